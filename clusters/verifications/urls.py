from django.urls import URLPattern, URLResolver, path

from clusters.verifications import views

urlpatterns: list[URLPattern | URLResolver] = [
    path("verifications/", views.team_verifications, name="verifications"),
    path("verifications/queue/", views.queue, name="queue"),
    path("verifications/<int:verification_id>/nodes/", views.verification_nodes,
         name="verification-nodes"),
    path("verifications/queue/<int:verification_id>/decide/", views.queue_decide,
         name="queue-decide"),
]
