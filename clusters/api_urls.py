from django.urls import include, path

urlpatterns = [
    path("", include("clusters.inventory.api_urls")),
    path("", include("clusters.verifications.api_urls")),
]
