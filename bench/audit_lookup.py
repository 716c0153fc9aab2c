"""Audit lookups over 1,000,000 audit events: a run's audit trail and the audit-events filters.

    DATABASE_URL=... REDIS_URL=... .venv/bin/python bench/audit_lookup.py [--events 1000000]
        [--rounds 30]

Creates a scratch database (migrated like the real one), makes one real job through the
services (its own audit events are the templates), then bulk-inserts `--events` audit
events with INSERT ... SELECT generate_series (60 % Job events over 10,000 jobs, 40 % Role
events over 20,000 roles; jobs spread over 100 teams; 100,000 request contexts of 50 users
and 100 teams; the real job gets 60 events of its own among them). Then times, `--rounds`
times each, the old lookup (pghistory's `Events` with every filter on top, limit/offset
pagination with its count: the code before the paged lookup, kept here) and the new one
(audit.lookup, cursor pagination) side by side:

- the run record's audit section (its 1,000 oldest events, as `run_record_chain`);
- `GET /api/v1/audit-events/?job=`, `?actor=`, `?model=` as a platform admin, and the
  unfiltered list as a team member (through Django and DRF in process, pagination included;
  the old one through the same serializer and a limit/offset page).

Prints p50/p95/p99 per lookup (fewer rounds when a lookup exceeds `--budget` seconds; an old
lookup's statement is cancelled after `--statement-timeout` seconds and reported as such).
Target p95 < 50 ms. The scratch database is dropped at the end, also on errors and Ctrl-C
(no statement of this run is left running: every connection to it is closed first).

To look at plans (EXPLAIN) on the same data: `--keep NAME` builds into database NAME and
leaves it; `--reuse NAME` times against that database again without building (migrating it
first, so new indexes apply); drop it with `dropdb NAME` when done.
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

# mypy: the old lookup below is kept only to compare with.

USERS = 50
TEAMS = 100
CONTEXTS = 100_000
FAKE_JOBS = 10_000
FAKE_ROLES = 20_000
OWN_EVENTS = 60
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
    teams = [Team.objects.create(slug=f"team-{i}", name=f"Team {i}") for i in range(TEAMS)]
    team = teams[0]
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
                obj_id=f"{FAKE_ID_BASE} + i %% {FAKE_JOBS}", start=OWN_EVENTS,
                team_id=f"{team.pk} + (i %% {FAKE_JOBS}) %% {TEAMS}")
    copy_events("jobs_roleevent", role_template, count=events - fake_job_events - OWN_EVENTS,
                obj_id=f"{FAKE_ID_BASE} + i %% {FAKE_ROLES}",
                job_id=f"{FAKE_ID_BASE} + (i %% {FAKE_ROLES}) / 2")
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
    print(f"inserted {events:,} audit events in {time.perf_counter() - started:.1f} s", flush=True)
    return {"job": job, "owner": people[0], "actor": people[1], "admin": admin}


def old_audit_events(*, objects: Any = None, actor_id: int | None = None,
                     model: str | None = None, team_ids: Any = None,
                     team_slugs: Any = None) -> Any:
    """The lookup before audit.lookup: pghistory's `Events` with the filters on top."""
    from django.db.models import Q
    from pghistory.models import Events

    events = Events.objects.all()
    if objects is not None:
        refs = Q(pk__in=[])
        for label, pk in objects:
            refs |= Q(pgh_obj_model=label, pgh_obj_id=str(pk))
        events = events.filter(refs)
    if team_ids is not None or team_slugs is not None:
        scope = Q(pk__in=[])
        for one_id in team_ids or []:
            scope |= Q(pgh_data__team_id=one_id) | Q(pgh_data__team=one_id)
        for slug in team_slugs or []:
            scope |= Q(pgh_context__team=slug)
        events = events.filter(scope)
    if actor_id is not None:
        events = events.filter(pgh_context__user=actor_id)
    if model:
        events = events.filter(Q(pgh_obj_model=model) | Q(pgh_obj_model__iendswith=f".{model}"))
    return events.order_by("-pgh_created_at", "-pgh_slug")


def old_events_as_dicts(events: list[Any]) -> list[dict[str, Any]]:
    """The old rows: pghistory's events as dicts, the actors' usernames read after them."""
    from django.contrib.auth import get_user_model

    from rlark_site.foundation.audit.selectors import event_as_dict

    rows = [event_as_dict(event) for event in events]
    ids = [row["actor"] for row in rows if isinstance(row["actor"], int)]
    names = dict(get_user_model().objects.filter(pk__in=ids).values_list("pk", "username"))
    for row in rows:
        row["actor_username"] = names.get(row["actor"])
    return rows


def _actor_id(actor: str) -> int | None:
    """The old API's actor: a user id, or a username read first (-1: nobody)."""
    from django.contrib.auth import get_user_model

    if actor.isdecimal():
        return int(actor)
    user = get_user_model().objects.filter(username=actor).first()
    return user.pk if user is not None else -1


def lookups(data: dict[str, Any]) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(name, old, new) of every lookup timed."""
    from django.contrib.auth import get_user_model
    from rest_framework.pagination import LimitOffsetPagination
    from rest_framework.request import Request
    from rest_framework.test import APIClient, APIRequestFactory

    from jobs.models import RunRecord
    from jobs.records.selectors import AUDIT_EVENTS_IN_CHAIN, events_as_dicts, job_audit_refs
    from jobs.records.serializers import AuditEventSerializer
    from rlark_site.foundation.audit.selectors import audit_events
    from rlark_site.foundation.tenancy.access import teams_for_user

    admin, member = APIClient(), APIClient()
    admin.force_authenticate(data["admin"])
    member.force_authenticate(data["owner"])
    job = data["job"]
    factory = APIRequestFactory()

    def new_api(client: APIClient, **params: str) -> Callable[[], Any]:
        def call() -> Any:
            response = client.get("/api/v1/audit-events/", params)
            assert response.status_code == 200, response.content[:300]
            return response

        return call

    def old_api(user: Any, *, job_trail: bool = False, actor: str = "", model: str = "",
                member_scope: bool = False) -> Callable[[], Any]:
        def call() -> Any:
            scope: dict[str, Any] = {}
            if member_scope:
                teams = list(teams_for_user(user))
                scope = {"team_ids": [t.pk for t in teams], "team_slugs": [t.slug for t in teams]}
            objects = None
            if job_trail:
                objects = job_audit_refs(job, RunRecord.objects.filter(job=job).first())
            events = old_audit_events(objects=objects, actor_id=_actor_id(actor) if actor else None,
                                      model=model or None, **scope)
            request = Request(factory.get("/api/v1/audit-events/"))
            paginator = LimitOffsetPagination()
            paginator.default_limit = 50
            page = paginator.paginate_queryset(events, request)
            rows = old_events_as_dicts(list(page or []))
            return paginator.get_paginated_response(AuditEventSerializer(rows, many=True).data)

        return call

    def old_section() -> Any:
        refs = job_audit_refs(job)
        return old_events_as_dicts(list(old_audit_events(objects=refs)
                                    .order_by("pgh_created_at", "pgh_slug")
                                    [:AUDIT_EVENTS_IN_CHAIN]))

    def new_section() -> Any:
        refs = job_audit_refs(job)
        return events_as_dicts(audit_events(objects=refs).page(AUDIT_EVENTS_IN_CHAIN,
                                                               oldest_first=True))

    actor = data["actor"].username
    assert get_user_model().objects.filter(username=actor).exists()
    return [
        ("run record audit section", old_section, new_section),
        ("audit-events ?job=", old_api(data["admin"], job_trail=True),
         new_api(admin, job=job.name)),
        ("audit-events ?actor=", old_api(data["admin"], actor=actor), new_api(admin, actor=actor)),
        ("audit-events ?model=job", old_api(data["admin"], model="job"),
         new_api(admin, model="job")),
        ("audit-events ?model=jobs.Role", old_api(data["admin"], model="jobs.Role"),
         new_api(admin, model="jobs.Role")),
        ("audit-events (member, own teams)", old_api(data["owner"], member_scope=True),
         new_api(member)),
    ]


def same_first_page(data: dict[str, Any]) -> None:
    """The new lookup's first page is the old one's (same events, same order up to ties)."""
    from jobs.records.selectors import job_audit_refs
    from rlark_site.foundation.audit.selectors import audit_events

    refs = job_audit_refs(data["job"])
    old = [(e.pgh_created_at, e.pgh_slug, e.pgh_diff) for e in
           old_audit_events(objects=refs).order_by("pgh_created_at", "pgh_slug")[:100]]
    new = [(e.pgh_created_at, e.pgh_slug, e.pgh_diff) for e in
           audit_events(objects=refs).page(100, oldest_first=True)]
    if sorted(old, key=str) != sorted(new, key=str):
        raise SystemExit("the new lookup's page differs from the old one's")


def timed(lookup: Callable[[], Any], args: argparse.Namespace) -> str:
    from django.db import connection
    from django.db.utils import OperationalError

    times: list[float] = []
    with connection.cursor() as cursor:
        cursor.execute("SET statement_timeout = %s", [int(args.statement_timeout * 1000)])
    try:
        started = time.perf_counter()
        try:
            lookup()  # warm
        except OperationalError:
            return f"cancelled after --statement-timeout {args.statement_timeout:.0f} s"
        first = time.perf_counter() - started
        budget = time.perf_counter() + args.budget
        while len(times) < args.rounds and time.perf_counter() < budget:
            started = time.perf_counter()
            try:
                lookup()
            except OperationalError:
                return (f"cancelled after --statement-timeout {args.statement_timeout:.0f} s "
                        f"in round {len(times) + 1} (earlier: {summary_ms(times or [first])})")
            times.append(time.perf_counter() - started)
        return summary_ms(times or [first])
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 0")


def existing(events: int) -> dict[str, Any]:
    """The data set of a database kept by `--keep` (migrated to today's schema first)."""
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from jobs.models import Job

    call_command("migrate", verbosity=0)
    users = get_user_model().objects
    print(f"reusing the kept data set (built with --events as given then; now {events:,})",
          flush=True)
    return {"job": Job.objects.get(name="audited-run"), "owner": users.get(username="user-00"),
            "actor": users.get(username="user-01"), "admin": users.get(username="bench-admin")}


def run(args: argparse.Namespace) -> None:
    data = existing(args.events) if args.reuse else build(args.events)
    same_first_page(data)
    print(f"{'lookup':34s} {'':4s} figures in ms")
    for name, old, new in lookups(data):
        for which, lookup in (("old", old), ("new", new)):
            if which == "old" and args.skip_old:
                continue
            print(f"{name:34s} {which:4s} {timed(lookup, args)}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds per lookup at most (fewer rounds when slow)")
    parser.add_argument("--statement-timeout", type=float, default=15.0,
                        help="seconds before one statement of a lookup is cancelled")
    parser.add_argument("--skip-old", action="store_true",
                        help="time only the new lookups")
    parser.add_argument("--keep", metavar="NAME",
                        help="build into database NAME and leave it there (for EXPLAIN)")
    parser.add_argument("--reuse", metavar="NAME",
                        help="time against database NAME left by --keep (no build)")
    args = parser.parse_args()
    setup_django()
    import logging

    from django.db import connection

    logging.getLogger("rlark.request").setLevel(logging.WARNING)  # no line per timed request
    if args.reuse:
        connection.close()
        connection.settings_dict["NAME"] = args.reuse
        run(args)
    elif args.keep:
        connection.settings_dict["TEST"]["NAME"] = args.keep
        connection.creation.create_test_db(verbosity=0, autoclobber=True, serialize=False)
        run(args)
        print(f"kept database {args.keep} (dropdb {args.keep} when done)")
    else:
        with scratch_database(f"rlark_bench_audit_{os.getpid()}"):
            run(args)


if __name__ == "__main__":
    main()
