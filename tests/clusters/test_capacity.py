"""Reading a node's capacity back from the inventory (pure, no database)."""

from __future__ import annotations

from clusters.capacity import node_capacity, quantities

GPU = "nvidia.com/gpu"


def test_free_is_allocatable_less_requested_and_never_below_zero() -> None:
    capacity = node_capacity(gpu=8, devices={"rlinf.io/rdma": 4}, cpu_milli=96_000,
                             memory_bytes=1 << 40, pods=110,
                             requested={GPU: "4", "cpu": "100", "memory": "128Gi",
                                        "pods": "2", "rlinf.io/other": "1"})

    assert quantities(capacity.free) == {"cpu": "0", "memory": "896Gi", GPU: "4", "pods": "108",
                                         "rlinf.io/rdma": "4"}
    assert quantities(capacity.requested_with_zeros()) == {
        "cpu": "100", "memory": "128Gi", GPU: "4", "pods": "2", "rlinf.io/rdma": "0",
        "rlinf.io/other": "1"}
    assert quantities(capacity.allocatable) == {"cpu": "96", "memory": "1Ti", GPU: "8",
                                                "pods": "110", "rlinf.io/rdma": "4"}


def test_a_node_never_counted_has_no_requested_or_free() -> None:
    capacity = node_capacity(gpu=None, devices={}, cpu_milli=None, memory_bytes=None, pods=110,
                             requested=None)

    assert (capacity.counted, capacity.free, capacity.requested_with_zeros()) == (False, {}, {})
    assert dict(capacity.allocatable) == {"pods": 110}


def test_an_idle_counted_node_is_all_free() -> None:
    capacity = node_capacity(gpu=8, devices={}, cpu_milli=1500, memory_bytes=None, pods=None,
                             requested={})

    assert quantities(capacity.free) == {"cpu": "1500m", GPU: "8"}


def test_a_stored_entry_that_is_not_a_quantity_is_left_out() -> None:
    capacity = node_capacity(gpu=8, devices={}, cpu_milli=None, memory_bytes=None, pods=None,
                             requested={GPU: "many"})

    assert capacity.free == {GPU: 8}
