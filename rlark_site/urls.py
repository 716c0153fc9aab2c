from __future__ import annotations

from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import URLPattern, URLResolver, include, path
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerSplitView,
)

from rlark_site import health, views
from rlark_site.foundation import metrics, sso
from rlark_site.foundation.tenancy import api as tenancy_api

api_v1: list[URLPattern | URLResolver] = [
    path("auth/token/", tenancy_api.TokenView.as_view(), name="api-token"),
    path("auth/tokens/", tenancy_api.TokensView.as_view(), name="api-tokens"),
    path("auth/tokens/<int:token_id>/", tenancy_api.TokenDetailView.as_view(),
         name="api-token-detail"),
    path("auth/me/", tenancy_api.MeView.as_view(), name="api-me"),
    path("teams/", tenancy_api.TeamsView.as_view(), name="api-teams"),
    path("teams/<slug:slug>/members/", tenancy_api.TeamMembersView.as_view(), name="api-members"),
    path("", include("clusters.api_urls")),
    path("", include("jobs.api_urls")),
]

urlpatterns = [
    path("", views.home, name="home"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", sso.LogoutView.as_view(), name="logout"),
    path("oidc/", include("mozilla_django_oidc.urls")),
    path("team/switch/", views.switch_team, name="switch-team"),
    path("account/tokens/", views.tokens, name="tokens"),
    path("account/tokens/<int:token_id>/revoke/", views.token_revoke_view, name="token-revoke"),
    path("account/notifications/", include("jobs.notify.account_urls")),
    path("i18n/", include("django.conf.urls.i18n")),
    path("health/live", health.live, name="health-live"),
    path("health/ready", health.ready, name="health-ready"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="swagger-ui"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="redoc"),
    path("clusters/", include("clusters.urls")),
    path("jobs/", include("jobs.urls")),
    path("teams/", include("jobs.notify.urls")),
    path("django-admin/", admin.site.urls),
]

handler400 = "rlark_site.foundation.exceptions.bad_request"
handler403 = "rlark_site.foundation.exceptions.permission_denied"
handler404 = "rlark_site.foundation.exceptions.page_not_found"
handler500 = "rlark_site.foundation.exceptions.server_error"
