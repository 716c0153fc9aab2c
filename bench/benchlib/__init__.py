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
    import django

    django.setup()


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """A freshly migrated database for this run only (its name is yielded); dropped after."""
    from django.db import connection

    connection.settings_dict["TEST"]["NAME"] = name
    original = connection.settings_dict["NAME"]
    connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
    try:
        yield name
    finally:
        connection.close()
        connection.creation.destroy_test_db(original, verbosity=0)


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
