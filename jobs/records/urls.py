from django.urls import URLPattern, URLResolver, path

from jobs.records import queue_views, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("launch-lists/", views.launch_lists, name="launch-lists"),
    path("launch-lists/new/", views.launch_list_create, name="launch-list-create"),
    path("launch-lists/<int:pk>/", views.launch_list_edit, name="launch-list-edit"),
    path("deployment-parameters/", views.deployment_parameters, name="deployment-parameters"),
    path("deployment-parameters/new/", views.deployment_parameters_create,
         name="deployment-parameters-create"),
    path("deployment-parameters/<int:pk>/", views.deployment_parameters_edit,
         name="deployment-parameters-edit"),
    path("deployment-parameters/<int:pk>/fill/", views.deployment_parameters_fill,
         name="deployment-parameters-fill"),
    path("deployment-parameters/<int:pk>/request-confirmation/",
         views.deployment_parameters_request_confirmation,
         name="deployment-parameters-request-confirmation"),
    path("deployment-parameters/queue/", queue_views.parameters_queue, name="parameters-queue"),
    path("deployment-parameters/queue/<int:pk>/decide/", queue_views.parameters_queue_decide,
         name="parameters-queue-decide"),
    path("job/<str:name>/", views.job_detail, name="job-detail"),
    path("job/<str:name>/cancel/", views.job_cancel, name="job-cancel"),
    path("job/<str:name>/first-run-check/", views.first_run_check, name="first-run-check"),
    path("records/", views.run_record_lookup, name="run-record-lookup"),
    path("records/<str:name>/", views.run_record, name="run-record"),
    path("records/<str:name>/clone/", views.run_record_clone, name="run-record-clone"),
    path("records/<str:name>/diff/", views.run_record_diff, name="run-record-diff"),
]
