"""The migrations describe the models: a model change without its migration fails here, not
on the first deployment that runs `manage.py migrate`."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.django_db  # makemigrations checks the applied history too


def test_no_model_change_lacks_a_migration() -> None:
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exited:  # --check exits 1 when a migration is missing
        raise AssertionError(f"models changed without a migration:\n{out.getvalue()}") from exited
