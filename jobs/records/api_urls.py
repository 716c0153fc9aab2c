from django.urls import URLPattern, URLResolver, path

from jobs.records import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("launch-lists/", api.LaunchListsView.as_view(), name="launch-list-list"),
    path("launch-lists/<int:pk>/", api.LaunchListDetailView.as_view(), name="launch-list-detail"),
    path("deployment-parameters/", api.DeploymentParametersListView.as_view(),
         name="deployment-parameters-list"),
    path("deployment-parameters/<int:pk>/", api.DeploymentParametersDetailView.as_view(),
         name="deployment-parameters-detail"),
    path("deployment-parameters/<int:pk>/fill-from-job/", api.FillFromJobView.as_view(),
         name="deployment-parameters-fill"),
    path("deployment-parameters/queue/", api.ParametersQueueView.as_view(),
         name="deployment-parameters-queue"),
    path("deployment-parameters/<int:pk>/request-confirmation/",
         api.ParametersConfirmationRequestView.as_view(),
         name="deployment-parameters-request-confirmation"),
    path("deployment-parameters/<int:pk>/confirm/", api.ParametersConfirmView.as_view(),
         name="deployment-parameters-confirm"),
    path("deployment-parameters/<int:pk>/reject/", api.ParametersRejectView.as_view(),
         name="deployment-parameters-reject"),
    path("jobs/<str:name>/submit/", api.JobSubmitView.as_view(), name="job-submit"),
    path("jobs/<str:name>/cancel/", api.JobCancelView.as_view(), name="job-cancel"),
    path("jobs/<str:name>/first-run-check/", api.FirstRunCheckView.as_view(),
         name="job-first-run-check"),
    path("run-records/", api.RunRecordListView.as_view(), name="run-record-list"),
    path("run-records/<str:name>/", api.RunRecordView.as_view(), name="run-record-detail"),
    path("run-records/<str:name>/clone/", api.RunRecordCloneView.as_view(),
         name="run-record-clone"),
    path("run-records/<str:name>/diff/", api.RunRecordDiffView.as_view(), name="run-record-diff"),
    path("audit-events/", api.AuditEventsView.as_view(), name="audit-event-list"),
]
