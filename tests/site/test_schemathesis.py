"""The OpenAPI schema is the API's exact contract: schemathesis generates requests for every
operation of the live schema (`/api/schema/`) and checks each answer, as a team member and as a
platform admin. The schema and docs views are not part of the contract (SERVE_INCLUDE_SCHEMA is
off, so they are not in the schema)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from rlark_site.foundation.tenancy.models import ApiToken

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance]


def _token(user: Any) -> str:
    _instance, secret = ApiToken.objects.create(user=user, expiry=timedelta(days=1),
                                                name="contract")
    return str(secret)


# The live schema, served by the WSGI app (the schema view needs no database).
schema = schemathesis.openapi.from_wsgi("/api/schema/", get_wsgi_application())


@pytest.fixture
def tokens(member: Any, admin_user: Any) -> Iterator[dict[str, str]]:
    """Like Django's test client, the app keeps the test's database connection (and its
    transaction) open between requests."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield {"member": _token(member), "admin": _token(admin_user)}
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def test_every_answer_matches_the_schema(case: Any, tokens: dict[str, str]) -> None:
    for secret in tokens.values():
        case.call_and_validate(headers={"Authorization": f"Token {secret}"}, checks=CHECKS)
