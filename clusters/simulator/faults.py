"""Fault injection for one simulated cluster.

Random faults (`error_rate`, `timeout_rate`, `drop_rate`) draw from a seeded
generator, so a run with the same requests in the same order misbehaves the same
way; `fail_next: N` is fully deterministic: the next N requests fail with
`fail_mode`, then the cluster answers normally again.
"""

from __future__ import annotations

import random
import threading
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import jsonschema


class FaultAction(StrEnum):
    """What to do to one request instead of (or after) answering it."""

    ERROR = "error"  # answer 500 InternalError without touching state
    THROTTLE = "throttle"  # answer 429 TooManyRequests without touching state
    TIMEOUT = "timeout"  # hang `hang_seconds` (longer than the client's timeout), then close
    DROP = "drop"  # close the connection without answering
    DROP_AFTER = "drop_after"  # perform the request, then close without answering


_RATE = {"type": "number", "minimum": 0, "maximum": 1}

FAULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "latency_ms": {"type": "number", "minimum": 0},
        "error_rate": _RATE,
        "timeout_rate": _RATE,
        "drop_rate": _RATE,
        "fail_next": {"type": "integer", "minimum": 0},
        "fail_mode": {"enum": [action.value for action in FaultAction]},
        "hang_seconds": {"type": "number", "exclusiveMinimum": 0},
        "seed": {"type": "integer"},
    },
}


@dataclass(frozen=True)
class FaultSpec:
    """Faults configured for a cluster; the default injects nothing."""

    latency_ms: float = 0
    error_rate: float = 0
    timeout_rate: float = 0
    drop_rate: float = 0
    fail_next: int = 0
    fail_mode: FaultAction = FaultAction.ERROR
    hang_seconds: float = 3.0
    seed: int = 0

    def to_dict(self) -> dict[str, Any]:
        document = asdict(self)
        document["fail_mode"] = self.fail_mode.value
        return document


def fault_problems(document: Any) -> list[str]:
    """Return what is wrong with a faults mapping (empty when it is valid)."""
    validator = jsonschema.Draft202012Validator(FAULTS_SCHEMA)
    problems = [
        f"{'.'.join(str(p) for p in error.absolute_path) or 'faults'}: {error.message}"
        for error in validator.iter_errors(document)
    ]
    if not problems:
        total = sum(document.get(key, 0) for key in ("error_rate", "timeout_rate", "drop_rate"))
        if total > 1:
            problems.append("error_rate + timeout_rate + drop_rate must not exceed 1")
    return problems


def fault_spec_from_dict(document: dict[str, Any]) -> FaultSpec:
    """Build a `FaultSpec` from an already validated mapping."""
    values = dict(document)
    if "fail_mode" in values:
        values["fail_mode"] = FaultAction(values["fail_mode"])
    return FaultSpec(**values)


class FaultInjector:
    """The live fault state of one cluster: its spec, its generator, its countdown."""

    def __init__(self, spec: FaultSpec) -> None:
        self._lock = threading.Lock()
        self._spec = spec
        self._rng = random.Random(spec.seed)
        self._remaining = spec.fail_next

    @property
    def spec(self) -> FaultSpec:
        return self._spec

    @property
    def latency_seconds(self) -> float:
        return self._spec.latency_ms / 1000

    def replace(self, spec: FaultSpec) -> None:
        """Install a new spec, restarting the generator and the `fail_next` countdown."""
        with self._lock:
            self._spec = spec
            self._rng = random.Random(spec.seed)
            self._remaining = spec.fail_next

    def decide(self) -> FaultAction | None:
        """Pick the fault for the next request, or None to answer it normally."""
        with self._lock:
            if self._remaining > 0:
                self._remaining -= 1
                return self._spec.fail_mode
            spec = self._spec
            if not (spec.error_rate or spec.timeout_rate or spec.drop_rate):
                return None
            roll = self._rng.random()
            for action, rate in (
                (FaultAction.ERROR, spec.error_rate),
                (FaultAction.TIMEOUT, spec.timeout_rate),
                (FaultAction.DROP, spec.drop_rate),
            ):
                if roll < rate:
                    return action
                roll -= rate
            return None

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {**self._spec.to_dict(), "fail_next_remaining": self._remaining}
