"""Reading Prometheus's `/api/v1/query` answer (rlark_site.foundation.prometheus.parse_answer):
an instant vector or a short reason, whatever the bytes."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from rlark_site.foundation.prometheus import PrometheusError, parse_answer

NOW = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


def answer(result: object, **top: object) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector",
                                                     "result": result}, **top}).encode()


def test_samples_are_read_and_non_finite_values_dropped() -> None:
    vector = parse_answer(answer([
        {"metric": {"pod": "a-x-0", "UUID": "GPU-1"}, "value": [1764583200.0, "0.25"]},
        {"metric": {"pod": "a-x-1"}, "value": [1764583200.0, "NaN"]},
        {"metric": {"pod": "a-x-2"}, "value": [1764583200.0, "+Inf"]}]), now=NOW)
    assert [(dict(s.labels), s.value) for s in vector.samples] == [
        ({"pod": "a-x-0", "UUID": "GPU-1"}, 0.25)]
    assert vector.evaluated_at == datetime.fromtimestamp(1764583200.0, UTC)
    assert parse_answer(answer([]), now=NOW, at=NOW).evaluated_at == NOW


@pytest.mark.parametrize(("body", "reason"), [
    (b"", "not JSON"), (b"\xff\xfe", "not JSON"), (b"[1, 2]", "not a Prometheus answer"),
    (b'{"status": "error", "errorType": "timeout"}', "query refused: timeout"),
    (b'{"status": "weird"}', "not a Prometheus answer"),
    (answer([], ), None),
    (json.dumps({"status": "success", "data": {"resultType": "scalar",
                                               "result": [1, "1"]}}).encode(),
     "not an instant vector"),
    (answer([{"metric": {"pod": 5}, "value": [1, "1"]}]), "not an instant vector"),
    (answer([{"metric": {}, "value": [1, "abc"]}]), "not an instant vector"),
    (answer([{"metric": {}, "value": [True, "1"]}]), "not an instant vector"),
    (answer([{"metric": {}, "value": [1e300, "1"]}]), "not an instant vector"),  # year 10^292
    (answer([{"metric": {}}]), "not an instant vector"),
    (answer(["x"]), "not an instant vector"),
])
def test_anything_else_is_a_short_reason(body: bytes, reason: str | None) -> None:
    if reason is None:
        assert parse_answer(body, now=NOW).samples == ()
        return
    with pytest.raises(PrometheusError) as refused:
        parse_answer(body, now=NOW)
    assert refused.value.reason == reason
