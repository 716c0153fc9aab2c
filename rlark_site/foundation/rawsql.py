"""Reading the values of statements written in SQL (not through a model's fields)."""

from __future__ import annotations

import json
from typing import Any


def jsonb(value: Any) -> Any:
    """A `jsonb` column or expression's value as Python data (None stays None).

    Django's psycopg setup hands jsonb over as text (its JSONField decodes it), so a value read
    by a raw cursor is decoded here; one already decoded is returned as it is."""
    return json.loads(value) if isinstance(value, str) else value
