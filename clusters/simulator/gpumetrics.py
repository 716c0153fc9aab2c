"""DCGM-exporter-like GPU gauges of a simulated cluster (SPEC 16), served at `/<cluster>/metrics`.

Modelled on what NVIDIA's dcgm-exporter emits on a Kubernetes node (its default counters and
the pod-resources mapping): one series per GPU of every node that has `nvidia.com/gpu`, in the
Prometheus text format, with the labels `gpu` (index), `UUID`, `pci_bus_id`, `device`
(`nvidiaN`), `modelName`, `Hostname` (the node) and `DCGM_FI_DRIVER_VERSION`; a GPU a running
pod holds also carries that pod's `container`, `namespace` and `pod` (a GPU nobody holds has
none, as the exporter leaves them out). The metrics:

- `DCGM_FI_DEV_GPU_UTIL` (gauge, percent), one of dcgm-exporter's default counters;
- `DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` (gauge, ratio), a profiling counter the exporter emits only
  when DCGM's profiling module is on: here, for a pod whose `tensor_active` is not null.

A running pod's GPUs read as a busy training job (`DEFAULT_UTILIZATION`, `DEFAULT_TENSOR`)
until `PUT /_control/clusters/{c}/namespaces/{ns}/pods/{pod}/gpu` sets them; GPUs no pod holds
read 0. A pod gets the node's GPUs in order of pod name (what the device plugin handed out is
not modelled further).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusters.simulator.fleet import NodeSpec
from clusters.types import GPU_RESOURCE

__all__ = ["CONTENT_TYPE", "DEFAULT_TENSOR", "DEFAULT_UTILIZATION", "GPU_SCHEMA", "GpuHolder",
           "GpuSetting", "render"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_UTILIZATION = 87.0
DEFAULT_TENSOR = 0.42
DRIVER_VERSION = "550.127.08"
MODEL_LABEL = "nvidia.com/gpu.product"  # GPU feature discovery's node label
DEFAULT_MODEL = "NVIDIA H100 80GB HBM3"
MAX_GPUS_PER_NODE = 64

GPU_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "minProperties": 1,
    "properties": {
        "utilization": {"type": "number", "minimum": 0, "maximum": 100},
        "tensor_active": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
    },
}

_HELP = {
    "DCGM_FI_DEV_GPU_UTIL": "GPU utilization (in %).",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": "Ratio of cycles the tensor (HMMA) pipe is active.",
}


@dataclass
class GpuSetting:
    utilization: float = DEFAULT_UTILIZATION
    tensor_active: float | None = DEFAULT_TENSOR

    def as_dict(self) -> dict[str, Any]:
        return {"utilization": self.utilization, "tensor_active": self.tensor_active}


@dataclass(frozen=True)
class GpuHolder:
    """A running pod bound to a node of the cluster, holding `gpus` GPUs there."""

    node: str
    namespace: str
    pod: str
    gpus: int
    setting: GpuSetting


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    return ",".join(f'{name}="{_escape(value)}"' for name, value in pairs)


def _gpu_count(node: NodeSpec) -> int:
    try:
        return max(0, min(MAX_GPUS_PER_NODE, int(str(node.allocatable.get(GPU_RESOURCE, 0)))))
    except ValueError:
        return 0


def _value(number: float) -> str:
    return repr(float(number)) if number != int(number) else str(int(number))


def render(cluster: str, nodes: Sequence[NodeSpec], holders: Iterable[GpuHolder]) -> str:
    """The cluster's `/metrics` answer."""
    by_node: dict[str, list[GpuHolder]] = {}
    for holder in holders:
        by_node.setdefault(holder.node, []).append(holder)
    rows: list[tuple[list[tuple[str, str]], GpuSetting | None]] = []
    for node in sorted(nodes, key=lambda n: n.name):
        count = _gpu_count(node)
        owners: list[GpuHolder | None] = []
        for holder in sorted(by_node.get(node.name, []), key=lambda h: (h.namespace, h.pod)):
            owners.extend([holder] * holder.gpus)
        owners = (owners + [None] * count)[:count]
        model = node.labels.get(MODEL_LABEL, DEFAULT_MODEL)
        for index, owner in enumerate(owners):
            gpu_uuid = uuid.uuid5(uuid.NAMESPACE_URL, f"{cluster}/{node.name}/{index}")
            labels = [("gpu", str(index)), ("UUID", f"GPU-{gpu_uuid}"),
                      ("pci_bus_id", f"00000000:{0x18 + index * 0x10 & 0xff:02X}:00.0"),
                      ("device", f"nvidia{index}"), ("modelName", model),
                      ("Hostname", node.name), ("DCGM_FI_DRIVER_VERSION", DRIVER_VERSION)]
            if owner is not None:
                labels += [("container", "main"), ("namespace", owner.namespace),
                           ("pod", owner.pod)]
            rows.append((labels, owner.setting if owner is not None else None))
    lines: list[str] = []
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
        series = []
        for labels, setting in rows:
            if metric == "DCGM_FI_DEV_GPU_UTIL":
                value: float | None = setting.utilization if setting else 0.0
            else:
                value = (setting.tensor_active if setting else 0.0)
            if value is not None:
                series.append(f"{metric}{{{_labels(labels)}}} {_value(value)}")
        if series:
            lines += [f"# HELP {metric} {_HELP[metric]}", f"# TYPE {metric} gauge", *series]
    return "\n".join(lines) + "\n" if lines else ""


def setting_from(document: Mapping[str, Any], current: GpuSetting | None) -> GpuSetting:
    """A pod's setting after a validated `PUT .../gpu` body (absent keys keep their value)."""
    setting = GpuSetting(**(current.as_dict() if current else {}))
    if "utilization" in document:
        setting.utilization = float(document["utilization"])
    if "tensor_active" in document:
        tensor = document["tensor_active"]
        setting.tensor_active = None if tensor is None else float(tensor)
    return setting
