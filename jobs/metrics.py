"""The jobs app's figures for `/metrics` (rlark_site.foundation.metrics): submissions counted and
timed by the workers that made them; jobs by state and the status sync's lag read at scrape time."""

from __future__ import annotations

from collections.abc import Iterator

from django.db.models import Count, Min
from django.db.models.functions import Coalesce
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from jobs.models import AttemptOutcome, Job, JobState, RunRecord
from jobs.records.lifecycle import ACTIVE_STATES
from rlark_site.foundation import metrics

SUBMISSIONS = "rlark_submissions"
SUBMISSION_LATENCY = "rlark_submission_latency_seconds"
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
_SUBMITTED = {AttemptOutcome.CREATED, AttemptOutcome.ALREADY_EXISTS}


def record_submission(*, run_record_id: int, outcome: str) -> None:
    """Count one run of the submission task by outcome; time the ones that created the Job
    (from the user's submit, when the YAML was frozen, to the Job existing on its cluster)."""
    metrics.increment(SUBMISSIONS, {"outcome": outcome})
    if outcome not in _SUBMITTED:
        return
    times = RunRecord.objects.filter(id=run_record_id).values("frozen_at", "submitted_at").first()
    if times and times["submitted_at"]:
        seconds = (times["submitted_at"] - times["frozen_at"]).total_seconds()
        metrics.observe(SUBMISSION_LATENCY, {}, max(seconds, 0.0), LATENCY_BUCKETS)


class JobsCollector(Collector):
    def collect(self) -> Iterator[Metric]:
        yield metrics.counter_family(SUBMISSIONS, "Submission task runs by outcome.",
                                     ["outcome"])
        yield metrics.histogram_family(
            SUBMISSION_LATENCY, "From submit (YAML frozen) to the Job created on its cluster.",
            [], LATENCY_BUCKETS)
        yield self._jobs_by_state()
        yield self._status_sync_lag()

    @staticmethod
    def _jobs_by_state() -> Metric:
        family = GaugeMetricFamily("rlark_jobs", "Jobs by state.", labels=["state"])
        counts = dict(RunRecord.objects.order_by().values_list("state").annotate(n=Count("id")))
        counts[JobState.DRAFT] = Job.objects.filter(Job.in_state(JobState.DRAFT)).count()
        for state in JobState.values:
            family.add_metric([state], counts.get(state, 0))
        return family

    @staticmethod
    def _status_sync_lag() -> Metric:
        oldest = RunRecord.objects.filter(state__in=ACTIVE_STATES).aggregate(
            oldest=Min(Coalesce("status_checked_at", "submitted_at")))["oldest"]
        lag = (timezone.now() - oldest).total_seconds() if oldest else 0.0
        return GaugeMetricFamily(
            "rlark_status_sync_lag_seconds",
            "Age of the stalest status among Pending and Running jobs (0 if none).", value=lag)
