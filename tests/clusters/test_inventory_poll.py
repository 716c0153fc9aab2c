"""The inventory poll, through the real kubernetes client over HTTP against the fleet simulator."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from pghistory.models import Events

from clusters.inventory.services import PollOutcome, cluster_create, poll_cluster
from clusters.k8s import create_job, iter_node_pages
from clusters.models import Cluster, ClusterJob, ClusterState, Node, StorageClass
from clusters.signals import inventory_changed
from clusters.simulator.fleet import generate_fleet
from clusters.simulator.testing import (
    TEST_JOB_CRD,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

pytestmark = pytest.mark.django_db

BIG_NODES = 1200
NODE_WRITE = re.compile(r'(INSERT INTO|UPDATE|DELETE FROM) "?clusters_node"?\s', re.IGNORECASE)


def _node_writes(queries: CaptureQueriesContext) -> list[str]:
    """The statements among `queries` that wrote `clusters_node`."""
    return [q["sql"] for q in queries.captured_queries if NODE_WRITE.match(q["sql"].lstrip())]


def _rows_but_versions(cluster: Cluster) -> dict[str, dict[str, Any]]:
    """Every stored node row of `cluster` by name, all columns but `resource_version`."""
    rows = Node.objects.filter(cluster=cluster).values()
    return {row["name"]: {k: v for k, v in row.items() if k != "resource_version"}
            for row in rows}


def _fleet() -> dict[str, Any]:
    big = generate_fleet(clusters=1, nodes_per_cluster=BIG_NODES, seed=3)["clusters"][0]
    small = {
        "name": "small",
        "namespace": "rl-small",
        "token": "small-secret-token",
        "storage_classes": ["s3-fuse", "local-nvme"],
        "nodes": [
            {
                "name": "s-gpu-1",
                "labels": {"pool": "gpu", "zone": "z1"},
                "allocatable": {"nvidia.com/gpu": 8, "rlinf.io/rdma": 4, "example.com/fpga": 1},
            },
            {"name": "s-cpu-1", "labels": {"pool": "cpu"}, "allocatable": {"rlinf.io/lic": "2"}},
            {"name": "s-down-1", "labels": {"pool": "cpu"}, "ready": False},
        ],
    }
    return {"clusters": [big, small]}


@pytest.fixture(scope="module")
def module_sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcessSimulator]:
    crd_path = tmp_path_factory.mktemp("crds") / "rlinf.io_jobs.yaml"
    crd_path.write_text(yaml.safe_dump(TEST_JOB_CRD))
    with run_simulator(_fleet(), crd_path=Path(crd_path)) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator, settings: Any) -> Iterator[InProcessSimulator]:
    settings.RLARK_INVENTORY_PAGE_SIZE = 500
    settings.RLARK_KUBE_TIMEOUT = 0.5
    settings.RLARK_INVENTORY_READ_ATTEMPTS = 1
    yield module_sim
    module_sim.reset()


def register(sim: InProcessSimulator, name: str, **overrides: Any) -> Cluster:
    spec = sim.fleet.cluster(name)
    values: dict[str, Any] = {
        "name": name, "namespace": spec.namespace, "api_url": sim.cluster_url(name),
        "token": spec.token or "", "verify_tls": False,
    }
    return cluster_create(**{**values, **overrides})


def node_events(**lookup: Any) -> int:
    return Events.objects.filter(pgh_obj_model="clusters.Node", **lookup).count()


def node_list_requests(sim: InProcessSimulator, cluster: str) -> list[dict[str, Any]]:
    return [r for r in sim.requests(cluster) if r["path"] == "/api/v1/nodes"]


def test_the_first_poll_stores_every_node_with_its_allocatable(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    result = poll_cluster(cluster_id=cluster.id)
    assert (result.outcome, result.stats.created, result.stats.nodes) == (PollOutcome.OK, 3, 3)
    gpu = Node.objects.get(cluster=cluster, name="s-gpu-1")
    assert gpu.labels == {"pool": "gpu", "zone": "z1"}
    assert (gpu.gpu, gpu.devices, gpu.ready, gpu.gone) == (8, {"rlinf.io/rdma": 4}, True, False)
    assert gpu.namespace == "rl-small"
    cpu = Node.objects.get(cluster=cluster, name="s-cpu-1")
    assert (cpu.gpu, cpu.devices) == (None, {"rlinf.io/lic": 2})
    assert Node.objects.get(cluster=cluster, name="s-down-1").ready is False


def test_a_successful_poll_records_the_outcome_and_bumps_the_generation(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.OK
    assert cluster.generation == 1
    assert cluster.last_success_at == cluster.last_polled_at is not None
    assert cluster.next_poll_at is not None and cluster.next_poll_at > timezone.now()
    assert cluster.poll_lease_until is None


def test_nodes_are_listed_page_by_page(sim: InProcessSimulator) -> None:
    cluster = register(sim, "sim-00")
    result = poll_cluster(cluster_id=cluster.id)
    assert (result.outcome, result.pages, result.stats.created) == (PollOutcome.OK, 3, BIG_NODES)
    assert Node.objects.filter(cluster=cluster).count() == BIG_NODES
    requests = node_list_requests(sim, "sim-00")
    assert [r["query"].get("limit") for r in requests] == ["500", "500", "500"]
    assert [bool(r["query"].get("continue")) for r in requests] == [False, True, True]


def test_the_page_size_comes_from_the_settings(sim: InProcessSimulator, settings: Any) -> None:
    settings.RLARK_INVENTORY_PAGE_SIZE = 100
    cluster = register(sim, "sim-00")
    assert poll_cluster(cluster_id=cluster.id).pages == 12
    assert Node.objects.filter(cluster=cluster).count() == BIG_NODES


def test_storage_classes_and_jobs_are_recorded(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    task = task_body("main", replicas=1, selector={"pool": "cpu"})
    create_job(
        credentials=sim.credentials("small"), namespace="rl-small",
        body=job_body("seen-run", tasks=[task]),
    )
    poll_cluster(cluster_id=cluster.id)
    assert sorted(StorageClass.objects.filter(cluster=cluster).values_list("name", flat=True)) == [
        "local-nvme", "s3-fuse",
    ]
    assert list(ClusterJob.objects.filter(cluster=cluster).values_list("namespace", "name")) == [
        ("rl-small", "seen-run")
    ]


def test_jobs_deleted_on_the_cluster_are_forgotten(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    ClusterJob.objects.create(cluster=cluster, namespace="rl-small", name="old-run")
    poll_cluster(cluster_id=cluster.id)
    assert not ClusterJob.objects.filter(cluster=cluster).exists()


def test_an_unchanged_re_poll_writes_no_node_row_and_no_audit_event(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "sim-00")
    poll_cluster(cluster_id=cluster.id)
    events_before = Events.objects.count()
    with CaptureQueriesContext(connection) as queries:
        result = poll_cluster(cluster_id=cluster.id)
    assert (result.stats.unchanged, result.stats.created, result.stats.updated, result.changed) == (
        BIG_NODES, 0, 0, False,
    )
    assert Events.objects.count() == events_before
    node_writes = _node_writes(queries)
    assert node_writes == []


def test_last_seen_moves_with_each_successful_poll_and_stays_put_once_a_node_vanished(
    sim: InProcessSimulator, api_client_for: Any, member: Any,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    first = Cluster.objects.get(id=cluster.id).last_success_at
    result = poll_cluster(cluster_id=cluster.id)
    second = Cluster.objects.get(id=cluster.id).last_success_at
    assert result.generation == 1 and first is not None and second is not None
    assert second > first
    nodes = Node.objects.filter(cluster=cluster).select_related("cluster")
    assert {n.seen_at for n in nodes} == {second}

    sim.remove_node("small", "s-cpu-1")
    poll_cluster(cluster_id=cluster.id)
    third = Cluster.objects.get(id=cluster.id).last_success_at
    listed = api_client_for(member).get(
        "/api/v1/nodes/", {"cluster": "small", "include_gone": "true"}
    ).json()["results"]
    seen = {n["name"]: (n["gone"], n["last_seen"]) for n in listed}
    assert seen["s-cpu-1"] == (True, second.isoformat().replace("+00:00", "Z"))
    assert seen["s-gpu-1"] == (False, third.isoformat().replace("+00:00", "Z"))


def test_each_node_row_keeps_the_resource_version_it_was_polled_at(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    listed = {
        node.name: node.resource_version
        for page in iter_node_pages(credentials=sim.credentials("small"))
        for node in page
    }
    stored = dict(Node.objects.filter(cluster=cluster).values_list("name", "resource_version"))
    assert stored == listed
    assert all(stored.values())


def test_a_node_polled_at_its_stored_version_is_not_compared_again(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    Node.objects.filter(cluster=cluster, name="s-gpu-1").update(labels={"edited": "in db"})
    result = poll_cluster(cluster_id=cluster.id)
    assert (result.stats.unchanged, result.stats.updated) == (3, 0)
    assert Node.objects.get(cluster=cluster, name="s-gpu-1").labels == {"edited": "in db"}


def test_a_new_version_with_the_same_values_only_moves_the_stored_version(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    events_before = Events.objects.count()
    rows_before = _rows_but_versions(cluster)
    bumped = sim.patch_node("small", "s-gpu-1", labels={"zone": "z1"})
    with CaptureQueriesContext(connection) as queries:
        result = poll_cluster(cluster_id=cluster.id)
    assert (result.stats.unchanged, result.stats.updated, result.generation, result.changed) == (
        3, 0, 1, False,
    )
    assert Events.objects.count() == events_before
    gpu = Node.objects.get(cluster=cluster, name="s-gpu-1")
    assert gpu.resource_version == bumped["metadata"]["resourceVersion"]
    assert len(_node_writes(queries)) == 1
    assert _rows_but_versions(cluster) == rows_before  # nothing but the version was written


def test_a_label_change_makes_one_audit_event_and_a_new_generation(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    events_before = Events.objects.count()
    sim.patch_node("small", "s-gpu-1", labels={"zone": "z2"})
    result = poll_cluster(cluster_id=cluster.id)
    assert (result.stats.updated, result.stats.labels_changed, result.generation) == (1, 1, 2)
    gpu = Node.objects.get(cluster=cluster, name="s-gpu-1")
    assert gpu.labels == {"pool": "gpu", "zone": "z2"}
    assert Events.objects.count() == events_before + 1
    assert node_events(pgh_obj_id=str(gpu.id), pgh_label="update") == 1


def test_a_readiness_change_is_written_without_a_new_generation(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    sim.patch_node("small", "s-down-1", ready=True)
    result = poll_cluster(cluster_id=cluster.id)
    assert (result.stats.updated, result.stats.labels_changed, result.generation) == (1, 0, 1)
    assert Node.objects.get(cluster=cluster, name="s-down-1").ready is True


def test_an_allocatable_change_is_written(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    sim.patch_node("small", "s-gpu-1", allocatable={"nvidia.com/gpu": 4, "rlinf.io/rdma": None})
    poll_cluster(cluster_id=cluster.id)
    gpu = Node.objects.get(cluster=cluster, name="s-gpu-1")
    assert (gpu.gpu, gpu.devices) == (4, {})


def test_a_vanished_node_is_marked_gone_and_comes_back_when_it_returns(
    sim: InProcessSimulator,
) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    sim.remove_node("small", "s-cpu-1")
    gone = poll_cluster(cluster_id=cluster.id)
    node = Node.objects.get(cluster=cluster, name="s-cpu-1")
    assert (gone.stats.gone, gone.generation, node.gone) == (1, 2, True)
    sim.add_node("small", "s-cpu-1", labels={"pool": "cpu"}, allocatable={"rlinf.io/lic": 2})
    back = poll_cluster(cluster_id=cluster.id)
    node.refresh_from_db()
    assert (back.stats.returned, back.generation, node.gone) == (1, 3, False)


def test_a_change_is_announced_after_commit(
    sim: InProcessSimulator, django_capture_on_commit_callbacks: Any,
) -> None:
    cluster = register(sim, "small")
    received: list[tuple[str, int]] = []

    def listener(sender: Any, cluster: Cluster, generation: int, **_: Any) -> None:
        received.append((cluster.name, generation))

    inventory_changed.connect(listener)
    try:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            poll_cluster(cluster_id=cluster.id)
        assert received == []
        for callback in callbacks:
            callback()
        with django_capture_on_commit_callbacks(execute=True):
            poll_cluster(cluster_id=cluster.id)
    finally:
        inventory_changed.disconnect(listener)
    assert received == [("small", 1)]


@pytest.mark.parametrize(
    ("faults", "error"),
    [
        ({"error_rate": 1}, "ServerError: 500"),
        ({"timeout_rate": 1, "hang_seconds": 1.5}, "Unreachable"),
        ({"drop_rate": 1}, "Unreachable"),
    ],
)
def test_a_failing_cluster_goes_stale_with_its_error(
    sim: InProcessSimulator, faults: dict[str, Any], error: str,
) -> None:
    cluster = register(sim, "small")
    sim.set_faults("small", **faults)
    result = poll_cluster(cluster_id=cluster.id)
    cluster.refresh_from_db()
    assert result.outcome == PollOutcome.FAILED
    assert cluster.state == ClusterState.STALE
    assert cluster.last_error.startswith(error)
    assert (cluster.failure_count, cluster.poll_lease_until) == (1, None)


def test_a_refused_connection_is_a_failure(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small", api_url="http://127.0.0.1:9/small")
    result = poll_cluster(cluster_id=cluster.id)
    assert result.outcome == PollOutcome.FAILED
    assert "ConnectionRefused" in result.error


def test_a_wrong_token_is_a_failure_that_names_the_status(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small", token="not-the-token")
    result = poll_cluster(cluster_id=cluster.id)
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.STALE
    assert cluster.last_error.startswith("Unauthorized: 401")
    assert "not-the-token" not in cluster.last_error
    assert result.outcome == PollOutcome.FAILED


def test_failures_back_off_exponentially_and_success_resets(
    sim: InProcessSimulator, settings: Any,
) -> None:
    settings.RLARK_INVENTORY_RETRY_BASE = 10
    settings.RLARK_INVENTORY_RETRY_CAP = 35
    cluster = register(sim, "small")
    sim.set_faults("small", error_rate=1)
    delays = []
    for _ in range(4):
        poll_cluster(cluster_id=cluster.id)
        cluster.refresh_from_db()
        assert cluster.next_poll_at is not None and cluster.last_polled_at is not None
        delays.append(round((cluster.next_poll_at - cluster.last_polled_at).total_seconds()))
    assert delays == [10, 20, 35, 35]
    assert cluster.failure_count == 4
    sim.clear_faults("small")
    poll_cluster(cluster_id=cluster.id)
    cluster.refresh_from_db()
    assert (cluster.state, cluster.failure_count, cluster.last_error) == (ClusterState.OK, 0, "")


def test_a_failed_poll_keeps_the_inventory_it_had(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    poll_cluster(cluster_id=cluster.id)
    sim.set_faults("small", error_rate=1)
    poll_cluster(cluster_id=cluster.id)
    assert Node.objects.filter(cluster=cluster, gone=False).count() == 3


def test_a_held_lease_keeps_a_second_poller_away(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    Cluster.objects.filter(id=cluster.id).update(
        poll_lease_until=timezone.now() + timedelta(minutes=5)
    )
    result = poll_cluster(cluster_id=cluster.id)
    assert result.outcome == PollOutcome.BUSY
    assert node_list_requests(sim, "small") == []
    assert not Node.objects.filter(cluster=cluster).exists()


def test_an_expired_lease_is_taken_over(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    Cluster.objects.filter(id=cluster.id).update(
        poll_lease_until=timezone.now() - timedelta(seconds=1)
    )
    assert poll_cluster(cluster_id=cluster.id).outcome == PollOutcome.OK


def test_a_disabled_or_missing_cluster_is_skipped(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small", enabled=False)
    assert poll_cluster(cluster_id=cluster.id).outcome == PollOutcome.SKIPPED
    assert poll_cluster(cluster_id=cluster.id + 1000).outcome == PollOutcome.SKIPPED
    assert node_list_requests(sim, "small") == []


def test_undecryptable_credentials_fail_the_poll(sim: InProcessSimulator) -> None:
    cluster = register(sim, "small")
    Cluster.objects.filter(id=cluster.id).update(token_encrypted="garbage")
    result = poll_cluster(cluster_id=cluster.id)
    assert result.outcome == PollOutcome.FAILED
    assert result.error.startswith("CredentialError")
