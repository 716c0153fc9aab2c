"""The job list and the create-job wizard (URL names used by navigation and other pages)."""

from django.urls import URLPattern, URLResolver, path

from jobs.wizard import role_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.job_list, name="list"),
    path("wizard/new/", views.wizard_new, name="wizard-new"),
    path("wizard/basics-findings/", views.basics_findings, name="wizard-basics-findings"),
    path("wizard/<str:name>/", views.wizard_resume, name="wizard"),
    path("wizard/<str:name>/step-<int:step>/", views.wizard_step, name="wizard-step"),
    path("wizard/<str:name>/roles/<int:index>/matches/", role_views.role_matches,
         name="wizard-matches"),
    path("wizard/<str:name>/roles/<int:index>/verification/", role_views.request_verification,
         name="wizard-verification"),
    path("wizard/<str:name>/common-findings/", views.common_findings,
         name="wizard-common-findings"),
    path("wizard/<str:name>/manifest.yaml", views.manifest_download, name="wizard-manifest"),
    path("wizard/<str:name>/submit/", views.submit, name="wizard-submit"),
    path("wizard/<str:name>/delete/", views.job_delete, name="wizard-delete"),
]
