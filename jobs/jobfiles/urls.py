from django.urls import URLPattern, URLResolver, path

from jobs.jobfiles import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("new/from-file/", views.new_from_file, name="new-from-file"),
]
