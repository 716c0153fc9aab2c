"""Prometheus metrics: RLark's own figures, the same whichever web pod is scraped.

Two sources, both shared by every process:
- gauges read at scrape time from PostgreSQL (collectors registered by the apps, each a few
  aggregate queries whose answers grow with the number of clusters or states, never with
  nodes or jobs) and from Redis (the length of each Celery queue);
- counters and histograms of work done in Celery workers (poll durations and outcomes,
  submission outcomes and latency), kept in Redis hashes by `increment` / `observe`.
`/metrics` serves them with a bearer token (`RLARK_METRICS_TOKEN`); see docs/operations.md.
"""

from __future__ import annotations

import hmac
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from functools import cache

import redis
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

logger = logging.getLogger(__name__)

PREFIX = "rlark:metrics:"
_COUNTER = PREFIX + "counter:"
_HISTOGRAM = PREFIX + "histogram:"
_INF = "+Inf"

REGISTRY = CollectorRegistry(auto_describe=False)


def register(collector: Collector) -> None:
    """Add a scrape-time collector (the apps call this from `AppConfig.ready`)."""
    REGISTRY.register(collector)


@cache
def _redis() -> redis.Redis:
    return redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2, socket_connect_timeout=2,
                                decode_responses=True)


def _labels_key(labels: dict[str, str]) -> str:
    return json.dumps(sorted(labels.items()), separators=(",", ":"))


def increment(name: str, labels: dict[str, str], amount: int = 1) -> None:
    """Add to a fleet-wide counter. Metrics never break the work they count."""
    try:
        _redis().hincrby(_COUNTER + name, _labels_key(labels), amount)
    except redis.RedisError:
        logger.warning("metrics: counter %s not recorded", name, exc_info=True)


def observe(name: str, labels: dict[str, str], value: float, buckets: Sequence[float]) -> None:
    """Add one observation to a fleet-wide histogram (cumulative buckets, sum and count)."""
    key = _labels_key(labels)
    try:
        with _redis().pipeline(transaction=False) as pipe:
            for bound in buckets:
                if value <= bound:
                    pipe.hincrby(_HISTOGRAM + name, f"{key}|{bound}", 1)
            pipe.hincrby(_HISTOGRAM + name, f"{key}|{_INF}", 1)
            pipe.hincrbyfloat(_HISTOGRAM + name, f"{key}|sum", value)
            pipe.execute()
    except redis.RedisError:
        logger.warning("metrics: observation of %s not recorded", name, exc_info=True)


def _label_values(key: str) -> list[str]:
    return [value for _, value in json.loads(key)]


def _read_hash(key: str) -> dict[str, str]:
    """A metrics hash as text (the client decodes responses)."""
    return {str(field): str(value) for field, value in _redis().hgetall(key).items()}


def counter_family(name: str, documentation: str, labels: Sequence[str]) -> CounterMetricFamily:
    """A counter kept by `increment`, read back for a scrape."""
    family = CounterMetricFamily(name, documentation, labels=labels)
    for key, value in sorted(_read_hash(_COUNTER + name).items()):
        family.add_metric(_label_values(key), int(value))
    return family


def histogram_family(name: str, documentation: str, labels: Sequence[str],
                     buckets: Sequence[float]) -> HistogramMetricFamily:
    """A histogram kept by `observe`, read back for a scrape (empty buckets read as 0)."""
    series: dict[str, dict[str, float]] = {}
    for field, value in _read_hash(_HISTOGRAM + name).items():
        key, _, part = field.rpartition("|")
        series.setdefault(key, {})[part] = float(value)
    family = HistogramMetricFamily(name, documentation, labels=labels)
    for key, parts in sorted(series.items()):
        counts = [(str(float(b)), parts.get(str(b), 0.0)) for b in buckets]
        family.add_metric(_label_values(key), [*counts, (_INF, parts.get(_INF, 0.0))],
                          sum_value=parts.get("sum", 0.0))
    return family


class CeleryQueueCollector(Collector):
    """`rlark_celery_queue_length{queue}`: messages waiting in each queue (Redis LLEN)."""

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily("rlark_celery_queue_length",
                                   "Messages waiting in each Celery queue.", labels=["queue"])
        queues: Iterable[str] = getattr(settings, "RLARK_QUEUES", None) or ["celery"]
        with _redis().pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.llen(queue)
            lengths = pipe.execute()
        for queue, length in zip(queues, lengths, strict=True):
            family.add_metric([queue], int(length))
        yield family


register(CeleryQueueCollector())


def _authorized(request: HttpRequest) -> bool:
    token = settings.RLARK_METRICS_TOKEN
    offered = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(offered.encode(), f"Bearer {token}".encode())


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """The Prometheus text format; 404 while no token is set, 401 for a wrong one."""
    if not settings.RLARK_METRICS_TOKEN:
        raise Http404
    if not _authorized(request):
        response = HttpResponse(status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse(generate_latest(REGISTRY), content_type=CONTENT_TYPE_LATEST)
