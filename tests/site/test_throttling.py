"""API rate limits: DRF's sliding windows and answers, counted in one Redis round trip."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser
from rest_framework import throttling as drf
from rest_framework.request import Request
from rest_framework.test import APIClient, APIRequestFactory

from rlark_site.foundation import throttling

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("private_cache")]

RATES = {"user": "3/minute", "anon": "2/minute"}
# request times (seconds): a burst, a refusal, the oldest leaving the window exactly at 60
MOMENTS = [0.0, 1.0, 2.0, 2.5, 30.0, 59.9, 60.0, 60.5, 61.0, 61.5, 62.0, 200.0]


@pytest.fixture(autouse=True)
def _rates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drf.SimpleRateThrottle, "THROTTLE_RATES", RATES)


def _decisions(throttle_class: type[drf.SimpleRateThrottle], request: Request
               ) -> list[tuple[bool, float | None]]:
    answers = []
    for moment in MOMENTS:
        throttle = throttle_class()
        throttle.timer = lambda moment=moment: 1_000_000.0 + moment  # type: ignore[method-assign]
        allowed = throttle.allow_request(request, None)  # type: ignore[arg-type]
        answers.append((allowed, None if allowed else round(throttle.wait() or -1, 6)))
    return answers


@pytest.mark.parametrize(("ours", "drfs", "who"), [
    (throttling.UserRateThrottle, drf.UserRateThrottle, "user"),
    (throttling.AnonRateThrottle, drf.AnonRateThrottle, "anon"),
])
def test_every_decision_and_wait_is_drfs(
    owner: Any, ours: type[drf.SimpleRateThrottle], drfs: type[drf.SimpleRateThrottle], who: str
) -> None:
    request = Request(APIRequestFactory().get("/api/v1/teams/", REMOTE_ADDR="10.1.2.3"))
    request.user = owner if who == "user" else AnonymousUser()
    expected = _decisions(drfs, request)
    assert _decisions(ours, request) == expected
    assert [allowed for allowed, _wait in expected].count(False) >= 3  # refusals were seen


def test_an_api_client_over_its_limit_is_told_when_to_retry(
    api_client_for: Callable[[Any], APIClient], owner: Any, member: Any
) -> None:
    client = api_client_for(owner)
    assert [client.get("/api/v1/teams/").status_code for _ in range(3)] == [200] * 3
    refused = client.get("/api/v1/teams/")
    assert refused.status_code == 429
    assert 58 <= int(refused["Retry-After"]) <= 60
    assert "detail" in refused.json()
    assert api_client_for(member).get("/api/v1/teams/").status_code == 200  # per user
