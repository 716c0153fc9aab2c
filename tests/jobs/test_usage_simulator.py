"""GPU-hours of a real run on the simulator over HTTP: submitted, seen Running by a status pass,
stalled (its Head Task frozen past the stall limit, seen by the progress pass), a worker failing,
then the Job failing; the usage API's split checked against the moments the passes stored.

No waiting: the simulator's clock runs 75 s behind the real one from before the Job is created
until the Head Task froze, and RLark's passes of that part run at the same moments (`now=`, the
run submitted on that clock too). The start script's seconds pass at once (the clock moved past
its lines, RLark's moments with it); once frozen, the rest of the 75 s (past the 60 s stall
limit) passes at once for both but for 1.1 s, which pass between the worker's failure and the
Job's: the simulator is on the real time again for the end (the usage API counts until now).
Every moment stored is a real answer of the simulator or a pass, on one timeline."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone

from jobs.models import (
    JobState,
    PodAttempt,
    RunProgress,
    RunRecord,
    StallEpisode,
    StatusChange,
)
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from jobs.usage.selectors import parse_query, usage_report
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.test_causes import past_start_lines
from tests.jobs.test_progress_pass import configure, eager, progress_of

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
__all__ = ["eager"]  # the progress tests' settings and eager Celery, used here too
# The start script's seconds (about 6) and past the stall limit (60 s) by a few more: the
# worker fails, on whole seconds, after the stall began (`last_step_at + 60 s`), with seconds of
# stall between.
BEHIND = timedelta(seconds=75)
LAST = timedelta(seconds=1.1)  # the worker fails, then the Job a whole second later


@pytest.fixture
def demo_simulator(demo_simulator: Any) -> Any:
    """The demo simulator, its clock 75 s behind the real one before the Job is created."""
    demo_simulator.set_clock_offset(-BEHIND.total_seconds())
    return demo_simulator


def on_its_clock(simulator: Any) -> Any:
    """RLark's moment on the simulator's clock while it is behind."""
    return timezone.now() + timedelta(seconds=simulator.clock_offset())


def test_submit_running_stall_fail_on_the_simulator(running: RunRecord, demo_simulator: Any,
                                                    owner: Any, api_client_for: Any) -> None:
    configure(running)
    RunRecord.objects.filter(pk=running.pk).update(submitted_at=F("submitted_at") - BEHIND)
    sync_submitted_jobs(now=on_its_clock(demo_simulator))  # seen Running: pods kept as attempts
    past_start_lines(demo_simulator, HEAD_POD)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, step_seconds=0.2)
    deadline = time.monotonic() + 90
    while (progress_of_step(running) or 0) < 2:
        assert time.monotonic() < deadline, "step 2 was not read"
        read_cluster_progress(cluster=CLUSTER, now=on_its_clock(demo_simulator))
        time.sleep(0.3)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER, now=on_its_clock(demo_simulator))
    stall_at = progress_of(running).last_step_at
    assert stall_at is not None and stall_at <= on_its_clock(demo_simulator)
    assert not StallEpisode.objects.filter(run_record=running).exists()
    # The rest of the 75 s but the Job's last second pass at once, for both clocks.
    demo_simulator.set_clock_offset(-LAST.total_seconds())
    assert on_its_clock(demo_simulator) >= stall_at + timedelta(seconds=63)  # limit + 3 s
    read_cluster_progress(cluster=CLUSTER, now=on_its_clock(demo_simulator))
    episode = StallEpisode.objects.get(run_record=running)

    worker = PodAttempt.objects.filter(run_record=running, task="rollout").order_by(
        "replica").first()
    assert worker is not None
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, worker.pod_name, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 1})
    sync_submitted_jobs(now=on_its_clock(demo_simulator))
    demo_simulator.set_clock_offset(0)  # the simulator's times are whole seconds: the Job
    # fails a second later, on the real time again (the usage API counts until now)
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, JOB, "Failed", reason="BackoffLimitExceeded")
    sync_submitted_jobs()
    read_cluster_progress(cluster=CLUSTER)  # ends the open stall: the run stopped running
    running.refresh_from_db()
    assert running.state == JobState.FAILED

    head = PodAttempt.objects.get(run_record=running, pod_name=HEAD_POD)
    worker.refresh_from_db()
    episode.refresh_from_db()
    seen_running = StatusChange.objects.get(run_record=running, phase="Running").observed_at
    bound, failure, cleanup = head.started_at, worker.finished_at, head.finished_at
    assert bound and failure and cleanup and episode.ended_at
    # The hand-computed timeline: only the head (Actor, 8 GPUs) holds GPUs (Rollout has none).
    assert bound <= seen_running < episode.started_at < failure < cleanup <= episode.ended_at
    expected = {
        "pending_partial": 8 * (seen_running - bound).total_seconds(),  # bound, not yet Running
        "productive": 8 * (episode.started_at - seen_running).total_seconds(),
        "stalled": 8 * (failure - episode.started_at).total_seconds(),
        "failed": 8 * (cleanup - failure).total_seconds(),  # the worker failed: to cleanup
    }
    body = api_client_for(owner).get(
        "/api/v1/usage/?group_by=job&team=vision-rl").json()
    (group,) = body["groups"]
    assert group["key"] == JOB and group["state"] == "failed"
    for name, gpu_seconds in expected.items():
        assert group[name] == pytest.approx(gpu_seconds / 3600, abs=0.0011), name
    assert group["reserved"] == pytest.approx(8 * (cleanup - bound).total_seconds() / 3600,
                                              abs=0.0011)
    assert group["stalled"] > 0 and group["failed"] > 0 and group["productive"] > 0
    # The same figures through the selector, after the fact: nothing counted past cleanup.
    later = usage_report(parse_query(owner, {"team": "vision-rl", "group_by": "job"}),
                         now=timezone.now() + timedelta(hours=5))
    assert later.groups[0]["reserved"] == group["reserved"]


def progress_of_step(record: RunRecord) -> int | None:
    kept = RunProgress.objects.filter(run_record=record).first()
    return None if kept is None else kept.step
