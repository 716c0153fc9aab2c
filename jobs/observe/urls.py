from django.urls import URLPattern, URLResolver, path

from jobs.observe import states, views

urlpatterns: list[URLPattern | URLResolver] = [
    path("states/", states.job_states, name="job-states"),
    path("job/<str:name>/live/", views.job_live, name="job-live"),
    path("job/<str:name>/pods/<str:pod>/log/", views.pod_log, name="job-pod-log"),
    path("records/<str:name>/attempts/", views.record_attempts, name="run-record-attempts"),
]
