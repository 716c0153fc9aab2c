from django.urls import URLPattern, URLResolver, path

from jobs.usage import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("usage/", views.usage_page, name="usage"),
    path("usage/export.csv", views.usage_export, name="usage-export"),
]
