"""The status pass's GPU reading (SPEC 16): one Prometheus query per cluster and pass.

With `RLARK_PROMETHEUS_URL` set, `observe_cluster_gpus` (called by `jobs.records.status.
sync_cluster` after the pods were captured) reads the cluster's Running runs and their running
pods (two queries), asks Prometheus **once** for the window averages of their GPUs
(`jobs.core.gpu.gpu_query`), and writes each run's `RunGpu` in one statement. Idle episodes open
and end by the rule of `jobs.gpu.models` (which also says how idle time is counted for
GPU-hours); `job_gpu_idle` goes through `jobs.notify.services.emit`, once per episode by key.

Prometheus down, slow (past `RLARK_PROMETHEUS_TIMEOUT`), answering an error, garbage or more
than `RLARK_PROMETHEUS_MAX_BYTES`: every Running run's `gpu` is unknown with the reason, no
idle time is counted, an open episode stays open, and the status pass goes on.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from django.db import transaction
from django.utils import timezone

from jobs.core.gpu import RunReading, assess, counted_seconds, gpu_query, pod_readings
from jobs.gpu import conf
from jobs.gpu.reasons import NO_PODS, PROMETHEUS, english
from jobs.models import (
    EventKind,
    GpuIdleEpisode,
    IdleEnd,
    JobState,
    PodAttempt,
    RunGpu,
    RunRecord,
)
from jobs.notify.services import emit
from jobs.progress.reader import running_since
from rlark_site.foundation.bulk import upsert
from rlark_site.foundation.prometheus import PrometheusError, instant_query

__all__ = ["GpuReport", "observe_cluster_gpus"]

logger = logging.getLogger(__name__)

_FIELDS = ("checked_at", "as_of", "utilization", "tensor_active", "metric", "idle", "gpus",
           "pods", "reason", "reason_code", "reason_params", "counted_until",
           "observed_seconds", "idle_seconds", "idle_gpu_seconds")


class GpuReport(NamedTuple):
    runs: int
    queries: int
    idle: int
    opened: int
    unknown: str  # why every run's reading is unknown ("" when Prometheus answered)


@dataclass
class _Run:
    pk: int
    job_name: str
    namespace: str
    running_since: datetime
    gpu: RunGpu
    episode: GpuIdleEpisode | None


def _running(cluster: str, now: datetime) -> list[_Run]:
    """The cluster's Running runs with their kept reading and open episode: three queries."""
    rows = list(RunRecord.objects.filter(cluster=cluster, state=JobState.RUNNING)
                .order_by("pk").values("pk", "job_name", "namespace", "submitted_at",
                                       running_since=running_since()))
    ids = [row["pk"] for row in rows]
    kept = RunGpu.objects.in_bulk(ids) if ids else {}
    episodes = {e.run_record_id: e for e in GpuIdleEpisode.objects.filter(
        run_record_id__in=ids, ended_at=None)} if ids else {}
    return [_Run(pk=row["pk"], job_name=row["job_name"], namespace=row["namespace"],
                 running_since=row["running_since"] or row["submitted_at"] or now,
                 gpu=kept.get(row["pk"]) or RunGpu(run_record_id=row["pk"], checked_at=now),
                 episode=episodes.get(row["pk"])) for row in rows]


def _pods(runs: Sequence[_Run]) -> dict[int, list[tuple[str, str]]]:
    """Each run's running pods as (namespace, pod), as the pass's capture recorded them."""
    namespaces = {run.pk: run.namespace for run in runs}
    pods: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for pk, name in (PodAttempt.objects.filter(run_record_id__in=list(namespaces),
                                               phase="Running", finished_at=None)
                     .order_by().values_list("run_record_id", "pod_name").distinct()):
        pods[pk].append((namespaces[pk], name))
    return pods


def _end_left_episodes(cluster: str) -> None:
    """Episodes of runs that stopped running end at their last idle reading."""
    for episode in GpuIdleEpisode.objects.filter(
            ended_at=None, run_record__cluster=cluster).exclude(
            run_record__state=JobState.RUNNING):
        GpuIdleEpisode.objects.filter(pk=episode.pk, ended_at=None).update(
            ended_at=episode.last_idle_at, end=IdleEnd.RUN_ENDED)


def _unknown(run: _Run, detail: str, now: datetime) -> None:
    """Prometheus gave no usable answer (`detail`, its reason): the reading is unknown."""
    gpu = run.gpu
    gpu.checked_at = now
    gpu.as_of = gpu.utilization = gpu.tensor_active = gpu.idle = None
    gpu.metric, gpu.gpus, gpu.pods = "", 0, []
    _reason(gpu, PROMETHEUS, {"detail": detail[:200]})


def _reason(gpu: RunGpu, code: str, params: Mapping[str, Any]) -> None:
    gpu.reason_code, gpu.reason_params = code, dict(params)
    gpu.reason = english(code, params)[:300] if code else ""


def _apply(run: _Run, reading: RunReading, as_of: datetime, now: datetime) -> float:
    """The reading into the run's `RunGpu` (in memory); the seconds it counts for."""
    gpu = run.gpu
    gpu.checked_at, gpu.as_of = now, as_of
    gpu.utilization, gpu.tensor_active = reading.utilization, reading.tensor_active
    gpu.metric, gpu.idle, gpu.gpus = reading.metric, reading.idle, reading.gpus
    gpu.pods = reading.pods
    _reason(gpu, reading.reason, reading.reason_params)
    if reading.idle is None:
        return 0.0
    seconds = counted_seconds(gpu.counted_until, as_of, conf.window_seconds())
    gpu.counted_until = as_of
    gpu.observed_seconds += seconds
    if reading.idle:
        gpu.idle_seconds += seconds
        gpu.idle_gpu_seconds += seconds * reading.gpus
    return seconds


def _record(pk: int) -> RunRecord:
    return RunRecord.objects.select_related("team").get(pk=pk)


def _open(run: _Run, reading: RunReading, as_of: datetime, seconds: float,
          now: datetime) -> None:
    number = GpuIdleEpisode.objects.filter(run_record_id=run.pk).count() + 1
    started = as_of - timedelta(seconds=seconds)
    GpuIdleEpisode.objects.create(
        run_record_id=run.pk, number=number, started_at=started, detected_at=now,
        last_idle_at=as_of, metric=reading.metric, threshold=conf.threshold(),
        window_seconds=conf.window_seconds(), gpus=reading.gpus, idle_seconds=seconds,
        idle_gpu_seconds=seconds * reading.gpus)
    emit(kind=EventKind.JOB_GPU_IDLE, record=_record(run.pk),
         key=f"{EventKind.JOB_GPU_IDLE}:{run.pk}:{number}", details={
             "episode": number, "idle_since": started.isoformat(), "as_of": as_of.isoformat(),
             "utilization": reading.utilization, "tensor_active": reading.tensor_active,
             "metric": reading.metric, "threshold": conf.threshold(),
             "window_seconds": conf.window_seconds(), "gpus": reading.gpus,
             "pods": reading.pods[:20]})


def _episode(run: _Run, reading: RunReading, as_of: datetime, seconds: float,
             now: datetime) -> bool:
    """Open, extend or end the run's idle episode; whether one opened."""
    episode = run.episode
    if reading.idle is None:
        return False
    if reading.idle and episode is None:
        _open(run, reading, as_of, seconds, now)
        return True
    if reading.idle and episode is not None:
        GpuIdleEpisode.objects.filter(pk=episode.pk).update(
            last_idle_at=as_of, idle_seconds=episode.idle_seconds + seconds,
            idle_gpu_seconds=episode.idle_gpu_seconds + seconds * reading.gpus,
            gpus=max(episode.gpus, reading.gpus))
    elif episode is not None:
        GpuIdleEpisode.objects.filter(pk=episode.pk, ended_at=None).update(
            ended_at=episode.last_idle_at, end=IdleEnd.BUSY)
    return False


def _row(run: _Run) -> dict[str, Any]:
    return {"run_record_id": run.pk, **{name: getattr(run.gpu, name) for name in _FIELDS}}


def _ask(runs: Sequence[_Run], pods: Mapping[int, list[tuple[str, str]]],
         now: datetime) -> tuple[Any, str]:
    """The one query's samples, or the reason there are none."""
    query = gpu_query(sorted({run.job_name for run in runs if pods.get(run.pk)}),
                      conf.window_seconds())
    if query is None:
        return None, ""
    try:
        return instant_query(conf.prometheus_url(), query, timeout=conf.timeout(),
                             max_bytes=conf.max_bytes(), at=now), ""
    except PrometheusError as error:
        logger.info("gpu reading: Prometheus did not answer: %s", error.reason)
        return None, error.reason or "?"


def observe_cluster_gpus(*, cluster: str, now: datetime | None = None) -> GpuReport | None:
    """One reading of the cluster's Running runs' GPUs (None: Prometheus is not configured)."""
    if not conf.prometheus_url():
        return None
    now = now or timezone.now()
    _end_left_episodes(cluster)
    runs = _running(cluster, now)
    if not runs:
        return GpuReport(0, 0, 0, 0, "")
    pods = _pods(runs)
    vector, failure = _ask(runs, pods, now)
    samples = [(s.labels, s.value) for s in vector.samples] if vector is not None else []
    as_of = vector.evaluated_at if vector is not None else now
    idle = opened = 0
    with transaction.atomic():
        for run in runs:
            if failure:
                _unknown(run, failure, now)
                continue
            reading = assess(list(pod_readings(samples, pods.get(run.pk, [])).values()),
                             threshold=conf.threshold(), running_since=run.running_since,
                             as_of=as_of, window_seconds=conf.window_seconds())
            if not pods.get(run.pk):
                reading = RunReading(None, None, "", None, 0, [], reason=NO_PODS)
            seconds = _apply(run, reading, as_of, now)
            idle += bool(reading.idle)
            opened += _episode(run, reading, as_of, seconds, now)
        upsert(RunGpu, [_row(run) for run in runs], unique=("run_record_id",), update=_FIELDS)
    return GpuReport(runs=len(runs), queries=int(vector is not None or bool(failure)),
                     idle=idle, opened=opened,
                     unknown=english(PROMETHEUS, {"detail": failure}) if failure else "")
