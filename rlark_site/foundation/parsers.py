"""Request parsing shared by every API endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.translation import gettext as _
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser


class SafeJSONParser(JSONParser):
    """Malformed JSON is a 400, never a 500: too deeply nested, or holding a NUL character
    anywhere (a key or a string), which PostgreSQL can store neither in text nor in jsonb."""

    def parse(self, stream: Any, media_type: str | None = None,
              parser_context: Mapping[str, Any] | None = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
            where = _nul_at(data)
        except RecursionError as exc:
            raise ParseError(_("JSON parse error - the document is nested too deeply")) from exc
        if where is not None:
            raise ParseError(
                _("%(where)s: NUL characters are not allowed") % {"where": where or "body"}
            )
        return data


def _nul_at(value: Any, path: str = "") -> str | None:
    """The dotted path of the first string (or key) holding a NUL, else None."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    items: Any = ()
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    for key, item in items:
        here = f"{path}.{key}" if path else str(key)
        if isinstance(key, str) and "\x00" in key:
            return here.replace("\x00", "\\0")
        found = _nul_at(item, here)
        if found is not None:
            return found
    return None
