"""`since`: how long ago, never "0 minutes" (under a minute reads "just now")."""

from __future__ import annotations

from datetime import datetime, timedelta

from django import template
from django.utils import timezone
from django.utils.timesince import timesince
from django.utils.translation import gettext

register = template.Library()

JUST_NOW = timedelta(minutes=1)


@register.filter
def since(moment: datetime | None) -> str:
    if moment is None:
        return ""
    if timezone.now() - moment < JUST_NOW:
        return gettext("just now")
    return gettext("%(duration)s ago") % {"duration": timesince(moment)}
