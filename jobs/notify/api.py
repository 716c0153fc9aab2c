"""Notification settings: a team's webhook (maintainers) and its delivery log, and each user's
choice of events that email them."""

from __future__ import annotations

from django.conf import settings
from django.utils.translation import gettext as _
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from jobs.models import EventKind, NotificationPreference, TeamWebhook, WebhookDelivery
from jobs.notify import services
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.tenancy.access import access_team, can_manage_members
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.validators import validate_webhook_url

_LANGUAGES = [code for code, _name in settings.LANGUAGES]


@extend_schema_field(OpenApiTypes.URI)
class WebhookURLField(serializers.CharField):
    """The webhook URL: text checked by the one webhook rule only (DRF's URLField would add
    its own URL check and answer "Enter a valid URL." twice)."""


class WebhookInSerializer(serializers.Serializer[object]):
    url = WebhookURLField(max_length=500, validators=[validate_webhook_url],
                               help_text="http(s) URL that receives the POSTs")
    secret = serializers.CharField(min_length=16, max_length=200, write_only=True)
    enabled = serializers.BooleanField(default=True)


class WebhookOutSerializer(serializers.Serializer[object]):
    url = serializers.URLField()
    enabled = serializers.BooleanField()
    updated_at = serializers.DateTimeField()


class DeliverySerializer(serializers.Serializer[object]):
    event = serializers.CharField(source="event.key")
    kind = serializers.CharField(source="event.kind")
    url = serializers.CharField()
    attempts = serializers.IntegerField()
    status_codes = serializers.ListField(child=serializers.IntegerField(allow_null=True))
    last_error = serializers.CharField()
    delivered_at = serializers.DateTimeField(allow_null=True)
    gave_up_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class PreferenceSerializer(serializers.Serializer[object]):
    email_events = serializers.ListField(
        child=serializers.ChoiceField(choices=EventKind.choices), max_length=len(EventKind))
    language = serializers.ChoiceField(choices=_LANGUAGES, default="en")


def _maintained_team(request: Request, slug: str) -> Team:
    team = access_team(request.user, slug)
    if not can_manage_members(request.user, team):
        raise ApplicationError(_("Only team maintainers and platform admins manage the "
                                 "team's webhook."), status_code=403)
    return team


class TeamWebhookView(APIView):
    @extend_schema(responses={200: WebhookOutSerializer, 404: OpenApiResponse()})
    def get(self, request: Request, slug: str) -> Response:
        webhook = TeamWebhook.objects.filter(team=_maintained_team(request, slug)).first()
        if webhook is None:
            raise NotFoundError(_("The team has no webhook."))
        return Response(WebhookOutSerializer(webhook).data)

    @extend_schema(request=WebhookInSerializer, responses={200: WebhookOutSerializer})
    def put(self, request: Request, slug: str) -> Response:
        team = _maintained_team(request, slug)
        data = WebhookInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        webhook = services.webhook_set(team=team, **data.validated_data)
        return Response(WebhookOutSerializer(webhook).data)


class TeamDeliveriesView(APIView):
    @extend_schema(responses=DeliverySerializer(many=True))
    def get(self, request: Request, slug: str) -> Response:
        team = access_team(request.user, slug)
        deliveries = WebhookDelivery.objects.filter(webhook__team=team).select_related(
            "event")[:200]
        return Response(DeliverySerializer(deliveries, many=True).data)


class PreferencesView(APIView):
    @extend_schema(responses=PreferenceSerializer)
    def get(self, request: Request) -> Response:
        preference = NotificationPreference.objects.filter(
            user__pk=request.user.pk or 0).first()
        return Response(PreferenceSerializer(
            preference or {"email_events": [], "language": "en"}).data)

    @extend_schema(request=PreferenceSerializer, responses=PreferenceSerializer)
    def put(self, request: Request) -> Response:
        data = PreferenceSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        preference = services.preferences_set(user=request.user, **data.validated_data)
        return Response(PreferenceSerializer(preference).data)
