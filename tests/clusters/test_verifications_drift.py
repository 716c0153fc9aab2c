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
