from django.urls import URLPattern, URLResolver, path

from clusters.verifications import api

urlpatterns: list[URLPattern | URLResolver] = [
    path("selector-matches/", api.SelectorMatchesView.as_view(), name="selector-matches"),
    path("verifications/", api.VerificationsView.as_view(), name="verifications"),
    path("verifications/<int:verification_id>/", api.VerificationDetailView.as_view(),
         name="verification-detail"),
    path("verifications/<int:verification_id>/approve/", api.VerificationApproveView.as_view(),
         name="verification-approve"),
    path("verifications/<int:verification_id>/reject/", api.VerificationRejectView.as_view(),
         name="verification-reject"),
]
