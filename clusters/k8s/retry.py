"""Exponential backoff with jitter, used by the gateway's reads and offered to callers."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import TypeVar

from clusters.k8s.errors import KubeError
from rlark_site.foundation.conf import KUBE_READ_ATTEMPTS_DEFAULT

T = TypeVar("T")

# Tries of a read when the caller does not say (the default of RLARK_INVENTORY_READ_ATTEMPTS).
DEFAULT_READ_ATTEMPTS = KUBE_READ_ATTEMPTS_DEFAULT
DEFAULT_BASE_DELAY = 0.1
DEFAULT_MAX_DELAY = 2.0


def backoff_delays(
    *, attempts: int, base: float, cap: float, rng: random.Random | None = None
) -> list[float]:
    """Return the pauses to take between `attempts` tries (so `attempts - 1` of them).

    Pause i is drawn uniformly from [d/2, d] with d = min(cap, base * 2**i): the
    exponential part spreads retries out, the jitter keeps many workers that
    failed together from retrying together.
    """
    if attempts < 1:
        raise ValueError("attempts must be at least 1")
    draw = rng or random
    delays = []
    for index in range(attempts - 1):
        ceiling = min(cap, base * 2**index)
        delays.append(ceiling / 2 + draw.uniform(0, ceiling / 2))
    return delays


def call_with_retries(
    call: Callable[[], T],
    *,
    attempts: int = DEFAULT_READ_ATTEMPTS,
    base_delay: float = DEFAULT_BASE_DELAY,
    max_delay: float = DEFAULT_MAX_DELAY,
) -> T:
    """Run `call`, retrying transient `KubeError`s; the last error propagates."""
    for delay in backoff_delays(attempts=attempts, base=base_delay, cap=max_delay):
        try:
            return call()
        except KubeError as error:
            if not error.transient:
                raise
        time.sleep(delay)
    return call()
