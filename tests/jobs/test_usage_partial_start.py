"""Partially-started GPU time of a real run on the simulator over HTTP (SPEC 16): the Actor's
pod is bound and started (its `startTime`, set by the simulated kubelet at bind) while one
Rollout replica waits for a node (NotReady), so the Job stays Pending; the node comes back,
the Job runs, then succeeds. The usage API's `pending_partial` is the Actor's 8 GPUs from its
start to the status pass seeing the Job Running, checked against the stored timelines.

No sleeping for the simulator's whole seconds: its clock starts 3.2 s behind the real one and
RLark's passes run at its moments (`now=`, the run submitted on that clock too); the 2.1 s of
partial start and the 1.1 s before the Job succeeds pass at once on both (the clock moved
forward), which brings the simulator back to the real time before the end."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from clusters import k8s
from jobs.models import JobState, PodAttempt, RunRecord, StatusChange
from jobs.records.status import sync_submitted_jobs
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.records_support import register_fleet, submittable_job
from tests.jobs.test_progress_pass import eager

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
DOWN = "a-cpu-04"  # one Rollout replica's node: NotReady while the rest of the gang starts
__all__ = ["eager"]  # the progress tests' settings and eager Celery, used here too
PARTIAL, BEFORE_SUCCESS = 2.1, 1.1  # seconds: the simulator's times are whole seconds


@pytest.fixture
def demo_simulator(demo_simulator: Any) -> Any:
    """The demo simulator, its clock behind the real one by the seconds the test lets pass."""
    demo_simulator.set_clock_offset(-(PARTIAL + BEFORE_SUCCESS))
    return demo_simulator


def on_its_clock(simulator: Any) -> datetime:
    """RLark's moment on the simulator's clock."""
    return timezone.now() + timedelta(seconds=simulator.clock_offset())


def test_a_gang_started_in_part_counts_as_pending_partial(
        demo_simulator: Any, team: Any, owner: Any, admin_user: Any,
        django_capture_on_commit_callbacks: Any, api_client_for: Any) -> None:
    register_fleet(demo_simulator)
    job = submittable_job(team=team, owner=owner, admin=admin_user, name=JOB)
    with django_capture_on_commit_callbacks(execute=False):
        record = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[record.pk])
    RunRecord.objects.filter(pk=record.pk).update(
        submitted_at=F("submitted_at") - timedelta(seconds=PARTIAL + BEFORE_SUCCESS))
    demo_simulator.patch_node(CLUSTER, DOWN, ready=False)
    demo_simulator.tick()

    credentials = demo_simulator.credentials(CLUSTER)
    pods = {p.name: p for p in k8s.list_pods(credentials=credentials, namespace=NAMESPACE,
                                             label_selector=f"rlinf.io/job={JOB}")}
    assert pods[HEAD_POD].phase == "Running" and pods[HEAD_POD].started_at
    assert [p.phase for name, p in sorted(pods.items()) if "rollout" in name].count(
        "Pending") == 1  # the replica whose node is down
    job_status = k8s.get_job(credentials=credentials, namespace=NAMESPACE, name=JOB)["status"]
    assert job_status["phase"] == "Pending"
    sync_submitted_jobs(now=on_its_clock(demo_simulator))  # seen Pending, started pods kept
    record.refresh_from_db()
    assert record.state == JobState.PENDING
    head = PodAttempt.objects.get(run_record=record, pod_name=HEAD_POD)
    assert head.phase == "Running" and head.started_at is not None

    demo_simulator.advance_clock(PARTIAL)  # a visible partial start, in whole seconds
    demo_simulator.patch_node(CLUSTER, DOWN, ready=True)
    demo_simulator.tick()
    sync_submitted_jobs(now=on_its_clock(demo_simulator))  # seen Running
    demo_simulator.advance_clock(BEFORE_SUCCESS)  # the simulator on the real time again
    assert abs(demo_simulator.clock_offset()) < 1e-6
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, JOB, "Succeeded")
    sync_submitted_jobs()
    record.refresh_from_db()
    assert record.state == JobState.SUCCEEDED

    head.refresh_from_db()
    job_status = k8s.get_job(credentials=credentials, namespace=NAMESPACE, name=JOB)["status"]
    seen_running = StatusChange.objects.get(run_record=record, phase="Running").observed_at
    bound, cleanup = head.started_at, head.finished_at
    assert bound is not None and cleanup is not None
    # The Actor started at bind, at least 2 s before the whole gang was (the Job's startTime).
    assert parse_datetime(job_status["startTime"]) - bound >= timedelta(seconds=2)
    assert bound < seen_running < cleanup
    # Hand-computed: only the Actor (8 GPUs) holds GPUs; the Rollout has none.
    expected = {
        "pending_partial": 8 * (seen_running - bound).total_seconds(),
        "productive": 8 * (cleanup - seen_running).total_seconds(),
        "stalled": 0.0,
        "failed": 0.0,
    }
    assert expected["pending_partial"] >= 8 * 2
    body = api_client_for(owner).get("/api/v1/usage/?group_by=job&team=vision-rl").json()
    (group,) = body["groups"]
    assert group["key"] == JOB and group["state"] == "succeeded"
    for name, gpu_seconds in expected.items():
        assert group[name] == pytest.approx(gpu_seconds / 3600, abs=0.0011), name
    assert group["reserved"] == pytest.approx(8 * (cleanup - bound).total_seconds() / 3600,
                                              abs=0.0011)

