from django.urls import include, path

urlpatterns = [
    path("", include("jobs.drafts.api_urls")),
    path("", include("jobs.jobfiles.api_urls")),
    path("", include("jobs.records.api_urls")),
    path("", include("jobs.observe.api_urls")),
    path("", include("jobs.notify.api_urls")),
    path("", include("jobs.usage.api_urls")),
]
