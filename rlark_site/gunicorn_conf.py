"""Gunicorn settings of every RLark web process (`make run` and the image alike):

    gunicorn -c python:rlark_site.gunicorn_conf rlark_site.wsgi

Workers and threads are sized from the CPUs this process may use (its CPU affinity and, in a
container, its cgroup CPU quota) and overridable from the environment; see
docs/operations.md ("Scaling each process").
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from rlark_site.foundation.conf import env_int, env_str

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process can use: its affinity, lowered by a cgroup v2 quota if any."""
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = cpu_max.read_text().split()[:2]
    except (OSError, ValueError):
        return cpus
    if quota == "max":
        return cpus
    return max(1, min(cpus, math.ceil(int(quota) / int(period))))


def default_workers(cpus: int) -> int:
    """Gunicorn's rule of thumb: two workers per CPU plus one."""
    return 2 * cpus + 1


wsgi_app = "rlark_site.wsgi"
bind = env_str("RLARK_WEB_BIND", "0.0.0.0:8000")
workers = env_int("RLARK_WEB_WORKERS", default_workers(available_cpus()))
threads = env_int("RLARK_WEB_THREADS", 4)
timeout = env_int("RLARK_WEB_TIMEOUT", 60)
graceful_timeout = env_int("RLARK_WEB_GRACEFUL_TIMEOUT", 30)
keepalive = env_int("RLARK_WEB_KEEPALIVE", 5)
# Recycle a worker after this many requests (with jitter, so not all at once); 0 never does.
max_requests = env_int("RLARK_WEB_MAX_REQUESTS", 2000)
max_requests_jitter = max_requests // 10
accesslog = env_str("RLARK_WEB_ACCESS_LOG", "-") or None
# Where workers keep their heartbeat files; in a container point it at a memory-backed
# directory (e.g. /dev/shm): a slow overlay /tmp can make the arbiter kill healthy workers.
worker_tmp_dir = env_str("RLARK_WEB_TMP_DIR") or None
