"""What one status pass with the pod capture costs the cluster: counted in the simulator's
request log, not timed. One jobs list and one pods list per namespace, whatever the number of
runs; log and event reads only for the pods that ended since the last pass."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db.models import Max
from django.utils import timezone

from clusters import k8s
from clusters.simulator.testing import job_body, task_body
from jobs.models import FailureTag, Job, JobState, PodAttempt, RunRecord
from jobs.observe.capture import capture_cluster
from jobs.records.lifecycle import FINAL_STATES
from jobs.records.status import sync_cluster
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.records_support import CPU_SELECTOR, register_fleet

pytestmark = pytest.mark.django_db

CLUSTER, NAMESPACE = "gpu-a", "rl-gpu-a"
RUNS, REPLICAS = 6, 2


@pytest.fixture(autouse=True)
def quick(settings: Any) -> Iterator[None]:
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_STATUS_PAGE_SIZE = 5  # several pages per listing
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


@pytest.fixture
def runs(demo_simulator: Any, team: Team) -> list[RunRecord]:
    """RUNS Jobs of REPLICAS pods each, running on the simulator, with pending run records."""
    register_fleet(demo_simulator)
    credentials = demo_simulator.credentials(CLUSTER)
    user = get_user_model().objects.create(username="capture-cost")
    records = []
    for index in range(RUNS):
        name = f"cost-{index}"
        k8s.create_job(credentials=credentials, namespace=NAMESPACE, body=job_body(
            name, namespace=NAMESPACE,
            tasks=[task_body("rollout", replicas=REPLICAS, selector=CPU_SELECTOR, head=True)]))
        job = Job.objects.create(team=team, name=name, created_by=user)
        records.append(RunRecord.objects.create(
            team=team, job=job, job_name=name, cluster=CLUSTER, namespace=NAMESPACE,
            manifest_yaml="", manifest_sha256="", frozen_by=user, state=JobState.PENDING,
            submitted_at=timezone.now(), pending_since=timezone.now()))
    demo_simulator.tick()
    return records


def calls(sim: Any, since: int) -> Counter[str]:
    """The requests since `since`, by kind."""
    kinds: Counter[str] = Counter()
    for request in sim.requests(CLUSTER)[since:]:
        path = request["path"]
        kind = ("log" if path.endswith("/log") else "events" if path.endswith("/events")
                else "pods" if path.endswith("/pods") else "jobs" if path.endswith("/jobs")
                else path)
        kinds[f"{request['method']} {kind}"] += 1
    return kinds


def one_pass(sim: Any) -> Counter[str]:
    since = len(sim.requests(CLUSTER))
    sync_cluster(cluster=CLUSTER)
    return calls(sim, since)


def latest_capture() -> Any:
    return PodAttempt.objects.aggregate(at=Max("captured_at"))["at"]


def test_a_pass_lists_each_namespace_once_and_reads_logs_only_of_pods_that_ended(
    demo_simulator: Any, runs: list[RunRecord], django_assert_max_num_queries: Any
) -> None:
    pages = -(-RUNS * REPLICAS // 5)
    first = one_pass(demo_simulator)
    assert first == {"GET jobs": -(-RUNS // 5), "GET pods": pages}
    assert PodAttempt.objects.count() == RUNS * REPLICAS
    assert not PodAttempt.objects.filter(logs_captured=True).exists()

    before = latest_capture()
    assert one_pass(demo_simulator) == first  # nothing changed: nothing read, nothing written
    assert latest_capture() == before
    # The capture's own database work does not grow with the runs: the runs' states and
    # the kept attempts, one query each.
    with django_assert_max_num_queries(2):
        capture_cluster(demo_simulator.credentials(CLUSTER), runs, final_states=FINAL_STATES)

    failed = "cost-3-rollout-1"
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, failed, ["Out of memory: Killed process 9"])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, failed, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 137})
    third = one_pass(demo_simulator)
    assert third == {**first, "GET log": 1, "GET events": 1}
    written = PodAttempt.objects.filter(captured_at__gt=before)
    assert [a.pod_name for a in written] == [failed]
    assert (written.get().failure_tag, written.get().logs_captured) == (FailureTag.OOM, True)

    assert one_pass(demo_simulator) == first  # read once: not again


def test_the_end_of_one_run_reads_only_that_runs_pods(demo_simulator: Any,
                                                      runs: list[RunRecord]) -> None:
    one_pass(demo_simulator)
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, "cost-1", "Succeeded")
    ended = one_pass(demo_simulator)
    assert (ended["GET log"], ended["GET events"]) == (REPLICAS, REPLICAS)
    captured = PodAttempt.objects.filter(logs_captured=True)
    assert {a.run_record.job_name for a in captured} == {"cost-1"}
    assert {a.capture_reason for a in captured} == {"job_ended"}
    assert RunRecord.objects.get(job_name="cost-1").state == JobState.SUCCEEDED


def test_capturing_every_new_pod_is_a_fixed_number_of_statements(
    demo_simulator: Any, runs: list[RunRecord], django_assert_num_queries: Any
) -> None:
    """The runs' states, the kept attempts, and one write for all the new attempts (not one
    per pod or per batch of pods), however many runs the namespace has."""
    with django_assert_num_queries(5) as done:  # with the write's savepoint and its release
        written = capture_cluster(demo_simulator.credentials(CLUSTER), runs,
                                  final_states=FINAL_STATES)
    assert written == PodAttempt.objects.count() == RUNS * REPLICAS
    statements = [query["sql"].split()[0] for query in done.captured_queries
                  if "SAVEPOINT" not in query["sql"]]
    assert statements == ["SELECT", "SELECT", "INSERT"]
