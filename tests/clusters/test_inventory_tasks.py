"""Beat fan-out of inventory polls and the lease between concurrent pollers (Celery eager)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from clusters import tasks
from clusters.inventory.services import PollOutcome, PollResult, cluster_create, poll_cluster
from clusters.models import Cluster, ClusterState, Node
from clusters.simulator.testing import InProcessSimulator, run_simulator
from rlark_site.celery import app as celery_app


def _fleet() -> dict[str, Any]:
    def cluster(name: str) -> dict[str, Any]:
        nodes = [{"name": f"{name}-n{i}", "labels": {"pool": name}} for i in range(4)]
        return {"name": name, "namespace": f"rl-{name}", "token": f"t-{name}", "nodes": nodes}

    return {"clusters": [cluster(name) for name in ("north", "south", "east", "west")]}


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(_fleet()) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator, settings: Any) -> Iterator[InProcessSimulator]:
    settings.RLARK_KUBE_TIMEOUT = 0.5
    settings.RLARK_INVENTORY_READ_ATTEMPTS = 1
    yield module_sim
    module_sim.reset()


@pytest.fixture
def eager_celery() -> Iterator[None]:
    saved = (celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates)
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = saved


def register(sim: InProcessSimulator, name: str, **overrides: Any) -> Cluster:
    spec = sim.fleet.cluster(name)
    return cluster_create(
        name=name, namespace=spec.namespace, api_url=sim.cluster_url(name),
        token=spec.token or "", verify_tls=False, **overrides,
    )


@pytest.mark.django_db
def test_one_beat_round_polls_every_due_cluster_and_isolates_the_failing_ones(
    sim: InProcessSimulator, eager_celery: None, django_capture_on_commit_callbacks: Any,
) -> None:
    clusters = {name: register(sim, name) for name in ("north", "south", "east", "west")}
    sim.set_faults("south", error_rate=1)
    sim.set_faults("east", timeout_rate=1, hang_seconds=1.5)
    with django_capture_on_commit_callbacks(execute=True):
        queued = tasks.poll_due_clusters()
    assert sorted(queued) == sorted(c.id for c in clusters.values())
    states = dict(Cluster.objects.values_list("name", "state"))
    assert states == {
        "north": ClusterState.OK, "south": ClusterState.STALE,
        "east": ClusterState.STALE, "west": ClusterState.OK,
    }
    errors = dict(Cluster.objects.values_list("name", "last_error"))
    assert errors["south"].startswith("ServerError: 500")
    assert errors["east"].startswith("Unreachable")
    assert Node.objects.filter(cluster__name__in=["north", "west"]).count() == 8


@pytest.mark.django_db
def test_clusters_not_yet_due_or_disabled_are_not_queued(
    sim: InProcessSimulator, eager_celery: None, django_capture_on_commit_callbacks: Any,
) -> None:
    due = register(sim, "north")
    register(sim, "south", enabled=False)
    later = register(sim, "east")
    Cluster.objects.filter(id=later.id).update(next_poll_at=timezone.now() + timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.poll_due_clusters() == [due.id]


@pytest.mark.django_db
def test_a_queued_cluster_is_not_queued_again_by_the_next_round(sim: InProcessSimulator) -> None:
    cluster = register(sim, "north")
    assert tasks.poll_due_clusters() == [cluster.id]
    assert tasks.poll_due_clusters() == []


@pytest.mark.django_db
def test_the_poll_task_polls_its_cluster(sim: InProcessSimulator, eager_celery: None) -> None:
    cluster = register(sim, "north")
    tasks.poll_cluster_task.delay(cluster.id)
    assert Node.objects.filter(cluster=cluster).count() == 4


def test_the_poll_task_has_time_limits() -> None:
    assert tasks.poll_cluster_task.soft_time_limit is not None
    assert tasks.poll_cluster_task.time_limit > tasks.poll_cluster_task.soft_time_limit


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_polls_of_one_cluster_only_one_calls_it(sim: InProcessSimulator) -> None:
    cluster = register(sim, "north")
    sim.set_faults("north", latency_ms=300)
    results: list[PollResult] = []
    start = threading.Barrier(2)

    def poll() -> None:
        try:
            start.wait()
            results.append(poll_cluster(cluster_id=cluster.id))
        finally:
            connection.close()

    threads = [threading.Thread(target=poll) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(r.outcome for r in results) == [PollOutcome.BUSY, PollOutcome.OK]
    node_lists = [r for r in sim.requests("north") if r["path"] == "/api/v1/nodes"]
    assert len(node_lists) == 1
    assert Node.objects.filter(cluster=cluster).count() == 4
