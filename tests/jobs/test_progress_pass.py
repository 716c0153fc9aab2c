"""The progress pass against the simulator over HTTP: steps read incrementally from the Head
Task's log after a real status pass, the `progress` of the job and run record APIs, stalls and
recoveries sent once to a real webhook receiver and by email, carrying the run's cause when one
is known, the cancel after a long stall, hostile logs."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from jobs.models import (
    EpisodeEnd,
    EventKind,
    JobState,
    NotificationEvent,
    PodAttempt,
    RunProgress,
    RunRecord,
    StallEpisode,
)
from jobs.notify.services import preferences_set, webhook_set
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from jobs.tasks import cancel_stalled_run
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.notify_support import SECRET, Receiver, signature_ok
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.test_causes import past_start_lines
from tests.jobs.test_observe_causes_rules import NCCL_WATCHDOG

pytestmark = pytest.mark.django_db
JOB = "ppo-run"


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


def configure(record: RunRecord, **progress: Any) -> None:
    record.launch_list_snapshot["progress"] = {"pattern": "", "stall_after_seconds": 60,
                                               "cancel_after_stalled_seconds": None, **progress}
    record.save(update_fields=["launch_list_snapshot"])


@pytest.fixture
def advancing(running: RunRecord, demo_simulator: Any) -> RunRecord:
    """The run seen Running by a status pass, past its start script's lines (the simulator's
    clock moved past them), its Head Task stepping every 0.2 s."""
    configure(running)
    sync_submitted_jobs()
    past_start_lines(demo_simulator, HEAD_POD)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, step_seconds=0.2)
    return running


def progress_of(record: RunRecord) -> RunProgress:
    return RunProgress.objects.get(run_record=record)


def pass_until(record: RunRecord, step: int, **kwargs: Any) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        read_cluster_progress(cluster=CLUSTER, **kwargs)
        kept = RunProgress.objects.filter(run_record=record).first()
        if kept is not None and kept.step is not None and kept.step >= step:
            return
        time.sleep(0.3)
    raise AssertionError(f"step {step} was not read")


def test_steps_are_read_and_answered_by_the_job_and_run_record_apis(
        advancing: RunRecord, owner: Any, api_client_for: Any) -> None:
    pass_until(advancing, 4)
    client = api_client_for(owner)
    progress = client.get(f"/api/v1/jobs/{JOB}/").json()["progress"]
    assert progress["total"] == 1000 and progress["step"] >= 4
    assert progress["percent"] == round(progress["step"] / 10, 1)
    assert progress["stalled"] is False and progress["stalled_since"] is None
    assert progress["points"][0][1] >= 1 and progress["points"][-1][1] == progress["step"]
    assert progress["steps_per_hour"] > 0 and progress["eta"] is not None
    chain = client.get(f"/api/v1/run-records/{JOB}/").json()
    assert chain["progress"]["step"] >= progress["step"]


def test_a_pass_with_nothing_new_reads_little_and_changes_nothing(
        advancing: RunRecord, demo_simulator: Any) -> None:
    pass_until(advancing, 3)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER)  # what came before the freeze
    kept = progress_of(advancing)
    with CaptureQueriesContext(connection) as captured:
        quiet = read_cluster_progress(cluster=CLUSTER)
    assert quiet.steps == 0 and quiet.read == 1
    assert quiet.bytes < 16 * 1024  # at most the cursor's second again, never the whole log
    writes = [q["sql"] for q in captured.captured_queries if "jobs_runprogress" in q["sql"]
              and not q["sql"].lstrip().upper().startswith("SELECT")]
    assert writes == []  # the cursor's second read again is not news: no progress written
    again = progress_of(advancing)
    assert (again.step, again.cursor_at, again.points, again.bytes_read) == (
        kept.step, kept.cursor_at, kept.points, kept.bytes_read)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="advancing")
    pass_until(advancing, kept.step + 2)
    moved = progress_of(advancing)
    assert moved.bytes_read > kept.bytes_read and len(moved.points) > len(kept.points)
    assert moved.last_step_at > kept.last_step_at and moved.cursor_at > kept.cursor_at


def test_a_stall_and_its_recovery_are_sent_once_each_signed(
        advancing: RunRecord, demo_simulator: Any, team: Team, receiver: Receiver,
        django_capture_on_commit_callbacks: Any, owner: Any, api_client_for: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    pass_until(advancing, 2)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER)
    later = timezone.now() + timedelta(seconds=120)
    for _ in range(3):  # every pass sees the stall; it is one episode, sent once
        with django_capture_on_commit_callbacks(execute=True):
            read_cluster_progress(cluster=CLUSTER, now=later)
    episode = StallEpisode.objects.get(run_record=advancing)
    assert episode.ended_at is None and episode.number == 1
    assert episode.started_at == progress_of(advancing).last_step_at + timedelta(seconds=60)
    client = api_client_for(owner)
    assert [j["name"] for j in client.get("/api/v1/jobs/?stalled=1").json()["results"]] == [JOB]
    assert client.get(f"/api/v1/jobs/{JOB}/").json()["progress"]["stalled"] is True

    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="advancing")
    step = progress_of(advancing).step
    with django_capture_on_commit_callbacks(execute=True):
        pass_until(advancing, step + 1)
    episode.refresh_from_db()
    assert episode.end == EpisodeEnd.RECOVERED and episode.recovered_step > step
    assert client.get("/api/v1/jobs/?stalled=1").json()["results"] == []
    kinds = [json.loads(body)["kind"] for _headers, body in receiver.received]
    assert kinds == ["job_stalled", "job_recovered"]
    assert all(signature_ok(headers, body) for headers, body in receiver.received)
    stalled = json.loads(receiver.received[0][1])
    assert stalled["event"] == f"job_stalled:{advancing.pk}:1"
    assert stalled["stall_after_seconds"] == 60 and stalled["cause"] is None
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_STALLED).count() == 1


def _stall(demo_simulator: Any, capture: Any, now: datetime, passes: int = 3) -> None:
    """Freeze the Head Task's steps, read what came before, then `passes` passes at `now`."""
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER)
    for _ in range(passes):
        with capture(execute=True):
            read_cluster_progress(cluster=CLUSTER, now=now)


def _recover(record: RunRecord, demo_simulator: Any, capture: Any, passes: int = 3) -> None:
    """Steps again: passes until a new step is read, then `passes` more that see nothing new
    to send (the episode is closed once)."""
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="advancing")
    step = progress_of(record).step
    with capture(execute=True):
        pass_until(record, (step or 0) + 1)
    for _ in range(passes):
        with capture(execute=True):
            read_cluster_progress(cluster=CLUSTER)


def _mails(kind_label: str) -> list[Any]:
    return [m for m in mail.outbox if m.subject == f"[RLark] {JOB}: {kind_label}"]


def test_job_recovered_is_emailed_once_per_episode_with_the_run_s_cause(
        advancing: RunRecord, demo_simulator: Any, team: Team, owner: Any, member: Any,
        receiver: Receiver, django_capture_on_commit_callbacks: Any) -> None:
    """Two stall episodes of one run, each seen by several passes and recovered: one
    job_stalled and one job_recovered email per episode per chooser, in the chooser's language,
    and the signed webhooks, all naming the cause found in the Head Task's log."""
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    owner.email, member.email = "owner@example.com", "member@example.com"
    owner.save(update_fields=["email"])
    member.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["job_stalled", "job_recovered"], language="en")
    preferences_set(user=member, email_events=["job_recovered"], language="zh-hans")
    capture = django_capture_on_commit_callbacks
    pass_until(advancing, 2)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    past_start_lines(demo_simulator, HEAD_POD)
    # The hang's evidence: the watchdog's heartbeat monitor speaks, no step comes any more.
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [NCCL_WATCHDOG])
    _stall(demo_simulator, capture, timezone.now() + timedelta(seconds=600))
    cause = RunRecord.objects.get(pk=advancing.pk).cause
    assert (cause["tag"], cause["pod"]) == ("nccl_watchdog", HEAD_POD)
    assert StallEpisode.objects.get(run_record=advancing, number=1).cause == cause
    assert len(_mails("job stalled (no new training step)")) == 1
    assert _mails("job recovered from a stall") == []

    _recover(advancing, demo_simulator, capture)
    recovered = _mails("job recovered from a stall")
    assert [m.to for m in recovered] == [["owner@example.com"]]
    english = recovered[0].body
    assert "job recovered from a stall" in english
    assert "Cause: NCCL watchdog stuck" in english and HEAD_POD in english
    assert "watchdog got stuck for 480 seconds" in english
    chinese = [m for m in mail.outbox if m.to == ["member@example.com"]]
    assert [m.subject for m in chinese] == [f"[RLark] {JOB}: 作业已从停滞中恢复"]
    assert "原因：" in chinese[0].body and HEAD_POD in chinese[0].body
    assert "watchdog got stuck" in chinese[0].body and "Cause:" not in chinese[0].body

    # A second episode of the same run: its own stall and recovery, each sent once more.
    _stall(demo_simulator, capture, timezone.now() + timedelta(seconds=600))
    assert StallEpisode.objects.get(run_record=advancing, number=2).ended_at is None
    _recover(advancing, demo_simulator, capture)
    assert StallEpisode.objects.filter(run_record=advancing, end=EpisodeEnd.RECOVERED).count() == 2
    assert len(_mails("job stalled (no new training step)")) == 2
    assert [m.to for m in _mails("job recovered from a stall")] == [["owner@example.com"]] * 2
    assert len([m for m in mail.outbox if m.to == ["member@example.com"]]) == 2

    sent = [json.loads(body) for _headers, body in receiver.received]
    assert [(b["kind"], b["event"]) for b in sent] == [
        ("job_stalled", f"job_stalled:{advancing.pk}:1"),
        ("job_recovered", f"job_recovered:{advancing.pk}:1"),
        ("job_stalled", f"job_stalled:{advancing.pk}:2"),
        ("job_recovered", f"job_recovered:{advancing.pk}:2")]
    assert all(signature_ok(headers, body) for headers, body in receiver.received)
    assert all(b["cause"] == cause for b in sent)
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_RECOVERED).count() == 2


def test_a_run_stalled_too_long_is_cancelled_once_captured_first(
        advancing: RunRecord, demo_simulator: Any, owner: Any, client: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    client.force_login(owner)
    configure(advancing, cancel_after_stalled_seconds=300)
    pass_until(advancing, 2)
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    read_cluster_progress(cluster=CLUSTER)
    stalled_at = timezone.now() + timedelta(seconds=120)
    with django_capture_on_commit_callbacks(execute=True):
        read_cluster_progress(cluster=CLUSTER, now=stalled_at)
    assert RunRecord.objects.get(pk=advancing.pk).state == JobState.RUNNING
    seen = len(demo_simulator.requests(CLUSTER))
    with django_capture_on_commit_callbacks(execute=True):
        read_cluster_progress(cluster=CLUSTER, now=stalled_at + timedelta(seconds=400))
        read_cluster_progress(cluster=CLUSTER, now=stalled_at + timedelta(seconds=500))
    record = RunRecord.objects.get(pk=advancing.pk)
    assert record.state == JobState.CANCELLED
    change = record.status_changes.get(phase="Cancelled")
    assert change.reason == "StalledTooLong" and "no new training step" in change.message
    episode = StallEpisode.objects.get(run_record=record)
    assert episode.end == EpisodeEnd.CANCELLED and episode.cancel_requested_at is not None
    # Captured first: every pod's log and events read before the one DELETE of the Job.
    calls = [(r["method"], r["path"]) for r in demo_simulator.requests(CLUSTER)[seen:]]
    job_path = f"/apis/rlinf.io/v1alpha1/namespaces/{NAMESPACE}/jobs/{JOB}"
    assert calls.count(("DELETE", job_path)) == 1
    deleted = calls.index(("DELETE", job_path))
    kept = PodAttempt.objects.filter(run_record=record, capture_reason="cancelled")
    assert kept.filter(pod_name=HEAD_POD, logs_captured=True).exists() and kept.count() >= 2
    captured = [i for i, (method, path) in enumerate(calls) if method == "GET"
                and any(path.endswith(f"/pods/{a.pod_name}/log") for a in kept)]
    assert len(captured) >= kept.count() and max(captured) < deleted
    # Once: the task delivered again (acks_late) and later passes change nothing.
    assert cancel_stalled_run.apply(args=[episode.pk]).get() is False
    with django_capture_on_commit_callbacks(execute=True):
        read_cluster_progress(cluster=CLUSTER, now=stalled_at + timedelta(seconds=900))
    assert record.status_changes.filter(phase="Cancelled").count() == 1
    assert StallEpisode.objects.filter(run_record=record).count() == 1
    # And says so, on the job page's status history.
    page = client.get(reverse("jobs:job-detail", args=[JOB])).content.decode()
    assert "StalledTooLong" in page and "Cancelled by RLark: no new training step" in page


def test_hostile_lines_neither_slow_nor_corrupt_the_progress(
        running: RunRecord, demo_simulator: Any, settings: Any) -> None:
    configure(running)
    sync_submitted_jobs()
    demo_simulator.set_progress(CLUSTER, NAMESPACE, JOB, state="frozen")
    settings.RLARK_PROGRESS_READ_BYTES = 64 * 1024

    def append(*lines: str) -> None:
        demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, list(lines))

    # The start script's lines are timed a second apart from the pod's start (and appended
    # lines never before them): past them, so appends are timed now.
    past_start_lines(demo_simulator, HEAD_POD)

    append("│ Global Step:    7/10 │ Progress: ██ │  70.0%")
    read_cluster_progress(cluster=CLUSTER)
    append("x" * 3_000_000)  # a line of megabytes: skipped with the rest of its second
    demo_simulator.advance_clock(1.1)
    append("\x00\xff\ufffd" * 1000 + "Global Step: \x01/\x02",
           "Global Step: 1000000000000000000/1000000000000000000", "Global Step: 20/10")
    reports = [read_cluster_progress(cluster=CLUSTER) for _ in range(4)]
    assert all(report.bytes <= 64 * 1024 + 1 for report in reports)
    kept = progress_of(running)
    assert (kept.step, kept.total) == (7, 10)
    assert kept.skipped_lines == 1 and kept.rejected_lines == 2
    append("│ Global Step:    3/10 │ Progress: █ │  30.0%")  # resumed from a checkpoint
    read_cluster_progress(cluster=CLUSTER)
    kept = progress_of(running)
    assert (kept.step, kept.restarts) == (3, 1)
    assert [point[1] for point in kept.points] == [7, 3]


def test_a_failed_read_is_recorded_on_its_run_and_opens_no_stall(
        advancing: RunRecord, demo_simulator: Any) -> None:
    pass_until(advancing, 2)
    kept = progress_of(advancing)
    RunProgress.objects.filter(run_record=advancing).update(pod=f"{JOB}-actor-9")
    later = timezone.now() + timedelta(seconds=600)  # past the stall limit (60 s)

    missing = read_cluster_progress(cluster=CLUSTER, now=later)
    gone = progress_of(advancing)
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")
    failing = read_cluster_progress(cluster=CLUSTER, now=later)
    failed = progress_of(advancing)
    demo_simulator.clear_faults(CLUSTER)

    assert (missing.read, missing.unreachable, failing.read, failing.unreachable) == (0, 0, 0, 1)
    assert gone.read_error.startswith("404 NotFound: pods") and f"{JOB}-actor-9" in gone.read_error
    assert failed.read_error == "500 InternalError: simulated server error"
    assert (failed.step, failed.cursor_at) == (kept.step, kept.cursor_at)
    assert not StallEpisode.objects.filter(run_record=advancing).exists()
    RunProgress.objects.filter(run_record=advancing).update(pod=HEAD_POD)
    pass_until(advancing, kept.step + 1)
    assert progress_of(advancing).read_error == ""


def test_viewers_read_what_the_pass_stored_and_never_the_log(
        advancing: RunRecord, demo_simulator: Any, owner: Any, client: Any,
        api_client_for: Any) -> None:
    """SPEC 16: logs are read per cluster pass, never per viewer. Pages and API answers of the
    run, asked many times, send no log read to the cluster (and their step is the pass's)."""
    pass_until(advancing, 2)
    stored = progress_of(advancing).step
    client.force_login(owner)
    api = api_client_for(owner)
    seen = len(demo_simulator.requests(CLUSTER))
    for _ in range(3):
        fragment = client.get(reverse("jobs:run-record-progress", args=[JOB]))
        assert fragment.status_code == 200 and f'data-step="{stored}"' in fragment.content.decode()
        assert client.get(reverse("jobs:job-detail", args=[JOB])).status_code == 200
        assert client.get(reverse("jobs:run-record", args=[JOB])).status_code == 200
        assert api.get(f"/api/v1/jobs/{JOB}/").json()["progress"]["step"] == stored
        assert api.get(f"/api/v1/run-records/{JOB}/").json()["progress"]["step"] == stored
        assert api.get("/api/v1/jobs/?stalled=1").status_code == 200
    reads = [r["path"] for r in demo_simulator.requests(CLUSTER)[seen:]
             if r["path"].endswith("/log")]
    assert reads == []
