"""Web load: 50 concurrent clients against RLark on a big fleet, single worker versus default.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/web_load.py [--clients 50]
        [--seconds 20] [--clusters 50] [--nodes 1000] [--jobs 10000] [--teams 100]

Creates a scratch database (migrated like the real one) and bulk-inserts a fleet of
`--clusters` x `--nodes` nodes and `--jobs` job drafts across `--teams` teams (INSERT ...
SELECT generate_series), plus the demo fleet's rows, one submitted job with its run record
and ten pending verification requests for a broad selector (every node of the fleet). Then,
for each web configuration in turn, starts gunicorn on loopback (rlark_site/gunicorn_conf.py
with RLARK_WEB_WORKERS / RLARK_WEB_THREADS) and drives `--clients` client threads for
`--seconds` seconds over these routes, round robin:

  job list (API), wizard step 2, live selector match (narrow and broad), admin queue (with
  the pending requests), manifest, run record, audit lookup (one job's trail).

Prints requests/s, p50/p95/p99, errors and the largest answer (kB) per route and in total
for each configuration: today's single worker (1 worker, 8 threads) and the new default
(the CPU-sized one); `--also "label:VAR=value,VAR=value"` (repeatable) adds configurations
of your own (e.g. `--also "2x8:RLARK_WEB_WORKERS=2,RLARK_WEB_THREADS=8"`).
Targets: p95 < 300 ms per route, 0 errors, total throughput >= 2x the single worker.

For each configuration it also prints what a request cost in CPU, read from /proc while the
clients ran: the web processes (gunicorn's session), the PostgreSQL backends serving the
bench's database, and the clients themselves (this process), in CPU ms per request, with the
load average before and after. With these, the capacity a machine needs is arithmetic: 50
closed-loop clients wait under 300 ms only when the server answers about 50 / 0.3 = 167
requests a second, i.e. about 167 x (web + database ms) / 1000 cores besides the clients'.
The server is stopped and the scratch database dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import REPO, percentile, scratch_database, setup_django

NARROW = {"topology.rlinf.io/cluster": "big-00", "rlinf.io/rack": "rack-3"}
BROAD = {"rlinf.io/pool": "big"}
PENDING_REQUESTS = 10
CONFIGURATIONS: tuple[tuple[str, dict[str, str]], ...] = (
    ("single worker (1 worker x 8 threads)", {"RLARK_WEB_WORKERS": "1", "RLARK_WEB_THREADS": "8"}),
    ("new default (CPU-sized)", {}),
)

_JOBS_SQL = """
INSERT INTO jobs_job ({columns})
SELECT {values}
FROM jobs_job t, generate_series(0, %(jobs)s - 1) AS i
WHERE t.id = %(template)s
"""


@dataclass(frozen=True)
class Route:
    name: str
    method: str
    path: str
    auth: str  # "token" (API) or "session" (pages)
    body: dict[str, Any] | None = None
    admin: bool = False


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    largest: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, route: str, seconds: float, ok: bool, size: int) -> None:
        with self.lock:
            self.latencies[route].append(seconds)
            self.largest[route] = max(self.largest[route], size)
            if not ok:
                self.errors[route] += 1


def bulk_jobs(template_id: int, *, jobs: int, teams: list[int]) -> None:
    """`jobs` copies of a template draft spread over `teams` (job names `load-00000`, ...)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'jobs_job' "
            "AND column_name <> 'id' ORDER BY ordinal_position"
        )
        columns = [row[0] for row in cursor.fetchall()]
        overrides = {
            "name": "format('load-%%s', lpad(i::text, 5, '0'))",
            "team_id": f"(ARRAY{teams})[1 + i %% {len(teams)}]",
            "created_at": "now() - make_interval(secs => i)",
            "updated_at": "now() - make_interval(secs => i)",
        }
        sql = _JOBS_SQL.format(
            columns=", ".join(f'"{c}"' for c in columns),
            values=", ".join(overrides.get(c, f't."{c}"') for c in columns),
        )
        cursor.execute(sql, {"jobs": jobs, "template": template_id})


def build(args: argparse.Namespace) -> dict[str, Any]:
    """The data set; returns the routes' parameters and the credentials to use."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from django.test import Client

    from jobs.drafts.services import job_create
    from jobs.records.submission import job_submit
    from rlark_site.foundation.tenancy.accounts import token_create
    from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team
    from tests.factories import bulk_fleet, load_fleet_rows, stored_request
    from tests.jobs.records_support import submittable_job

    started = time.perf_counter()
    bulk_fleet(args.clusters, args.nodes)
    load_fleet_rows()
    users = get_user_model()
    admin = users.objects.create_user("load-admin", password=None, is_staff=True)
    numbers = range(args.teams)
    teams = [Team.objects.create(slug=f"team-{i:03d}", name=f"Team {i}") for i in numbers]
    members = [users.objects.create_user(f"member-{i:03d}", password=None) for i in numbers]
    Membership.objects.bulk_create(
        Membership(team=t, user=m, role=MemberRole.MAINTAINER)
        for t, m in zip(teams, members, strict=True)
    )
    team, member = teams[0], members[0]
    job = submittable_job(team=team, owner=member, admin=admin, name="load-run")
    job_submit(job=job, user=member)
    draft = job_create(team=team, user=member, data={
        "name": "load-draft", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": "big-00", "selector": NARROW, "gpus": 8}],
        "run_script": "python -m rlinf.train",
    })
    bulk_jobs(draft.pk, jobs=args.jobs, teams=[t.pk for t in teams])
    # The request service refuses a selector that spans clusters (selector.cross_cluster), so
    # the worst case the issue measured (a pending request matching every node of the fleet,
    # reached when the inventory drifts after a request) is written with the snapshot the
    # service stores.
    for requester_team, requester in list(zip(teams, members, strict=True))[:PENDING_REQUESTS]:
        stored_request(team=requester_team, user=requester, cluster="big-00", selector=BROAD)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"data set built in {time.perf_counter() - started:.1f} s: {args.clusters} clusters x "
          f"{args.nodes} nodes, {args.jobs:,} jobs over {args.teams} teams, "
          f"{PENDING_REQUESTS} pending broad requests", flush=True)

    def session_cookie(user: Any) -> str:
        client = Client()
        client.force_login(user)
        return str(client.cookies["sessionid"].value)

    return {
        "member_token": token_create(user=member, name="web load")[1],
        "admin_token": token_create(user=admin, name="web load")[1],
        "member_session": session_cookie(member),
        "admin_session": session_cookie(admin),
        "run": job.name, "draft": draft.name,
    }


def routes(data: dict[str, Any]) -> list[Route]:
    run, draft = data["run"], data["draft"]
    return [
        Route("job list", "GET", "/api/v1/jobs/", "token"),
        Route("wizard step 2", "GET", f"/jobs/wizard/{draft}/step-2/", "session"),
        Route("match narrow", "POST", "/api/v1/selector-matches/", "token",
              {"cluster": "big-00", "selector": NARROW}),
        Route("match broad", "POST", "/api/v1/selector-matches/", "token",
              {"cluster": "big-00", "selector": BROAD}),
        Route("admin queue", "GET", "/clusters/verifications/queue/", "session", admin=True),
        Route("manifest", "GET", f"/api/v1/jobs/{run}/manifest/", "token"),
        Route("run record", "GET", f"/api/v1/run-records/{run}/", "token"),
        Route("audit lookup", "GET", f"/api/v1/audit-events/?job={run}", "token"),
    ]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def web_server(database: str, extra_env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """gunicorn with RLark's settings module on a loopback port, for the `with` block."""
    import requests
    from django.db import connection

    settings_dict = connection.settings_dict
    port = _free_port()
    url = (f"postgresql://{settings_dict['USER']}@{settings_dict['HOST'] or '127.0.0.1'}:"
           f"{settings_dict['PORT'] or 5432}/{database}")
    if settings_dict["PASSWORD"]:
        url = url.replace("@", f":{settings_dict['PASSWORD']}@", 1)
    # One member account stands for every client: its API rate limit (1,200/minute) would
    # answer 429 to most of them, so the bench lifts it (a one-second window keeps the
    # throttle's own bookkeeping as small as in production).
    env = {**os.environ, "DATABASE_URL": url, "RLARK_WEB_ACCESS_LOG": "",
           "RLARK_THROTTLE_USER": "10000/s", "DEBUG": "0", **extra_env}
    # The server's log (a line per request) goes to a file: a pipe nobody reads would fill
    # after a few hundred requests and block every worker writing to it.
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:rlark_site.gunicorn_conf",
         "--bind", f"127.0.0.1:{port}"],
        cwd=REPO, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=log,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if requests.get(f"{base}/health/live", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or process.poll() is not None:
                log.seek(0)
                sys.stderr.write(log.read()[-4000:].decode(errors="replace"))
                raise SystemExit("gunicorn did not start")
            time.sleep(0.3)
        yield base, process.pid
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int) -> tuple[int, float] | None:
    """(session id, CPU seconds) of a process from /proc, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command: state ppid pgrp session ... utime(12) stime(13) (0-based here)
    return int(fields[3]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def session_cpu(session: int) -> float:
    """CPU seconds used so far by the live processes of a session (gunicorn's master and
    workers; a worker recycled meanwhile takes its figure with it, so this errs low)."""
    total = 0.0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (found := _proc_cpu(int(entry.name))) is not None:
            total += found[1] if found[0] == session else 0.0
    return total


def database_cpu(database: str) -> float:
    """CPU seconds used so far by the PostgreSQL backends connected to `database` (readable in
    /proc when the server runs on this machine; 0 when it does not)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", [database])
        pids = [row[0] for row in cursor.fetchall()]
    return sum(found[1] for pid in pids if (found := _proc_cpu(pid)) is not None)


@dataclass
class CpuUse:
    web: float
    database: float
    clients: float
    load: tuple[float, float]

    @classmethod
    def sample(cls, session: int, database: str) -> CpuUse:
        return cls(session_cpu(session), database_cpu(database), time.process_time(),
                   (os.getloadavg()[0], 0.0))

    def since(self, start: CpuUse) -> CpuUse:
        return CpuUse(self.web - start.web, self.database - start.database,
                      self.clients - start.clients, (start.load[0], self.load[0]))


def client_loop(base: str, index: int, plan: list[Route], data: dict[str, Any],
                stop: float, tally: Tally) -> None:
    import requests

    session = requests.Session()
    turn = index
    while time.monotonic() < stop:
        route = plan[turn % len(plan)]
        turn += 1
        headers: dict[str, str] = {}
        cookies: dict[str, str] = {}
        who = "admin" if route.admin else "member"
        if route.auth == "token":
            headers["Authorization"] = f"Token {data[f'{who}_token']}"
        else:
            cookies["sessionid"] = data[f"{who}_session"]
        started = time.perf_counter()
        try:
            response = session.request(route.method, base + route.path, json=route.body,
                                       headers=headers, cookies=cookies, timeout=60,
                                       allow_redirects=False)
            ok, size = response.status_code == 200, len(response.content)
        except requests.RequestException:
            ok, size = False, 0
        tally.add(route.name, time.perf_counter() - started, ok, size)


def drive(base: str, plan: list[Route], data: dict[str, Any], *, clients: int,
          seconds: float) -> Tally:
    tally = Tally()
    stop = time.monotonic() + seconds
    threads = [threading.Thread(target=client_loop, args=(base, i, plan, data, stop, tally))
               for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=seconds + 120)
    return tally


def cpu_per_request(cpu: CpuUse, tally: Tally) -> tuple[float, float, float]:
    """(web, database, clients) CPU seconds per request of a configuration's run."""
    count = sum(len(values) for values in tally.latencies.values())
    if not count:
        return (0.0, 0.0, 0.0)
    return (cpu.web / count, cpu.database / count, cpu.clients / count)


def report(title: str, tally: Tally, seconds: float, cpu: CpuUse, clients: int) -> float:
    print(f"\n{title}")
    print(f"  {'route':16s} {'req/s':>7s} {'p50 ms':>8s} {'p95 ms':>8s} {'p99 ms':>8s} "
          f"{'errors':>6s} {'requests':>8s} {'max kB':>7s}")
    everything: list[float] = []
    errors = 0
    for name, values in tally.latencies.items():
        everything += values
        errors += tally.errors[name]
        print(f"  {name:16s} {len(values) / seconds:7.1f} {percentile(values, .5) * 1e3:8.0f} "
              f"{percentile(values, .95) * 1e3:8.0f} {percentile(values, .99) * 1e3:8.0f} "
              f"{tally.errors[name]:6d} {len(values):8d} {tally.largest[name] / 1000:7.1f}")
    total = len(everything) / seconds
    print(f"  {'all routes':16s} {total:7.1f} {percentile(everything, .5) * 1e3:8.0f} "
          f"{percentile(everything, .95) * 1e3:8.0f} {percentile(everything, .99) * 1e3:8.0f} "
          f"{errors:6d} {len(everything):8d}", flush=True)
    if everything:
        per = 1e3 / len(everything)
        server = (cpu.web + cpu.database) * per
        print(f"  CPU per request: web {cpu.web * per:.1f} ms, "
              f"database {cpu.database * per:.1f} ms, clients {cpu.clients * per:.1f} ms; "
              f"load average {cpu.load[0]:.1f} -> "
              f"{cpu.load[1]:.1f}; p95 < 300 ms for {clients} clients needs about "
              f"{server * clients / 0.3 / 1e3:.1f} cores for the server at this cost", flush=True)
    return total


def run(args: argparse.Namespace, database: str) -> None:
    from rlark_site import gunicorn_conf

    data = build(args)
    plan = routes(data)
    cpus = gunicorn_conf.available_cpus()
    print(f"{cpus} CPUs; default: {gunicorn_conf.default_workers(cpus)} workers x "
          f"{gunicorn_conf.threads} threads; {args.clients} clients for {args.seconds:.0f} s each")
    throughput: list[float] = []
    costs: list[tuple[float, float, float]] = []
    for title, extra_env in [*CONFIGURATIONS, *args.also]:
        with web_server(database, extra_env) as (base, session):
            drive(base, plan, data, clients=min(args.clients, 8), seconds=3)  # warm up
            start = CpuUse.sample(session, database)
            tally = drive(base, plan, data, clients=args.clients, seconds=args.seconds)
            cpu = CpuUse.sample(session, database).since(start)
        throughput.append(report(title, tally, args.seconds, cpu, args.clients))
        costs.append(cpu_per_request(cpu, tally))
    print(f"\nthroughput, new default / single worker: {throughput[1] / throughput[0]:.2f}x")
    # One worker runs Python on one core at a time (the GIL), so it is bounded by the web
    # CPU of a request; the default shares the machine's cores with the database and the
    # clients, so it is bounded by all three: the ratio this machine can show at most.
    web, everything = costs[0][0], sum(costs[1])
    if web and everything:
        bound = cpus * web / everything
        print(f"at these costs, {cpus} CPUs allow the default at most {bound:.2f}x"
              f" the single worker on an otherwise idle machine (CPUs x web / (web + database +"
              f" clients) CPU per request)")


def configuration(text: str) -> tuple[str, dict[str, str]]:
    """`label:VAR=value,VAR=value` as (label, environment)."""
    label, _, assignments = text.partition(":")
    pairs = [item.partition("=") for item in assignments.split(",") if item]
    if not label or any(not name or not sep for name, sep, _ in pairs):
        raise argparse.ArgumentTypeError(f"expected LABEL:VAR=VALUE,...; got {text!r}")
    return label, {name: value for name, _, value in pairs}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--also", type=configuration, action="append", default=[],
                        metavar="LABEL:VAR=VALUE,...", help="another configuration to drive")
    args = parser.parse_args()
    setup_django()
    import redis
    from django.conf import settings

    with scratch_database(f"rlark_bench_web_{os.getpid()}") as database:
        try:
            run(args, database)
        finally:
            redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("submission")


if __name__ == "__main__":
    main()
