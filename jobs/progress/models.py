"""A run's training progress read from its Head Task's log, and its stall episodes.

Imported by `jobs.models` (same app, `jobs`). `RunProgress` is an observation rebuilt from the
cluster's log at every pass (the read cursor, the latest step, the bounded series): like
`RunRecord.status_checked_at` it is not audited, or every pass of every run would write an
event row. What the reading concludes is: each `StallEpisode` (opened, recovered, ended, the
cancel it asked for) is audited, and a cancel after a stall is in the status history.
"""

from __future__ import annotations

from django.db import models
from django.utils.translation import gettext_lazy as _

from rlark_site.foundation.audit.tracking import audited


class RunProgress(models.Model):
    """Where a Running run's Head Task log was read up to, and what it says."""

    run_record = models.OneToOneField("jobs.RunRecord", on_delete=models.CASCADE,
                                      primary_key=True, related_name="progress")
    pod = models.CharField(max_length=253)  # the Head Task's first pod
    # The last line consumed: its time and how many lines of exactly that time were consumed.
    cursor_at = models.DateTimeField(null=True, blank=True)
    cursor_lines = models.PositiveIntegerField(default=0)
    # Set while the reader is behind (a read hit the byte bound): the next read asks for the
    # newest this many lines since the cursor, skipping the middle, to catch up.
    tail_lines = models.PositiveIntegerField(null=True, blank=True)
    step = models.BigIntegerField(null=True, blank=True)
    total = models.BigIntegerField(null=True, blank=True)
    first_step_at = models.DateTimeField(null=True, blank=True)
    last_step_at = models.DateTimeField(null=True, blank=True)  # when the step last changed
    restarts = models.PositiveIntegerField(default=0)  # times the step went down
    points = models.JSONField(default=list, blank=True)  # [[unix milliseconds, step], ...] <= 200
    bytes_read = models.BigIntegerField(default=0)  # of the reads that brought new lines
    rejected_lines = models.BigIntegerField(default=0)  # matched, but not a sane step
    skipped_lines = models.BigIntegerField(default=0)  # longer than one read's bound
    read_error = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        app_label = "jobs"

    def __str__(self) -> str:
        return f"{self.run_record_id}: {self.step}/{self.total}"


class EpisodeEnd(models.TextChoices):
    RECOVERED = "recovered", _("a new step came")
    RUN_ENDED = "run_ended", _("the run stopped running")
    CANCELLED = "cancelled", _("cancelled after the stall")


@audited()
class StallEpisode(models.Model):
    """One stall of a run: from when no new step had come for the stall limit until a new
    step came (or the run stopped running). `started_at` is the moment the limit passed
    (`last_progress_at` + the limit), `detected_at` the pass that saw it."""

    run_record = models.ForeignKey("jobs.RunRecord", on_delete=models.CASCADE,
                                   related_name="stall_episodes")
    number = models.PositiveIntegerField()  # 1, 2, ... per run
    started_at = models.DateTimeField()
    last_progress_at = models.DateTimeField()
    detected_at = models.DateTimeField()
    step = models.BigIntegerField(null=True, blank=True)  # the step it stalled at
    stall_after_seconds = models.PositiveIntegerField()
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=20, choices=EpisodeEnd.choices, blank=True, default="")
    recovered_step = models.BigIntegerField(null=True, blank=True)
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    # What caused it, when known ({tag, evidence, pod, at}: SPEC 16's `cause`); empty here,
    # filled by the failure-cause classification (jobs.progress.reader.stall_cause).
    cause = models.JSONField(default=dict, blank=True)

    class Meta:
        app_label = "jobs"
        ordering = ["run_record", "number"]
        constraints = [
            models.UniqueConstraint(fields=["run_record", "number"],
                                    name="unique_stall_episode"),
            models.UniqueConstraint(fields=["run_record"], condition=models.Q(ended_at=None),
                                    name="one_open_stall_episode"),
        ]

    def __str__(self) -> str:
        return f"{self.run_record_id}#{self.number}"
