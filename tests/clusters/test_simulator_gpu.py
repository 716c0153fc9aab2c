"""The simulator's DCGM-like GPU gauges: `/<cluster>/metrics` in the Prometheus text format with
dcgm-exporter's metric and label names, one series per GPU of each GPU node, a running pod's
GPUs labelled with it, set by `PUT /_control/.../pods/{pod}/gpu` (validated, bounded)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from clusters import k8s
from clusters.simulator.gpumetrics import DEFAULT_TENSOR, DEFAULT_UTILIZATION
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-a"
HEAD = {"rlinf.io/pool": "a100-head"}
POOL = {"rlinf.io/pool": "a100-a"}


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


def families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    return {family.name: [(dict(s.labels), s.value) for s in family.samples]
            for family in text_string_to_metric_families(text)}


def _start(sim: InProcessSimulator) -> None:
    head = task_body("actor", replicas=1, selector=HEAD, gpus=8, head=True)
    workers = task_body("rollout", replicas=2, selector=POOL, gpus=4)
    k8s.create_job(credentials=sim.credentials("gpu-a"), namespace=NS,
                   body=job_body("ppo", tasks=[head, workers]))
    sim.tick()


def of_pod(series: list[tuple[dict[str, str], float]], pod: str) -> list[float]:
    return [value for labels, value in series if labels.get("pod") == pod]


def test_every_gpu_of_the_cluster_is_a_series_with_dcgm_exporters_labels(
        sim: InProcessSimulator) -> None:
    read = families(sim.metrics("gpu-a"))
    util = read["DCGM_FI_DEV_GPU_UTIL"]
    gpus = sum(int(n.allocatable.get("nvidia.com/gpu", 0))
               for c in sim.fleet.clusters if c.name == "gpu-a" for n in c.nodes)
    assert gpus > 0 and len(util) == gpus
    labels, value = util[0]
    assert {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname",
            "DCGM_FI_DRIVER_VERSION"} <= set(labels)
    assert labels["UUID"].startswith("GPU-") and value == 0.0
    assert "pod" not in labels  # no pod holds it: the exporter leaves the pod labels out
    assert len({lab["UUID"] for lab, _ in util}) == gpus


def test_a_running_pods_gpus_carry_its_labels_and_read_busy(sim: InProcessSimulator) -> None:
    _start(sim)
    read = families(sim.metrics("gpu-a"))
    util, tensor = read["DCGM_FI_DEV_GPU_UTIL"], read["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"]
    assert of_pod(util, "ppo-actor-0") == [DEFAULT_UTILIZATION] * 8
    assert of_pod(tensor, "ppo-rollout-1") == [DEFAULT_TENSOR] * 4
    held = [labels for labels, _ in util if labels.get("pod") == "ppo-actor-0"]
    assert {(lab["namespace"], lab["container"]) for lab in held} == {(NS, "main")}
    assert len({lab["Hostname"] for lab in held}) == 1 and len({lab["gpu"] for lab in held}) == 8


def test_the_control_sets_a_pods_gauges_and_null_removes_tensor_activity(
        sim: InProcessSimulator) -> None:
    _start(sim)
    answer = sim.set_pod_gpu("gpu-a", NS, "ppo-actor-0", utilization=3, tensor_active=None)
    assert answer == {"namespace": NS, "pod": "ppo-actor-0", "utilization": 3.0,
                      "tensor_active": None}
    read = families(sim.metrics("gpu-a"))
    assert of_pod(read["DCGM_FI_DEV_GPU_UTIL"], "ppo-actor-0") == [3.0] * 8
    assert of_pod(read["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"], "ppo-actor-0") == []
    sim.set_pod_gpu("gpu-a", NS, "ppo-actor-0", tensor_active=0.01)  # utilization kept
    read = families(sim.metrics("gpu-a"))
    assert of_pod(read["DCGM_FI_DEV_GPU_UTIL"], "ppo-actor-0") == [3.0] * 8
    assert of_pod(read["DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"], "ppo-actor-0") == [0.01] * 8


@pytest.mark.parametrize(("body", "code"), [
    ({"utilization": 101}, 422), ({"utilization": -1}, 422), ({"tensor_active": 1.5}, 422),
    ({"utilization": "high"}, 422), ({}, 422), ({"watts": 300}, 422),
])
def test_bad_gauges_are_refused(sim: InProcessSimulator, body: dict[str, object],
                                code: int) -> None:
    _start(sim)
    with pytest.raises(ControlError) as refused:
        sim.set_pod_gpu("gpu-a", NS, "ppo-actor-0", **body)
    assert refused.value.code == code


def test_an_unknown_pod_is_404_and_a_pod_that_ended_leaves_the_metrics(
        sim: InProcessSimulator) -> None:
    with pytest.raises(ControlError) as missing:
        sim.set_pod_gpu("gpu-a", NS, "nope-actor-0", utilization=1)
    assert missing.value.code == 404
    _start(sim)
    sim.patch_pod("gpu-a", NS, "ppo-actor-0", phase="Failed")
    util = families(sim.metrics("gpu-a"))["DCGM_FI_DEV_GPU_UTIL"]
    assert of_pod(util, "ppo-actor-0") == [] and of_pod(util, "ppo-rollout-0") != []
