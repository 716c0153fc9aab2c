"""Cold start of the `rlark` CLI, against a bare interpreter and kubectl, in the same run.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/cli.py [--runs 15] [--jobs 1000]
    make bench BENCH=cli

Creates a scratch database (migrated like the real one) with one team, a member with an API
token and `--jobs` job drafts (bulk-inserted as bench/web_load.py does), starts gunicorn on
loopback (bench/web_load.py's `web_server`), then runs, alternating, `--runs` times each:

  python -c pass                 the bare interpreter of the venv rlark runs in
  rlark --help                   the installed console script (.venv/bin/rlark)
  rlark list -o json             every job of the team (two pages of 500), printed as JSON
  kubectl version --client       when a kubectl is on PATH (else the output says it is absent)

and prints per command the wall time (median, min, p95, ms), the number of modules Python
imported (`-X importtime`, one line per module; kubectl is not Python) and the ratio of the
median to the bare interpreter's. Target: `rlark --help` within 4x `python -c pass`. The server
is stopped and the scratch database dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import percentile, scratch_database, setup_django
from web_load import bulk_jobs, web_server

RLARK = Path(sys.executable).parent / "rlark"


def timed(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {done.stderr.decode()[-2000:]}")
    return seconds


def modules_imported(command: list[str], env: dict[str, str]) -> int:
    """Modules a Python command imports (its `-X importtime` lines)."""
    python = [sys.executable, "-X", "importtime"]
    argv = python + (command[1:] if command[0] == sys.executable else command)
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True)
    return sum(1 for line in done.stderr.splitlines() if line.startswith("import time:")
               and "| imported package" not in line)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--jobs", type=int, default=1000)
    args = parser.parse_args()
    setup_django()
    from jobs.models import Job
    from rlark_site.foundation.tenancy.models import ApiToken, MemberRole, Membership, Team

    with scratch_database("rlark_bench_cli") as database:
        from django.contrib.auth import get_user_model

        team = Team.objects.create(slug="bench", name="Bench")
        user = get_user_model().objects.create_user(username="bench", password="unused-pw-1")
        Membership.objects.create(team=team, user=user, role=MemberRole.MEMBER)
        _token, secret = ApiToken.objects.create(user=user, expiry=timedelta(days=1),
                                                 name="bench")
        template = Job.objects.create(team=team, name="template", created_by=user,
                                      run_script="python -m rlinf.train")
        bulk_jobs(template.pk, jobs=args.jobs - 1, teams=[team.pk])
        count = Job.objects.filter(team=team).count()
        with web_server(database, {}) as (base, _pid):
            env = {k: v for k, v in os.environ.items() if not k.startswith("RLARK_")}
            env.update({"RLARK_URL": base, "RLARK_TOKEN": secret,
                        "XDG_CONFIG_HOME": "/nonexistent-rlark-bench"})
            kubectl = shutil.which("kubectl")
            commands: list[tuple[str, list[str]]] = [
                ("python -c pass", [sys.executable, "-c", "pass"]),
                ("rlark --help", [str(RLARK), "--help"]),
                (f"rlark list -o json ({count} jobs)", [str(RLARK), "list", "-o", "json"]),
            ]
            if kubectl:
                commands.append((f"kubectl version --client ({kubectl})",
                                 [kubectl, "version", "--client"]))
            listed = subprocess.run(commands[2][1], env=env, capture_output=True, text=True)
            import json

            assert len(json.loads(listed.stdout)) == count, listed.stderr
            for _label, command in commands:  # warm the page cache once; not measured
                timed(command, env)
            times: dict[str, list[float]] = {label: [] for label, _ in commands}
            for _run in range(args.runs):
                for label, command in commands:
                    times[label].append(timed(command, env))
            bare = statistics.median(times["python -c pass"])
            print(f"cold start, {args.runs} runs each, alternating (ms); CPUs "
                  f"{os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
            print(f"{'command':52} {'median':>8} {'min':>8} {'p95':>8} {'x bare':>7} "
                  f"{'modules':>8}")
            for label, command in commands:
                values = times[label]
                python = command[0] in (sys.executable, str(RLARK))
                modules = str(modules_imported(command, env)) if python else "n/a"
                median = statistics.median(values)
                print(f"{label:52} {median * 1000:8.1f} {min(values) * 1000:8.1f} "
                      f"{percentile(values, 0.95) * 1000:8.1f} {median / bare:7.2f} "
                      f"{modules:>8}")
            if not kubectl:
                print("kubectl version --client: kubectl is absent on this machine (not on "
                      "PATH); no figure")
            ratio = statistics.median(times["rlark --help"]) / bare
            print(f"rlark --help = {ratio:.2f}x bare python -c pass (target <= 4x): "
                  + ("met" if ratio <= 4 else "NOT met"))


if __name__ == "__main__":
    main()
