"""Audit lookups over 1,000,000 audit events: a run's audit trail and the audit-events filters.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/audit_lookup.py [--events 1000000]
        [--rounds 30]

Creates a scratch database (migrated like the real one), makes one real job through the
services (its own audit events are the templates), then bulk-inserts `--events` audit
events with INSERT ... SELECT generate_series (60 % Job events over 10,000 jobs, 40 % Role
events over 20,000 roles; 100,000 request contexts of 50 users and 100 teams; the real job
gets 60 events of its own among them). Then times, `--rounds` times each:

- the run record's audit section (`audit_events` over the job's refs, as `run_record_chain`);
- `GET /api/v1/audit-events/?job=`, `?actor=`, `?model=` as a platform admin, and the
  unfiltered list as a team member (through Django and DRF in process, pagination included).

Prints p50/p95/p99 per lookup (fewer rounds when a lookup exceeds `--budget` seconds).
Target p95 < 50 ms. The scratch database is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import scratch_database, setup_django, summary_ms

USERS = 50
TEAMS = 100
CONTEXTS = 100_000
FAKE_JOBS = 10_000
FAKE_ROLES = 20_000
OWN_EVENTS = 60
# Lookups that match a large share of all events: `Events` expands (JSON, diff) every
# matching event before sorting, so they are run only on smaller sets (`--broad-max`).
BROAD = "audit-events (broad) "
FAKE_ID_BASE = 1_000_000

_CONTEXTS_SQL = """
INSERT INTO pghistory_context (id, created_at, updated_at, metadata)
SELECT md5('ctx' || i)::uuid, now(), now(),
       jsonb_build_object('user', %(first_user)s + i %% %(users)s,
                          'team', 'team-' || (i %% %(teams)s), 'url', '/api/v1/jobs/',
                          'request_id', md5('req' || i))
FROM generate_series(0, %(contexts)s - 1) AS i
"""


def _columns(table: str) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = %s "
            "AND column_name <> 'pgh_id' ORDER BY ordinal_position", [table],
        )
        return [row[0] for row in cursor.fetchall()]


def copy_events(table: str, template_id: int, *, count: int, obj_id: str, start: int = 0,
                **columns: str) -> None:
    """`count` copies of one event row, each with its own object, time and context."""
    from django.db import connection

    overrides = {
        **columns,
        "pgh_obj_id": obj_id,
        "pgh_created_at": "now() - make_interval(secs => i)",
        "pgh_context_id": f"md5('ctx' || (i %% {CONTEXTS}))::uuid",
    }
    columns = _columns(table)
    select = ", ".join(overrides.get(c, f't."{c}"') for c in columns)
    quoted = ", ".join(f'"{c}"' for c in columns)
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{table}" ({quoted}) SELECT {select} FROM "{table}" t, '
            f"generate_series({start}, {start + count - 1}) AS i WHERE t.pgh_id = %s",
            [template_id],
        )


def build(events: int) -> dict[str, Any]:
    """The real job, its owner and an admin; then the bulk of the events."""
    from django.apps import apps
    from django.contrib.auth import get_user_model
    from django.db import connection

    from jobs.drafts.services import job_create
    from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

    job_events = apps.get_model("jobs", "JobEvent")
    role_events = apps.get_model("jobs", "RoleEvent")

    users = get_user_model()
    people = [users.objects.create_user(f"user-{i:02d}", password=None) for i in range(USERS)]
    admin = users.objects.create_user("bench-admin", password=None, is_staff=True)
    team = Team.objects.create(slug="team-0", name="Team 0")
    Membership.objects.create(team=team, user=people[0], role=MemberRole.MAINTAINER)
    job = job_create(team=team, user=people[0], data={
        "name": "audited-run", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": "", "selector": {}, "gpus": 0}],
        "run_script": "python -m rlinf.train",
    })
    job_template = job_events.objects.filter(pgh_obj_id=job.pk).values_list("pgh_id", flat=True)[0]
    role_template = role_events.objects.values_list("pgh_id", flat=True)[0]
    with connection.cursor() as cursor:
        cursor.execute(_CONTEXTS_SQL, {"first_user": people[0].pk, "users": USERS,
                                       "teams": TEAMS, "contexts": CONTEXTS})
    fake_job_events = events * 6 // 10 - OWN_EVENTS
    started = time.perf_counter()
    copy_events("jobs_jobevent", job_template, count=OWN_EVENTS, obj_id=str(job.pk))
    copy_events("jobs_jobevent", job_template, count=fake_job_events,
                obj_id=f"{FAKE_ID_BASE} + i %% {FAKE_JOBS}", start=OWN_EVENTS)
    copy_events("jobs_roleevent", role_template, count=events - fake_job_events - OWN_EVENTS,
                obj_id=f"{FAKE_ID_BASE} + i %% {FAKE_ROLES}",
                job_id=f"{FAKE_ID_BASE} + (i %% {FAKE_ROLES}) / 2")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"inserted {events:,} audit events in {time.perf_counter() - started:.1f} s", flush=True)
    return {"job": job, "owner": people[0], "actor": people[1], "admin": admin}


def lookups(data: dict[str, Any]) -> dict[str, Callable[[], Any]]:
    from rest_framework.test import APIClient

    from jobs.records.selectors import AUDIT_EVENTS_IN_CHAIN, job_audit_refs
    from rlark_site.foundation.audit.selectors import audit_events

    admin, member = APIClient(), APIClient()
    admin.force_authenticate(data["admin"])
    member.force_authenticate(data["owner"])
    job = data["job"]

    def api(client: APIClient, **params: str) -> Callable[[], Any]:
        def call() -> Any:
            response = client.get("/api/v1/audit-events/", params)
            assert response.status_code == 200, response.content[:300]
            return response

        return call

    def audit_section() -> Any:
        refs = job_audit_refs(job)
        return list(audit_events(objects=refs).order_by("pgh_created_at", "pgh_slug")
                    [:AUDIT_EVENTS_IN_CHAIN])

    return {
        "run record audit section": audit_section,
        "audit-events ?job= (one trail)": api(admin, job=job.name),
        BROAD + "?actor=": api(admin, actor=data["actor"].username),
        BROAD + "?model=job": api(admin, model="job"),
        BROAD + "?model=jobs.Role": api(admin, model="jobs.Role"),
        BROAD + "(member, own teams)": api(member),
    }


def object_lookup_uses_indexes(data: dict[str, Any]) -> bool:
    """Whether the plan of a run's audit trail reads the event tables by the object index
    (without it, every event of every table is expanded before the filter)."""
    from django.db import connection

    from jobs.records.selectors import job_audit_refs
    from rlark_site.foundation.audit.selectors import audit_events

    query = audit_events(objects=job_audit_refs(data["job"])).query
    sql, params = query.get_compiler(using="default").as_sql()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    return "_obj_text" in plan and "Seq Scan on jobs_jobevent" not in plan


def run(args: argparse.Namespace) -> None:
    data = build(args.events)
    if not object_lookup_uses_indexes(data):
        raise SystemExit("the object lookup would scan every event: migrate the audit indexes")
    for name, lookup in lookups(data).items():
        if name.startswith(BROAD) and args.events > args.broad_max:
            print(f"{name:42s} skipped above --broad-max {args.broad_max:,} events")
            continue
        times: list[float] = []
        started = time.perf_counter()
        lookup()  # warm
        first = time.perf_counter() - started
        budget = time.perf_counter() + args.budget
        while len(times) < args.rounds and time.perf_counter() < budget:
            started = time.perf_counter()
            lookup()
            times.append(time.perf_counter() - started)
        print(f"{name:42s} {summary_ms(times or [first])}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--broad-max", type=int, default=20_000,
                        help="run the broad filters only up to this many events")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per lookup at most (fewer rounds when slow)")
    args = parser.parse_args()
    setup_django()
    with scratch_database(f"rlark_bench_audit_{os.getpid()}"):
        run(args)


if __name__ == "__main__":
    main()
