from django.urls import URLPattern, URLResolver, path

from jobs.observe import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("jobs/<str:name>/pods/", api.JobPodsView.as_view(), name="job-pods"),
    path("jobs/<str:name>/events/", api.JobEventsView.as_view(), name="job-events"),
    path("jobs/<str:name>/pods/<str:pod>/log/", api.PodLogView.as_view(), name="job-pod-log"),
    path("run-records/<str:name>/attempts/", api.RunRecordAttemptsView.as_view(),
         name="run-record-attempts"),
]
