"""Reads of a run's GPU reading: SPEC 16's `gpu` body, from the database only (the status pass
fills it once per cluster and pass; a page or an API call never asks Prometheus)."""

from __future__ import annotations

from typing import Any

from jobs.gpu import conf
from jobs.gpu.reasons import NO_READING, NOT_CONFIGURED, reason_text
from jobs.models import GpuIdleEpisode, JobState, RunGpu, RunRecord
from jobs.progress.selectors import iso

__all__ = ["gpu_body", "idle_episodes_body"]



def idle_episodes_body(record: RunRecord) -> list[dict[str, Any]]:
    """Every idle episode of the run, oldest first (what a GPU-hours split sums)."""
    return [{
        "number": e.number, "started_at": iso(e.started_at), "last_idle_at": iso(e.last_idle_at),
        "detected_at": iso(e.detected_at), "ended_at": iso(e.ended_at), "end": e.end or None,
        "metric": e.metric or None, "threshold": e.threshold, "window_seconds": e.window_seconds,
        "gpus": e.gpus, "idle_seconds": round(e.idle_seconds, 3),
        "idle_gpu_seconds": round(e.idle_gpu_seconds, 3),
    } for e in GpuIdleEpisode.objects.filter(run_record=record).order_by("number")]


def gpu_body(record: RunRecord | None) -> dict[str, Any]:
    """SPEC 16's `gpu` of a run: {utilization, tensor_active, as_of, idle} and what explains
    them (the metric that decided, the reason when unknown: `reason_code`, stable, and `reason`,
    its words in the active language, the pods, the idle time)."""
    body: dict[str, Any] = {
        "utilization": None, "tensor_active": None, "as_of": None, "idle": None,
        "idle_since": None, "metric": None, "reason_code": NOT_CONFIGURED,
        "reason": reason_text(NOT_CONFIGURED), "checked_at": None,
        "gpus": 0, "pods": [], "window_seconds": conf.window_seconds(),
        "threshold": conf.threshold(), "observed_seconds": 0.0, "idle_seconds": 0.0,
        "idle_gpu_seconds": 0.0, "episodes": [],
    }
    if record is None:
        return body
    try:  # no statement when the caller read it with the record (select_related("gpu"))
        kept: RunGpu | None = record.gpu
    except RunGpu.DoesNotExist:
        kept = None
    if kept is None:
        if conf.prometheus_url():
            body.update(reason_code=NO_READING, reason=reason_text(NO_READING))
        return body
    episodes = idle_episodes_body(record)
    open_episode = next((e for e in episodes if e["ended_at"] is None), None)
    body.update(
        utilization=kept.utilization, tensor_active=kept.tensor_active, as_of=iso(kept.as_of),
        idle=kept.idle, metric=kept.metric or None, reason_code=kept.reason_code or None,
        reason=reason_text(kept.reason_code, kept.reason_params, fallback=kept.reason) or None,
        checked_at=iso(kept.checked_at), gpus=kept.gpus, pods=kept.pods,
        observed_seconds=round(kept.observed_seconds, 3),
        idle_seconds=round(kept.idle_seconds, 3),
        idle_gpu_seconds=round(kept.idle_gpu_seconds, 3), episodes=episodes,
        idle_since=open_episode["started_at"]
        if open_episode and kept.idle and record.state == JobState.RUNNING else None)
    return body
