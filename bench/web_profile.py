"""Web profile: each route of bench/web_load.py, one request at a time, on the same data set.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/web_profile.py [--repeat 20]
        [--clusters 50] [--nodes 1000] [--jobs 10000] [--teams 100]
        [--database NAME] [--pyinstrument ROUTE] [--cprofile ROUTE]

Builds web_load's data set (50 clusters x 1,000 nodes, 10,000 jobs over 100 teams, ten pending
broad verification requests, one submitted run) and sends every route through Django's whole
stack in this process (middleware, authentication, view, template, serializer), one request at
a time, so the figures are the route's own cost and not the machine's load. Per route: the
queries per request, their SQL time as Django measures it, the CPU time of the request (this
thread; the database's own work is not in it), the template render time, the wall time and
the answer's size, as medians over `--repeat` requests after two warm-up requests.

`--database NAME` keeps the data set in that database (built on the first run, reused after;
dropped by hand), for iterating; without it a scratch database is built and dropped.
`--pyinstrument ROUTE` prints a pyinstrument profile of that route (if pyinstrument is
installed) instead of the table; `--cprofile ROUTE` prints cProfile's 40 costliest functions of
that route by own time and by cumulative time (standard library only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import scratch_database, setup_django
from web_load import Route, build, routes


@contextmanager
def render_timer(spent: list[float]) -> Any:
    """Adds the time spent rendering Django templates (top-level renders) to `spent`."""
    from django.template.backends.django import Template

    original = Template.render

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            spent.append(time.perf_counter() - started)

    Template.render = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        Template.render = original  # type: ignore[method-assign]


def requester(route: Route, data: dict[str, Any]) -> Callable[[], Any]:
    """A function sending `route` once through Django's test client as the bench's user."""
    from django.test import Client

    who = "admin" if route.admin else "member"
    client = Client()
    headers: dict[str, str] = {}
    if route.auth == "token":
        headers["Authorization"] = f"Token {data[f'{who}_token']}"
    else:
        client.cookies["sessionid"] = data[f"{who}_session"]

    def send() -> Any:
        if route.method == "POST":
            return client.post(route.path, json.dumps(route.body),
                               content_type="application/json", headers=headers)
        return client.get(route.path, headers=headers)

    return send


def measure(route: Route, data: dict[str, Any], repeat: int) -> dict[str, float]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    send = requester(route, data)
    for _ in range(2):
        answer = send()
        if answer.status_code != 200:
            raise SystemExit(f"{route.name}: {answer.status_code} {answer.content[:300]!r}")
    rows: list[dict[str, float]] = []
    for _ in range(repeat):
        renders: list[float] = []
        with CaptureQueriesContext(connection) as queries, render_timer(renders):
            wall, cpu = time.perf_counter(), time.thread_time()
            answer = send()
            cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        rows.append({
            "queries": len(queries.captured_queries),
            "sql": sum(float(q["time"]) for q in queries.captured_queries),
            "cpu": cpu, "render": sum(renders), "wall": wall, "size": len(answer.content),
        })
    return {key: statistics.median(row[key] for row in rows) for key in rows[0]}


def table(plan: list[Route], data: dict[str, Any], repeat: int) -> None:
    print(f"\nmedians over {repeat} requests, one at a time")
    print(f"  {'route':16s} {'queries':>7s} {'SQL ms':>7s} {'CPU ms':>7s} {'render ms':>9s} "
          f"{'wall ms':>8s} {'kB':>7s}")
    for route in plan:
        figures = measure(route, data, repeat)
        print(f"  {route.name:16s} {figures['queries']:7.0f} {figures['sql'] * 1e3:7.1f} "
              f"{figures['cpu'] * 1e3:7.1f} {figures['render'] * 1e3:9.1f} "
              f"{figures['wall'] * 1e3:8.1f} {figures['size'] / 1000:7.1f}", flush=True)


def profile(route: Route, data: dict[str, Any], repeat: int) -> None:
    from pyinstrument import Profiler

    send = requester(route, data)
    send()
    profiler = Profiler(interval=0.0005)
    with profiler:
        for _ in range(repeat):
            send()
    print(profiler.output_text(unicode=True, color=False, show_all=False))


def cprofile(route: Route, data: dict[str, Any], repeat: int) -> None:
    import cProfile
    import pstats

    send = requester(route, data)
    send()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(repeat):
        send()
    profiler.disable()
    stats = pstats.Stats(profiler)
    stats.sort_stats("tottime").print_stats(40)
    stats.sort_stats("cumulative").print_stats(40)


def existing_data(args: argparse.Namespace) -> dict[str, Any] | None:
    """The credentials and names for a data set already built in this database, if any."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    from clusters.models import Cluster
    from jobs.models import Job
    from rlark_site.foundation.tenancy.accounts import token_create

    if not Cluster.objects.filter(name="big-00").exists():
        return None
    users = get_user_model()
    admin = users.objects.get(username="load-admin")
    member = users.objects.get(username="member-000")

    def session_cookie(user: Any) -> str:
        client = Client()
        client.force_login(user)
        return str(client.cookies["sessionid"].value)

    return {
        "member_token": token_create(user=member, name="web profile")[1],
        "admin_token": token_create(user=admin, name="web profile")[1],
        "member_session": session_cookie(member), "admin_session": session_cookie(admin),
        "run": Job.objects.get(name="load-run").name, "draft": "load-draft",
    }


def run(args: argparse.Namespace) -> None:
    data = existing_data(args) or build(args)
    plan = routes(data)
    wanted = args.pyinstrument or args.cprofile
    if wanted:
        chosen = [r for r in plan if r.name == wanted]
        if not chosen:
            raise SystemExit(f"no route {wanted!r}: {[r.name for r in plan]}")
        (profile if args.pyinstrument else cprofile)(chosen[0], data, args.repeat)
    else:
        table(plan, data, args.repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--clusters", type=int, default=50)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--teams", type=int, default=100)
    parser.add_argument("--database", help="keep the data set in this database (reused)")
    parser.add_argument("--pyinstrument", metavar="ROUTE", help="profile this route instead")
    parser.add_argument("--cprofile", metavar="ROUTE", help="cProfile this route instead")
    args = parser.parse_args()
    setup_django()
    import redis
    from django.conf import settings

    try:
        if args.database:
            from django.db import connection
            from psycopg import sql

            connection.close()
            with connection.cursor() as cursor:  # on the configured database
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [args.database])
                exists = cursor.fetchone() is not None
                if not exists:
                    cursor.execute(sql.SQL("CREATE DATABASE {}").format(
                        sql.Identifier(args.database)).as_string(cursor.connection))
            connection.close()
            connection.settings_dict["NAME"] = args.database
            from django.core.management import call_command

            call_command("migrate", verbosity=0)
            run(args)
        else:
            with scratch_database("rlark_bench_profile"):
                run(args)
    finally:
        redis.Redis.from_url(settings.CELERY_BROKER_URL).delete("submission")


if __name__ == "__main__":
    main()
