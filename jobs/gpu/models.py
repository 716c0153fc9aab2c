"""A Running run's GPU reading from Prometheus (DCGM exporter metrics) and its idle episodes.

Imported by `jobs.models` (same app, `jobs`). `RunGpu` is the last reading, rewritten by every
status pass (like `RunProgress` it is not audited: every pass of every run would write an
event row). What the readings conclude is audited: each `GpuIdleEpisode` (opened, extended,
ended).

**The idle-time model (for GPU-hours, SPEC 16 "idle when Prometheus is configured").** Each
status pass that gets a reading for a run at Prometheus evaluation time `t` counts the interval
since the run's previous known reading `t_prev`, at most the window long:
`d = min(t - t_prev, RLARK_GPU_IDLE_WINDOW)` (0 for the run's first reading). The reading at `t`
is the run's average over the window ending at `t`, so it speaks for that interval:

- `RunGpu.observed_seconds += d` for every known reading (the time Prometheus spoke for),
- when the reading is idle: `idle_seconds += d` and `idle_gpu_seconds += d * gpus` (`gpus`: the
  GPU series the reading saw for the run's pods), on the run and on its open episode.

A pass whose reading is unknown (Prometheus down, slow, garbage) counts nothing and leaves an
open episode open. So a run's idle GPU-hours are `RunGpu.idle_gpu_seconds / 3600`, and
`GpuIdleEpisode` rows are the same time as intervals: `[started_at, last_idle_at]`, whose length
equals the episode's `idle_seconds` unless Prometheus was unknown for longer than a window
inside it (then `idle_seconds` is smaller: the unknown time is not counted as idle), for
grouping by day or week.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.audit.tracking import audited


class GpuMetric(models.TextChoices):
    NONE = "", _("no reading")
    TENSOR_ACTIVE = "tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"
    UTILIZATION = "utilization", "DCGM_FI_DEV_GPU_UTIL"


class RunGpu(models.Model):
    """The last GPU reading of a Running run, and the idle time counted so far."""

    run_record = models.OneToOneField("jobs.RunRecord", on_delete=models.CASCADE,
                                      primary_key=True, related_name="gpu")
    checked_at = models.DateTimeField()  # the status pass that last asked
    # The last known reading: Prometheus's evaluation time and what it said (None: unknown).
    as_of = models.DateTimeField(null=True, blank=True)
    utilization = models.FloatField(null=True, blank=True)  # percent, 0-100
    tensor_active = models.FloatField(null=True, blank=True)  # ratio, 0-1
    metric = models.CharField(max_length=20, choices=GpuMetric.choices, blank=True, default="")
    idle = models.BooleanField(null=True, blank=True)
    gpus = models.PositiveIntegerField(default=0)  # GPU series seen for the run's pods
    # [{namespace, pod, gpus, utilization, tensor_active, idle}], at most MAX_PODS entries
    pods = models.JSONField(default=list, blank=True)
    # Why it is unknown: a code of jobs.gpu.reasons and its parameters, put into words in the
    # viewer's language when shown; `reason` keeps the words in English (logs, the admin, and
    # readings stored before the codes).
    reason = models.CharField(max_length=300, blank=True, default="")
    reason_code = models.CharField(max_length=40, blank=True, default="")
    reason_params = models.JSONField(default=dict, blank=True)
    # When the last known reading was taken: the start of the next counted interval.
    counted_until = models.DateTimeField(null=True, blank=True)
    observed_seconds = models.FloatField(default=0.0)
    idle_seconds = models.FloatField(default=0.0)
    idle_gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"{self.run_record_id}: idle={self.idle}"


class IdleEnd(models.TextChoices):
    BUSY = "busy", _("the GPUs were busy again")
    RUN_ENDED = "run_ended", _("the run stopped running")


@audited()
class GpuIdleEpisode(models.Model):
    """One idle stretch of a run: from the first idle reading (less the interval it speaks
    for) until a reading that is not idle, or the run stopped running. `job_gpu_idle` is sent
    once per episode."""

    run_record = models.ForeignKey("jobs.RunRecord", on_delete=models.CASCADE,
                                   related_name="gpu_idle_episodes")
    number = models.PositiveIntegerField()  # 1, 2, ... per run
    started_at = models.DateTimeField()
    detected_at = models.DateTimeField()  # the pass that saw it
    last_idle_at = models.DateTimeField()  # the latest idle reading
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=20, choices=IdleEnd.choices, blank=True, default="")
    metric = models.CharField(max_length=20, choices=GpuMetric.choices, blank=True, default="")
    threshold = models.FloatField()  # the idle threshold when it opened (ratio, 0-1)
    window_seconds = models.PositiveIntegerField()
    gpus = models.PositiveIntegerField(default=0)  # the most GPUs a reading of it saw
    idle_seconds = models.FloatField(default=0.0)
    idle_gpu_seconds = models.FloatField(default=0.0)

    class Meta:
        app_label = "jobs"
        ordering = ["run_record", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run_record", "number"],
                                    name="unique_gpu_idle_episode"),
            models.UniqueConstraint(fields=["run_record"], condition=models.Q(ended_at=None),
                                    name="one_open_gpu_idle_episode"),
        ]

    def __str__(self) -> str:
        return f"{self.run_record_id}#{self.number}"
