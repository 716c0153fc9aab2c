"""A Content-Security-Policy without inline script, and templates that need none."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.test import Client

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
INLINE_SCRIPT = re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I)
HANDLER = re.compile(r"\son[a-z]+\s*=", re.I)


@pytest.mark.parametrize("template", sorted(TEMPLATES.rglob("*.html")), ids=str)
def test_no_template_carries_inline_script(template: Path) -> None:
    text = template.read_text()
    assert not INLINE_SCRIPT.search(text)
    assert not HANDLER.search(text)
    assert "hx-on" not in text


def _script_src(header: str) -> str:
    return next(part for part in header.split(";") if part.strip().startswith("script-src"))


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/login/", "/jobs/", "/api/docs/"])
def test_pages_are_served_under_a_strict_script_policy(client: Client, member, url: str) -> None:
    client.force_login(member)
    response = client.get(url)
    assert response.status_code == 200
    script_src = _script_src(response["Content-Security-Policy"])
    assert "'self'" in script_src
    assert "unsafe-inline" not in script_src and "unsafe-eval" not in script_src
    assert not INLINE_SCRIPT.search(response.content.decode())
