"""Instant queries to the operator's Prometheus (`RLARK_PROMETHEUS_URL`, SPEC 16 and 18).

The address is set by the operator, not by a team: it is not held to the webhook rule of
internal addresses (`egress`), since a Prometheus usually is internal. The other conventions of
outbound requests hold:

- one `POST <url>/api/v1/query` (form-encoded, so a long selector fits), with a connect and
  read timeout and an overall deadline for the whole answer (a server that trickles bytes is
  cut at the deadline, not after one timeout per read);
- the answer is read up to a byte bound: one byte more is an error, never a bigger buffer;
- no redirect is followed (a 3xx is an error), the environment's proxies are not used;
- an error keeps a short reason (a class such as `timeout` or `refused`, `HTTP 503`, `not
  JSON`, Prometheus's own `errorType`), never the text of a connection error.

`instant_query` returns the answer's instant vector: `(labels, value)` per series, as Prometheus
gave them (labels are strings, values floats, NaN and infinities dropped).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import requests

from rlark_site.foundation.egress import classify

__all__ = ["InstantVector", "PrometheusError", "Sample", "instant_query"]

_CHUNK = 64 * 1024


class PrometheusError(Exception):
    """A query that got no usable answer; `reason` is short and safe to show."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class InstantVector:
    evaluated_at: datetime  # the query's evaluation time (the samples' timestamp)
    samples: tuple[Sample, ...]


def _read(response: requests.Response, *, max_bytes: int, deadline: float) -> bytes:
    """The answer's body (decoded) as it arrives: each read gives what came (`read1`), not a
    whole chunk, so an answer dripping a byte at a time is cut at the deadline instead of when
    the chunk fills or the server closes."""
    body = bytearray()
    while chunk := response.raw.read1(_CHUNK, decode_content=True):
        body.extend(chunk)
        if len(body) > max_bytes:
            raise PrometheusError(f"answer larger than {max_bytes} bytes")
        if time.monotonic() > deadline:
            raise PrometheusError("timeout")
    return bytes(body)


def _sample(item: Any) -> tuple[Sample | None, float]:
    if not isinstance(item, dict):
        raise PrometheusError("not an instant vector")
    metric, value = item.get("metric"), item.get("value")
    if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
        raise PrometheusError("not an instant vector")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metric.items()):
        raise PrometheusError("not an instant vector")
    stamp, text = value
    if isinstance(stamp, bool) or not isinstance(stamp, int | float) \
            or not isinstance(text, str) or not math.isfinite(stamp):
        raise PrometheusError("not an instant vector")
    try:
        number = float(text)
    except ValueError as exc:
        raise PrometheusError("not an instant vector") from exc
    if not math.isfinite(number):
        return None, float(stamp)
    return Sample(labels=dict(metric), value=number), float(stamp)


def parse_answer(body: bytes, *, now: datetime, at: datetime | None = None) -> InstantVector:
    """An `/api/v1/query` answer read as an instant vector; `PrometheusError` otherwise. The
    evaluation time is `at` when the query named one, else the samples' newest timestamp."""
    try:
        document = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PrometheusError("not JSON") from exc
    if not isinstance(document, dict):
        raise PrometheusError("not a Prometheus answer")
    if document.get("status") != "success":
        kind = document.get("errorType")
        raise PrometheusError(f"query refused: {kind}"[:100] if isinstance(kind, str)
                              else "not a Prometheus answer")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" \
            or not isinstance(data.get("result"), list):
        raise PrometheusError("not an instant vector")
    samples: list[Sample] = []
    stamps: list[float] = []
    for item in data["result"]:
        sample, stamp = _sample(item)
        stamps.append(stamp)
        if sample is not None:
            samples.append(sample)
    if at is not None or not stamps:
        return InstantVector(evaluated_at=at or now, samples=tuple(samples))
    try:
        evaluated = datetime.fromtimestamp(max(stamps), UTC)
    except (OverflowError, OSError, ValueError) as exc:
        raise PrometheusError("not an instant vector") from exc
    return InstantVector(evaluated_at=evaluated, samples=tuple(samples))


def instant_query(base_url: str, query: str, *, timeout: float, max_bytes: int,
                  at: datetime | None = None) -> InstantVector:
    """One instant query; `PrometheusError(reason)` when there is no usable answer."""
    url = base_url.rstrip("/") + "/api/v1/query"
    form = {"query": query}
    if at is not None:
        form["time"] = f"{at.timestamp():.3f}"
    deadline = time.monotonic() + timeout
    try:
        with requests.Session() as session:
            session.trust_env = False
            response = session.post(url, data=form, timeout=(timeout, timeout),
                                    allow_redirects=False, stream=True,
                                    headers={"Accept": "application/json"})
            with response:
                if 300 <= response.status_code < 400:
                    raise PrometheusError(f"redirect refused (HTTP {response.status_code})")
                body = _read(response, max_bytes=max_bytes, deadline=deadline)
    except PrometheusError:
        raise
    except (requests.RequestException, OSError, ValueError) as exc:
        raise PrometheusError(str(classify(exc))) from exc
    if response.status_code != 200 and not body.lstrip().startswith(b"{"):
        raise PrometheusError(f"HTTP {response.status_code}")
    return parse_answer(body, now=datetime.now(UTC), at=at)
