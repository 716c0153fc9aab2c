"""Status sync per cluster: one listing per namespace, changes in bulk, one task per cluster."""

from __future__ import annotations

from typing import Any

import pghistory
import pytest

from clusters.k8s import create_job, delete_job
from clusters.simulator.testing import job_body, task_body
from jobs.drafts.services import job_create
from jobs.models import JobState, PodAttempt, RunRecord, StatusChange
from jobs.records.status import apply_observations, observation, sync_cluster
from jobs.tasks import sync_cluster_status
from jobs.tasks import sync_submitted_jobs as sync_task
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, run_record_for

pytestmark = pytest.mark.django_db

CLUSTER = "gpu-a"
NAMESPACES = ("default", "rl-gpu-a")
JOBS_PER_NAMESPACE = 4


@pytest.fixture(autouse=True)
def small_pages(settings: Any) -> None:
    settings.RLARK_STATUS_PAGE_SIZE = 3  # four Jobs a namespace: two pages each
    settings.RLARK_KUBE_TIMEOUT = 5.0


def running_jobs(sim: Any, team: Team, owner: Any, cluster: str = CLUSTER) -> list[RunRecord]:
    """Jobs on the cluster in two namespaces, each with a pending run record."""
    records = []
    task = task_body("actor", replicas=1, selector={"rlinf.io/pool": "status-sync"}, head=True)
    for namespace in NAMESPACES:
        for index in range(JOBS_PER_NAMESPACE):
            name = f"{cluster}-{namespace}-{index}"
            create_job(credentials=sim.credentials(cluster), namespace=namespace,
                       body=job_body(name, namespace=namespace, tasks=[task]))
            job = job_create(team=team, user=owner, data={"name": name})
            records.append(run_record_for(job, state=JobState.PENDING, cluster=cluster,
                                          namespace=namespace))
    return records


def job_requests(sim: Any) -> list[tuple[str, str]]:
    return [(r["method"], r["path"]) for r in sim.requests(CLUSTER) if "/jobs" in r["path"]]


def test_one_pass_lists_each_namespace_once_in_pages_and_reads_no_job_alone(
    demo_simulator: Any, team: Team, owner: Any
) -> None:
    register_fleet(demo_simulator)
    records = running_jobs(demo_simulator, team, owner)
    demo_simulator.set_job_phase(CLUSTER, "rl-gpu-a", records[-1].job_name, "Running",
                                 reason="Started", message="all tasks up")
    before = len(job_requests(demo_simulator))

    report = sync_cluster(cluster=CLUSTER)

    made = job_requests(demo_simulator)[before:]
    assert sorted({path for _, path in made}) == [
        f"/apis/rlinf.io/v1alpha1/namespaces/{namespace}/jobs"
        for namespace in NAMESPACES
    ]
    assert len(made) == 4 and {method for method, _ in made} == {"GET"}  # 2 pages x 2
    assert (report.checked, report.changed, report.unreachable) == (8, 8, 0)
    states = dict(RunRecord.objects.values_list("job_name", "state"))
    assert states.pop(records[-1].job_name) == JobState.RUNNING
    assert set(states.values()) == {JobState.PENDING}
    running = RunRecord.objects.get(pk=records[-1].pk)
    assert (running.status_reason, running.status_message) == ("Started", "all tasks up")
    assert sync_cluster(cluster=CLUSTER).changed == 0  # nothing new: nothing written


def test_a_job_missing_from_the_listing_is_gone_as_a_404_was(
    demo_simulator: Any, team: Team, owner: Any
) -> None:
    register_fleet(demo_simulator)
    records = running_jobs(demo_simulator, team, owner)
    gone = records[0]
    delete_job(credentials=demo_simulator.credentials(CLUSTER), namespace=gone.namespace,
               name=gone.job_name)

    sync_cluster(cluster=CLUSTER)

    gone.refresh_from_db()
    assert gone.state == JobState.FAILED
    assert list(gone.status_changes.values_list("phase", "reason")) == [("Gone", "NotFound")]
    assert RunRecord.objects.filter(state=JobState.PENDING).count() == len(records) - 1


def test_an_observation_of_a_run_cancelled_meanwhile_is_dropped(
    team: Team, owner: Any
) -> None:
    job = job_create(team=team, user=owner, data={"name": "cancelled-meanwhile"})
    record = run_record_for(job, state=JobState.CANCELLED)
    seen = observation({"status": {"phase": "Running"}})
    assert seen is not None
    assert apply_observations({record.pk: seen}) == 0
    assert not record.status_changes.exists()


def test_beat_fans_out_one_task_per_cluster_with_active_runs(
    team: Team, owner: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = (("a1", "gpu-a", JobState.PENDING), ("a2", "gpu-a", JobState.RUNNING),
            ("b1", "gpu-b", JobState.RUNNING), ("c1", "cpu-c", JobState.SUCCEEDED))
    for name, cluster, state in runs:
        job = job_create(team=team, user=owner, data={"name": name})
        run_record_for(job, state=state, cluster=cluster)
    sent: list[tuple[Any, ...]] = []
    monkeypatch.setattr(sync_cluster_status, "apply_async",
                        lambda args, expires: sent.append((*args, expires)))

    assert sync_task.apply().get() == ["gpu-a", "gpu-b"]
    assert sent == [("gpu-a", 15.0), ("gpu-b", 15.0)]


def test_the_cluster_task_runs_one_pass(demo_simulator: Any, team: Team, owner: Any) -> None:
    register_fleet(demo_simulator)
    running_jobs(demo_simulator, team, owner)
    assert sync_cluster_status.apply(args=[CLUSTER]).get() == {
        "checked": 8, "changed": 8, "unreachable": 0, "flagged": 0,
    }


def test_a_passs_phase_changes_and_pod_attempts_are_each_audited_in_the_tasks_context(
    demo_simulator: Any, team: Team, owner: Any
) -> None:
    register_fleet(demo_simulator)
    records = running_jobs(demo_simulator, team, owner)
    with pghistory.context(task="jobs.sync_cluster_status"):
        sync_cluster(cluster=CLUSTER)
    for model in (StatusChange, PodAttempt):
        events = model.pgh_event_model.objects  # type: ignore[union-attr]
        assert sorted(events.values_list("pgh_label", "run_record_id")) == sorted(
            ("insert", record.pk) for record in records)
        assert {e.pgh_context.metadata["task"] for e in events.all()} == {
            "jobs.sync_cluster_status"}
    demo_simulator.set_job_phase(CLUSTER, "default", records[0].job_name, "Running")
    sync_cluster(cluster=CLUSTER)
    updated = PodAttempt.pgh_event_model.objects.filter(  # type: ignore[attr-defined]
        pgh_label="update")
    assert [(e.run_record_id, e.phase) for e in updated] == [(records[0].pk, "Running")]
