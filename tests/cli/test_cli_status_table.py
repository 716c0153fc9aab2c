"""What `rlark status` prints of the job detail's SPEC 15/16 blocks (a pure function of the
API's answer; the live commands are tested in test_cli_runs.py)."""

from __future__ import annotations

from rlark_cli.main import status_table

BASE = {"name": "ppo-7b", "team": "vision-rl", "state": "pending", "findings": []}


def test_a_pending_job_says_why_its_verdict_and_its_cause() -> None:
    text = status_table({
        **BASE,
        "pending": {"source": "scheduler", "summary":
                    "Rollout: 2 of 4 workers wait for GPUs: a-node-03 has 4 of 8 free, 8 needed."},
        "capacity": {"verdict": "will_queue", "as_of": "2026-12-02T01:00:00Z", "roles": []},
        "cause": {"tag": "nccl_timeout", "pod": "ppo-7b-rollout-0",
                  "evidence": "Watchdog caught collective operation timeout", "at": "..."},
    })
    assert "pending" in text and "a-node-03 has 4 of 8 free, 8 needed." in text
    assert "will_queue (occupancy of 2026-12-02T01:00:00Z)" in text
    assert "nccl_timeout in ppo-7b-rollout-0: Watchdog caught collective operation timeout" in text


def test_nothing_is_printed_for_blocks_the_server_left_empty() -> None:
    text = status_table({**BASE, "pending": None, "capacity": None, "cause": None})
    assert "capacity" not in text and "cause" not in text
    assert "pending" in text  # the state itself
    assert text.count("pending") == 1


HOURS = {"reserved": 8.0, "productive": 4.667, "stalled": 2.667, "failed": 0.0,
         "pending_partial": 0.667, "idle": None, "idle_measured": False}


def test_a_runs_gpu_hours_split_and_idle_only_when_measured() -> None:
    text = status_table({**BASE, "state": "succeeded", "gpu_hours": HOURS})
    assert ("gpu-hours: 8.0 reserved: productive 4.667, stalled 2.667, failed 0.0, "
            "partial 0.667; idle not measured") in text
    measured = status_table({**BASE, "gpu_hours": {**HOURS, "idle": 1.5, "idle_measured": True}})
    assert "partial 0.667; idle 1.5" in measured
    assert "gpu-hours" not in status_table({**BASE, "state": "draft", "gpu_hours": None})


GPU = {"utilization": 3.0, "tensor_active": 0.012, "as_of": "2026-12-02T10:00:00Z",
       "idle": True, "idle_since": "2026-12-02T09:40:00Z", "reason_code": None, "reason": None,
       "checked_at": "2026-12-02T10:00:05Z", "gpus": 16, "window_seconds": 900}


def test_gpu_idleness_is_shown_when_prometheus_reads_it() -> None:
    text = status_table({**BASE, "state": "running", "gpu": GPU})
    assert ("gpu: idle since 2026-12-02T09:40:00Z (tensor cores active 1.2 %, utilization 3 % "
            "over 15 min, 16 GPUs)") in " ".join(text.split())
    unknown = status_table({**BASE, "gpu": {**GPU, "idle": None, "reason_code": "no_reading",
                                            "reason": "no reading yet", "checked_at": None}})
    assert "gpu: unknown: no reading yet" in " ".join(unknown.split())
    off = status_table({**BASE, "gpu": {**GPU, "idle": None, "reason_code": "not_configured",
                                        "reason": "Prometheus is not configured",
                                        "checked_at": None}})
    assert "gpu:" not in off


def test_a_run_no_pod_of_which_held_a_gpu_says_so_instead_of_zeros() -> None:
    """As the job page says it (issue 22): a submitted run still waiting for its pods."""
    zeros = {**HOURS, "reserved": 0.0, "productive": 0.0, "stalled": 0.0, "pending_partial": 0.0}
    text = status_table({**BASE, "gpu_hours": zeros})
    assert "gpu-hours: none so far (no pod of this run has held a GPU)" in text
    assert "0.0 reserved" not in text
