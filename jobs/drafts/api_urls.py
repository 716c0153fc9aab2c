from django.urls import URLPattern, URLResolver, path

from jobs.drafts import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("jobs/", api.JobListView.as_view(), name="job-list"),
    path("jobs/<str:name>/", api.JobDetailView.as_view(), name="job-detail"),
    path("jobs/<str:name>/manifest/", api.JobManifestView.as_view(), name="job-manifest"),
    path("ssh-keys/", api.SSHKeyListView.as_view(), name="ssh-key-list"),
    path("ssh-keys/<str:name>/", api.SSHKeyDetailView.as_view(), name="ssh-key-detail"),
]
