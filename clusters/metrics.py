"""The clusters app's figures for `/metrics` (rlark_site.foundation.metrics): inventory polls
counted and timed by the workers that ran them, nodes and verification queue read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min, Q
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from clusters.models import Cluster, Verification, VerificationState
from rlark_site.foundation import metrics

POLLS = "rlark_inventory_polls"
POLL_DURATION = "rlark_inventory_poll_duration_seconds"
POLL_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


def record_poll(*, cluster: str, outcome: str, seconds: float | None) -> None:
    """Count one inventory poll of `cluster` by outcome (`ok`, `failed`, `busy`, `skipped`)
    and, when it called the cluster (`seconds` given), how long it took."""
    metrics.increment(POLLS, {"cluster": cluster, "outcome": outcome})
    if seconds is not None:
        metrics.observe(POLL_DURATION, {"cluster": cluster}, seconds, POLL_BUCKETS)


class ClustersCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield metrics.counter_family(POLLS, "Inventory polls by cluster and outcome.",
                                     ["cluster", "outcome"])
        yield metrics.histogram_family(POLL_DURATION, "Wall time of inventory polls.",
                                       ["cluster"], POLL_BUCKETS)
        yield from self._clusters()
        yield from self._verification_queue()

    @staticmethod
    def _clusters() -> Iterator[Metric]:
        nodes = GaugeMetricFamily("rlark_cluster_nodes", "Present nodes of each cluster.",
                                  labels=["cluster"])
        success = GaugeMetricFamily(
            "rlark_cluster_last_successful_poll_timestamp_seconds",
            "When each cluster's inventory was last polled successfully.", labels=["cluster"])
        rows = Cluster.objects.annotate(
            present=Count("nodes", filter=Q(nodes__gone=False))
        ).values_list("name", "present", "last_success_at")
        for name, present, last_success in rows:
            nodes.add_metric([name], present)
            if last_success is not None:
                success.add_metric([name], last_success.timestamp())
        yield nodes
        yield success

    @staticmethod
    def _verification_queue() -> Iterator[Metric]:
        queue = Verification.objects.filter(state=VerificationState.PENDING).aggregate(
            pending=Count("id"), oldest=Min("created_at"))
        yield GaugeMetricFamily("rlark_verifications_pending",
                                "Verification requests waiting for an admin.",
                                value=queue["pending"])
        age = (timezone.now() - queue["oldest"]).total_seconds() if queue["oldest"] else 0.0
        yield GaugeMetricFamily("rlark_verification_oldest_pending_age_seconds",
                                "Age of the oldest pending verification request (0 if none).",
                                value=age)

