from django.urls import URLPattern, URLResolver

app_name = "clusters"
urlpatterns: list[URLPattern | URLResolver] = []
