from __future__ import annotations

from typing import Any

import pytest
from pghistory.models import Events

from clusters.models import Cluster, Node, Verification, VerificationState
from clusters.verifications.selectors import (
    verification_result,
    verification_view_for,
    verification_views,
)
from clusters.verifications.services import (
    verification_approve,
    verification_reject,
    verification_request,
    verification_request_outcome,
    verifications_follow_inventory,
)
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from tests.factories import drifted_request, load_fleet_rows, stored_request

pytestmark = pytest.mark.django_db

A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}


@pytest.fixture(autouse=True)
def demo_inventory() -> None:
    load_fleet_rows()


def gpu_a() -> Cluster:
    return Cluster.objects.get(name="gpu-a")


def request(team: Any, user: Any, selector: dict[str, str], **kwargs: Any) -> Verification:
    return verification_request(team=team, user=user, cluster=gpu_a(), selector=selector,
                                **kwargs)


def codes(verification: Verification) -> list[str]:
    return [c.code for c in verification_result(verification).checks]


def test_a_request_stores_the_global_matches_with_their_inventory_generations(
    team: Any, member: Any,
) -> None:
    Cluster.objects.filter(name="gpu-b").update(generation=7)
    verification = request(team, member, A100_IN_A)
    assert verification.state == VerificationState.PENDING
    assert len(verification.matches) == 13
    assert verification.matches[0] == {
        "cluster": "gpu-a", "name": "a-head-01", "namespace": "rl-gpu-a", "gpu": 8,
        "devices": {"rlinf.io/rdma": 4}, "ready": True,
    }
    assert ["gpu-a", "a-node-12"] in verification.match_signature
    # gpu-b is involved: its nodes carry rlinf.io/gpu-model=a100 too (one condition reaches it)
    assert verification.inventory_generations == {"gpu-a": 1, "gpu-b": 7}
    assert verification.selector_key == (
        "rlinf.io/gpu-model=a100,topology.rlinf.io/cluster=gpu-a"
    )


B_A100 = [f"b-node-{i}" for i in range(13, 17)]


def test_a_label_pair_present_in_two_clusters_is_reported_with_foreign_nodes(
    team: Any, member: Any,
) -> None:
    verification = drifted_request(hidden=B_A100, team=team, user=member, cluster=gpu_a(),
                                   selector={"rlinf.io/gpu-model": "a100"})
    assert verification.state == VerificationState.PENDING
    assert len(verification.matches) == 17
    result = verification_result(verification)
    cross = next(c for c in result.checks if c.code == "selector.cross_cluster")
    assert cross.detail["nodes"] == [
        {"cluster": "gpu-b", "name": f"b-node-{i}", "namespace": "rl-gpu-b"}
        for i in range(13, 17)
    ]
    assert result.confined is False
    assert "selector.no_cluster_label" in [c.code for c in result.checks]


def test_a_selector_confined_by_one_condition_passes_the_placement_checks(
    team: Any, member: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    result = verification_result(verification)
    assert result.confined is True
    assert result.confining_conditions == [{"key": "topology.rlinf.io/cluster", "value": "gpu-a"}]
    assert codes(verification) == []


def test_a_header_role_request_matching_two_nodes_is_flagged(team: Any, member: Any) -> None:
    selector = {"rlinf.io/pool": "a100-head", "topology.rlinf.io/cluster": "gpu-a"}
    verification = request(team, member, selector, for_header_role=True)
    second_head = Node.objects.get(name="a-node-01")
    second_head.labels["rlinf.io/pool"] = "a100-head"
    second_head.save(update_fields=["labels"])
    verifications_follow_inventory(cluster=gpu_a())  # as the next poll would
    verification.refresh_from_db()
    header = next(c for c in verification_result(verification).checks
                  if c.code == "header.replicas")
    assert header.detail["count"] == 2
    assert [node["name"] for node in header.detail["nodes"]] == ["a-head-01", "a-node-01"]


def test_a_header_role_request_matching_one_node_is_not_flagged(team: Any, member: Any) -> None:
    selector = {"rlinf.io/pool": "a100-head", "topology.rlinf.io/cluster": "gpu-a"}
    assert "header.replicas" not in codes(request(team, member, selector, for_header_role=True))


def test_capacity_and_host_path_asks_show_until_confirmed(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(
        team, member, {"rlinf.io/pool": "cpu-a", "topology.rlinf.io/cluster": "gpu-a"},
        requested_gpu=2, requested_devices={"rlinf.io/rdma": 1},
        requested_host_paths=["/data/models"],
    )
    assert codes(verification) == [
        "gpu.unconfirmed", "device.exceeds_capacity", "mount.host_path.unconfirmed",
    ]
    approved = verification_approve(
        verification_id=verification.pk, admin=admin_user, note="checked by hand",
        confirm_gpu=2, confirm_devices={"rlinf.io/rdma": 1}, confirm_host_paths=["/data/models"],
    )
    assert codes(approved) == []


def test_gpu_above_the_smallest_allocatable_is_shown_on_a_stored_request(
    team: Any, member: Any,
) -> None:
    verification = stored_request(team=team, user=member, cluster="gpu-a", selector=A100_IN_A,
                                  requested_gpu=16)
    assert codes(verification) == ["gpu.exceeds_capacity"]


# --- requests for selectors that already fail the automated checks are refused ---------------


def refusal(team: Any, user: Any, selector: dict[str, str], **kwargs: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as raised:
        request(team, user, selector, **kwargs)
    return raised.value


@pytest.mark.parametrize(
    ("selector", "asks", "expected"),
    [
        ({"rlinf.io/gpu-model": "a100"}, {},
         ["selector.cross_cluster", "selector.no_cluster_label"]),
        ({"rlinf.io/pool": "no-such-pool"}, {}, ["selector.no_match"]),
        (A100_IN_A, {"for_header_role": True}, ["header.replicas"]),
        (A100_IN_A, {"requested_gpu": 16}, ["gpu.exceeds_capacity"]),
    ],
)
def test_a_request_for_a_failing_selector_is_refused_with_its_findings(
    team: Any, member: Any, selector: dict[str, str], asks: dict[str, Any],
    expected: list[str],
) -> None:
    error = refusal(team, member, selector, **asks)
    assert error.status_code == 422
    assert "fails the automated checks" in error.message
    assert [f["code"] for f in error.extra["findings"]] == expected
    assert {f["severity"] for f in error.extra["findings"]} == {"error"}
    assert not Verification.objects.exists()


def test_the_refusal_names_the_foreign_nodes(team: Any, member: Any) -> None:
    error = refusal(team, member, {"rlinf.io/gpu-model": "a100"})
    cross = error.extra["findings"][0]
    assert (cross["code"], cross["field"]) == ("selector.cross_cluster", "selector")
    assert [n["name"] for n in cross["detail"]["nodes"]] == B_A100


def test_asking_for_confirmations_is_not_refused(team: Any, member: Any) -> None:
    verification = request(
        team, member, {"rlinf.io/pool": "cpu-a", "topology.rlinf.io/cluster": "gpu-a"},
        requested_gpu=2, requested_devices={"rlinf.io/rdma": 1},
        requested_host_paths=["/data/models"],
    )
    assert verification.state == VerificationState.PENDING
    assert codes(verification) == [
        "gpu.unconfirmed", "device.exceeds_capacity", "mount.host_path.unconfirmed",
    ]


def test_not_ready_nodes_do_not_refuse_a_request(team: Any, member: Any) -> None:
    Node.objects.filter(name="a-node-02").update(ready=False)
    assert request(team, member, A100_IN_A).state == VerificationState.PENDING


def test_an_open_request_is_not_reused_for_a_selector_that_now_fails(
    team: Any, member: Any,
) -> None:
    selector = {"rlinf.io/pool": "a100-head", "topology.rlinf.io/cluster": "gpu-a"}
    first = request(team, member, selector, for_header_role=True)
    Node.objects.filter(name="a-node-01").update(
        labels={**Node.objects.get(name="a-node-01").labels, "rlinf.io/pool": "a100-head"}
    )
    error = refusal(team, member, selector, for_header_role=True)
    assert [f["code"] for f in error.extra["findings"]] == ["header.replicas"]
    assert list(Verification.objects.values_list("pk", flat=True)) == [first.pk]


def test_an_identical_open_request_is_reused(team: Any, member: Any, owner: Any) -> None:
    first = request(team, member, A100_IN_A, requested_gpu=8)
    again = verification_request_outcome(
        team=team, user=owner, cluster=gpu_a(), selector=dict(reversed(A100_IN_A.items())),
        requested_gpu=4,
    )
    assert again.reused is True and again.updated is False
    assert again.verification.pk == first.pk
    assert Verification.objects.count() == 1


def test_zero_gpus_or_devices_ask_for_nothing(team: Any, member: Any, admin_user: Any) -> None:
    first = request(team, member, A100_IN_A)
    verification_approve(verification_id=first.pk, admin=admin_user, note="ok")
    again = verification_request_outcome(
        team=team, user=member, cluster=gpu_a(), selector=A100_IN_A, requested_gpu=0,
        requested_devices={"rlinf.io/rdma": 0},
    )
    assert again.reused is True and again.verification.pk == first.pk


def test_a_pending_request_is_widened_by_a_request_asking_for_more(
    team: Any, member: Any,
) -> None:
    first = request(team, member, A100_IN_A, requested_host_paths=["/data/a"])
    again = verification_request_outcome(
        team=team, user=member, cluster=gpu_a(), selector=A100_IN_A,
        requested_host_paths=["/data/b"], note="also /data/b",
    )
    assert (again.reused, again.updated, again.verification.pk) == (True, True, first.pk)
    first.refresh_from_db()
    assert first.requested_host_paths == ["/data/a", "/data/b"]
    assert "also /data/b" in first.request_note


def test_an_approval_not_covering_new_asks_leads_to_a_new_request_carrying_both(
    team: Any, member: Any, admin_user: Any,
) -> None:
    first = request(team, member, A100_IN_A, requested_host_paths=["/data/a"])
    verification_approve(verification_id=first.pk, admin=admin_user, note="ok",
                         confirm_host_paths=["/data/a"])
    again = verification_request_outcome(
        team=team, user=member, cluster=gpu_a(), selector=A100_IN_A, requested_gpu=8,
    )
    assert again.reused is False
    assert again.verification.requested_host_paths == ["/data/a"]
    assert again.verification.requested_gpu == 8


def test_other_teams_do_not_share_requests(team: Any, member: Any, other_team: Any,
                                           outsider: Any) -> None:
    mine = request(team, member, A100_IN_A)
    theirs = verification_request_outcome(
        team=other_team, user=outsider, cluster=gpu_a(), selector=A100_IN_A
    )
    assert theirs.reused is False and theirs.verification.pk != mine.pk


def test_a_user_cannot_request_for_a_team_they_are_not_in(team: Any, outsider: Any) -> None:
    with pytest.raises(NotFoundError):
        request(team, outsider, A100_IN_A)


@pytest.mark.parametrize(
    ("selector", "code"),
    [
        ({}, "selector.empty"),
        ({"bad key!": "x"}, "selector.syntax"),
        ({"rlinf.io/pool": "v" * 64}, "selector.syntax"),
    ],
)
def test_bad_selectors_are_refused_with_findings(
    team: Any, member: Any, selector: dict[str, str], code: str,
) -> None:
    with pytest.raises(ApplicationError) as raised:
        request(team, member, selector)
    assert raised.value.status_code == 400
    assert [f["code"] for f in raised.value.extra["findings"]] == [code]
    assert Verification.objects.count() == 0


def test_bad_asks_are_refused(team: Any, member: Any) -> None:
    with pytest.raises(ApplicationError) as raised:
        request(team, member, A100_IN_A, requested_host_paths=["data/relative"])
    assert raised.value.extra["findings"][0]["code"] == "mount.path.invalid"
    with pytest.raises(ApplicationError) as raised:
        request(team, member, A100_IN_A, requested_devices={"nvidia.com/gpu": 1})
    assert raised.value.extra["findings"][0]["code"] == "device.unknown"


def test_approval_records_the_decision_and_is_audited(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    approved = verification_approve(verification_id=verification.pk, admin=admin_user,
                                    note="placement looks right", confirm_gpu=8)
    assert approved.state == VerificationState.APPROVED
    assert (approved.decided_by, approved.decision_note) == (admin_user, "placement looks right")
    assert approved.decided_at is not None and approved.confirmed_gpu == 8
    events = Events.objects.references(approved).filter(pgh_label="update")
    assert [e.pgh_data["state"] for e in events] == ["approved"]
    assert events[0].pgh_data["decision_note"] == "placement looks right"


def test_a_decided_request_cannot_be_decided_again(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    verification_reject(verification_id=verification.pk, admin=admin_user, note="wrong pool")
    with pytest.raises(ApplicationError) as raised:
        verification_approve(verification_id=verification.pk, admin=admin_user, note="")
    assert raised.value.status_code == 409
    assert raised.value.extra["state"] == "rejected"
    assert raised.value.extra["decided_by"] == admin_user.username


def test_members_cannot_decide(team: Any, member: Any, owner: Any) -> None:
    verification = request(team, member, A100_IN_A)
    with pytest.raises(ApplicationError) as raised:
        verification_approve(verification_id=verification.pk, admin=owner, note="")
    assert raised.value.status_code == 403
    verification.refresh_from_db()
    assert verification.state == VerificationState.PENDING


def test_rejection_needs_a_note(team: Any, member: Any, admin_user: Any) -> None:
    verification = request(team, member, A100_IN_A)
    with pytest.raises(ApplicationError) as raised:
        verification_reject(verification_id=verification.pk, admin=admin_user, note="  ")
    assert raised.value.status_code == 400


def test_deciding_a_missing_request_is_not_found(admin_user: Any) -> None:
    with pytest.raises(NotFoundError):
        verification_approve(verification_id=987654, admin=admin_user, note="")


def test_drift_turns_an_approval_stale_with_what_changed(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    Node.objects.filter(name="a-node-03").update(labels={"rlinf.io/gpu-model": "h100"})
    Node.objects.filter(name="a-cpu-01").update(
        labels={"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}
    )
    assert verifications_follow_inventory(cluster=gpu_a()) == [verification.pk]
    verification.refresh_from_db()
    assert verification.state == VerificationState.STALE
    assert verification.stale_at is not None
    assert verification.drift == {
        "added": [{"cluster": "gpu-a", "name": "a-cpu-01", "namespace": "rl-gpu-a"}],
        "removed": [{"cluster": "gpu-a", "name": "a-node-03", "namespace": "rl-gpu-a"}],
    }


def test_drift_refreshes_a_pending_snapshot_and_leaves_other_clusters_alone(
    team: Any, member: Any,
) -> None:
    pending = request(team, member, A100_IN_A)
    elsewhere = verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="cpu-c"),
        selector={"rlinf.io/pool": "env-c"},
    )
    Node.objects.filter(name="a-node-03").update(gone=True)
    assert verifications_follow_inventory(cluster=gpu_a()) == []
    pending.refresh_from_db()
    assert pending.state == VerificationState.PENDING
    assert ["gpu-a", "a-node-03"] not in pending.match_signature
    assert len(pending.matches) == 12
    unchanged = Events.objects.references(elsewhere).filter(pgh_label="update")
    assert not unchanged.exists()


def test_an_unchanged_inventory_leaves_approvals_approved(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    Node.objects.filter(name="a-cpu-01").update(ready=False)
    assert verifications_follow_inventory(cluster=gpu_a()) == []
    verification.refresh_from_db()
    assert verification.state == VerificationState.APPROVED


def test_views_pick_the_newest_approved_else_the_newest(
    team: Any, member: Any, admin_user: Any, other_team: Any, outsider: Any,
) -> None:
    approved = request(team, member, A100_IN_A, requested_gpu=2)
    verification_approve(verification_id=approved.pk, admin=admin_user, note="ok",
                         confirm_gpu=2, confirm_host_paths=["/data"])
    request(team, member, A100_IN_A, requested_gpu=8)  # newer, pending
    rejected = request(team, member, {"rlinf.io/pool": "cpu-a"})
    verification_reject(verification_id=rejected.pk, admin=admin_user, note="no")
    verification_request(team=other_team, user=outsider, cluster=gpu_a(),
                         selector={"rlinf.io/pool": "a100-head"})
    pairs: list[tuple[str, dict[str, str] | tuple[tuple[str, str], ...]]] = [
        ("gpu-a", A100_IN_A), ("gpu-a", (("rlinf.io/pool", "cpu-a"),)),
        ("gpu-a", {"rlinf.io/pool": "a100-head"}),
    ]
    views = verification_views(team, pairs)
    key = ("gpu-a", tuple(sorted(A100_IN_A.items())))
    assert set(views) == {key, ("gpu-a", (("rlinf.io/pool", "cpu-a"),))}
    assert views[key].id == approved.pk and views[key].state == "approved"
    assert views[key].confirmed_gpu == 2 and views[key].confirmed_host_paths == ("/data",)
    assert ("gpu-a", "a-node-01") in views[key].node_signature
    assert views[("gpu-a", (("rlinf.io/pool", "cpu-a"),))].state == "rejected"
    assert verification_view_for(team, "gpu-a", {"rlinf.io/pool": "a100-head"}) is None
    assert verification_view_for(team, "gpu-b", A100_IN_A) is None


def test_views_for_many_pairs_take_one_query(
    team: Any, member: Any, django_assert_num_queries: Any,
) -> None:
    request(team, member, A100_IN_A)
    pairs = [("gpu-a", {"rlinf.io/pool": f"p{i}"}) for i in range(20)] + [("gpu-a", A100_IN_A)]
    with django_assert_num_queries(1):
        views = verification_views(team, pairs)
    assert len(views) == 1


def test_transitions_carry_the_actor_and_transition_in_the_audit_context(
    team: Any, member: Any, admin_user: Any,
) -> None:
    verification = request(team, member, A100_IN_A)
    verification_reject(verification_id=verification.pk, admin=admin_user, note="wrong pool")
    events = list(Events.objects.references(verification).order_by("pgh_created_at"))
    assert [e.pgh_label for e in events] == ["insert", "update"]
    assert events[0].pgh_context["user"] == member.pk
    assert events[0].pgh_context["team"] == "vision-rl"
    assert events[1].pgh_context["user"] == admin_user.pk
    assert events[1].pgh_context["transition"] == "rejected"
    assert events[1].pgh_data["decision_note"] == "wrong pool"
