from __future__ import annotations

from rlark_site.foundation.conf import (
    KUBE_READ_ATTEMPTS_DEFAULT,
    KUBE_TIMEOUT_DEFAULT,
    env_float,
    env_int,
    env_str,
)

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:6379/0")
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SOFT_TIME_LIMIT = env_int("RLARK_TASK_SOFT_TIME_LIMIT", 120)
CELERY_TASK_TIME_LIMIT = env_int("RLARK_TASK_TIME_LIMIT", 180)
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": env_int("RLARK_VISIBILITY_TIMEOUT", 300)}
CELERY_TASK_ALWAYS_EAGER = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Queues: one per kind of work, so that a slow or stuck inventory poll never delays a
# submission. Every task is routed here (and only here); a worker started without `-Q`
# consumes all four, production runs one worker Deployment per queue (docs/operations.md).
RLARK_QUEUE_INVENTORY = "inventory"
RLARK_QUEUE_SUBMISSION = "submission"
RLARK_QUEUE_STATUS = "status"
RLARK_QUEUE_NOTIFICATIONS = "notifications"
RLARK_QUEUES = (
    RLARK_QUEUE_INVENTORY,
    RLARK_QUEUE_SUBMISSION,
    RLARK_QUEUE_STATUS,
    RLARK_QUEUE_NOTIFICATIONS,
)
CELERY_TASK_QUEUES = {name: {"exchange": name, "routing_key": name} for name in RLARK_QUEUES}
CELERY_TASK_ROUTES = {
    "clusters.tasks.*": {"queue": RLARK_QUEUE_INVENTORY},
    "jobs.tasks.submit_*": {"queue": RLARK_QUEUE_SUBMISSION},
    "jobs.tasks.resume_stalled_submissions": {"queue": RLARK_QUEUE_SUBMISSION},
    "jobs.tasks.sync_*": {"queue": RLARK_QUEUE_STATUS},
    "jobs.tasks.cancel_stalled_run": {"queue": RLARK_QUEUE_STATUS},
    "*.notify_*": {"queue": RLARK_QUEUE_NOTIFICATIONS},
    "*.notifications.*": {"queue": RLARK_QUEUE_NOTIFICATIONS},
}
# A task no route names (a new one) goes to the status queue, which every deployment consumes;
# tests/site/test_task_queues.py fails until it is routed on purpose.
CELERY_TASK_DEFAULT_QUEUE = RLARK_QUEUE_STATUS

# How often beat polls each cluster's inventory and the submitted jobs' status (seconds).
RLARK_INVENTORY_POLL_INTERVAL = env_float("RLARK_INVENTORY_POLL_INTERVAL", 60.0)
# How often beat looks for clusters due a poll (seconds): a poll starts at most this late.
RLARK_INVENTORY_DUE_CHECK = env_float("RLARK_INVENTORY_DUE_CHECK", 5.0)
RLARK_STATUS_POLL_INTERVAL = env_float("RLARK_STATUS_POLL_INTERVAL", 15.0)
# Status sync: Jobs per list request (one listing per cluster namespace and pass).
RLARK_STATUS_PAGE_SIZE = env_int("RLARK_STATUS_PAGE_SIZE", 500)
# A job Pending longer than this (seconds) is flagged on its page and in the list.
RLARK_PENDING_DEADLINE = env_float("RLARK_PENDING_DEADLINE", 600.0)
# Inventory polling: nodes per list request (and per database batch), tries per request, the
# backoff of a failing cluster (doubling from base up to cap, seconds) and the poll task's limits.
RLARK_INVENTORY_PAGE_SIZE = env_int("RLARK_INVENTORY_PAGE_SIZE", 500)
RLARK_INVENTORY_READ_ATTEMPTS = env_int(
    "RLARK_INVENTORY_READ_ATTEMPTS", KUBE_READ_ATTEMPTS_DEFAULT
)
RLARK_INVENTORY_RETRY_BASE = env_float("RLARK_INVENTORY_RETRY_BASE", 15.0)
RLARK_INVENTORY_RETRY_CAP = env_float("RLARK_INVENTORY_RETRY_CAP", 900.0)
RLARK_INVENTORY_TASK_SOFT_TIME_LIMIT = env_int("RLARK_INVENTORY_TASK_SOFT_TIME_LIMIT", 90)
RLARK_INVENTORY_TASK_TIME_LIMIT = env_int("RLARK_INVENTORY_TASK_TIME_LIMIT", 120)
# Occupancy: the most pods and pages one poll's cluster-wide pod listing reads; beyond them the
# listing is a problem of the cluster and its last good occupancy is kept.
RLARK_OCCUPANCY_MAX_PODS = env_int("RLARK_OCCUPANCY_MAX_PODS", 200_000)
RLARK_OCCUPANCY_MAX_PAGES = env_int("RLARK_OCCUPANCY_MAX_PAGES", 2_000)
# Timeouts for calls to clusters (seconds).
RLARK_KUBE_TIMEOUT = env_float("RLARK_KUBE_TIMEOUT", KUBE_TIMEOUT_DEFAULT)
# Submission: tries before a transient failure becomes final, the retry pause (doubling with
# jitter from base up to cap), how long a worker owns a claimed submission, and how long a
# queued record may wait for its message before beat sends it again (seconds).
RLARK_SUBMIT_MAX_ATTEMPTS = env_int("RLARK_SUBMIT_MAX_ATTEMPTS", 6)
RLARK_SUBMIT_RETRY_BASE = env_float("RLARK_SUBMIT_RETRY_BASE", 2.0)
RLARK_SUBMIT_RETRY_CAP = env_float("RLARK_SUBMIT_RETRY_CAP", 60.0)
RLARK_SUBMIT_LEASE = env_float("RLARK_SUBMIT_LEASE", 60.0)
RLARK_SUBMIT_RESUME_GRACE = env_float("RLARK_SUBMIT_RESUME_GRACE", 30.0)
# Celery beat holds a Redis lock while it runs (rlark_site/foundation/beatlock.py): a second beat
# waits as a standby and takes over within this many seconds of the holder's death.
RLARK_BEAT_LOCK_TTL = env_float("RLARK_BEAT_LOCK_TTL", 30.0)

# The shared cache (Redis, the same server as the broker): live pod/event snapshots of a job are
# fetched once per refresh interval however many people watch, and shared by every process.
# Django's Redis cache, with one client per connection pool (rlark_site/foundation/cache.py).
CACHES = {
    "default": {
        "BACKEND": "rlark_site.foundation.cache.SharedClientRedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("RLARK_CACHE_PREFIX", "rlark"),
    }
}
# Live observation of a submitted job: how often pages refresh the pods, events, state and a
# followed log (seconds; also how long one cluster read is shared), the log lines shown by
# default and at most, and the most log bytes one request reads.
RLARK_OBSERVE_REFRESH = env_float("RLARK_OBSERVE_REFRESH", 5.0)
# The pause in typing after which a form's live answer is asked for (the wizard's findings and
# node counts, a log search), in milliseconds: typing faster than this sends one request.
RLARK_LIVE_DEBOUNCE_MS = env_int("RLARK_LIVE_DEBOUNCE_MS", 400)
RLARK_LOG_TAIL_DEFAULT = env_int("RLARK_LOG_TAIL_DEFAULT", 200)
RLARK_LOG_TAIL_MAX = env_int("RLARK_LOG_TAIL_MAX", 5000)
RLARK_LOG_MAX_BYTES = env_int("RLARK_LOG_MAX_BYTES", 1024 * 1024)
# Pod attempts kept in run records: the time a cancel may spend capturing the run's pods before
# it deletes the Job (seconds), and the most pods one namespace listing of the status sync reads.
RLARK_CANCEL_CAPTURE_SECONDS = env_float("RLARK_CANCEL_CAPTURE_SECONDS", 30.0)
RLARK_CAPTURE_MAX_PODS = env_int("RLARK_CAPTURE_MAX_PODS", 100_000)
# Training progress (docs/progress.md): how often each cluster's Running runs have their Head
# Task log read (seconds; a cluster's pass expires after one), the most log bytes one run's read
# takes per pass, and how many reads of one cluster's pass run at once.
RLARK_PROGRESS_POLL_INTERVAL = env_float("RLARK_PROGRESS_POLL_INTERVAL", 15.0)
RLARK_PROGRESS_READ_BYTES = env_int("RLARK_PROGRESS_READ_BYTES", 64 * 1024)
RLARK_PROGRESS_READERS = env_int("RLARK_PROGRESS_READERS", 8)
# GPU idleness (docs/progress.md, "GPU idleness"): the Prometheus that scrapes the clusters'
# DCGM exporters (operator-set; empty turns the reading off), the window each reading averages
# over (seconds), the ratio under which a run's GPUs are idle (tensor-pipe activity, or
# utilisation / 100 where only DCGM_FI_DEV_GPU_UTIL is exported), and the bounds of one query.
RLARK_PROMETHEUS_URL = env_str("RLARK_PROMETHEUS_URL", "")
RLARK_GPU_IDLE_WINDOW = env_int("RLARK_GPU_IDLE_WINDOW", 15 * 60)
RLARK_GPU_IDLE_THRESHOLD = env_float("RLARK_GPU_IDLE_THRESHOLD", 0.05)
RLARK_PROMETHEUS_TIMEOUT = env_float("RLARK_PROMETHEUS_TIMEOUT", 5.0)
RLARK_PROMETHEUS_MAX_BYTES = env_int("RLARK_PROMETHEUS_MAX_BYTES", 8 * 1024 * 1024)
