"""Settings of the GPU idleness reading, through small functions (values: settings/tasks.py)."""

from __future__ import annotations

from django.conf import settings


def prometheus_url() -> str:
    """The operator's Prometheus; empty: GPU idleness is not read."""
    return str(settings.RLARK_PROMETHEUS_URL or "").strip()


def window_seconds() -> int:
    """The window each reading averages over (at least 1 s; 900 by default)."""
    return max(1, int(settings.RLARK_GPU_IDLE_WINDOW))


def threshold() -> float:
    """Under this ratio a GPU is idle (tensor-pipe activity, or utilisation / 100)."""
    return min(1.0, max(0.0, float(settings.RLARK_GPU_IDLE_THRESHOLD)))


def timeout() -> float:
    return max(0.1, float(settings.RLARK_PROMETHEUS_TIMEOUT))


def max_bytes() -> int:
    return max(1024, int(settings.RLARK_PROMETHEUS_MAX_BYTES))
