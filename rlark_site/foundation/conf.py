"""Environment-backed configuration, read through small functions (one place to look)."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from psycopg.conninfo import conninfo_to_dict

BASE_DIR = Path(__file__).resolve().parents[2]

# Defaults the settings (settings/tasks.py) and the Kubernetes gateway (`clusters.k8s`, which
# does not read Django settings) share: the gateway's fallbacks are the settings' defaults.
KUBE_TIMEOUT_DEFAULT = 10.0
KUBE_READ_ATTEMPTS_DEFAULT = 3
STATE_DIR = Path(os.environ.get("RLARK_STATE_DIR", BASE_DIR / ".rlark"))


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return raw.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    return int(raw) if raw not in (None, "") else default


def env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    return float(raw) if raw not in (None, "") else default


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def env_networks(name: str) -> list[str]:
    """Comma-separated CIDRs (a bare address is its own /32 or /128), normalized; a value that
    is not a network stops the process at start-up, naming it."""
    networks = []
    for part in env_list(name, []):
        try:
            networks.append(str(ipaddress.ip_network(part, strict=False)))
        except ValueError as exc:
            raise ImproperlyConfigured(f"{name}: {part!r} is not a network (CIDR)") from exc
    return networks


def database_from_url(url: str) -> dict[str, Any]:
    """Django DATABASES entry from any libpq URI (TCP or unix-socket forms)."""
    params = conninfo_to_dict(url)
    options = {
        k: v for k, v in params.items() if k not in {"dbname", "user", "password", "host", "port"}
    }
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": params.get("dbname") or "rlark",
        "USER": params.get("user") or "",
        "PASSWORD": params.get("password") or "",
        "HOST": params.get("host") or "",
        "PORT": str(params.get("port") or ""),
        "OPTIONS": options,
        # Persistent connections (seconds; 0 closes after every request): a request then
        # does not pay for a new PostgreSQL connection; checked before reuse.
        "CONN_MAX_AGE": env_int("RLARK_DB_CONN_MAX_AGE", 60),
        "CONN_HEALTH_CHECKS": True,
        "TEST": {"NAME": env_str("RLARK_TEST_DATABASE_NAME") or None},
    }
