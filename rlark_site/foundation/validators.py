"""Validators shared by models, forms and serializers (the storage boundary)."""

from __future__ import annotations

import re

from django.core.validators import RegexValidator, URLValidator
from django.utils.translation import gettext_lazy as _

CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def has_control_characters(text: str) -> bool:
    """C0 controls (NUL, CR, LF, TAB, ...), DEL and C1 controls."""
    return CONTROL_CHARACTERS.search(text) is not None


no_control_characters = RegexValidator(
    CONTROL_CHARACTERS,
    _("Control characters (line breaks, tabs, NUL, ...) are not allowed here."),
    code="control_characters",
    inverse_match=True,
)


# A webhook's URL: http or https only (RLark POSTs JSON to it). The one rule, used by the
# TeamWebhook model, the API serializer and the team page form.
validate_webhook_url = URLValidator(schemes=["http", "https"])

