from django.urls import URLPattern, URLResolver, path

from jobs.notify import views

app_name = "teams"
urlpatterns: list[URLPattern | URLResolver] = [
    path("", views.team_list, name="list"),
    path("<slug:slug>/", views.team_detail, name="detail"),
]
