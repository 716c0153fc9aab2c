from django.urls import URLPattern, URLResolver, path

from jobs.notify import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("teams/<slug:slug>/webhook/", api.TeamWebhookView.as_view(), name="team-webhook"),
    path("teams/<slug:slug>/webhook/deliveries/", api.TeamDeliveriesView.as_view(),
         name="team-webhook-deliveries"),
    path("notifications/preferences/", api.PreferencesView.as_view(),
         name="notification-preferences"),
]
