"""`matches_capacity`: a job's matches and their nodes' capacity in one query, the same answers
as `match_many` + `matched_capacity` (the two reads it replaces in `check_context_for`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from clusters.inventory.selectors import matched_capacity, matches_capacity
from clusters.matching import match_many
from clusters.models import Cluster, ClusterState, Node, NodeOccupancy
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

SELECTORS = [
    {"rlinf.io/zone": "zone-1", "topology.rlinf.io/cluster": "gpu-a"},
    {"rlinf.io/gpu-model": "a100", "rlinf.io/zone": "zone-2"},
    {"rlinf.io/pool": "env-c", "rlinf.io/zone": "zone-3"},
    {"rlinf.io/pool": "env-c", "topology.rlinf.io/cluster": "gpu-a"},  # nothing carries both
    {"rlinf.io/zone": "zone-1"},
    {"rlinf.io/gpu-model": "a100"},
    {"rlinf.io/zone": "nowhere", "rlinf.io/gpu-model": "a100"},
    {"order": "test"},
    {"rlinf.io/zone": "zone-1"},  # twice: read once
]


@pytest.fixture(autouse=True)
def inventory() -> None:
    """The demo fleet with occupancy: gpu-a counted (a time with microseconds), gpu-b counted
    on a whole second but stale, cpu-c never counted; some nodes without an occupancy row;
    names that sort differently by code point than by collation; a gone node."""
    clusters = {c.name: c for c in load_fleet_rows()}
    Node.objects.filter(name="a-head-01").update(gone=True)
    Node.objects.bulk_create([
        Node(cluster=clusters["gpu-a"], name=name, namespace="rl-gpu-a",
             labels={"order": "test"}, gpu=8, cpu_milli=64_000, memory_bytes=1 << 39, pods=110)
        for name in ("n1", "n-2", "N3")])
    Node.objects.filter(cluster=clusters["gpu-a"]).update(cpu_milli=64_000, pods=110)
    times = {"gpu-a": datetime(2026, 12, 2, 14, 0, 1, 120_000, tzinfo=UTC),
             "gpu-b": datetime(2026, 12, 2, 14, 0, 2, tzinfo=UTC)}
    for name, when in times.items():
        Cluster.objects.filter(name=name).update(occupancy_as_of=when)
    Cluster.objects.filter(name="gpu-b").update(state=ClusterState.STALE)
    for index, node in enumerate(Node.objects.exclude(cluster__name="cpu-c").order_by("name")):
        if index % 4 == 3:
            continue  # never counted
        NodeOccupancy.objects.create(
            node=node, cluster_id=node.cluster_id, changed_at=times["gpu-a"],
            requested={"nvidia.com/gpu": "4", "cpu": "1500m"} if index % 2 else {"pods": "1"})


def test_the_same_matches_and_capacity_as_the_two_reads_it_replaces() -> None:
    read = matches_capacity(SELECTORS)
    assert read.matches == match_many(SELECTORS)
    assert list(read.matches) == list(match_many(SELECTORS))
    expected = matched_capacity(SELECTORS)
    assert read.capacity.nodes == expected.nodes
    assert read.capacity.occupancy == expected.occupancy
    assert read.capacity.occupancy["gpu-a"].as_of == "2026-12-02T14:00:01.120000+00:00"
    assert read.capacity.occupancy["gpu-b"].stale


def test_names_keep_code_point_order_and_gone_nodes_are_left_out() -> None:
    match = matches_capacity([{"order": "test"}]).matches[(("order", "test"),)]
    assert [n.name for n in match.nodes] == ["N3", "n-2", "n1"]
    zone = matches_capacity([{"rlinf.io/gpu-model": "a100"}]).matches[
        (("rlinf.io/gpu-model", "a100"),)]
    assert "a-head-01" not in {n.name for n in zone.nodes}


def test_an_empty_selector_matches_nothing_and_reads_nothing(
        django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(0):
        read = matches_capacity([{}])
    assert read.matches[()].count == 0 and not read.capacity.nodes


def test_a_whole_job_is_one_query(django_assert_num_queries: Any) -> None:
    with django_assert_num_queries(1):
        matches_capacity(SELECTORS)
