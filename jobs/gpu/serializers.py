"""The documented shape of SPEC 16's `gpu` (job detail and run record)."""

from __future__ import annotations

from rest_framework import serializers

from jobs.gpu.reasons import REASONS


class GpuPodSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    pod = serializers.CharField()
    gpus = serializers.IntegerField(help_text="GPU series seen for the pod")
    utilization = serializers.FloatField(allow_null=True, help_text="DCGM_FI_DEV_GPU_UTIL, %")
    tensor_active = serializers.FloatField(allow_null=True,
                                           help_text="DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0-1")
    idle = serializers.BooleanField()


class GpuIdleEpisodeSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    started_at = serializers.DateTimeField()
    last_idle_at = serializers.DateTimeField(help_text="the latest idle reading")
    detected_at = serializers.DateTimeField()
    ended_at = serializers.DateTimeField(allow_null=True)
    end = serializers.ChoiceField(choices=["busy", "run_ended"], allow_null=True)
    metric = serializers.CharField(allow_null=True)
    threshold = serializers.FloatField()
    window_seconds = serializers.IntegerField()
    gpus = serializers.IntegerField()
    idle_seconds = serializers.FloatField()
    idle_gpu_seconds = serializers.FloatField()


class GpuSerializer(serializers.Serializer):
    utilization = serializers.FloatField(allow_null=True, help_text="mean over the run's GPUs "
                                         "of their window averages, percent")
    tensor_active = serializers.FloatField(allow_null=True, help_text="the same for tensor-pipe "
                                           "activity, 0-1; null where not exported")
    as_of = serializers.DateTimeField(allow_null=True, help_text="Prometheus's evaluation time")
    idle = serializers.BooleanField(allow_null=True, help_text="null: unknown (see reason)")
    idle_since = serializers.DateTimeField(allow_null=True)
    metric = serializers.ChoiceField(choices=["tensor_active", "utilization"], allow_null=True,
                                     help_text="what decided idle")
    reason_code = serializers.ChoiceField(
        choices=list(REASONS), allow_null=True,
        help_text="why it is unknown, as a stable code (null: known, or a reading stored "
                  "before the codes)")
    reason = serializers.CharField(allow_null=True, help_text="why it is unknown, in the "
                                   "request's language (Accept-Language)")
    checked_at = serializers.DateTimeField(allow_null=True, help_text="the last status pass")
    gpus = serializers.IntegerField()
    pods = GpuPodSerializer(many=True)
    window_seconds = serializers.IntegerField()
    threshold = serializers.FloatField()
    observed_seconds = serializers.FloatField()
    idle_seconds = serializers.FloatField()
    idle_gpu_seconds = serializers.FloatField()
    episodes = GpuIdleEpisodeSerializer(many=True)
