"""How a polled node becomes row values and compares with its stored row (pure, no database)."""

from __future__ import annotations

import json

from clusters.inventory.diff import (
    NodeValues,
    Polled,
    SeenRow,
    StoredNode,
    diff_page,
    node_values,
    split_by_version,
)
from clusters.k8s import NodeInfo


def info(name: str = "n1", *, labels: dict[str, str] | None = None,
         allocatable: dict[str, str] | None = None, ready: bool = True,
         version: str = "") -> NodeInfo:
    return NodeInfo(name=name, labels=labels or {"pool": "a"}, allocatable=allocatable or {},
                    ready=ready, resource_version=version)


def stored(values: NodeValues, *, row_id: int = 7, gone: bool = False,
           version: str = "v1") -> StoredNode:
    return StoredNode(
        row_id, values.name, values.namespace, json.dumps(values.labels), values.gpu,
        json.dumps(values.devices), values.ready, gone, version,
    )


def test_gpus_and_rlinf_devices_become_counts() -> None:
    values = node_values(
        info(allocatable={"nvidia.com/gpu": "8", "rlinf.io/rdma": "4", "rlinf.io/x": "2k"}),
        namespace="ns",
    )
    assert (values.gpu, values.devices) == (8, {"rlinf.io/rdma": 4, "rlinf.io/x": 2000})
    assert (values.namespace, values.ready, values.gone) == ("ns", True, False)


def test_unreported_gpus_are_none_and_other_resources_are_ignored() -> None:
    values = node_values(info(allocatable={"example.com/fpga": "1"}), namespace="ns")
    assert (values.gpu, values.devices) == (None, {})


def test_an_unparseable_count_is_kept_as_none() -> None:
    values = node_values(info(allocatable={"nvidia.com/gpu": "lots", "rlinf.io/x": "1.5"}),
                         namespace="ns")
    assert (values.gpu, values.devices) == (None, {"rlinf.io/x": None})


def test_a_node_polled_at_its_stored_version_needs_no_comparison() -> None:
    nodes = [info("n1", version="v1"), info("n2", version="v9"), info("n3", version="v1")]
    seen = {"n1": SeenRow(7, "v1", False), "n2": SeenRow(8, "v1", False)}

    unchanged, to_compare = split_by_version(nodes, seen)

    assert (unchanged, [n.name for n in to_compare]) == ([7], ["n2", "n3"])


def test_a_node_without_a_version_or_with_a_gone_row_is_always_compared() -> None:
    nodes = [info("n1", version=""), info("n2", version="v1")]
    seen = {"n1": SeenRow(7, "", False), "n2": SeenRow(8, "v1", True)}

    unchanged, to_compare = split_by_version(nodes, seen)

    assert (unchanged, [n.name for n in to_compare]) == ([], ["n1", "n2"])


def test_a_node_without_a_row_is_created_with_its_version() -> None:
    polled = Polled(node_values(info(), namespace="ns"), "v1")
    diff = diff_page([polled], {})
    assert (diff.created, diff.changed, diff.unchanged_ids) == ([polled], [], [])


def test_an_identical_node_is_unchanged_whatever_the_key_order() -> None:
    values = node_values(info(labels={"a": "1", "bb": "2"}), namespace="ns")
    row = stored(values)._replace(labels_text='{"bb": "2", "a": "1"}')
    diff = diff_page([Polled(values, "v1")], {"n1": row})
    assert (diff.unchanged_ids, diff.changed, diff.created, diff.refreshed) == ([7], [], [], [])


def test_an_identical_node_at_a_new_version_only_gets_the_version_refreshed() -> None:
    values = node_values(info(), namespace="ns")
    diff = diff_page([Polled(values, "v2")], {"n1": stored(values, version="v1")})
    assert (diff.unchanged_ids, diff.refreshed, diff.changed) == ([7], [(7, "v2")], [])


def test_a_relabelled_node_is_changed_and_counted_as_a_label_change() -> None:
    before = node_values(info(labels={"zone": "z1"}), namespace="ns")
    after = Polled(node_values(info(labels={"zone": "z2"}), namespace="ns"), "v2")
    diff = diff_page([after], {"n1": stored(before)})
    assert (diff.changed, diff.labels_changed, diff.returned) == ([(7, after)], 1, 0)
    assert diff.refreshed == []


def test_readiness_allocatable_and_namespace_changes_are_not_label_changes() -> None:
    before = node_values(info(allocatable={"nvidia.com/gpu": "8"}), namespace="ns")
    changes = [
        node_values(info(allocatable={"nvidia.com/gpu": "8"}, ready=False), namespace="ns"),
        node_values(info(allocatable={"nvidia.com/gpu": "4"}), namespace="ns"),
        node_values(info(allocatable={"nvidia.com/gpu": "8"}), namespace="other"),
    ]
    for after in changes:
        diff = diff_page([Polled(after, "v2")], {"n1": stored(before)})
        assert (len(diff.changed), diff.labels_changed) == (1, 0)


def test_a_gone_node_that_is_back_is_changed_and_counted_as_returned() -> None:
    values = Polled(node_values(info(), namespace="ns"), "v1")
    diff = diff_page([values], {"n1": stored(values.values, gone=True)})
    assert (diff.changed, diff.returned, diff.labels_changed) == ([(7, values)], 1, 0)
