from django.urls import URLPattern, URLResolver, path

from jobs.notify import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.preferences, name="notification-preferences"),
]
