"""Helpers for the job-file tests: post a file, compare manifests apart from the name."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from rest_framework.test import APIClient

APPLY = "/api/v1/job-files/apply/"
VALIDATE = "/api/v1/job-files/validate/"
SWEEP = "/api/v1/job-files/sweep/"
SCHEMA = "/api/v1/job-file-schema/"
_SPEC_SHA = re.compile(r"rlark\.io/spec-sha256: '?([0-9a-f]{64})'?")


def post_file(api: APIClient, url: str, text: str | bytes, **query: Any) -> Any:
    body = text.encode("utf-8") if isinstance(text, str) else text
    if query:
        from urllib.parse import urlencode
        url = f"{url}?{urlencode(query, doseq=True)}"
    return api.generic("POST", url, body, content_type="application/yaml")


def renamed_manifest(text: str, *, old: str, new: str) -> str:
    """The manifest `text` of job `old` with its name put back as `new`, and its spec sha256
    annotation recomputed for the renamed spec: what `new`'s manifest must equal byte for byte."""
    swapped = text.replace(old, new)
    spec = swapped[swapped.index("\nspec:\n") + len("\nspec:\n"):]
    unindented = "\n".join(line[2:] if line.startswith("  ") else line
                           for line in spec.split("\n"))
    digest = hashlib.sha256(unindented.encode("utf-8")).hexdigest()
    return _SPEC_SHA.sub(lambda m: m.group(0).replace(m.group(1), digest), swapped, count=1)
