"""The paged audit lookup (audit.lookup): the same events, data and diffs as pghistory's
`Events`, in one order across tables, pages that neither skip nor repeat, tenancy, and a
number of queries that does not grow with the events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pghistory
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pghistory.models import Events
from rest_framework.test import APIClient

from jobs.drafts.services import job_create
from rlark_site.foundation.audit.lookup import Position, decode_position
from rlark_site.foundation.audit.selectors import audit_events
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import make_user

AUDIT = "/api/v1/audit-events/"


def _order_key(event: Any) -> tuple[Any, str, int]:
    model, pk = event.pgh_slug.rsplit(":", 1)
    return (event.pgh_created_at, model, int(pk))


def _make_history(team: Team, owner: Any) -> None:
    """Events in several tables: jobs and their roles (one transaction writes both), renames."""
    for index in range(3):
        job = job_create(team=team, user=owner, data={
            "name": f"run-{index}", "task_type": "custom", "header_role": "Actor",
            "roles": [{"name": "Actor", "cluster": "", "selector": {}, "gpus": 0}],
        })
        job.description = f"renamed {index}"
        job.save()


def _all_pages(client: APIClient, params: dict[str, str]) -> list[dict[str, Any]]:
    pages, url, query = [], AUDIT, dict(params)
    while url:
        answer = client.get(url, query)
        assert answer.status_code == 200, answer.content
        body = answer.json()
        assert set(body) == {"next", "previous", "results"}
        pages.append(body)
        url, query = body["next"], {}
    return pages


@pytest.mark.django_db(transaction=True)
def test_events_come_newest_first_across_tables_with_the_same_data_as_pghistory(
    team: Team, owner: Any
) -> None:
    _make_history(team, owner)
    expected = sorted(Events.objects.all(), key=_order_key, reverse=True)
    assert len({e.pgh_model for e in expected}) >= 3
    assert len({e.pgh_created_at for e in expected}) > 3  # separate transactions
    found = list(audit_events())
    assert [e.pgh_slug for e in found] == [e.pgh_slug for e in expected]
    for mine, theirs in zip(found, expected, strict=True):
        assert (mine.pgh_label, mine.pgh_obj_model, mine.pgh_obj_id) == (
            theirs.pgh_label, theirs.pgh_obj_model, theirs.pgh_obj_id)
        assert mine.pgh_data == theirs.pgh_data
        assert mine.pgh_diff == theirs.pgh_diff
        assert mine.pgh_context == theirs.pgh_context
    oldest_first = audit_events().page(1000, oldest_first=True)
    assert [e.pgh_slug for e in oldest_first] == [e.pgh_slug for e in reversed(expected)]


@pytest.mark.django_db(transaction=True)
def test_pages_follow_each_other_without_gaps_or_repeats_and_go_back(
    team: Team, owner: Any, admin_user: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    _make_history(team, owner)
    admin = api_client_for(admin_user)
    whole = [row["id"] for row in admin.get(AUDIT, {"limit": "500"}).json()["results"]]
    expected = [e.pgh_slug for e in sorted(Events.objects.all(), key=_order_key, reverse=True)]
    # The admin's own token was made after the history: it is the newest event.
    assert whole == expected
    pages = _all_pages(admin, {"limit": "2"})
    assert [row["id"] for page in pages for row in page["results"]] == whole
    assert pages[0]["previous"] is None and pages[-1]["next"] is None
    assert all(len(page["results"]) == 2 for page in pages[:-1])
    # Back from the last page: the same pages, in reverse.
    url, back = pages[-1]["previous"], []
    while url:
        body = admin.get(url).json()
        back.append([row["id"] for row in body["results"]])
        url = body["previous"]
    assert back == [[row["id"] for row in page["results"]] for page in reversed(pages[:-1])]


@pytest.mark.django_db
def test_one_transactions_events_are_ordered_by_table_then_id(team: Team, owner: Any) -> None:
    _make_history(team, owner)  # one test transaction: every event has the same time
    found = list(audit_events())
    assert len({e.pgh_created_at for e in found}) == 1
    keys = [_order_key(e) for e in found]
    assert keys == sorted(keys, reverse=True)
    # Pages of one event each walk the same order through the tie.
    walked, after = [], None
    while page := audit_events().page(1, after=after):
        walked.append(page[0].pgh_slug)
        after = page[0].position
    assert walked == [e.pgh_slug for e in found]


@pytest.mark.django_db
def test_a_member_sees_their_teams_events_only(
    team: Team, other_team: Team, owner: Any, api_client_for: Callable[[Any], APIClient],
) -> None:
    _make_history(team, owner)
    stranger = make_user("stranger", team=other_team, role="maintainer")
    job_create(team=other_team, user=stranger, data={"name": "theirs", "task_type": "rl"})
    mine = [row for page in _all_pages(api_client_for(owner), {"limit": "3"})
            for row in page["results"]]
    jobs = {row["data"].get("name") for row in mine if row["model"] == "jobs.Job"}
    assert jobs == {"run-0", "run-1", "run-2"}
    theirs = [row for page in _all_pages(api_client_for(stranger), {}) for row in page["results"]]
    assert {row["data"].get("name") for row in theirs if row["model"] == "jobs.Job"} == {"theirs"}
    for rows, one in ((mine, team), (theirs, other_team)):
        # each row is the team's own, or was written while working in the team
        assert all(row["data"].get("team_id") == one.pk or row["team"] == one.slug
                   for row in rows)


@pytest.mark.django_db
def test_the_request_team_puts_a_teamless_row_in_the_teams_events(
    team: Team, other_team: Team, owner: Any
) -> None:
    job = job_create(team=team, user=owner, data={"name": "one", "task_type": "rl"})
    with pghistory.context(team=team.slug, user=owner.pk):
        role = job.roles.first()
        assert role is not None
        role.name = "Critic"
        role.save()
    events = type(role).pgh_event_models["update"]  # type: ignore[attr-defined]
    expected = f"jobs.RoleEvent:{events.objects.latest('pgh_id').pgh_id}"
    by_context = {e.pgh_slug for e in audit_events(team_slugs=[team.slug])}
    assert expected in by_context
    assert expected not in {e.pgh_slug for e in audit_events(team_ids=[team.pk])}
    assert expected not in {e.pgh_slug for e in audit_events(team_slugs=[other_team.slug],
                                                             team_ids=[other_team.pk])}
    both = {e.pgh_slug for e in audit_events(team_ids=[team.pk], team_slugs=[team.slug])}
    assert by_context | {e.pgh_slug for e in audit_events(team_ids=[team.pk])} == both


@pytest.mark.django_db
def test_filters_by_actor_model_and_job(
    team: Team, owner: Any, member: Any, admin_user: Any,
    api_client_for: Callable[[Any], APIClient],
) -> None:
    api = api_client_for(owner)
    assert api.post("/api/v1/launch-lists/", {"title": "first"},
                    format="json").status_code == 201
    job_create(team=team, user=owner, data={"name": "mine", "task_type": "rl"})
    admin = api_client_for(admin_user)
    by_actor = admin.get(AUDIT, {"actor": "owner"}).json()["results"]
    assert by_actor and {row["actor_username"] for row in by_actor} == {"owner"}
    assert admin.get(AUDIT, {"actor": "member"}).json()["results"] == []
    roles = admin.get(AUDIT, {"model": "role"}).json()["results"]
    assert roles and {row["model"] for row in roles} == {"jobs.Role"}
    assert admin.get(AUDIT, {"model": "jobs.Role"}).json()["results"] == roles
    trail = admin.get(AUDIT, {"job": "mine"}).json()["results"]
    assert {row["model"] for row in trail} == {"jobs.Job", "jobs.Role"}


@pytest.mark.django_db
def test_queries_do_not_grow_with_events_or_tables(
    team: Team, owner: Any, admin_user: Any, api_client_for: Callable[[Any], APIClient],
) -> None:
    def count(lookup: Any, limit: int = 50) -> int:
        with CaptureQueriesContext(connection) as queries:
            lookup.page(limit)
        return len(queries.captured_queries)

    job_create(team=team, user=owner, data={"name": "one", "task_type": "rl"})
    few = {name: count(lookup) for name, lookup in {
        "all": audit_events(), "model": audit_events(model="job"),
        "actor": audit_events(actor_id=owner.pk),
        "member": audit_events(team_ids=[team.pk], team_slugs=[team.slug]),
    }.items()}
    # positions + rows (one statement over few tables, as for a model); an actor or a context
    # team adds the read of their contexts
    assert few == {"all": 2, "model": 1, "actor": 3, "member": 3}
    _make_history(team, owner)
    assert count(audit_events()) == 2
    admin = api_client_for(admin_user)
    with CaptureQueriesContext(connection) as small:
        assert len(admin.get(AUDIT, {"limit": "1", "actor": "owner"}).json()["results"]) == 1
    with CaptureQueriesContext(connection) as large:
        assert len(admin.get(AUDIT, {"limit": "200", "actor": "owner"}).json()["results"]) > 6
    assert small.captured_queries  # the request ran here: equal counts are not 0 == 0
    assert len(small.captured_queries) == len(large.captured_queries)


@pytest.mark.django_db
def test_a_broken_cursor_or_an_offset_is_a_400(
    admin_user: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    admin = api_client_for(admin_user)
    for params in ({"cursor": "not-a-cursor"}, {"cursor": "W10"}, {"offset": "50"},
                   {"limit": "0"}, {"limit": "x"}):
        answer = admin.get(AUDIT, params)
        assert answer.status_code == 400, (params, answer.content)
        assert answer.json()


def test_a_cursor_round_trips() -> None:
    from datetime import UTC, datetime

    position = Position(datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC), "jobs.JobEvent", 42)
    assert decode_position(position.encode()) == (position, False)
    assert decode_position(position.encode(before=True)) == (position, True)
    assert decode_position("") is None


@pytest.mark.django_db
def test_the_fast_answer_is_what_the_serializer_gives(
    team: Team, owner: Any, api_client_for: Callable[[Any], APIClient],
) -> None:
    from jobs.records.selectors import events_as_dicts
    from jobs.records.serializers import AuditEventSerializer, audit_events_data

    api = api_client_for(owner)
    assert api.post("/api/v1/launch-lists/", {"title": "first"},
                    format="json").status_code == 201
    _make_history(team, owner)
    rows = events_as_dicts(audit_events().page(100))
    assert any(row["actor"] is not None for row in rows)
    assert audit_events_data(rows) == AuditEventSerializer(rows, many=True).data


def test_the_diff_compares_like_jsonb() -> None:
    from rlark_site.foundation.audit.lookup import event_diff

    was = {"pgh_id": 1, "pghx": 1, "gpus": 1, "ratio": 1.0, "on": True, "selector": [["a", 1]],
           "spec": {"x": 1, "y": [True]}, "name": "a", "gone": 1}
    now = {"pgh_id": 2, "pghx": 2, "gpus": True, "ratio": 1, "on": True, "selector": [["a", 1]],
           "spec": {"x": 1, "y": [1]}, "name": "b", "new": 1}
    # true is not 1 (also inside arrays and objects), 1.0 is 1; keys LIKE 'pgh_%' and keys the
    # previous event lacks are left out
    assert event_diff(now, was) == {"gpus": [1, True], "spec": [{"x": 1, "y": [True]},
                                                                {"x": 1, "y": [1]}],
                                    "name": ["a", "b"]}
    assert event_diff(now, None) is None
    assert event_diff(was, dict(was)) is None


@pytest.mark.django_db
def test_json_field_changes_give_pghistorys_diff(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={
        "name": "typed", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": "", "selector": {}, "gpus": 1}],
    })
    role = job.roles.get()
    role.gpus = True  # raw input: the same as 1 in Python, not in JSON
    role.save()
    role.selector = [["zone", "a"]]
    role.gpus = 1.0
    role.save()
    theirs = {e.pgh_slug: e.pgh_diff for e in Events.objects.all()}
    mine = {e.pgh_slug: e.pgh_diff for e in audit_events()}
    assert mine == theirs
    assert any(diff and diff.get("gpus") == [1, True] for diff in mine.values())


@pytest.mark.django_db
def test_a_page_names_its_actors_in_the_same_read(
    team: Team, owner: Any, member: Any
) -> None:
    from jobs.records.selectors import events_as_dicts

    with pghistory.context(user=owner.pk):
        job_create(team=team, user=owner, data={"name": "by-owner", "task_type": "rl"})
    with pghistory.context(user=member.pk):
        job_create(team=team, user=member, data={"name": "by-member", "task_type": "rl"})
    with pghistory.context(user="not-an-id"):
        team.name = "Renamed"
        team.save()
    with CaptureQueriesContext(connection) as queries:
        rows = events_as_dicts(audit_events().page(50))
    assert len(queries.captured_queries) == 2  # positions, rows (no third read of the users)
    names = {row["data"]["name"]: (row["actor"], row["actor_username"]) for row in rows
             if row["model"] in ("jobs.Job", "tenancy.Team")}
    assert names == {"by-owner": (owner.pk, "owner"), "by-member": (member.pk, "member"),
                     "Renamed": ("not-an-id", None), "Vision RL": (None, None)}


@pytest.mark.django_db
def test_an_actors_contexts_are_read_from_the_index_alone(owner: Any) -> None:
    with pghistory.context(user=owner.pk, team="vision-rl"):
        owner.first_name = "Olga"
        owner.save()
    with connection.cursor() as cursor:
        # the generated columns follow the metadata
        cursor.execute("SELECT count(*) FROM pghistory_context WHERE metadata_user IS DISTINCT "
                       "FROM metadata -> 'user' OR metadata_team IS DISTINCT FROM "
                       "metadata -> 'team'")
        assert cursor.fetchone()[0] == 0
        cursor.execute("SELECT count(*) FROM pghistory_context WHERE metadata_user = "
                       "to_jsonb(%s::bigint) AND metadata_team = to_jsonb('vision-rl'::text)",
                       [owner.pk])
        assert cursor.fetchone()[0] == 1
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL enable_bitmapscan = off")
        plans = []
        for name, _sql, params in audit_events(actor_id=owner.pk, team_slugs=["vision-rl"])\
                ._contexts():
            cursor.execute(f"EXPLAIN {_sql}", params)
            plans.append((name, "\n".join(row[0] for row in cursor.fetchall())))
    assert [name for name, _plan in plans] == ["actor_contexts", "team_contexts"]
    for name, plan in plans:
        column = "user" if name == "actor_contexts" else "team"
        assert f"Index Only Scan using pghistory_context_metadata_{column}" in plan, plan


@pytest.mark.django_db
def test_an_actor_by_name_costs_no_query_more_than_by_id(
    team: Team, owner: Any, admin_user: Any, api_client_for: Callable[[Any], APIClient],
) -> None:
    job_create(team=team, user=owner, data={"name": "one", "task_type": "rl"})
    admin = api_client_for(admin_user)
    answers, counts = {}, {}
    for actor in ("owner", str(owner.pk), "nobody"):
        with CaptureQueriesContext(connection) as queries:
            answer = admin.get(AUDIT, {"actor": actor})
        assert answer.status_code == 200, (actor, answer.content)
        answers[actor] = [row["id"] for row in answer.json()["results"]]
        counts[actor] = len(queries.captured_queries)
    assert answers["owner"] and answers["owner"] == answers[str(owner.pk)]
    assert answers["nobody"] == []
    assert counts["owner"] == counts[str(owner.pk)] > 0


@pytest.fixture
def no_dense_sets() -> Any:
    from rlark_site.foundation.audit import lookup

    lookup._DENSE.clear()
    yield lookup._DENSE
    lookup._DENSE.clear()


@pytest.mark.django_db
def test_many_contexts_are_counted_once_per_process(
    team: Team, owner: Any, no_dense_sets: set[Any],
) -> None:
    from rlark_site.foundation.audit.lookup import SPARSE_CONTEXTS

    job_create(team=team, user=owner, data={"name": "one", "task_type": "rl"})
    with connection.cursor() as cursor:  # more request contexts of the owner in the team
        cursor.execute(
            "INSERT INTO pghistory_context (id, created_at, updated_at, metadata) "
            "SELECT gen_random_uuid(), now(), now(), jsonb_build_object('user', %s::bigint, "
            "'team', %s::text) FROM generate_series(1, %s)",
            [owner.pk, team.slug, SPARSE_CONTEXTS + 1],
        )

    def page(lookup: Any) -> tuple[list[str], int]:
        with CaptureQueriesContext(connection) as queries:
            found = [event.pgh_slug for event in lookup.page(50)]
        return found, len(queries.captured_queries)

    for make in (lambda: audit_events(actor_id=owner.pk),
                 lambda: audit_events(actor_username="owner"),
                 lambda: audit_events(team_ids=[team.pk], team_slugs=[team.slug])):
        first, counted = page(make())
        again, known = page(make())
        assert first and again == first
        assert (counted, known) == (3, 2)  # contexts counted, positions, rows; then no count
    assert len(no_dense_sets) == 3


@pytest.mark.django_db
def test_a_lookup_over_few_tables_reads_its_page_in_one_statement_in_the_same_order(
    team: Team, owner: Any
) -> None:
    from jobs.records.selectors import job_audit_refs
    from rlark_site.foundation.audit.lookup import ONE_STATEMENT_TABLES_AT_MOST, read_events

    _make_history(team, owner)  # one test transaction: the events tie on time across tables
    job = job_create(team=team, user=owner, data={
        "name": "traced", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": "", "selector": {}, "gpus": 0},
                  {"name": "Critic", "cluster": "", "selector": {}, "gpus": 0}],
    })
    lookup = audit_events(objects=job_audit_refs(job))
    assert 1 < len({rank for rank, _table, _ids in lookup._tables()}) \
        <= ONE_STATEMENT_TABLES_AT_MOST
    for oldest_first in (False, True):
        two = read_events(lookup.positions(100, oldest_first=oldest_first))
        assert len({event.pgh_model for event in two}) > 1
        with CaptureQueriesContext(connection) as queries:
            one = lookup.page(100, oldest_first=oldest_first)
        assert len(queries.captured_queries) == 1
        assert one == two
        # and page by page from a cursor
        walked, after = [], None
        while page := lookup.page(2, after=after, oldest_first=oldest_first):
            walked += page
            after = page[-1].position
        assert [event.pgh_slug for event in walked] == [event.pgh_slug for event in two]
