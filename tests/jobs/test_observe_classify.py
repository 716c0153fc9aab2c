"""The failure classifier: one rule per tag, the order between them, and bounded matching."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from jobs.observe.classify import AttemptFacts, Classification, classify
from jobs.observe.models import FailureTag


def facts(*, phase: str = "Failed", reasons: Sequence[str] = ("Error", ""),
          exit_codes: Sequence[int | None] = (1, None), restarts: int = 0,
          lines: Sequence[str] = ()) -> AttemptFacts:
    return AttemptFacts(phase=phase, reasons=reasons, exit_codes=exit_codes, restarts=restarts,
                        lines=lines)


@pytest.mark.parametrize(("given", "tag"), [
    (facts(reasons=("OOMKilled", ""), exit_codes=(137, None)), FailureTag.OOM),
    (facts(lines=["[  12.3] Out of memory: Killed process 4242 (python)"]), FailureTag.OOM),
    (facts(phase="Pending", reasons=("ImagePullBackOff", ""), exit_codes=(None, None)),
     FailureTag.IMAGE_PULL),
    (facts(phase="Running", reasons=("CrashLoopBackOff", "Error"), restarts=3),
     FailureTag.CRASH_LOOP),
    (facts(lines=["torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB"]),
     FailureTag.CUDA_OOM),
    (facts(lines=["[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(OpType="
                  "ALLREDUCE) ran for 1800000 milliseconds before timing out."]),
     FailureTag.NCCL_TIMEOUT),
    (facts(lines=["NCCL WARN Call to recv timed out"]), FailureTag.NCCL_TIMEOUT),
    (facts(lines=["ray.exceptions.ActorDiedError: The actor died unexpectedly"]),
     FailureTag.RAY_ACTOR_DIED),
    (facts(lines=["Traceback (most recent call last):", "ValueError: bad config"]),
     FailureTag.UNKNOWN),
    (facts(phase="Succeeded", reasons=("Completed", ""), exit_codes=(0, None),
           lines=["CUDA out of memory (recovered)"]), FailureTag.NONE),
    (facts(phase="Running", reasons=("", ""), exit_codes=(None, None)), FailureTag.NONE),
])
def test_each_tag(given: AttemptFacts, tag: FailureTag) -> None:
    assert classify(given).tag == tag


def test_the_oldest_matching_line_decides_and_is_the_evidence() -> None:
    """SPEC 16: the first error is the cause; what follows is RLinf's teardown."""
    lines = ["NCCL WARN timeout on rank 1", "later: CUDA out of memory on rank 0"]
    assert classify(facts(lines=lines)) == Classification(
        FailureTag.NCCL_TIMEOUT, "NCCL WARN timeout on rank 1")


def test_a_crash_loop_with_a_cuda_line_is_the_cuda_oom() -> None:
    given = facts(phase="Running", reasons=("CrashLoopBackOff", "Error"), restarts=2,
                  lines=["CUDA out of memory"])
    assert classify(given).tag == FailureTag.CUDA_OOM


def test_an_oom_kill_outranks_the_log() -> None:
    given = facts(reasons=("OOMKilled", ""), lines=["NCCL timeout"])
    assert classify(given) == Classification(FailureTag.OOM, "OOMKilled")


def test_a_huge_hostile_line_is_cut_before_matching() -> None:
    line = "NCCL" + " " * 1_000_000 + "timeout"
    assert classify(facts(lines=[line])).tag == FailureTag.UNKNOWN
