from django.urls import URLPattern, URLResolver, path

from jobs.progress import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("records/<str:name>/progress/", views.run_progress, name="run-record-progress"),
]
