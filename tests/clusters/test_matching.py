from __future__ import annotations

import pytest

from clusters.matching import match_many, match_selector
from clusters.models import Node
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def demo_inventory() -> None:
    load_fleet_rows()


def test_label_pair_in_two_clusters_reports_foreign_nodes_with_namespaces() -> None:
    match = match_selector({"rlinf.io/gpu-model": "a100"})
    assert match.clusters == {"gpu-a", "gpu-b"}
    foreign = match.foreign_nodes("gpu-a")
    assert [(n.cluster, n.name, n.namespace) for n in foreign] == [
        ("gpu-b", f"b-node-{i}", "rl-gpu-b") for i in range(13, 17)
    ]


def test_matches_are_ordered_by_cluster_then_node_name() -> None:
    match = match_selector({"rlinf.io/zone": "zone-1"})
    keys = [(n.cluster, n.name) for n in match.nodes]
    assert keys == sorted(keys)
    assert keys[0] == ("gpu-a", "a-cpu-01")


def test_a_confining_condition_is_recognised() -> None:
    match = match_selector({"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"})
    assert match.clusters == {"gpu-a"}
    assert match.confining_conditions("gpu-a") == (("topology.rlinf.io/cluster", "gpu-a"),)
    assert match.count == 13


def test_gone_nodes_are_excluded_and_capacity_is_the_smallest() -> None:
    Node.objects.filter(name="a-head-01").update(gone=True)
    match = match_selector({"rlinf.io/gpu-model": "a100"})
    assert "a-head-01" not in {n.name for n in match.nodes}
    assert match.gpu_max() == 4  # b-node-13..16 have 4
    assert match.devices_max() == {"rlinf.io/rdma": 2}


def test_empty_selector_matches_nothing_and_many_deduplicates() -> None:
    assert match_selector({}).count == 0
    result = match_many([{"rlinf.io/pool": "env-c"}, {"rlinf.io/pool": "env-c"}])
    assert list(result) == [(("rlinf.io/pool", "env-c"),)]
    assert result[(("rlinf.io/pool", "env-c"),)].count == 10
