from __future__ import annotations

from rlark_site.conf import env_float, env_int, env_str

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

# How often beat polls each cluster's inventory and the submitted jobs' status (seconds).
RLARK_INVENTORY_POLL_INTERVAL = env_float("RLARK_INVENTORY_POLL_INTERVAL", 60.0)
RLARK_STATUS_POLL_INTERVAL = env_float("RLARK_STATUS_POLL_INTERVAL", 15.0)
# A job Pending longer than this (seconds) is flagged on its page and in the list.
RLARK_PENDING_DEADLINE = env_float("RLARK_PENDING_DEADLINE", 600.0)
# Timeouts for calls to clusters (seconds).
RLARK_KUBE_TIMEOUT = env_float("RLARK_KUBE_TIMEOUT", 10.0)
