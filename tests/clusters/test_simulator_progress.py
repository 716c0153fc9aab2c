"""The simulator's training progress: RLinf's step table in a Running Head Task's log at a set
pace, frozen and resumed by the control endpoint, read as the Kubernetes log API reads
(`sinceTime` to the second, `tailLines`, `limitBytes`, `timestamps`), through the gateway."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from clusters import k8s
from clusters.simulator.progress import LINES_PER_STEP, StepClock, table_lines
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    ControlError,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)
from jobs.core.progress import compile_step_pattern

NS = "rl-gpu-a"
HEAD = {"rlinf.io/pool": "a100-head"}
POOL = {"rlinf.io/pool": "a100-a"}
T0 = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)
STEP = compile_step_pattern("")


def steps_in(text: str) -> list[int]:
    return [found[0] for line in text.splitlines()
            if isinstance(found := STEP.last_step(line), tuple)]


def test_the_table_is_rlinfs_shape_and_its_step_row_is_read_by_the_default_pattern() -> None:
    lines = table_lines(120, 1000, seconds=5.0, elapsed=600.0)
    assert lines[2].startswith("├") and " Metric Table " in lines[2]
    assert lines[3].startswith("│ Global Step:  120/1000 │ Progress: ████░")
    assert len(lines[3]) == 120 and lines[3].endswith(" │")
    assert "│ Elapsed: 10:00 │ ETA: 01:13:20 │ Step Time: 5.000s" in lines[4]
    assert steps_in("\n".join(lines)) == [120]


def test_the_clock_advances_freezes_resumes_and_restarts_from_a_checkpoint() -> None:
    clock = StepClock(seconds=5.0, total=100)
    clock.start(T0)
    assert clock.step_at(T0 + timedelta(seconds=62)) == 12
    clock.set(T0 + timedelta(seconds=62), frozen=True)
    assert clock.step_at(T0 + timedelta(hours=1)) == 12
    clock.set(T0 + timedelta(hours=1), frozen=False)
    assert clock.step_at(T0 + timedelta(hours=1, seconds=10)) == 14
    clock.restart(T0 + timedelta(hours=1, seconds=10))
    assert clock.step_at(T0 + timedelta(hours=1, seconds=10)) == 10
    later = clock.steps(since=None, until=T0 + timedelta(hours=1, seconds=20))
    assert [step for _, step in later] == [11, 12]  # the new container's log only


def test_the_clock_stops_at_the_total_and_renders_only_a_reads_window() -> None:
    clock = StepClock(seconds=1.0, total=50)
    clock.start(T0)
    assert clock.step_at(T0 + timedelta(hours=1)) == 50
    window = clock.steps(since=T0 + timedelta(seconds=40), until=T0 + timedelta(hours=1))
    assert [step for _, step in window] == list(range(40, 51))
    assert [s for _, s in clock.steps(since=None, until=T0 + timedelta(hours=1), last=3)] == [
        48, 49, 50]


@pytest.fixture(scope="module")
def fast_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH, step_seconds=0.2) as handle:
        yield handle


@pytest.fixture
def sim(fast_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield fast_sim
    fast_sim.reset()


def _start(sim: InProcessSimulator, name: str = "ppo") -> k8s.Credentials:
    credentials = sim.credentials("gpu-a")
    head = task_body("actor", replicas=1, selector=HEAD, gpus=8, head=True)
    body = job_body(name, tasks=[head, task_body("rollout", replicas=1, selector=POOL)])
    k8s.create_job(credentials=credentials, namespace=NS, body=body)
    sim.tick()
    return credentials


def _read(credentials: k8s.Credentials, pod: str = "ppo-actor-0", **options: object) -> str:
    return k8s.read_pod_log(credentials=credentials, namespace=NS, name=pod,
                            **options).text  # type: ignore[arg-type]


def _wait_for_steps(credentials: k8s.Credentials, count: int) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = _read(credentials, timestamps=True)
        if len(steps_in(text)) >= count:
            return text
        time.sleep(0.05)
    raise AssertionError("no step lines came")


def test_a_running_head_task_logs_steps_and_other_pods_do_not(sim: InProcessSimulator) -> None:
    credentials = _start(sim)
    text = _wait_for_steps(credentials, 3)
    assert steps_in(text)[:3] == [1, 2, 3]
    assert steps_in(_read(credentials, "ppo-rollout-0")) == []


def test_frozen_the_log_goes_quiet_and_resumed_it_goes_on(sim: InProcessSimulator) -> None:
    credentials = _start(sim)
    _wait_for_steps(credentials, 2)
    frozen = sim.set_progress("gpu-a", NS, "ppo", state="frozen")
    assert frozen["state"] == "frozen"
    before = steps_in(_read(credentials))
    sim.advance_clock(1.0)  # five steps' time passes on the simulator's clock
    assert steps_in(_read(credentials)) == before
    sim.set_progress("gpu-a", NS, "ppo", state="advancing", step_seconds=0.1)
    text = _wait_for_steps(credentials, len(before) + 2)
    assert steps_in(text)[len(before)] == before[-1] + 1


def test_reads_since_a_time_tail_and_bytes_as_the_kubernetes_api(
        sim: InProcessSimulator) -> None:
    credentials = _start(sim)
    text = _wait_for_steps(credentials, 4)
    stamped = [line for line in text.splitlines() if "Global Step:" in line]
    third = datetime.strptime(stamped[2][:26], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=UTC)
    since = steps_in(_read(credentials, since_time=third))
    assert since[0] <= 3 and 3 in since  # from the start of that second, as the API server
    sim.set_progress("gpu-a", NS, "ppo", state="frozen")
    newest = steps_in(_read(credentials))[-1]
    assert steps_in(_read(credentials, tail_lines=LINES_PER_STEP)) == [newest]
    assert steps_in(_read(credentials, tail_lines=LINES_PER_STEP,
                          since_time=datetime.now(UTC) + timedelta(seconds=5))) == []
    cut = k8s.read_pod_log(credentials=credentials, namespace=NS, name="ppo-actor-0",
                           max_bytes=100)
    assert cut.truncated and len(cut.text) <= 100 and cut.text.startswith("rlark: task actor")


def test_the_progress_control_refuses_bad_bodies_and_unknown_jobs(
        sim: InProcessSimulator) -> None:
    _start(sim)
    with pytest.raises(ControlError) as refused:
        sim.control("POST", "clusters/gpu-a/namespaces/rl-gpu-a/jobs/ppo/progress",
                    {"state": "paused"})
    assert refused.value.code == 422
    with pytest.raises(ControlError) as missing:
        sim.set_progress("gpu-a", NS, "nope", state="frozen")
    assert missing.value.code == 404
