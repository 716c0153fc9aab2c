"""GPU idleness from DCGM exporter metrics (SPEC 16). Pure: no database, no network.

**The query.** One instant query per cluster and status pass asks Prometheus for the window
average of each GPU series of the Running runs' pods, for both metrics at once:

    label_replace(avg_over_time(DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{pod=~"<jobs>"}[<w>s]),
                  "rlark_metric", "tensor_active", "", "")
    or ... the same with exported_pod=~ ... or ... DCGM_FI_DEV_GPU_UTIL ...

`<jobs>` is `(?:job-a|job-b)-.+` (a run's pods are named `<job>-<task>-<index>`); the answer is
narrowed to the runs' actual pods here. `exported_pod` is where the pod of the GPU's workload
is when Prometheus scrapes the exporter with `honor_labels: false` and the scrape target has a
`pod` label of its own (the exporter's pod, through Kubernetes service discovery).

**The answer.** Label names are matched case-insensitively (exporters and relabelling spell
`Hostname`/`hostname`, `UUID`/`uuid`); the workload's pod and namespace are `exported_pod` and
`exported_namespace` when present, else `pod` and `namespace`, else dcgm-exporter's old
`pod_name` and `pod_namespace`. A pod's figure is the mean of its GPUs' window averages;
`DCGM_FI_PROF_PIPE_TENSOR_ACTIVE` (a ratio) is the idleness signal where the exporter exports
it (it needs DCGM's profiling module and is not in dcgm-exporter's default counters), else
`DCGM_FI_DEV_GPU_UTIL` (percent) / 100. Utilisation alone misses a run hung in an NCCL
collective (its kernels spin at 100 %); tensor activity does not.

**Idle.** A run is idle when every pod that has GPU series is under the threshold and the run
has been Running for at least the window (an average over a window that includes the start,
loading weights, says nothing).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

__all__ = [
    "MAX_PODS",
    "METRIC_LABEL",
    "NO_SERIES",
    "TENSOR_ACTIVE",
    "TOO_YOUNG",
    "UTILIZATION",
    "PodReading",
    "RunReading",
    "assess",
    "counted_seconds",
    "gpu_query",
    "pod_readings",
    "workload_of",
]

TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
# Why a reading is unknown: stable codes, put into words by jobs.gpu.reasons (both languages).
NO_SERIES = "no_series"  # Prometheus has no DCGM series for the run's pods
TOO_YOUNG = "shorter_than_window"  # Running for less than the window; {window_seconds}
UTILIZATION = "DCGM_FI_DEV_GPU_UTIL"
METRIC_LABEL = "rlark_metric"
_METRICS = ((TENSOR_ACTIVE, "tensor_active"), (UTILIZATION, "utilization"))
_POD_LABELS = ("pod", "exported_pod")  # the selector's spellings (dcgm-exporter's, Prometheus's)
MAX_PODS = 200  # per-pod figures kept per run
# Kubernetes names (DNS-1123): anything else cannot be a run's job name and is left out.
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _regex_literal(names: Iterable[str]) -> str:
    """An RE2 alternation of the names, quoted as a PromQL string (double quotes)."""
    escaped = sorted({re.escape(name) for name in names if _NAME.match(name)})
    pattern = f"(?:{'|'.join(escaped)})-.+"
    return '"' + pattern.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gpu_query(job_names: Iterable[str], window_seconds: int) -> str | None:
    """The one query of a cluster's pass for these jobs' pods; None when no name is usable."""
    names = [name for name in job_names if _NAME.match(name)]
    if not names:
        return None
    regex = _regex_literal(names)
    window = f"{max(1, int(window_seconds))}s"
    parts = [
        f'label_replace(avg_over_time({metric}{{{label}=~{regex}}}[{window}]), '
        f'"{METRIC_LABEL}", "{short}", "", "")'
        for metric, short in _METRICS for label in _POD_LABELS
    ]
    return " or ".join(parts)


def _folded(labels: Mapping[str, str]) -> dict[str, str]:
    """Label names folded to lower case; an empty value counts as absent."""
    folded: dict[str, str] = {}
    for name, value in labels.items():
        key = name.lower()
        if value and key not in folded:
            folded[key] = value
    return folded


def workload_of(labels: Mapping[str, str]) -> tuple[str, str] | None:
    """The (namespace, pod) a GPU series belongs to, by the exporter's label conventions."""
    folded = _folded(labels)
    for pod_key, namespace_key in (("exported_pod", "exported_namespace"),
                                   ("pod", "namespace"), ("pod_name", "pod_namespace")):
        pod = folded.get(pod_key)
        if pod:
            return folded.get(namespace_key, ""), pod
    return None


def _gpu_identity(labels: Mapping[str, str]) -> str:
    folded = _folded(labels)
    return "/".join(folded.get(key, "") for key in ("hostname", "uuid", "gpu", "gpu_i_id"))


@dataclass(frozen=True)
class PodReading:
    namespace: str
    pod: str
    gpus: int
    utilization: float | None  # percent
    tensor_active: float | None  # ratio

    def idle(self, threshold: float) -> bool:
        if self.tensor_active is not None:
            return self.tensor_active < threshold
        return self.utilization is not None and self.utilization / 100.0 < threshold

    def as_dict(self, threshold: float) -> dict[str, Any]:
        return {"namespace": self.namespace, "pod": self.pod, "gpus": self.gpus,
                "utilization": _rounded(self.utilization),
                "tensor_active": _rounded(self.tensor_active, 4),
                "idle": self.idle(threshold)}


def _rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def pod_readings(samples: Iterable[tuple[Mapping[str, str], float]],
                 wanted: Iterable[tuple[str, str]]) -> dict[tuple[str, str], PodReading]:
    """Per (namespace, pod) of `wanted`, the mean of its GPUs' window averages; series of other
    pods, without a pod, with an unknown metric or a value out of range are left out."""
    wanted = set(wanted)
    values: dict[tuple[str, str], dict[str, dict[str, float]]] = defaultdict(
        lambda: {"tensor_active": {}, "utilization": {}})
    for labels, value in samples:
        metric = next((v for k, v in labels.items() if k.lower() == METRIC_LABEL), "")
        if metric not in ("tensor_active", "utilization") or not math.isfinite(value):
            continue
        workload = workload_of(labels)
        if workload is None or workload not in wanted:
            continue
        limit = 1.0 if metric == "tensor_active" else 100.0
        if not 0.0 <= value <= limit * 1.0001:
            continue
        values[workload][metric][_gpu_identity(labels)] = min(value, limit)
    readings = {}
    for (namespace, pod), metrics in values.items():
        gpus = len(set(metrics["tensor_active"]) | set(metrics["utilization"]))
        readings[(namespace, pod)] = PodReading(
            namespace=namespace, pod=pod, gpus=gpus,
            utilization=_mean(list(metrics["utilization"].values())),
            tensor_active=_mean(list(metrics["tensor_active"].values())))
    return readings


@dataclass(frozen=True)
class RunReading:
    """What one reading says of a run; `idle` None (with `reason`, a code of
    `jobs.gpu.reasons`, and its `reason_params`) when it cannot say."""

    utilization: float | None
    tensor_active: float | None
    metric: str  # "tensor_active", "utilization" or "" (no series)
    idle: bool | None
    gpus: int
    pods: list[dict[str, Any]]
    reason: str = ""  # NO_SERIES, TOO_YOUNG, ... (jobs.gpu.reasons puts it into words)
    reason_params: dict[str, Any] = field(default_factory=dict)


def _weighted(readings: Sequence[PodReading], attribute: str) -> float | None:
    pairs = [(getattr(r, attribute), r.gpus) for r in readings
             if getattr(r, attribute) is not None]
    total = sum(gpus for _value, gpus in pairs)
    return sum(value * gpus for value, gpus in pairs) / total if total else None


def assess(readings: Sequence[PodReading], *, threshold: float, running_since: datetime,
           as_of: datetime, window_seconds: int) -> RunReading:
    """The run's reading from its pods' (the mean over its GPUs) and whether it is idle."""
    readings = sorted(readings, key=lambda r: (r.namespace, r.pod))
    pods = [r.as_dict(threshold) for r in readings[:MAX_PODS]]
    utilization = _weighted(readings, "utilization")
    tensor_active = _weighted(readings, "tensor_active")
    metric = "tensor_active" if tensor_active is not None else \
        "utilization" if utilization is not None else ""
    gpus = sum(r.gpus for r in readings)
    idle: bool | None = all(r.idle(threshold) for r in readings)
    reason, params = "", {}
    if not readings:
        idle, reason = None, NO_SERIES
    elif running_since > as_of - timedelta(seconds=window_seconds):
        idle, reason, params = None, TOO_YOUNG, {"window_seconds": window_seconds}
    return RunReading(utilization=_rounded(utilization),
                      tensor_active=_rounded(tensor_active, 4), metric=metric, idle=idle,
                      gpus=gpus, pods=pods, reason=reason, reason_params=params)


def counted_seconds(previous: datetime | None, as_of: datetime, window_seconds: int) -> float:
    """The interval a reading at `as_of` speaks for: since the previous known reading, at most
    the window (0 for a first reading, or one not after the previous)."""
    if previous is None or as_of <= previous:
        return 0.0
    return min((as_of - previous).total_seconds(), float(window_seconds))
