"""Drift through the real path: the simulator's control endpoint changes a node, the inventory
poll (the kubernetes client over HTTP) commits the change, and its `inventory_changed` signal
makes the approval stale."""

from __future__ import annotations

from typing import Any

import pytest

from clusters.inventory.services import PollOutcome, cluster_create, poll_cluster
from clusters.models import Cluster, VerificationState
from clusters.verifications.services import verification_approve, verification_request

pytestmark = pytest.mark.django_db

A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}


@pytest.fixture
def polled_demo(demo_simulator: Any, django_capture_on_commit_callbacks: Any) -> Any:
    """Every demo cluster registered against the simulator and polled once."""
    for spec in demo_simulator.fleet.clusters:
        cluster = cluster_create(
            name=spec.name, namespace=spec.namespace, api_url=demo_simulator.cluster_url(spec.name),
            token=spec.token or "", verify_tls=False,
        )
        with django_capture_on_commit_callbacks(execute=True):
            assert poll_cluster(cluster_id=cluster.pk).outcome == PollOutcome.OK
    return demo_simulator


def poll(name: str, capture: Any) -> None:
    with capture(execute=True):
        assert poll_cluster(cluster_id=Cluster.objects.get(name=name).pk).outcome == (
            PollOutcome.OK
        )


def test_a_label_changed_on_the_cluster_turns_the_approval_stale(
    polled_demo: Any, team: Any, member: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    verification = verification_request(team=team, user=member,
                                        cluster=Cluster.objects.get(name="gpu-a"),
                                        selector=A100_IN_A)
    # gpu-b is involved too: rlinf.io/gpu-model=a100 on its own reaches its nodes.
    generations = dict(Cluster.objects.values_list("name", "generation"))
    assert verification.inventory_generations == {
        "gpu-a": generations["gpu-a"], "gpu-b": generations["gpu-b"],
    }
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")

    polled_demo.patch_node("gpu-a", "a-node-07", labels={"rlinf.io/gpu-model": "h100"})
    poll("gpu-a", django_capture_on_commit_callbacks)

    verification.refresh_from_db()
    assert verification.state == VerificationState.STALE
    assert verification.stale_at is not None
    assert verification.drift == {
        "added": [],
        "removed": [{"cluster": "gpu-a", "name": "a-node-07", "namespace": "rl-gpu-a"}],
    }


def test_a_node_joining_another_cluster_with_the_pair_turns_a_cross_cluster_approval_stale(
    polled_demo: Any, team: Any, member: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    verification = verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="cpu-c"),
        selector={"rlinf.io/zone": "zone-3"},
    )
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    polled_demo.add_node("gpu-b", "b-new-01", labels={"rlinf.io/zone": "zone-3"})
    poll("gpu-b", django_capture_on_commit_callbacks)
    verification.refresh_from_db()
    assert verification.state == VerificationState.STALE
    assert verification.drift["added"] == [
        {"cluster": "gpu-b", "name": "b-new-01", "namespace": "rl-gpu-b"}
    ]


def test_a_poll_that_changes_nothing_relevant_keeps_the_approval(
    polled_demo: Any, team: Any, member: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    verification = verification_request(team=team, user=member,
                                        cluster=Cluster.objects.get(name="gpu-a"),
                                        selector=A100_IN_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    polled_demo.patch_node("gpu-a", "a-cpu-01", labels={"rlinf.io/zone": "zone-2"})
    poll("gpu-a", django_capture_on_commit_callbacks)
    verification.refresh_from_db()
    assert verification.state == VerificationState.APPROVED


POOL_A = {"rlinf.io/pool": "a100-a"}


def test_a_matched_nodes_gpu_drop_reaches_a_pending_requests_snapshot_on_the_next_poll(
    polled_demo: Any, team: Any, member: Any, django_capture_on_commit_callbacks: Any,
) -> None:
    """The matched node set stays the same; the pending request's snapshot (its summary's
    minimum GPUs and the node rows) follows the drop, and the automated checks then say the
    ask exceeds what the matched nodes have."""
    from clusters.verifications.selectors import match_summary, verification_result

    verification = verification_request(team=team, user=member,
                                        cluster=Cluster.objects.get(name="gpu-a"),
                                        selector=POOL_A, requested_gpu=8)
    signature = verification.match_signature
    assert match_summary(verification).gpu_max() == 8
    assert "gpu.exceeds_capacity" not in {
        c.code for c in verification_result(verification).checks}

    polled_demo.patch_node("gpu-a", "a-node-03",
                           allocatable={"nvidia.com/gpu": 4, "rlinf.io/rdma": 2})
    poll("gpu-a", django_capture_on_commit_callbacks)

    verification.refresh_from_db()
    assert verification.state == VerificationState.PENDING
    assert verification.match_signature == signature  # the same nodes
    assert match_summary(verification).gpu_max() == 4
    assert match_summary(verification).devices_max()["rlinf.io/rdma"] == 2
    node = next(n for n in verification.matches if n["name"] == "a-node-03")
    assert (node["gpu"], node["devices"]["rlinf.io/rdma"]) == (4, 2)
    checks = {c.code for c in verification_result(verification).checks}
    assert "gpu.exceeds_capacity" in checks


def test_a_matched_nodes_gpu_drop_leaves_an_approval_as_it_was(
    polled_demo: Any, team: Any, member: Any, admin_user: Any,
    django_capture_on_commit_callbacks: Any,
) -> None:
    """An approval holds for its snapshot (SPEC 6): only a change of the node set makes it
    stale, and its snapshot is not rewritten."""
    verification = verification_request(team=team, user=member,
                                        cluster=Cluster.objects.get(name="gpu-a"),
                                        selector=POOL_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    before = Cluster.objects.get(name="gpu-a")
    polled_demo.patch_node("gpu-a", "a-node-03", allocatable={"nvidia.com/gpu": 4})
    poll("gpu-a", django_capture_on_commit_callbacks)
    verification.refresh_from_db()
    assert verification.state == VerificationState.APPROVED
    assert {n["gpu"] for n in verification.matches} == {8}
    assert Cluster.objects.get(name="gpu-a").generation == before.generation
