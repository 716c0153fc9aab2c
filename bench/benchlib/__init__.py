"""Helpers shared by the benchmarks (a package, so `make bench` does not run it as one)."""

from __future__ import annotations

import os
import statistics
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def setup_django() -> None:
    """Django with the environment's DATABASE_URL / REDIS_URL (embedded ones when unset)."""
    sys.path.insert(0, str(REPO))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")
    os.environ.setdefault("RLARK_DEV_SECRETS", "1")
    import logging

    import django

    django.setup()
    # A bench prints its figures; the line per request the web stack logs would bury them.
    logging.getLogger("rlark.request").setLevel(logging.WARNING)


def fleet_yaml(document: object) -> str:
    """A generated fleet as YAML, written by libyaml when PyYAML has it (100,000 nodes take
    about a minute in pure Python, a quarter of that in C)."""
    import yaml

    return yaml.dump(document, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper))


def _end_sessions_on(name: str) -> None:
    """Terminate what still runs in the scratch database `name` (a statement the bench gave up
    on keeps running on the server after its client went away, and would block the DROP)."""
    from django.db import connection

    with connection.creation._nodb_cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()", [name],
        )


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A freshly migrated database for this run only (its name is yielded); dropped after,
    also on an error, Ctrl-C or SIGTERM, once every session still on it has been ended."""
    import signal

    from django.db import connection

    def _interrupted(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, _interrupted)
    connection.settings_dict["TEST"]["NAME"] = name
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield name
    finally:
        connection.close()
        _end_sessions_on(name)
        connection.creation.destroy_test_db(original, verbosity=0)
        signal.signal(signal.SIGTERM, previous)


def percentile(values: Sequence[float], share: float) -> float:
    """The `share` (0..1) percentile of `values`, nearest-rank."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(0, min(len(ordered) - 1, round(share * len(ordered) + 0.5) - 1))
    return ordered[rank]


def summary_ms(values: Sequence[float]) -> str:
    """`p50 p95 p99 max` of seconds, printed in milliseconds."""
    if not values:
        return "no round finished within the budget"
    return "  ".join(
        f"{label} {percentile(values, share) * 1000:8.1f}"
        for label, share in (("p50", 0.5), ("p95", 0.95), ("p99", 0.99), ("max", 1.0))
    ) + f"  (n={len(values)}, mean {statistics.fmean(values) * 1000:.1f} ms)"
