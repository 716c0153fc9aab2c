"""Reads of a team's notification settings: its members and its webhook's delivery log."""

from __future__ import annotations

from django.db.models import QuerySet

from jobs.models import WebhookDelivery
from rlark_site.foundation.tenancy.models import Membership, Team


def team_deliveries(*, team: Team) -> QuerySet[WebhookDelivery]:
    """The team's webhook deliveries, newest first, with their events."""
    return (WebhookDelivery.objects.filter(webhook__team=team).select_related("event")
            .order_by("-created_at", "-id"))


def team_memberships(*, team: Team) -> QuerySet[Membership]:
    return Membership.objects.filter(team=team).select_related("user").order_by(
        "user__username")
