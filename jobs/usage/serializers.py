"""The shape of `GET usage/` (for the OpenAPI schema; the body is built by the selector)."""

from __future__ import annotations

from rest_framework import serializers

_HOURS = "GPU-hours"


class UsageHoursSerializer(serializers.Serializer[object]):
    reserved = serializers.FloatField(help_text=f"{_HOURS} held: the sum of the four below")
    productive = serializers.FloatField(help_text=f"{_HOURS} of a complete, advancing gang")
    stalled = serializers.FloatField(help_text=f"{_HOURS} inside a stall episode")
    failed = serializers.FloatField(help_text=f"{_HOURS} from the run's failure to cleanup")
    pending_partial = serializers.FloatField(
        help_text=f"{_HOURS} held while the gang was incomplete")
    idle = serializers.FloatField(
        allow_null=True, help_text=f"{_HOURS} held while the GPUs were idle (Prometheus); "
                                   "null when GPU idleness is not measured")


class RunGpuHoursSerializer(UsageHoursSerializer):
    """One run's GPU-hours over its whole life (SPEC 16, the rule of `GET usage/`); null for a
    run never submitted (or no run). A run still holding GPUs is counted up to now."""

    idle_measured = serializers.BooleanField(
        help_text="whether GPU idleness is measured (Prometheus configured)")


class UsageGroupSerializer(UsageHoursSerializer):
    key = serializers.CharField(help_text="the day or week's first day (YYYY-MM-DD, UTC), "
                                          "the username or the job name")
    team = serializers.CharField(required=False, help_text="group_by=job: the run's team")
    user = serializers.CharField(required=False, help_text="group_by=job: who submitted it")
    state = serializers.CharField(required=False, help_text="group_by=job: the run's state")


class UsageSerializer(serializers.Serializer[object]):
    team = serializers.CharField(allow_null=True, help_text="the team asked for, or null")
    teams = serializers.ListField(child=serializers.CharField(),
                                  help_text="the teams counted (slugs)")
    # `from` is a keyword: declared through the field's name below.
    to = serializers.DateTimeField(help_text="the window's end (exclusive)")
    counted_until = serializers.DateTimeField(help_text="the window's end, or now if earlier")
    group_by = serializers.ChoiceField(choices=["day", "week", "user", "job"])
    unit = serializers.CharField()
    runs = serializers.IntegerField(help_text="runs that held GPUs in the window")
    idle_measured = serializers.BooleanField()
    total = UsageHoursSerializer()
    groups = UsageGroupSerializer(many=True)


UsageSerializer._declared_fields["from"] = serializers.DateTimeField(
    help_text="the window's start (inclusive)")
