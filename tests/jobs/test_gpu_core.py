"""The pure rules of GPU idleness (jobs.core.gpu): whose GPU a series is, per-pod means, the
tensor-activity signal and its utilisation fallback, when a run is idle, what time counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from jobs.core.gpu import (
    NO_SERIES,
    TOO_YOUNG,
    PodReading,
    assess,
    counted_seconds,
    gpu_query,
    pod_readings,
    workload_of,
)

T = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(("labels", "expected"), [
    ({"pod": "a-actor-0", "namespace": "rl"}, ("rl", "a-actor-0")),
    ({"Pod": "a-actor-0", "NAMESPACE": "rl"}, ("rl", "a-actor-0")),  # names folded
    # honor_labels off behind Kubernetes discovery: `pod` is the exporter's own pod
    ({"pod": "dcgm-exporter-x", "namespace": "gpu-operator", "exported_pod": "a-actor-0",
      "exported_namespace": "rl"}, ("rl", "a-actor-0")),
    ({"pod_name": "a-actor-0", "pod_namespace": "rl"}, ("rl", "a-actor-0")),  # old exporter
    ({"pod": "", "namespace": "", "container": ""}, None),  # a GPU no pod holds
    ({"gpu": "0", "UUID": "GPU-1"}, None),
])
def test_the_workload_of_a_series(labels: dict[str, str],
                                  expected: tuple[str, str] | None) -> None:
    assert workload_of(labels) == expected


def series(pod: str, gpu: str, metric: str, value: float, **extra: str) -> tuple[dict, float]:
    return ({"pod": pod, "namespace": "rl", "gpu": gpu, "UUID": f"GPU-{pod}-{gpu}",
             "Hostname": "node-1", "rlark_metric": metric, **extra}, value)


def test_per_pod_means_over_its_gpus_other_pods_and_bad_values_left_out() -> None:
    samples = [series("a-actor-0", "0", "utilization", 10.0),
               series("a-actor-0", "1", "utilization", 30.0),
               series("a-actor-0", "0", "tensor_active", 0.02),
               series("a-actor-0", "1", "tensor_active", 0.04),
               series("b-actor-0", "0", "utilization", 99.0),  # not asked for
               series("a-actor-0", "2", "utilization", 250.0),  # out of range
               series("a-actor-0", "3", "bogus", 1.0)]
    readings = pod_readings(samples, [("rl", "a-actor-0")])
    reading = readings[("rl", "a-actor-0")]
    assert set(readings) == {("rl", "a-actor-0")}
    assert reading.gpus == 2 and reading.utilization == 20.0
    assert reading.tensor_active == pytest.approx(0.03)


def test_uuid_spelled_either_way_is_one_gpu() -> None:
    samples = [({"pod": "a-x-0", "namespace": "rl", "uuid": "GPU-9", "hostname": "n",
                 "rlark_metric": "utilization"}, 5.0),
               ({"pod": "a-x-0", "namespace": "rl", "UUID": "GPU-9", "Hostname": "n",
                 "rlark_metric": "tensor_active"}, 0.01)]
    assert pod_readings(samples, [("rl", "a-x-0")])[("rl", "a-x-0")].gpus == 1


def reading(pod: str, *, util: float | None, tensor: float | None, gpus: int = 8) -> PodReading:
    return PodReading(namespace="rl", pod=pod, gpus=gpus, utilization=util,
                      tensor_active=tensor)


def judge(*readings: PodReading, since: timedelta = timedelta(hours=1)) -> object:
    return assess(list(readings), threshold=0.05, running_since=T - since, as_of=T,
                  window_seconds=900)


def test_tensor_activity_decides_even_at_full_utilisation() -> None:
    """A run hung in an NCCL collective: kernels spin (100 %), the tensor pipe does nothing."""
    run = judge(reading("a-actor-0", util=100.0, tensor=0.0))
    assert run.idle is True and run.metric == "tensor_active"


def test_utilisation_is_the_fallback_without_tensor_activity() -> None:
    run = judge(reading("a-actor-0", util=3.0, tensor=None))
    assert run.idle is True and run.metric == "utilization" and run.tensor_active is None
    assert judge(reading("a-actor-0", util=40.0, tensor=None)).idle is False


def test_idle_only_when_every_pod_is_and_figures_are_weighted_by_gpus() -> None:
    run = judge(reading("a-actor-0", util=2.0, tensor=0.01, gpus=8),
                reading("a-rollout-0", util=90.0, tensor=0.6, gpus=2))
    assert run.idle is False and run.gpus == 10
    assert run.utilization == pytest.approx((2.0 * 8 + 90.0 * 2) / 10, abs=0.01)
    assert [p["idle"] for p in run.pods] == [True, False]


def test_unknown_without_series_or_before_a_full_window() -> None:
    assert judge().idle is None and judge().reason == NO_SERIES
    young = judge(reading("a-actor-0", util=0.0, tensor=0.0), since=timedelta(minutes=5))
    assert young.idle is None and young.reason == TOO_YOUNG
    assert young.reason_params == {"window_seconds": 900}  # put into words when shown
    assert young.utilization == 0.0  # the figures are still shown


def test_counted_seconds_since_the_previous_reading_at_most_the_window() -> None:
    assert counted_seconds(None, T, 900) == 0.0
    assert counted_seconds(T - timedelta(seconds=30), T, 900) == 30.0
    assert counted_seconds(T - timedelta(hours=2), T, 900) == 900.0  # a gap is not idle time
    assert counted_seconds(T, T, 900) == 0.0


def test_the_query_asks_both_metrics_under_both_pod_labels_for_the_jobs() -> None:
    query = gpu_query(["ppo.run", "b-job", "Not_A_Name"], 900)
    assert query is not None
    assert query.count("avg_over_time(") == 4 and query.count(" or ") == 3
    assert 'pod=~"(?:b\\\\-job|ppo\\\\.run)-.+"' in query
    assert "exported_pod=~" in query and "[900s]" in query
    assert "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE" in query and "DCGM_FI_DEV_GPU_UTIL" in query
    assert gpu_query(["Not_A_Name"], 900) is None
