"""Validators shared by models, forms and serializers (the storage boundary)."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator, URLValidator
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation import egress

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


class WebhookURLValidator(URLValidator):
    """A webhook's URL: http or https only (RLark POSTs JSON to it), and not naming an internal
    address (SPEC 18: loopback, private, link-local, metadata, ... in any spelling, or
    `localhost`) unless `RLARK_WEBHOOK_ALLOWED_NETWORKS` opens it. Each is told so: "ftp://..."
    is a valid URL, just not one RLark can POST to. A host name is checked again, on every
    address it resolves to, when a delivery connects (`rlark_site.foundation.egress.post`)."""

    scheme_message = _("A webhook URL must start with http:// or https://.")
    blocked_message = _("This URL names an internal address (loopback, private, link-local, "
                        "cloud metadata or another reserved range); RLark does not send "
                        "webhooks there.")

    def __call__(self, value: object) -> None:
        scheme = str(value).split("://", 1)[0].lower() if "://" in str(value) else ""
        if scheme and scheme not in self.schemes:
            raise ValidationError(self.scheme_message, code="invalid_scheme",
                                  params={"value": value})
        if egress.blocked_literal(str(value), egress.allowed_networks()):
            raise ValidationError(self.blocked_message, code="blocked_address",
                                  params={"value": value})
        super().__call__(value)


# The one rule, used by the TeamWebhook model, the API serializer and the team page form
# (the fields there are plain text fields with this validator, so a bad URL gets one message,
# not the URL field's own "Enter a valid URL." as well).
validate_webhook_url = WebhookURLValidator(schemes=["http", "https"])

