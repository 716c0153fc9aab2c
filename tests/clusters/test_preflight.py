"""The pre-flight's per-node shortfalls and verdicts (pure, no database): SPEC 15's table."""

from __future__ import annotations

from decimal import Decimal

import pytest

from clusters.capacity import node_capacity
from clusters.kueue import ClusterQueueView, KueueView, ResourceQuota
from clusters.preflight import (
    FITS_NOW,
    NEVER_FITS,
    UNKNOWN,
    WILL_QUEUE,
    ClusterOccupancy,
    job_verdict,
    needs_units,
    node_fit,
    quota_waits,
    role_preflight,
)

GPU = "nvidia.com/gpu"
NOW = ClusterOccupancy(as_of="2026-12-02T01:00:00+00:00")


def _node(requested: dict[str, str] | None, *, gpu: int | None = 8, pods: int | None = 110):
    return node_capacity(gpu=gpu, devices={"rlinf.io/rdma": 2}, cpu_milli=96_000,
                         memory_bytes=512 << 30, pods=pods, requested=requested)


def test_needs_are_scheduler_units_with_one_pod() -> None:
    assert needs_units({GPU: Decimal(8), "cpu": Decimal("0.5"), "memory": Decimal(2**30)}) == {
        GPU: 8, "cpu": 500, "memory": 2**30, "pods": 1}
    assert needs_units({"cpu": Decimal("0.0001")}) == {"cpu": 1, "pods": 1}  # rounded up


@pytest.mark.parametrize(("requested", "usable", "state", "short"), [
    ({}, True, "fits", []),
    ({GPU: "4"}, True, "short", [(GPU, "4", "8", "8")]),
    ({"pods": "110"}, True, "short", [("pods", "0", "110", "1")]),
    (None, True, "unknown", []),                 # never counted
    ({GPU: "8"}, False, "unknown", []),          # stale: no "short" from an old count
])
def test_node_fit_now(requested, usable, state, short) -> None:
    fit = node_fit(_node(requested), {GPU: 8, "pods": 1}, cluster="a", node="n1", usable=usable)
    assert fit.state == state
    assert [(s.resource, s.as_dict()["free"], s.as_dict()["allocatable"], s.as_dict()["needed"])
            for s in fit.short] == short


def test_node_fit_never_whatever_the_occupancy() -> None:
    for requested, usable in (({}, True), (None, True), ({}, False)):
        fit = node_fit(_node(requested), {"cpu": 128_000, "pods": 1}, cluster="a", node="n1",
                       usable=usable)
        assert fit.state == "never"
        assert [s.as_dict() for s in fit.short] == [{
            "cluster": "a", "node": "n1", "resource": "cpu", "free": "96",
            "allocatable": "96", "needed": "128"}]


def test_a_resource_the_node_does_not_report_is_unknown() -> None:
    fit = node_fit(_node({}, gpu=None), {GPU: 1, "pods": 1}, cluster="a", node="n1", usable=True)
    assert (fit.state, fit.unknown) == ("unknown", (GPU,))


def test_role_verdicts_and_counts() -> None:
    nodes = [("a", "n1"), ("a", "n2")]
    caps = {("a", "n1"): _node({}), ("a", "n2"): _node({GPU: "8"})}
    occ = {"a": NOW}
    queued = role_preflight("Actor", nodes, caps, {GPU: 8, "pods": 1}, occ)
    assert (queued.verdict, queued.replicas, queued.fits_now, queued.fits_ever) == (
        WILL_QUEUE, 2, 1, 2)
    assert queued.as_dict()["short"] == [{"cluster": "a", "node": "n2", "resource": GPU,
                                          "free": "0", "allocatable": "8", "needed": "8"}]
    assert "n2 has 0 of 8 nvidia.com/gpu free, 8 needed" in queued.message()
    assert queued.as_of == NOW.as_of

    fits = role_preflight("Actor", nodes[:1], caps, {GPU: 8, "pods": 1}, occ)
    assert (fits.verdict, fits.fits_now, fits.short) == (FITS_NOW, 1, ())

    never = role_preflight("Actor", nodes, caps, {"memory": 1 << 40, "pods": 1}, occ)
    assert (never.verdict, never.fits_ever) == (NEVER_FITS, 0)
    assert {s.node for s in never.short} == {"n1", "n2"}

    stale = role_preflight("Actor", nodes, caps, {GPU: 8, "pods": 1},
                           {"a": ClusterOccupancy(as_of=NOW.as_of, stale=True)})
    assert (stale.verdict, stale.fits_now, stale.fits_ever) == (UNKNOWN, 0, 2)
    assert stale.unknown_clusters == ("a",)
    unpolled = role_preflight("Actor", nodes, caps, {GPU: 8, "pods": 1}, {})
    assert (unpolled.verdict, unpolled.as_of) == (UNKNOWN, "")

    assert role_preflight("Actor", [], caps, {"pods": 1}, occ).verdict == NEVER_FITS


def test_nodes_sharing_one_capacity_are_judged_alike_and_named_each() -> None:
    shared, other = _node({GPU: "4"}), _node({GPU: "4"})
    nodes = [("a", "n1"), ("b", "n2"), ("a", "n3")]
    caps = {("a", "n1"): shared, ("b", "n2"): shared, ("a", "n3"): other}
    occ = {"a": NOW, "b": ClusterOccupancy(as_of=NOW.as_of, stale=True)}
    result = role_preflight("Rollout", nodes, caps, {GPU: 8, "pods": 1}, occ)
    assert (result.verdict, result.fits_now, result.fits_ever, result.short_count) == (
        WILL_QUEUE, 0, 3, 2)
    assert [(s.cluster, s.node) for s in result.short] == [("a", "n1"), ("a", "n3")]
    assert result.unknown_clusters == ("b",)  # the same capacity, on a stale cluster


def test_job_verdict_is_the_worst_role() -> None:
    assert job_verdict([FITS_NOW, FITS_NOW]) == FITS_NOW
    assert job_verdict([FITS_NOW, UNKNOWN]) == UNKNOWN
    assert job_verdict([UNKNOWN, WILL_QUEUE]) == WILL_QUEUE
    assert job_verdict([WILL_QUEUE, NEVER_FITS, UNKNOWN]) == NEVER_FITS
    assert job_verdict([]) == UNKNOWN


def test_quota_used_now_is_a_wait() -> None:
    queue = ClusterQueueView(name="cq", cohort="", quotas=(
        ResourceQuota(flavor="a100", resource=GPU, nominal="16", reserved="12"),))
    view = KueueView(cluster_queues=(queue,), as_of=NOW.as_of)
    waits = quota_waits(view, queue, {GPU: Decimal(8), "cpu": Decimal(0)})
    assert [w.as_dict() for w in waits] == [{"cluster_queue": "cq", "resource": GPU,
                                             "unused": "4", "needed": "8"}]
    assert quota_waits(view, queue, {GPU: Decimal(4)}) == []
