"""A run's cause (SPEC 16) on the simulator over HTTP: lines injected through its log control
(`POST /_control/.../pods/{pod}/log`), a real status pass and progress pass, then the cause on
the run record, the job and run record APIs and pages, and in job_failed / job_stalled (email
and signed webhook). The earliest evidence across roles wins: RLinf's teardown prints later
errors on the other roles."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from clusters.k8s import read_pod_log
from jobs.models import EventKind, JobState, NotificationEvent, RunRecord, StallEpisode
from jobs.notify.services import preferences_set, webhook_set
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.notify_support import SECRET, Receiver, signature_ok
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.test_observe_causes_rules import KILLED, NCCL_TIMEOUT, NCCL_WATCHDOG

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
ROLLOUT_POD = "ppo-run-rollout-0"


@pytest.fixture(autouse=True)
def eager(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_WEBHOOK_RETRY_BASE = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    clear_prefix(OBSERVE_PREFIX)
    yield
    current_app.conf.task_always_eager = before
    clear_prefix(OBSERVE_PREFIX)


def past_start_lines(sim: Any, *pods: str) -> None:
    """The start script's lines are timed a second apart from the pod's start, and appended
    lines never before them: the simulator's clock moved past them (that much time passing
    at once instead of a wait), so appends are timed now."""
    ahead = 0.0
    for pod in pods:
        last = read_pod_log(credentials=sim.credentials(CLUSTER), namespace=NAMESPACE,
                            name=pod, timestamps=True).text.splitlines()[-1]
        moment = datetime.strptime(last[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
        now = datetime.now(UTC) + timedelta(seconds=sim.clock_offset())
        ahead = max(ahead, (moment - now).total_seconds() + 1.1)
    if ahead > 0:
        sim.advance_clock(ahead)


def test_the_earliest_evidence_across_roles_is_the_cause_of_a_failed_run(
        running: RunRecord, demo_simulator: Any, team: Team, owner: Any, outsider: Any,
        receiver: Receiver, api_client_for: Any, client: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    owner.email = "owner@example.com"
    owner.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["job_failed"], language="zh-hans")
    sync_submitted_jobs()  # seen Running
    past_start_lines(demo_simulator, HEAD_POD, ROLLOUT_POD)
    # The Rollout's NCCL collective times out first; RLinf then kills the other workers, and
    # the Actor (the Head Task) prints its ActorDiedError last: the newest line is not it.
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD, [
        "rollout step 41 done", NCCL_TIMEOUT, "Traceback (most recent call last):"])
    time.sleep(0.05)
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [KILLED])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 1})
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, JOB, "Failed")
    with django_capture_on_commit_callbacks(execute=True):
        sync_submitted_jobs()

    record = RunRecord.objects.get(pk=running.pk)
    assert record.state == JobState.FAILED
    cause = record.cause
    assert (cause["tag"], cause["pod"]) == ("nccl_timeout", ROLLOUT_POD)
    assert cause["evidence"].startswith("[rank3]:[E1202") and "Watchdog caught" in \
        cause["evidence"]
    at = datetime.fromisoformat(cause["at"].replace("Z", "+00:00"))
    assert abs((at - timezone.now()).total_seconds()) < 120  # the kubelet's line time
    assert record.pod_attempts.get(pod_name=HEAD_POD).failure_tag == "ray_actor_died"

    api = api_client_for(owner)
    assert api.get(f"/api/v1/jobs/{JOB}/").json()["cause"] == cause
    assert api.get(f"/api/v1/run-records/{JOB}/").json()["cause"] == cause
    client.force_login(owner)
    for url in (reverse("jobs:job-detail", args=[JOB]), reverse("jobs:run-record", args=[JOB])):
        page = client.get(url).content.decode()
        assert 'id="run-cause" data-tag="nccl_timeout"' in page and ROLLOUT_POD in page

    [headers, body] = next((h, b) for h, b in receiver.received
                           if json.loads(b)["kind"] == "job_failed")
    assert signature_ok(headers, body) and json.loads(body)["cause"] == cause
    [email] = [m for m in mail.outbox if JOB in m.body]
    assert "NCCL 超时" in email.body and ROLLOUT_POD in email.body
    assert "Watchdog caught collective operation timeout" in email.body

    # Another team sees none of it: the same 404s as before.
    other = api_client_for(outsider)
    assert other.get(f"/api/v1/jobs/{JOB}/").status_code == 404
    assert other.get(f"/api/v1/run-records/{JOB}/").status_code == 404
    client.force_login(outsider)
    assert client.get(reverse("jobs:job-detail", args=[JOB])).status_code == 404


def test_a_later_error_never_replaces_an_earlier_cause(running: RunRecord,
                                                       demo_simulator: Any) -> None:
    sync_submitted_jobs()
    past_start_lines(demo_simulator, HEAD_POD, ROLLOUT_POD)
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD, [NCCL_TIMEOUT])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, restarts=1,
                             lastTerminated={"reason": "Error", "exitCode": 1})
    sync_submitted_jobs()  # the Rollout restarted: captured, its cause offered
    first = RunRecord.objects.get(pk=running.pk).cause
    assert first["tag"] == "nccl_timeout"
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [KILLED])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 1})
    sync_submitted_jobs()  # a later pass finds the Actor's (later) error
    assert RunRecord.objects.get(pk=running.pk).cause == first


def test_a_stall_names_the_cause_found_in_the_head_tasks_log(
        running: RunRecord, demo_simulator: Any, team: Team, owner: Any, receiver: Receiver,
        django_capture_on_commit_callbacks: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    owner.email = "owner@example.com"
    owner.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["job_stalled"], language="en")
    running.launch_list_snapshot["progress"] = {"pattern": "", "stall_after_seconds": 60,
                                                "cancel_after_stalled_seconds": None}
    running.save(update_fields=["launch_list_snapshot"])
    sync_submitted_jobs()
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    past_start_lines(demo_simulator, HEAD_POD)
    read_cluster_progress(cluster=CLUSTER)
    # The hang: the watchdog's heartbeat monitor speaks, no step comes any more.
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [NCCL_WATCHDOG])
    with django_capture_on_commit_callbacks(execute=True):
        read_cluster_progress(cluster=CLUSTER, now=timezone.now() + timedelta(seconds=600))
    episode = StallEpisode.objects.get(run_record=running)
    assert (episode.cause["tag"], episode.cause["pod"]) == ("nccl_watchdog", HEAD_POD)
    assert RunRecord.objects.get(pk=running.pk).cause == episode.cause
    [body] = [b for _h, b in receiver.received if json.loads(b)["kind"] == "job_stalled"]
    assert json.loads(body)["cause"] == episode.cause
    [email] = mail.outbox
    assert "Cause: NCCL watchdog stuck" in email.body and HEAD_POD in email.body
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_STALLED).count() == 1
