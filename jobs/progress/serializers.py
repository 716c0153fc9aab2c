"""The documented shape of SPEC 16's `progress` (job detail and run record)."""

from __future__ import annotations

from rest_framework import serializers


class StallEpisodeSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField(help_text="when no new step had come for the limit")
    last_progress_at = serializers.DateTimeField(help_text="the last new step (or Running)")
    detected_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    end = serializers.ChoiceField(choices=["recovered", "run_ended", "cancelled"],
                                  allow_null=True)
    step = serializers.IntegerField(allow_null=True)
    recovered_step = serializers.IntegerField(allow_null=True)
    stall_after_seconds = serializers.IntegerField()
    cancel_requested_at = serializers.DateTimeField(allow_null=True)
    cause = serializers.DictField(allow_null=True, help_text="{tag, evidence, pod, at} when known")


class ProgressSerializer(serializers.Serializer):
    step = serializers.IntegerField(allow_null=True)
    total = serializers.IntegerField(allow_null=True)
    percent = serializers.FloatField(allow_null=True)
    first_step_at = serializers.DateTimeField(allow_null=True)
    last_step_at = serializers.DateTimeField(allow_null=True,
                                             help_text="when the step last changed")
    steps_per_hour = serializers.FloatField(allow_null=True, help_text="over the last hour, "
                                            "from the last restart on")
    eta = serializers.DateTimeField(allow_null=True, help_text="null while stalled")
    stalled = serializers.BooleanField()
    stalled_since = serializers.DateTimeField(allow_null=True)
    points = serializers.ListField(child=serializers.ListField(), help_text="[[time, step], ...], "
                                   "at most 200 (downsampled; the last is the newest step)")
    restarts = serializers.IntegerField(help_text="times the step went down (resumed from a "
                                        "checkpoint)")
    pattern = serializers.CharField(help_text="the launch list's; blank: RLinf's step lines")
    stall_after_seconds = serializers.IntegerField()
    cancel_after_stalled_seconds = serializers.IntegerField(allow_null=True)
    episodes = StallEpisodeSerializer(many=True)
