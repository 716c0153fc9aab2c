from django.urls import URLPattern, URLResolver, path

from jobs.usage import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("usage/", api.UsageView.as_view(), name="usage"),
]
