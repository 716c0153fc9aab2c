"""Shapes of the live observation API (documented in OpenAPI)."""

from __future__ import annotations

from rest_framework import serializers


class ContainerStateSerializer(serializers.Serializer[object]):
    state = serializers.CharField(help_text="waiting, running, terminated or empty")
    reason = serializers.CharField()
    message = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    started_at = serializers.CharField()
    finished_at = serializers.CharField()


class PodSerializer(serializers.Serializer[object]):
    name = serializers.CharField()
    uid = serializers.CharField()
    task = serializers.CharField(help_text="the rlinf.io/task label")
    node = serializers.CharField()
    phase = serializers.CharField()
    created_at = serializers.CharField()
    started_at = serializers.CharField()
    container = serializers.CharField()
    restarts = serializers.IntegerField()
    current = ContainerStateSerializer()
    previous = ContainerStateSerializer()


class EventSerializer(serializers.Serializer[object]):
    kind = serializers.CharField()
    name = serializers.CharField()
    type = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    count = serializers.IntegerField()
    first_at = serializers.CharField()
    last_at = serializers.CharField()


class AccessEntrySerializer(serializers.Serializer[object]):
    name = serializers.ChoiceField(choices=["ray_dashboard", "tensorboard", "shell"])
    title = serializers.CharField(help_text="what it opens, in the user's language")
    kind = serializers.ChoiceField(choices=["link", "command"],
                                   help_text="link: an http(s) URL; command: a shell command")
    value = serializers.CharField()
    configured = serializers.BooleanField(
        help_text="from the cluster's template; false: the kubectl default")


class PodsSerializer(serializers.Serializer[object]):
    fetched_at = serializers.DateTimeField()
    error = serializers.CharField(help_text="why the cluster could not be read; empty when read")
    pods = PodSerializer(many=True)
    access = AccessEntrySerializer(
        many=True, help_text="the ways into the head pod: the cluster's access links filled "
                             "in, else kubectl commands; empty without a Head Task")


class EventGroupSerializer(serializers.Serializer[object]):
    kind = serializers.CharField(help_text="the involved objects' kind (Job, Pod)")
    reason = serializers.CharField()
    objects = serializers.ListField(child=serializers.CharField(),
                                    help_text="the involved objects' names, in the order first "
                                              "seen")
    event_count = serializers.IntegerField(help_text="Event objects in the group")
    count = serializers.IntegerField(help_text="occurrences: the sum of their counts")
    first_at = serializers.CharField(help_text="the earliest first seen of the group")
    last_at = serializers.CharField(help_text="the latest last seen of the group")
    message = serializers.CharField(help_text="the newest event's message")
    message_count = serializers.IntegerField(help_text="distinct messages in the group")


class EventSummarySerializer(serializers.Serializer[object]):
    warning_count = serializers.IntegerField(
        help_text="events that are not Normal: those of `events` whose type is not Normal, "
                  "in the same order (newest first), never grouped")
    normal_count = serializers.IntegerField(help_text="Normal events (Event objects)")
    normal_groups = EventGroupSerializer(
        many=True, help_text="the Normal events grouped by involved kind and reason, newest "
                             "first (what the job page shows collapsed)")


class EventsSerializer(serializers.Serializer[object]):
    fetched_at = serializers.DateTimeField()
    error = serializers.CharField()
    events = EventSerializer(many=True, help_text="the Job's and its pods' events, newest first")
    summary = EventSummarySerializer(
        help_text="Warnings first, Normal events grouped: the job page's view of `events`")


class LogQuerySerializer(serializers.Serializer[object]):
    tail = serializers.IntegerField(required=False, min_value=1)
    since = serializers.IntegerField(required=False, min_value=1,
                                     help_text="only lines of the last N seconds")
    previous = serializers.BooleanField(required=False, default=False)


class LogSerializer(serializers.Serializer[object]):
    pod = serializers.CharField()
    previous = serializers.BooleanField()
    text = serializers.CharField(help_text="the selected lines, at most RLARK_LOG_MAX_BYTES")
    truncated = serializers.BooleanField(help_text="more text was cut at the byte bound")


class PodAttemptSerializer(serializers.Serializer[object]):
    task = serializers.CharField()
    replica = serializers.IntegerField()
    pod_name = serializers.CharField()
    pod_uid = serializers.CharField()
    node = serializers.CharField()
    phase = serializers.CharField()
    pod_created_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    restarts = serializers.IntegerField()
    container_state = serializers.CharField()
    reason = serializers.CharField()
    message = serializers.CharField()
    exit_code = serializers.IntegerField(allow_null=True)
    previous_reason = serializers.CharField()
    previous_exit_code = serializers.IntegerField(allow_null=True)
    failure_tag = serializers.CharField(
        help_text="oom, image_pull, crash_loop, cuda_oom, nccl_timeout, nccl_watchdog, "
                  "host_oom, node_dead, rollout_engine, ray_actor_died, evicted, preempted, "
                  "unknown, or empty (no failure)")
    failure_evidence = serializers.CharField()
    events = serializers.ListField(child=serializers.DictField(), source="pod_events")
    logs_captured = serializers.BooleanField()
    capture_reason = serializers.CharField()
    captured_at = serializers.DateTimeField()


class CauseSerializer(serializers.Serializer[object]):
    """A run's `cause` (SPEC 16): the earliest evidence across its roles' captured log tails,
    pod states, the Head Task's log and, on a Kueue cluster, the eviction of the job's
    Workload."""

    tag = serializers.CharField(
        help_text="nccl_timeout, nccl_watchdog, cuda_oom, host_oom, oom, ray_actor_died, "
                  "node_dead, rollout_engine, image_pull, evicted or preempted")
    evidence = serializers.CharField(
        help_text="the log line or pod state that says so, or the Kueue Workload's Evicted "
                  "message verbatim")
    pod = serializers.CharField(
        allow_blank=True, help_text="the pod the evidence is from; blank for the Workload's")
    at = serializers.DateTimeField(help_text="when the evidence was written (UTC)")


class PodAttemptRowSerializer(serializers.Serializer[object]):
    attempt = PodAttemptSerializer()
    log_tail = serializers.CharField(help_text="the last 256 KiB of the container's log")
    previous_log_tail = serializers.CharField(help_text="the same of the previous container")
