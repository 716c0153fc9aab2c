"""The attempt record: what the status sync keeps of each pod, and that it outlives the pods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.urls import reverse

from clusters import k8s
from jobs.models import FailureTag, JobState, PodAttempt, RunRecord
from jobs.observe.capture import LOG_TAIL_BYTES, attempt_log, capture_cluster
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE

pytestmark = pytest.mark.django_db

ROLLOUT_POD = "ppo-run-rollout-0"
FINAL = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


@pytest.fixture(autouse=True)
def quick(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


def capture(sim: Any, record: RunRecord) -> int:
    return capture_cluster(sim.credentials(CLUSTER), [record], final_states=FINAL)


def attempt(record: RunRecord, pod: str) -> PodAttempt:
    return PodAttempt.objects.get(run_record=record, pod_name=pod)


def test_running_pods_are_recorded_without_reading_their_logs(
    demo_simulator: Any, running: RunRecord
) -> None:
    assert capture(demo_simulator, running) == PodAttempt.objects.filter(
        run_record=running).count()
    head = attempt(running, HEAD_POD)
    assert (head.task, head.replica, head.node, head.phase) == ("actor", 0, "a-head-01",
                                                                "Running")
    assert head.pod_uid and head.started_at is not None
    assert (head.logs_captured, head.failure_tag) == (False, FailureTag.NONE)
    reads = [r for r in demo_simulator.requests(CLUSTER) if r["path"].endswith("/log")]
    assert reads == []
    assert capture(demo_simulator, running) == 0


def test_an_oom_failure_outlives_the_deleted_job(demo_simulator: Any,
                                                  running: RunRecord) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD, [
        "step 7 reward=0.41", "Out of memory: Killed process 4242 (python) total-vm:99GB"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 137})
    capture(demo_simulator, running)
    k8s.delete_job(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE,
                   name="ppo-run")
    capture(demo_simulator, running)
    kept = attempt(running, ROLLOUT_POD)
    assert (kept.phase, kept.reason, kept.exit_code) == ("Failed", "Error", 137)
    assert kept.failure_tag == FailureTag.OOM
    assert kept.failure_evidence.startswith("Out of memory: Killed process 4242")
    assert attempt_log(kept.log_tail).endswith(
        "step 7 reward=0.41\nOut of memory: Killed process 4242 (python) total-vm:99GB\n")
    assert [e["reason"] for e in kept.pod_events][:1] == ["Failed"]
    assert "Started" in [e["reason"] for e in kept.pod_events]


def test_a_restart_keeps_the_previous_containers_log(demo_simulator: Any,
                                                    running: RunRecord) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD,
                                  ["torch.cuda.OutOfMemoryError: CUDA out of memory."])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, restarts=1,
                             lastTerminated={"reason": "Error", "exitCode": 1},
                             waiting={"reason": "CrashLoopBackOff"})
    capture(demo_simulator, running)
    kept = attempt(running, HEAD_POD)
    assert (kept.restarts, kept.previous_reason, kept.previous_exit_code) == (1, "Error", 1)
    assert attempt_log(kept.previous_log_tail).endswith("CUDA out of memory.\n")
    assert "CUDA" not in attempt_log(kept.log_tail)
    assert kept.failure_tag == FailureTag.CUDA_OOM


def test_the_end_of_the_job_captures_every_pod(demo_simulator: Any,
                                               running: RunRecord) -> None:
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, "ppo-run", "Succeeded")
    capture(demo_simulator, running)
    attempts = PodAttempt.objects.filter(run_record=running)
    assert attempts and all(a.logs_captured and a.phase == "Succeeded" for a in attempts)
    assert {a.failure_tag for a in attempts} == {FailureTag.NONE}
    assert "rlark: task actor replica 0" in attempt_log(attempt(running, HEAD_POD).log_tail)


def test_a_long_log_keeps_only_its_last_256_kib(demo_simulator: Any,
                                                running: RunRecord) -> None:
    line = "x" * 1023
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD,
                                  [f"{i:06d}{line}" for i in range(400)] + ["last line"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 2})
    capture(demo_simulator, running)
    kept = attempt(running, HEAD_POD)
    text = attempt_log(kept.log_tail)
    assert len(text.encode()) <= LOG_TAIL_BYTES
    assert text.endswith("last line\n")
    assert len(kept.log_tail) < LOG_TAIL_BYTES // 10  # kept compressed


def test_the_record_page_and_api_show_the_kept_attempt(
    demo_simulator: Any, running: RunRecord, owner: Any, outsider: Any, client: Any,
    api_client_for: Any
) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD, ["OOMKilled by the kernel"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    capture(demo_simulator, running)
    k8s.delete_job(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE,
                   name="ppo-run")
    client.force_login(owner)
    page = client.get(reverse("jobs:run-record-attempts", args=["ppo-run"])).content.decode()
    assert 'data-tag="oom"' in page and "OOMKilled by the kernel" in page
    assert "Container main terminated: OOMKilled (exit code 137)" in page
    record_page = client.get(reverse("jobs:run-record", args=["ppo-run"])).content.decode()
    assert reverse("jobs:run-record-attempts", args=["ppo-run"]) in record_page
    rows = api_client_for(owner).get(reverse("api:run-record-attempts", args=["ppo-run"])).json()
    kept = next(row for row in rows if row["attempt"]["pod_name"] == ROLLOUT_POD)
    assert (kept["attempt"]["failure_tag"], kept["attempt"]["exit_code"]) == ("oom", 137)
    assert kept["log_tail"].endswith("OOMKilled by the kernel\n")
    outsider_api = api_client_for(outsider)
    assert outsider_api.get(reverse("api:run-record-attempts", args=["ppo-run"])).status_code \
        == 404
    client.force_login(outsider)
    assert client.get(reverse("jobs:run-record-attempts", args=["ppo-run"])).status_code == 404


def test_the_status_sync_keeps_an_oom_attempt_after_the_job_is_deleted(
    demo_simulator: Any, running: RunRecord, owner: Any, client: Any
) -> None:
    from jobs.records.status import sync_submitted_jobs

    sync_submitted_jobs()
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD,
                                  ["Out of memory: Killed process 77 (python)"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 137})
    sync_submitted_jobs()
    k8s.delete_job(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE,
                   name="ppo-run")
    sync_submitted_jobs()  # the Job is gone: the run ends, its pods with it
    kept = attempt(running, ROLLOUT_POD)
    assert (kept.failure_tag, kept.exit_code, kept.reason) == (FailureTag.OOM, 137, "Error")
    assert attempt_log(kept.log_tail).endswith("Out of memory: Killed process 77 (python)\n")
    assert "Failed" in [event["reason"] for event in kept.pod_events]
    client.force_login(owner)
    page = client.get(reverse("jobs:run-record-attempts", args=["ppo-run"])).content.decode()
    assert 'data-tag="oom"' in page


def test_the_status_sync_captures_every_pod_when_the_job_ends(demo_simulator: Any,
                                                              running: RunRecord) -> None:
    from jobs.records.status import sync_submitted_jobs

    sync_submitted_jobs()
    assert not PodAttempt.objects.filter(run_record=running, logs_captured=True).exists()
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, "ppo-run", "Succeeded")
    sync_submitted_jobs()
    attempts = PodAttempt.objects.filter(run_record=running)
    assert attempts and all(a.logs_captured for a in attempts)


# --- capture on cancel --------------------------------------------------------------------------


def cancel(owner: Any, record: RunRecord) -> RunRecord:
    from jobs.records.services import job_cancel

    job_cancel(job=record.job, user=owner)
    record.refresh_from_db()
    return record


def test_cancelling_keeps_every_pod_with_its_log_and_events_before_the_job_is_deleted(
    demo_simulator: Any, running: RunRecord, owner: Any
) -> None:
    listed = k8s.list_pods(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE,
                           label_selector="rlinf.io/job=ppo-run")
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, ROLLOUT_POD, ["step 3 reward=0.12"])
    seen = len(demo_simulator.requests(CLUSTER))
    record = cancel(owner, running)
    assert (record.state, record.capture_incomplete) == (JobState.CANCELLED, "")
    kept = {a.pod_name: a for a in PodAttempt.objects.filter(run_record=record)}
    assert set(kept) == {pod.name for pod in listed} and len(kept) >= 2
    for pod in kept.values():
        assert pod.logs_captured and pod.capture_reason == "cancelled"
        assert "Started" in [event["reason"] for event in pod.pod_events]
        assert f"rlark: task {pod.task} replica {pod.replica}" in attempt_log(pod.log_tail)
    assert attempt_log(kept[ROLLOUT_POD].log_tail).endswith("step 3 reward=0.12\n")
    # Every read came before the Job's deletion, and the Job is gone.
    calls = [(r["method"], r["path"]) for r in demo_simulator.requests(CLUSTER)[seen:]]
    deleted = calls.index(
        ("DELETE", f"/apis/rlinf.io/v1alpha1/namespaces/{NAMESPACE}/jobs/ppo-run"))
    reads = [i for i, (method, path) in enumerate(calls)
             if method == "GET" and (path.endswith("/log") or path.endswith("/events"))]
    assert len(reads) == 2 * len(kept) and max(reads) < deleted
    assert k8s.list_jobs(credentials=demo_simulator.credentials(CLUSTER),
                         namespace=NAMESPACE) == []


def test_a_cluster_failing_during_the_capture_still_cancels_and_the_record_says_so(
    demo_simulator: Any, running: RunRecord, owner: Any, client: Any, api_client_for: Any
) -> None:
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")  # the pods list
    record = cancel(owner, running)
    assert record.state == JobState.CANCELLED
    assert record.capture_incomplete.startswith("the pods could not be listed")
    client.force_login(owner)
    for page in ("jobs:run-record", "jobs:run-record-attempts"):
        html = client.get(reverse(page, args=["ppo-run"])).content.decode()
        assert 'data-capture="incomplete"' in html and "could not be listed" in html
    answer = api_client_for(owner).get(reverse("api:run-record-detail", args=["ppo-run"])).json()
    assert answer["submission"]["capture_incomplete"] == record.capture_incomplete
    assert k8s.list_jobs(credentials=demo_simulator.credentials(CLUSTER),
                         namespace=NAMESPACE) == []


def test_a_cancel_capture_out_of_time_still_cancels_and_keeps_what_it_listed(
    demo_simulator: Any, running: RunRecord, owner: Any, settings: Any
) -> None:
    settings.RLARK_CANCEL_CAPTURE_SECONDS = 1.0
    demo_simulator.set_faults(CLUSTER, latency_ms=600)  # two calls cannot fit in the budget
    try:
        record = cancel(owner, running)
    finally:
        demo_simulator.clear_faults(CLUSTER)
    assert record.state == JobState.CANCELLED
    assert record.capture_incomplete
    assert not PodAttempt.objects.filter(run_record=record, logs_captured=True).exists()
    assert k8s.list_jobs(credentials=demo_simulator.credentials(CLUSTER),
                         namespace=NAMESPACE) == []
