"""Size limits of everything a client can send: the one table (docs/security.md lists it).

Lists and maps in request bodies are bounded here; text fields carry their own `max_length`
(names 63-255, notes 4,000, long texts 20,000); whole bodies are bounded by Django's
DATA_UPLOAD_MAX_MEMORY_SIZE (413) and list pages by rlark_site.foundation.pagination.
"""

from __future__ import annotations

from typing import Any

from django.utils.translation import gettext_lazy as _
from rest_framework import serializers

MAX_ROLES = 32  # roles of a job or of deployment parameters
MAX_SELECTOR_CONDITIONS = 32  # key=value conditions of one node selector
MAX_DEVICE_KINDS = 32  # rlinf.io/* device names in one request or confirmation
MAX_HOST_PATHS = 64  # host directories in one verification request or confirmation
MAX_MOUNTS = 64  # mounts of one role
MAX_EXPECTED_SIGNALS = 100  # expected signals of one launch list
MAX_REFERENCES = 100  # ids referenced by one record (verifications of deployment parameters)
MAX_CHECKLIST_ANSWERS = 100  # troubleshooting answers of one first-run check
MAX_FORM_TEXT = 20_000  # a free-text form field (host paths, devices: one per line)


class BoundedDictField(serializers.DictField):
    """A DictField with at most `max_items` keys (DRF's has no bound)."""

    def __init__(self, *args: Any, max_items: int, **kwargs: Any) -> None:
        self.max_items = max_items
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if isinstance(data, dict) and len(data) > self.max_items:
            raise serializers.ValidationError(
                _("Ensure this field has no more than %(max)s entries.") % {"max": self.max_items}
            )
        return super().to_internal_value(data)
