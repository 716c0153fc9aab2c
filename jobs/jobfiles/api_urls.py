from django.urls import URLPattern, URLResolver, path

from jobs.jobfiles import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("job-file-schema/", api.JobFileSchemaView.as_view(), name="job-file-schema"),
    path("job-files/validate/", api.JobFileValidateView.as_view(), name="job-file-validate"),
    path("job-files/apply/", api.JobFileApplyView.as_view(), name="job-file-apply"),
    path("job-files/sweep/", api.JobFileSweepView.as_view(), name="job-file-sweep"),
    path("jobs/<str:name>/job-file/", api.JobFileExportView.as_view(), name="job-file"),
    path("jobs/<str:name>/clone/", api.JobCloneView.as_view(), name="job-clone"),
    path("jobs/<str:name>/verify/", api.JobVerifyView.as_view(), name="job-verify"),
]
