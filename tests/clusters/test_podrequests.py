"""The effective pod request rule against a table of pod shapes (pure, no database).

Expected values follow k8s.io/component-helpers `resource.PodRequests` and the worked
examples of KEP-753 (sidecars) and KEP-2837 (pod-level resources).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusters.podrequests import (
    MAX_CONTAINERS,
    PodSpecError,
    format_units,
    pod_requests,
    scheduler_units,
)
from clusters.quantities import NANO, nano_units, parse_quantity

GPU = "nvidia.com/gpu"


def _c(requests: dict[str, Any] | None = None, *, name: str = "c", **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, **extra}
    if requests is not None:
        container["resources"] = {"requests": requests}
    return container


def _sidecar(requests: dict[str, Any]) -> dict[str, Any]:
    return _c(requests, restartPolicy="Always")


CASES: list[tuple[str, dict[str, Any], dict[str, int]]] = [
    ("no spec at all", {}, {}),
    ("a container without resources", {"containers": [_c()]}, {}),
    ("plain", {"containers": [_c({"cpu": "500m", "memory": "1Gi", GPU: "8"})]},
     {"cpu": 500, "memory": 1 << 30, GPU: 8}),
    ("multi-container sums", {"containers": [_c({"cpu": "1", "memory": "1Gi"}),
                                             _c({"cpu": "250m", GPU: "2"})]},
     {"cpu": 1250, "memory": 1 << 30, GPU: 2}),
    ("init larger than the containers wins per resource",
     {"initContainers": [_c({"cpu": "4", "memory": "64Mi"})],
      "containers": [_c({"cpu": "1", "memory": "1Gi"})]},
     {"cpu": 4000, "memory": 1 << 30}),
    ("the largest of several init containers, not their sum",
     {"initContainers": [_c({"cpu": "3"}), _c({"cpu": "2"})], "containers": [_c({"cpu": "1"})]},
     {"cpu": 3000}),
    ("a sidecar adds to the containers", {"initContainers": [_sidecar({"cpu": "500m"})],
                                          "containers": [_c({"cpu": "1"})]},
     {"cpu": 1500}),
    ("a sidecar before an init container adds to that init container's turn",
     {"initContainers": [_sidecar({"cpu": "1"}), _c({"cpu": "5"})],
      "containers": [_c({"cpu": "1"})]},
     {"cpu": 6000}),
    ("a sidecar after an init container does not add to its turn",
     {"initContainers": [_c({"cpu": "5"}), _sidecar({"cpu": "1"})],
      "containers": [_c({"cpu": "1"})]},
     {"cpu": 5000}),
    ("KEP-753 example: sidecars interleaved with init containers",
     {"initContainers": [_sidecar({"memory": "10"}), _c({"memory": "20"}),
                         _sidecar({"memory": "30"}), _c({"memory": "5"})],
      "containers": [_c({"memory": "100"})]},
     {"memory": 140}),
    ("KEP-753: a late init container above the containers and sidecars",
     {"initContainers": [_sidecar({"memory": "10"}), _sidecar({"memory": "30"}),
                         _c({"memory": "200"})],
      "containers": [_c({"memory": "100"})]},
     {"memory": 240}),
    ("restartPolicy other than Always is a plain init container",
     {"initContainers": [_c({"cpu": "1"}, restartPolicy="OnFailure")],
      "containers": [_c({"cpu": "1"})]},
     {"cpu": 1000}),
    ("pod-level requests replace the containers' cpu and memory",
     {"resources": {"requests": {"cpu": "8", "memory": "16Gi"}},
      "containers": [_c({"cpu": "1", "memory": "1Gi", GPU: "4"})]},
     {"cpu": 8000, "memory": 16 << 30, GPU: 4}),
    ("pod-level requests replace only what they set",
     {"resources": {"requests": {"cpu": "2"}}, "containers": [_c({"cpu": "1", "memory": "1Gi"})]},
     {"cpu": 2000, "memory": 1 << 30}),
    ("pod-level extended resources are not pod-level resources",
     {"resources": {"requests": {GPU: "8"}}, "containers": [_c({GPU: "1"})]},
     {GPU: 1}),
    ("pod-level requests win over a large init container too",
     {"resources": {"requests": {"cpu": "2"}}, "initContainers": [_c({"cpu": "10"})],
      "containers": [_c({"cpu": "1"})]},
     {"cpu": 2000}),
    ("overhead is added on top", {"overhead": {"cpu": "250m", "memory": "120Mi"},
                                  "containers": [_c({"cpu": "1", "memory": "1Gi"})]},
     {"cpu": 1250, "memory": (1 << 30) + 120 * (1 << 20)}),
    ("overhead is added on top of pod-level requests",
     {"overhead": {"cpu": "100m"}, "resources": {"requests": {"cpu": "2"}},
      "containers": [_c({"cpu": "1"})]},
     {"cpu": 2100}),
    ("rlinf.io devices are tracked, other resources ignored",
     {"containers": [_c({"rlinf.io/rdma": "2", "ephemeral-storage": "10Gi",
                         "hugepages-2Mi": "1Gi", "example.com/fpga": "1"})]},
     {"rlinf.io/rdma": 2}),
    ("an untracked resource's garbage is never read",
     {"containers": [_c({"ephemeral-storage": ["not", "read"], "cpu": "1"})]},
     {"cpu": 1000}),
    ("cpu below a millicore rounds up once, after adding",
     {"containers": [_c({"cpu": "0.0004"}), _c({"cpu": "0.0004"})]}, {"cpu": 1}),
    ("memory fractions round up to a byte", {"containers": [_c({"memory": "1.5"})]},
     {"memory": 2}),
    ("zero requests are left out", {"containers": [_c({"cpu": "0", GPU: "0"})]}, {}),
    ("numbers as JSON numbers", {"containers": [_c({"cpu": 2, GPU: 8, "memory": 1.5e9})]},
     {"cpu": 2000, GPU: 8, "memory": 1_500_000_000}),
    ("huge quantities add without overflow",
     {"containers": [_c({"memory": "8Ei"}), _c({"memory": "8Ei"})]}, {"memory": 2 * 8 << 60}),
    ("missing resources and requests", {"containers": [{"name": "a", "resources": {}},
                                                       {"name": "b", "resources": None}]}, {}),
    ("null lists", {"containers": None, "initContainers": None, "overhead": None}, {}),
]


@pytest.mark.parametrize(("shape", "spec", "expected"), CASES, ids=[c[0] for c in CASES])
def test_effective_request_of_a_pod_shape(shape: str, spec: dict[str, Any],
                                          expected: dict[str, int]) -> None:
    assert pod_requests(spec) == expected


GARBAGE: list[tuple[str, object, str]] = [
    ("spec is a list", ["x"], "spec: not a mapping"),
    ("containers is a string", {"containers": "main"}, "spec.containers: not a list"),
    ("a container is a number", {"containers": [7]}, r"spec.containers\[0\]: not a mapping"),
    ("resources is a list", {"containers": [{"resources": []}]},
     r"spec.containers\[0\].resources: not a mapping"),
    ("requests is a string", {"containers": [{"resources": {"requests": "8"}}]},
     r"spec.containers\[0\].resources.requests: not a mapping"),
    ("a quantity that is not one", {"containers": [_c({GPU: "eight"})]},
     r"spec.containers\[0\].resources.requests.nvidia.com/gpu: 'eight' is not a quantity"),
    ("a negative quantity", {"initContainers": [_c({"cpu": "-1"})]},
     r"spec.initContainers\[0\].resources.requests.cpu"),
    ("an absurd quantity", {"containers": [_c({"memory": "1e400"})]}, "is not a quantity"),
    ("a boolean quantity", {"containers": [_c({"cpu": True})]}, "is not a quantity"),
    ("an infinite number", {"containers": [_c({"cpu": float("inf")})]}, "is not a quantity"),
    ("a very long quantity", {"containers": [_c({"cpu": "1" * 10_000})]}, "is not a quantity"),
    ("overhead is a list", {"overhead": ["cpu"]}, "spec.overhead: not a mapping"),
    ("pod-level resources are a string", {"resources": "lots"}, "spec.resources: not a mapping"),
    ("too many containers", {"containers": [{}] * (MAX_CONTAINERS + 1)}, "more than"),
    ("a non-string resource name", {"containers": [{"resources": {"requests": {1: "1"}}}]},
     "not a string"),
]


@pytest.mark.parametrize(("shape", "spec", "message"), GARBAGE, ids=[g[0] for g in GARBAGE])
def test_garbage_pod_specs_are_refused_naming_the_field(shape: str, spec: object,
                                                        message: str) -> None:
    with pytest.raises(PodSpecError, match=message):
        pod_requests(spec)


@pytest.mark.parametrize(("resource", "amount", "text"), [
    ("cpu", 1500, "1500m"), ("cpu", 2000, "2"), ("cpu", 0, "0"),
    ("memory", 64 << 30, "64Gi"), ("memory", 1536 << 20, "1536Mi"), ("memory", 1000, "1000"),
    ("memory", 0, "0"), (GPU, 8, "8"), ("pods", 110, "110"),
])
def test_amounts_are_written_as_quantities(resource: str, amount: int, text: str) -> None:
    assert format_units(resource, amount) == text


@given(st.sampled_from(["cpu", "memory", GPU]), st.integers(min_value=0, max_value=1 << 63))
def test_a_written_quantity_reads_back_to_the_same_amount(resource: str, amount: int) -> None:
    """Up to the largest amount a quantity may stand for (2^63 base units)."""
    text = format_units(resource, amount)
    assert scheduler_units(resource, nano_units(text)) == amount


@pytest.mark.parametrize(("text", "nano"), [
    ("1", NANO), ("1n", 1), ("0.5n", 1), ("1e-12", 1), ("1.0000000001", NANO + 1), ("0", 0),
])
def test_nano_units_round_up_below_a_nano(text: str, nano: int) -> None:
    assert nano_units(text) == nano
    assert parse_quantity(text) * NANO <= nano
