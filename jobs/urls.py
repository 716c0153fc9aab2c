from django.urls import include, path

app_name = "jobs"
urlpatterns = [
    path("", include("jobs.drafts.urls")),
    path("", include("jobs.jobfiles.urls")),
    path("", include("jobs.wizard.urls")),
    path("", include("jobs.records.urls")),
    path("", include("jobs.observe.urls")),
    path("", include("jobs.progress.urls")),
    path("", include("jobs.usage.urls")),
    path("", include("jobs.help_urls")),
]
