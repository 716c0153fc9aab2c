"""`rlark submit`, `logs -f`, `events`, `cancel`, `record`, `diff`, `clone`, `sweep`, `match`
and `verify` as the installed console script, against gunicorn and the simulator: the
submission and status passes run when the test pumps (tests/cli/conftest.py). Every job a test
starts is ended before the next one needs the head node."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import yaml

from tests.cli.conftest import Site, lines, read_until
from tests.cli.test_cli_files import MINIMAL, one_error_line, write

CLUSTER, NAMESPACE = "gpu-a", "rl-gpu-a"


def state_of(name: str) -> str:
    from jobs.models import RunRecord

    record = RunRecord.objects.filter(job_name=name).first()
    return record.state if record else "draft"


def pump_to(site: Site, name: str, state: str, limit: float = 60) -> None:
    deadline = time.monotonic() + limit
    while state_of(name) != state:
        assert time.monotonic() < deadline, f"{name} is {state_of(name)}, not {state}"
        site.pump()
        time.sleep(0.1)


def test_submit_until_running_logs_follow_events_record(site: Site) -> None:
    site.submittable("ppo-run")
    process = site.start("submit", "ppo-run", "--until", "running", "--interval", "0.3",
                         "--timeout", "80")
    result = site.pump_until(process)
    assert result.code == 0, result.err
    assert "job ppo-run submitted (queued)" in result.err
    assert "ppo-run: running" in result.err  # progress on stderr
    assert result.out.strip() == "ppo-run: running"
    assert site.run("status", "ppo-run", "-o", "json").json()["state"] == "running"

    site.sim.append_pod_log(CLUSTER, NAMESPACE, "ppo-run-actor-0", ["actor says one"])
    site.sim.append_pod_log(CLUSTER, NAMESPACE, "ppo-run-rollout-0", ["rollout says one"])
    head = site.run("logs", "ppo-run")
    assert head.code == 0 and "actor says one" in head.out  # the Header role by default
    rollout = site.run("logs", "ppo-run", "--role", "Rollout", "--replica", "0", "--tail", "5")
    assert "rollout says one" in rollout.out and "actor says" not in rollout.out
    as_json = site.run("logs", "ppo-run", "-o", "json").json()
    assert as_json["pod"] == "ppo-run-actor-0" and "actor says one" in as_json["text"]
    missing = site.run("logs", "ppo-run", "--role", "Critic")
    assert missing.code == 2 and "tasks: actor, rollout" in one_error_line(missing)

    follower = site.start("logs", "ppo-run", "-f", "--interval", "0.3")
    seen = read_until(follower, "stdout", "actor says one")  # it follows
    site.sim.append_pod_log(CLUSTER, NAMESPACE, "ppo-run-actor-0", ["actor says two"])
    seen += read_until(follower, "stdout", "actor says two")  # the new line followed
    site.sim.set_job_phase(CLUSTER, NAMESPACE, "ppo-run", "Succeeded")
    out, err = follower.communicate(timeout=60)  # ends by itself when the pod ends
    assert follower.returncode == 0, err
    text = (seen + out.decode()).splitlines()
    assert text.count("actor says one") == 1 and text.count("actor says two") == 1
    assert "pod ppo-run-actor-0 ended (Succeeded)" in err.decode()

    events = site.run("events", "ppo-run", "-o", "json")
    assert events.code == 0
    assert "summary" in events.json() and events.json()["events"]
    assert "normal events" in site.run("events", "ppo-run").out
    pump_to(site, "ppo-run", "succeeded")
    record = site.run("record", "ppo-run", "-o", "json")
    assert record.code == 0 and record.json()["job"]["name"] == "ppo-run"
    assert yaml.safe_load(site.run("record", "ppo-run", "-o", "yaml").out)["job"]["state"] == \
        "succeeded"
    shown = site.run("record", "ppo-run").out
    assert "state:" in shown and "succeeded" in shown and "manifest sha256:" in shown
    # submitting again does not submit twice: it follows the run, which succeeded
    again = site.run("submit", "ppo-run", "--wait")
    assert again.code == 0 and "already submitted (succeeded)" in again.err
    # an exported run record applied under another name is a draft of the same job
    exported = site.run("export", "ppo-run")
    assert exported.code == 0 and "name: ppo-run" in exported.out


def test_submit_timeout_cancel_failed_blocked_interrupted_and_diff(site: Site,
                                                                   tmp_path: Path) -> None:
    from tests.jobs.records_support import POOL_SELECTOR

    site.submittable("ppo-wait", worker_selector=POOL_SELECTOR)  # stays Pending
    timed = site.pump_until(site.start("submit", "ppo-wait", "--wait", "--timeout", "3",
                                       "--interval", "0.3"))
    assert timed.code == 4, timed.err
    assert "timed out after 3 s" in timed.err and "still submitted" in timed.err
    assert state_of("ppo-wait") in ("pending", "queued", "submitting")

    follower = site.start("submit", "ppo-wait", "--wait", "--interval", "0.3", "-o", "json")
    read_until(follower, "stderr", "] ppo-wait: ")  # following the submitted job
    cancelled = site.run("cancel", "ppo-wait", "-o", "json")
    assert cancelled.code == 0 and cancelled.json()["state"] == "cancelled"
    followed = site.pump_until(follower)
    assert followed.code == 3, followed.err
    assert json.loads(followed.out)["state"] == "cancelled"
    again = site.run("cancel", "ppo-wait")
    assert again.code == 2 and one_error_line(again)

    site.submittable("ppo-fail")
    failing = site.start("submit", "ppo-fail", "--wait", "--interval", "0.3")
    pump_to(site, "ppo-fail", "running")
    site.sim.set_job_phase(CLUSTER, NAMESPACE, "ppo-fail", "Failed", reason="BackoffLimit")
    failed = site.pump_until(failing)
    assert failed.code == 1, failed.err
    assert "ppo-fail: failed" in failed.err
    warning = [line for line in site.run("events", "ppo-fail").out.splitlines()
               if "Job/ppo-fail" in line]
    assert warning and "Failed" in warning[0]  # the Warning first, with its object

    path = write(tmp_path, MINIMAL.format(name="cli-blocked"))
    assert site.run("apply", "-f", str(path)).code == 0
    blocked = site.run("submit", "cli-blocked")
    assert blocked.code == 5
    assert "not submitted" in one_error_line(blocked)
    assert "  error " in blocked.err  # the findings, under the one line
    assert state_of("cli-blocked") == "draft"

    site.submittable("ppo-stop")
    waiting = site.start("submit", "ppo-stop", "--wait", "--interval", "0.3")
    pump_to(site, "ppo-stop", "running")
    read_until(waiting, "stderr", "] ppo-stop: running")  # waiting on, past running
    waiting.send_signal(signal.SIGINT)
    _out, err = waiting.communicate(timeout=30)
    assert waiting.returncode == 4, err
    assert "stays submitted" in err.decode()
    assert state_of("ppo-stop") == "running"  # Ctrl-C stopped the waiting, not the job
    site.sim.set_job_phase(CLUSTER, NAMESPACE, "ppo-stop", "Succeeded")
    pump_to(site, "ppo-stop", "succeeded")

    diff = site.run("diff", "ppo-fail", "ppo-stop", "-o", "json")
    assert diff.code == 0, diff.err
    assert diff.json()["from"] == "ppo-fail" and diff.json()["to"] == "ppo-stop"
    assert "from ppo-fail to ppo-stop" in site.run("diff", "ppo-fail", "ppo-stop").out
    assert site.run("diff", "ppo-fail", "their-job").code == 6


def test_clone_sweep_match_verify(site: Site, tmp_path: Path) -> None:
    from jobs.models import Job

    site.submittable("cli-base")
    clone = site.run("clone", "cli-base", "cli-base-lr", "--set", "roles.Actor.env.LR=3e-4",
                     "--set", "roles.Rollout.gpus=0", "-o", "json")
    assert clone.code == 0, clone.err
    assert clone.json()["overrides"] == [{"path": "spec.roles[0].env.LR", "value": "3e-4"},
                                         {"path": "spec.roles[1].gpus", "value": 0}]
    assert Job.objects.filter(name="cli-base-lr").exists()
    dry = site.run("clone", "cli-base", "cli-base-dry", "--set", "roles.Actor.gpus=4",
                   "--dry-run")
    assert dry.code == 0 and "would be created" in dry.out
    assert not Job.objects.filter(name="cli-base-dry").exists()
    wrong = site.run("clone", "cli-base", "cli-base-x", "--set", "roles.Actor.gpu=4")
    assert wrong.code == 2 and "gpus" in wrong.err
    assert not Job.objects.filter(name="cli-base-x").exists()

    good = write(tmp_path, site.run("export", "cli-base").out.replace(
        "name: cli-base", "name: cli-sweep"), "good.yaml")
    swept = site.run("sweep", "-f", str(good), "--grid", "roles.Actor.env.LR=1e-4,3e-4",
                     "-o", "json")
    assert swept.code == 0, swept.err
    drafts = swept.json()["drafts"]
    assert [(d["name"], d["values"]) for d in drafts] == [
        ("cli-sweep-1", {"spec.roles[0].env.LR": "1e-4"}),
        ("cli-sweep-2", {"spec.roles[0].env.LR": "3e-4"})]
    table = site.run("sweep", "-f", str(good), "--grid", "roles.Actor.env.LR=1e-4,3e-4")
    assert [line.split()[:2] for line in lines(table.out)[1:]] == [
        ["cli-sweep-1", "unchanged"], ["cli-sweep-2", "unchanged"]]

    minimal = write(tmp_path, MINIMAL.format(name="cli-min"))
    with_errors = site.run("sweep", "-f", str(minimal), "--grid", "run_script=echo a,echo b")
    assert with_errors.code == 1
    refused = site.run("sweep", "-f", str(minimal), "--grid", "run_script=echo c,echo d",
                       "--submit", "-o", "json")
    assert refused.code == 1 and "error: " in refused.err
    assert len(refused.json()["drafts"]) == 2
    assert list(Job.objects.filter(name__startswith="cli-min-").values_list(
        "run_script", flat=True).order_by("name")) == ["echo a", "echo b"]  # nothing stored
    bad_grid = site.run("sweep", "-f", str(minimal), "--grid", "roles.Nobody.gpus=1,2")
    assert bad_grid.code == 2 and "override" in one_error_line(bad_grid)

    matched = site.run("match", "--cluster", "gpu-a", "rlinf.io/pool=cpu-a",
                       "topology.rlinf.io/cluster=gpu-a", "-o", "json")
    assert matched.code == 0, matched.err
    assert matched.json()["count"] == 4 and matched.json()["confined"] is True
    assert "4 nodes match on gpu-a" in site.run("match", "--cluster", "gpu-a",
                                                "rlinf.io/pool=cpu-a").out
    assert site.run("match", "--cluster", "gpu-a", "no-equals").code == 2
    # --gpus asks the server's pre-flight (SPEC 15 `needs`): CPU nodes can never hold a GPU
    needing = site.run("match", "--cluster", "gpu-a", "rlinf.io/pool=cpu-a",
                       "topology.rlinf.io/cluster=gpu-a", "--gpus", "1", "-o", "json")
    assert needing.code == 0, needing.err
    assert needing.json()["fits_now"] == 0 and needing.json()["fits_ever"] == 0
    assert "fits_ever: 0" in site.run("match", "--cluster", "gpu-a", "rlinf.io/pool=cpu-a",
                                      "--gpus", "1").out

    role_file = write(tmp_path, MINIMAL.format(name="cli-verify").replace(
        "  task_type: custom\n",
        "  task_type: custom\n  header_role: Actor\n  roles:\n  - name: Actor\n"
        "    cluster: gpu-a\n    selector: {kubernetes.io/hostname: a-node-02, "
        "topology.rlinf.io/cluster: gpu-a}\n    gpus: 8\n"), "verify.yaml")
    assert site.run("apply", "-f", str(role_file)).code == 0
    verified = site.run("verify", "cli-verify", "-o", "json")
    assert verified.code == 0, verified.err
    assert [r["outcome"] for r in verified.json()["roles"]] == ["requested"]
    again = site.run("verify", "cli-verify")
    assert again.code == 0 and "reused" in again.out
