from __future__ import annotations

from typing import Any

import pytest

from clusters.matching import (
    NodeWindow,
    SelectorInputError,
    describe_match,
    describe_selector,
    match_many,
    match_selector,
    parse_selector_input,
)
from clusters.models import Cluster, Node
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


def _scanned(selector: dict[str, str]) -> tuple[list[tuple[str, str]], dict[str, set[str]]]:
    """Matches and per-condition clusters by looking at every present node in Python."""
    nodes = Node.objects.filter(gone=False).select_related("cluster")
    matched = sorted(
        (n.cluster.name, n.name) for n in nodes
        if all(n.labels.get(k) == v for k, v in selector.items())
    )
    reached = {
        f"{k}={v}": {n.cluster.name for n in nodes if n.labels.get(k) == v}
        for k, v in selector.items()
    }
    return matched, reached


@pytest.mark.parametrize(
    "selector",
    [
        {"rlinf.io/zone": "zone-1", "topology.rlinf.io/cluster": "gpu-a"},
        {"rlinf.io/gpu-model": "a100", "rlinf.io/zone": "zone-2"},
        {"rlinf.io/pool": "env-c", "rlinf.io/zone": "zone-3"},
        {"rlinf.io/pool": "env-c", "topology.rlinf.io/cluster": "gpu-a"},
        {"rlinf.io/zone": "zone-1"},
        {"rlinf.io/zone": "nowhere", "rlinf.io/gpu-model": "a100"},
    ],
)
def test_matches_and_condition_clusters_agree_with_a_scan_of_every_node(
    selector: dict[str, str],
) -> None:
    Node.objects.filter(name="a-head-01").update(gone=True)
    match = match_selector(selector)
    matched, reached = _scanned(selector)
    assert [(n.cluster, n.name) for n in match.nodes] == matched
    assert {f"{k}={v}": set(c) for (k, v), c in match.condition_clusters} == reached


def test_when_no_cluster_carries_every_condition_no_node_is_read(
    django_assert_num_queries: Any,
) -> None:
    with django_assert_num_queries(1):
        match = match_selector({"rlinf.io/gpu-model": "a100", "rlinf.io/pool": "env-c"})
    assert match.count == 0
    assert dict(match.condition_clusters) == {
        ("rlinf.io/gpu-model", "a100"): {"gpu-a", "gpu-b"},
        ("rlinf.io/pool", "env-c"): {"cpu-c"},
    }
    with django_assert_num_queries(2):
        match = match_selector({"rlinf.io/gpu-model": "a100", "rlinf.io/zone": "zone-1"})
    assert match.count == 11
    with django_assert_num_queries(1):  # one condition reaches the clusters of its matches
        assert match_selector({"rlinf.io/gpu-model": "a100"}).count == 17


def test_a_condition_reaching_only_gone_nodes_elsewhere_still_confines() -> None:
    Node.objects.filter(name__in=[f"b-node-{i}" for i in range(13, 17)]).update(gone=True)
    match = match_selector({"rlinf.io/gpu-model": "a100", "rlinf.io/pool": "a100-a"})
    assert match.confining_conditions("gpu-a") == (
        ("rlinf.io/gpu-model", "a100"), ("rlinf.io/pool", "a100-a"),
    )


def test_names_are_ordered_by_code_point_whatever_the_collation() -> None:
    cluster = Node.objects.get(name="a-cpu-01").cluster
    Node.objects.bulk_create([
        Node(cluster=cluster, name=name, namespace="rl-gpu-a", labels={"order": "test"})
        for name in ("n1", "n-2", "N3")
    ])
    assert [n.name for n in match_selector({"order": "test"}).nodes] == ["N3", "n-2", "n1"]


def test_describe_match_is_the_selector_matches_body() -> None:
    body = describe_match(match_selector({"rlinf.io/gpu-model": "a100"}), cluster="gpu-b")
    assert body["count"] == 17 and body["confined"] is False
    assert body["clusters"] == ["gpu-a", "gpu-b"]
    assert len(body["foreign_nodes"]) == 13
    assert body["foreign_nodes"][0] == {"cluster": "gpu-a", "name": "a-head-01",
                                        "namespace": "rl-gpu-a"}
    nothing = describe_match(match_selector({"rlinf.io/pool": "nope"}), cluster="gpu-a")
    assert (nothing["count"], nothing["confined"], nothing["gpu_max"]) == (0, False, None)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"b": "2", "a": "1"}, {"a": "1", "b": "2"}),
        ([["a", "1"], ["b", "2"]], {"a": "1", "b": "2"}),
        (" a = 1 ,\n b=2 \n", {"a": "1", "b": "2"}),
    ],
)
def test_selector_input_comes_as_object_pairs_or_text(raw: object,
                                                      expected: dict[str, str]) -> None:
    assert parse_selector_input(raw) == expected


@pytest.mark.parametrize(
    ("raw", "codes"),
    [
        ("", ["selector.empty"]),
        ([], ["selector.empty"]),
        ("a=1, nonsense", ["selector.syntax"]),
        ("a=1\na=2", ["selector.duplicate_key"]),
        ({"-bad": "1"}, ["selector.syntax"]),
        ({"a": "x" * 64}, ["selector.syntax"]),
        ({"a": 1}, ["selector.syntax"]),
        (42, ["selector.syntax"]),
    ],
)
def test_bad_selector_input_names_every_problem(raw: object, codes: list[str]) -> None:
    with pytest.raises(SelectorInputError) as raised:
        parse_selector_input(raw, field="conditions")
    findings = raised.value.extra["findings"]
    assert [f["code"] for f in findings] == codes
    assert {f["field"] for f in findings} == {"conditions"}
    assert raised.value.status_code == 400


def _odd_nodes() -> None:
    """Nodes the SQL aggregation must treat as the Python reading does: an unknown GPU count,
    a device reported as null or not at all, a name ordered by code point,
    a NotReady node and a gone one."""
    gpu_a, gpu_b = Cluster.objects.get(name="gpu-a"), Cluster.objects.get(name="gpu-b")
    odd_a = {"rlinf.io/odd": "yes", "topology.rlinf.io/cluster": "gpu-a"}
    odd = {"rlinf.io/odd": "yes", "topology.rlinf.io/cluster": "gpu-b"}
    Node.objects.bulk_create([
        Node(cluster=gpu_a, name="Z-first", namespace="rl-gpu-a", labels=odd_a, gpu=4,
             devices={"rlinf.io/rdma": 2, "rlinf.io/fpga": 1}),
        Node(cluster=gpu_a, name="a-second", namespace="rl-gpu-a", labels=odd_a, gpu=2,
             devices={"rlinf.io/rdma": 3, "rlinf.io/fpga": None}, ready=False),
        Node(cluster=gpu_b, name="b-third", namespace="rl-gpu-b", labels=odd, gpu=8,
             devices={"rlinf.io/rdma": 1}),
        Node(cluster=gpu_b, name="b-gone", namespace="rl-gpu-b", labels=odd, gpu=0,
             devices={"rlinf.io/rdma": 0}, gone=True),
        Node(cluster=gpu_b, name="b-unknown", namespace="rl-gpu-b",
             labels={**odd, "rlinf.io/unknown-gpu": "1"}, gpu=None,
             devices={"rlinf.io/rdma": 5}),
    ])


@pytest.mark.parametrize("selector", [
    {"rlinf.io/gpu-model": "a100"},
    {"rlinf.io/zone": "zone-1"},
    {"rlinf.io/odd": "yes"},
    {"rlinf.io/odd": "yes", "rlinf.io/unknown-gpu": "1"},
    {"rlinf.io/odd": "yes", "topology.rlinf.io/cluster": "gpu-a"},
    {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-b"},
    {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "cpu-c"},
    {"rlinf.io/pool": "nope"},
    {},
])
@pytest.mark.parametrize("cluster", ["gpu-a", "gpu-b", "nowhere"])
@pytest.mark.parametrize("window", [NodeWindow(), NodeWindow(offset=2, limit=3),
                                    NodeWindow(offset=500, limit=1)])
def test_describe_selector_answers_what_describe_match_answers(
    selector: dict[str, str], cluster: str, window: NodeWindow
) -> None:
    _odd_nodes()
    expected = describe_match(match_selector(selector), cluster=cluster, window=window)
    answer = describe_selector(selector, cluster=cluster, window=window)
    assert answer == expected
    assert list(answer) == list(expected)  # the same keys in the same order
    assert [list(n) for n in answer["nodes"]] == [list(n) for n in expected["nodes"]]


def test_describe_selector_aggregates_counts_and_minima() -> None:
    _odd_nodes()
    answer = describe_selector({"rlinf.io/odd": "yes"}, cluster="gpu-a",
                               window=NodeWindow(limit=2))
    assert answer["per_cluster"] == [{"cluster": "gpu-a", "count": 2, "ready": 1},
                                     {"cluster": "gpu-b", "count": 2, "ready": 2}]
    assert [n["name"] for n in answer["nodes"]] == ["Z-first", "a-second"]
    assert answer["nodes_next_offset"] == 2
    assert answer["foreign_nodes"] == [
        {"cluster": "gpu-b", "name": "b-third", "namespace": "rl-gpu-b"},
        {"cluster": "gpu-b", "name": "b-unknown", "namespace": "rl-gpu-b"}]
    assert (answer["gpu_max"], answer["devices_max"]) == (None, {"rlinf.io/rdma": 1})
    known = describe_selector({"rlinf.io/odd": "yes", "topology.rlinf.io/cluster": "gpu-a"},
                              cluster="gpu-a")
    assert (known["gpu_max"], known["devices_max"]) == (2, {"rlinf.io/rdma": 2})
    assert known["confined"] and known["confining_conditions"] == [
        {"key": "topology.rlinf.io/cluster", "value": "gpu-a"}]
