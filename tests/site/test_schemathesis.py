"""The OpenAPI schema is the API's exact contract: schemathesis generates requests for every
operation of the live schema (`/api/schema/`) and checks each answer, as a team member and as a
platform admin. The schema and docs views are not part of the contract (SERVE_INCLUDE_SCHEMA is
off, so they are not in the schema).

One test per operation, built when it runs, not when it is collected: schemathesis's
`schema.parametrize()` builds every operation's Hypothesis test at collection, with all ~8,300
coverage-phase cases, in every pytest-xdist worker (~3.5 s of CPU each) though one worker runs
the module. The test is built as schemathesis builds it (its lazy loader,
`schemathesis/pytest/lazy.py`, calls the same `build_operation_test`), so the phases (examples,
coverage, fuzzing), the settings and the checks are the same."""

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
from schemathesis.core.control import SkipTest
from schemathesis.core.failures import FailureGroup, as_reported_failure
from schemathesis.generation.feedback import FeedbackSources
from schemathesis.generation.hypothesis.builder import (
    InvalidHeadersExampleMark,
    MissingPathParameters,
    UnserializablePayloadMark,
)
from schemathesis.pytest._test_builder import build_operation_test
from schemathesis.python._constants.orchestrator import make_constants_value_source
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
OPERATIONS = {operation.label: operation
              for operation in (result.ok() for result in schema.get_all_operations())}


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


@settings(max_examples=3, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
def _answers_match_the_schema(case: Any, tokens: dict[str, str]) -> None:
    for secret in tokens.values():
        case.call_and_validate(headers={"Authorization": f"Token {secret}"}, checks=CHECKS)


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_answer_matches_the_schema(label: str, tokens: dict[str, str]) -> None:
    """Run as schemathesis's pytest plugin runs an operation's test: its failures as
    schemathesis reports them; an operation left untested (every case skipped, example headers
    that cannot be sent, path parameters the schema lacks) fails."""
    __tracebackhide__ = True
    test = build_operation_test(
        config=schema.config, operation=OPERATIONS[label], test_func=_answers_match_the_schema,
        given_kwargs={},
        feedback=FeedbackSources(constants_value_source=make_constants_value_source(schema)),
    )
    try:
        test(tokens=tokens)
    except FailureGroup as exc:
        raise as_reported_failure(exc) from None
    except SkipTest as exc:
        pytest.fail(f"{label} was not tested: {exc}")
    assert UnserializablePayloadMark.get(test) is None
    assert InvalidHeadersExampleMark.get(test) is None
    assert not MissingPathParameters.get(test)
