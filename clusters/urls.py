from django.urls import include, path

app_name = "clusters"
urlpatterns = [
    path("", include("clusters.inventory.urls")),
    path("", include("clusters.verifications.urls")),
]
