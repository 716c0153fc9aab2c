# ruff: noqa: S608  (SQL from event tables' names and fixed fragments; values are parameters)
"""Audit lookups that page on the event tables first.

pghistory's `Events` is a UNION of every event table in which every row gets its JSON data
and its diff (a read of the object's previous event) before any filter, sort or limit: a
broad lookup (an actor, a model, a member's teams) at a million events expanded every one
of them. Here a lookup is two steps whose cost follows the page size (one statement when
the lookup spans at most ONE_STATEMENT_TABLES_AT_MOST tables, two otherwise; an actor or
team filter first reads its request contexts, unless they are known to be many):

1. **Positions.** One branch per event table (and per scope alternative: the row's team, or
   the team of the request that made it) selects only `(created, id)` with every filter,
   the keyset position and `ORDER BY ... LIMIT page` inside the branch, on a composite index
   (`(pgh_created_at, pgh_id)`, `(pgh_obj_id, pgh_created_at, pgh_id)`,
   `(team_id, pgh_created_at, pgh_id)`: audit.indexes). The branches' top rows are merged
   and the first `page` kept.
2. **Rows.** Only the page's events are read whole: data, request context with the actor's
   username, and the previous event of the same object, one index probe each (the diff of
   the two is computed in Python, `event_diff`).

Order: newest first by `pgh_created_at`; events of the same instant (one transaction writes
many) by event model label, then event id, both descending (`oldest_first` reverses all
three). A page continues after (or before) a `Position`, so pages never skip or repeat an
event while new ones arrive.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, cast

from django.apps import apps
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.db import connection

from rlark_site.foundation.rawsql import jsonb

__all__ = ["AuditEvent", "AuditLookup", "Position", "decode_position", "event_models_info"]

CONTEXT_TABLE = "pghistory_context"
# More teams than this are matched with one `team_id = ANY(...)` branch per table (a sort of
# the teams' events) instead of one ordered index scan per team.
TEAM_BRANCHES_AT_MOST = 8
# An actor's (or team's) request contexts up to this many are handed to the query as a list
# (their events are read by context and sorted); more are a set the time-ordered walk of
# each table checks row by row, stopping at the page's end.
SPARSE_CONTEXTS = 300
# Context sets (an actor's, a set of teams') seen with more than SPARSE_CONTEXTS contexts in
# this process. Request contexts are only ever added, so such a set stays dense and its count
# is not read again (one query fewer per page). Were one to shrink, the walk still reads it
# correctly, only slower than the list would.
_DENSE: set[tuple[str, Any]] = set()
DENSE_KEYS_AT_MOST = 10_000
# A lookup over at most this many event tables reads its positions and rows in one statement
# (a model, a run's trail); over more (everyone's events, an actor's, a member's), planning
# the rows' read of every table costs more than the round trip it would save.
ONE_STATEMENT_TABLES_AT_MOST = 8


@dataclass(frozen=True)
class EventTable:
    label: str  # the event model's label, "jobs.JobEvent"
    table: str
    tracked: str  # the tracked model's label, "jobs.Job"
    has_team: bool
    obj_field: Any  # the tracked model's primary key field (to type object ids)


@cache
def event_models_info() -> tuple[EventTable, ...]:
    """Every pghistory event table that tracks an object, sorted by event model label."""
    found = []
    for model in apps.get_models():
        names = {f.name for f in model._meta.fields}
        if not (model.__name__.endswith("Event") and {"pgh_obj", "pgh_id"} <= names):
            continue
        columns = {f.column for f in model._meta.fields}
        found.append(EventTable(
            label=model._meta.label, table=model._meta.db_table,
            tracked=model.pgh_tracked_model._meta.label,  # type: ignore[attr-defined]
            has_team="team_id" in columns,
            obj_field=cast(Any, model._meta.get_field("pgh_obj")).target_field,
        ))
    return tuple(sorted(found, key=lambda t: t.label))


@cache
def _ranks() -> dict[str, int]:
    """Each event model label's rank (its place in `event_models_info()`)."""
    return {table.label: rank for rank, table in enumerate(event_models_info())}


@dataclass
class _PositionsQuery:
    with_parts: list[str]
    with_params: list[Any]
    select: str  # ranks, times and ids in the page's order, `LIMIT %s` last in `params`
    params: list[Any]
    ranks: set[int]  # the tables it reads

    def run(self) -> list[tuple[int, datetime, int]]:
        sql = (f"WITH {', '.join(self.with_parts)} " if self.with_parts else "") + self.select
        with connection.cursor() as cursor:
            cursor.execute(sql, [*self.with_params, *self.params])
            return [(int(rank), at, int(pk)) for rank, at, pk in cursor.fetchall()]


@dataclass(frozen=True, order=True)
class Position:
    """Where an event sits in the order: (time, event model label, event id)."""

    at: datetime
    model: str
    id: int

    def encode(self, *, before: bool = False) -> str:
        raw = json.dumps(["b" if before else "a", self.at.isoformat(), self.model, self.id])
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_position(cursor: str) -> tuple[Position, bool] | None:
    """(position, before?) of an API cursor; None when it is not one of ours."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        kind, at, model, pk = json.loads(raw)
        position = Position(datetime.fromisoformat(at), str(model), int(pk))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError):
        return None
    if kind not in ("a", "b") or position.at.tzinfo is None or not 0 <= position.id < 2**63:
        return None
    return position, kind == "b"


@dataclass
class AuditEvent:
    """One event with the attribute names of pghistory's `Events` rows."""

    pgh_model: str
    pgh_id: int
    pgh_created_at: datetime
    pgh_label: str
    pgh_obj_model: str
    pgh_obj_id: str
    pgh_data: dict[str, Any] | None
    pgh_diff: dict[str, Any] | None
    pgh_context_id: Any
    pgh_context: dict[str, Any] | None
    # The username of the context's `user` (None: no user, or no longer one).
    actor_username: str | None = None

    @property
    def pgh_slug(self) -> str:
        return f"{self.pgh_model}:{self.pgh_id}"

    @property
    def position(self) -> Position:
        return Position(self.pgh_created_at, self.pgh_model, self.pgh_id)


def _typed_ids(table: EventTable, ids: Iterable[Any]) -> list[Any]:
    typed = []
    for value in ids:
        try:
            typed.append(table.obj_field.to_python(value))
        except (ValidationError, TypeError, ValueError):
            continue
    return typed


@dataclass
class AuditLookup:
    """The filters of one lookup; `page()` reads one page of them."""

    objects: list[tuple[str, Any]] | None = None
    team_ids: list[int] = field(default_factory=list)
    team_slugs: list[str] = field(default_factory=list)
    scoped: bool = False
    actor_id: int | None = None
    # The actor by username instead (looked up inside the contexts' read, not before it).
    actor_username: str | None = None
    model: str | None = None
    since: datetime | None = None
    until: datetime | None = None

    @property
    def _has_actor(self) -> bool:
        return self.actor_id is not None or self.actor_username is not None

    # --- which tables, which branches ---------------------------------------------------

    def _tables(self) -> list[tuple[int, EventTable, list[Any] | None]]:
        """(rank, table, object ids or None) of every table the lookup can match."""
        chosen = []
        wanted = self.model.lower() if self.model else None
        for rank, table in enumerate(event_models_info()):
            if wanted and not (table.tracked.lower() == wanted
                               or table.tracked.lower().endswith(f".{wanted}")
                               or table.tracked == self.model):
                continue
            ids: list[Any] | None = None
            if self.objects is not None:
                ids = _typed_ids(table, (pk for label, pk in self.objects
                                         if label == table.tracked))
                if not ids:
                    continue
            chosen.append((rank, table, ids))
        return chosen

    def _scopes(self, table: EventTable) -> list[tuple[str, list[Any]]]:
        """The alternatives (SQL, params) that put an event of `table` in the scope."""
        if not self.scoped:
            return [("TRUE", [])]
        scopes: list[tuple[str, list[Any]]] = []
        if table.has_team and self.team_ids:
            if len(self.team_ids) <= TEAM_BRANCHES_AT_MOST:
                scopes += [("e.team_id = %s", [one]) for one in self.team_ids]
            else:
                every_team: list[Any] = [list(self.team_ids)]
                scopes.append(("e.team_id = ANY(%s)", every_team))
        if self.team_slugs:
            scopes.append(("e.pgh_context_id IN (SELECT id FROM team_contexts)", []))
        return scopes

    def _branch(self, rank: int, table: EventTable, ids: list[Any] | None,
                scope: tuple[str, list[Any]], limit: int, after: Position | None,
                ascending: bool) -> tuple[str, list[Any]]:
        conditions = [scope[0]]
        params: list[Any] = list(scope[1])
        if ids is not None:
            conditions.append("e.pgh_obj_id = ANY(%s)")
            params.append(ids)
        if self._has_actor:
            conditions.append("e.pgh_context_id IN (SELECT id FROM actor_contexts)")
        if self.since is not None:
            conditions.append("e.pgh_created_at >= %s")
            params.append(self.since)
        if self.until is not None:
            conditions.append("e.pgh_created_at < %s")
            params.append(self.until)
        if after is not None:
            # The next rows in the order (time, label, id), with this table's label fixed.
            beyond = ">" if ascending else "<"
            if table.label == after.model:
                conditions.append(f"(e.pgh_created_at, e.pgh_id) {beyond} (%s, %s)")
                params += [after.at, after.id]
            elif (table.label > after.model) == ascending:
                conditions.append(f"e.pgh_created_at {beyond}= %s")
                params.append(after.at)
            else:
                conditions.append(f"e.pgh_created_at {beyond} %s")
                params.append(after.at)
        direction = "ASC" if ascending else "DESC"
        sql = (
            f"(SELECT {rank} AS rank, e.pgh_created_at AS at, e.pgh_id AS id "
            f'FROM "{table.table}" e '
            f"WHERE {' AND '.join(conditions)} "
            f"ORDER BY e.pgh_created_at {direction}, e.pgh_id {direction} LIMIT %s)"
        )
        return sql, [*params, limit]

    # --- reading ---------------------------------------------------------------------------

    def _contexts(self) -> list[tuple[str, str, list[Any]]]:
        """(CTE name, SQL, params) of the request contexts the actor/team filters name (their
        `metadata -> 'user'`/`'team'`, as generated columns indexed with the id: audit.0005)."""
        found: list[tuple[str, str, list[Any]]] = []
        if self.actor_id is not None:
            found.append(("actor_contexts",
                          f"SELECT id FROM {CONTEXT_TABLE} "
                          "WHERE metadata_user = to_jsonb(%s::bigint)", [self.actor_id]))
        elif self.actor_username is not None:
            users, _name = _user_join()
            found.append(("actor_contexts",
                          f"SELECT id FROM {CONTEXT_TABLE} WHERE metadata_user = "
                          f"(SELECT to_jsonb({users.pk}) FROM {users.table} "
                          f"WHERE {users.username} = %s)", [self.actor_username]))
        if self.scoped and self.team_slugs:
            marks = ", ".join(["to_jsonb(%s::text)"] * len(self.team_slugs))
            found.append(("team_contexts",
                          f"SELECT id FROM {CONTEXT_TABLE} WHERE metadata_team IN ({marks})",
                          list(self.team_slugs)))
        return found

    def _dense_keys(self) -> dict[str, list[tuple[str, Any]]]:
        """Per context set, the keys under which it may be known dense (any one suffices)."""
        keys: dict[str, list[tuple[str, Any]]] = {}
        if self.actor_id is not None:
            keys["actor_contexts"] = [("user", self.actor_id)]
        elif self.actor_username is not None:
            keys["actor_contexts"] = [("username", self.actor_username)]
        if self.scoped and self.team_slugs:
            # The teams together, or any one of them alone.
            keys["team_contexts"] = [("teams", tuple(sorted(set(self.team_slugs)))),
                                     *(("teams", (slug,)) for slug in self.team_slugs)]
        return keys

    def _sparse(self, contexts: list[tuple[str, str, list[Any]]]) -> dict[str, list[Any] | None]:
        """The ids of each context set of at most SPARSE_CONTEXTS (None: more than that); a
        set already seen dense in this process is not read again."""
        keys = self._dense_keys()
        known = {name for name, _query, _params in contexts
                 if any(key in _DENSE for key in keys.get(name, []))}
        unknown = [one for one in contexts if one[0] not in known]
        result: dict[str, list[Any] | None] = dict.fromkeys(known)
        if not unknown:
            return result
        sql = " UNION ALL ".join(
            f"(SELECT %s, id FROM ({query} LIMIT {SPARSE_CONTEXTS + 1}) found)"
            for _name, query, _params in unknown
        )
        params = [value for name, _query, more in unknown for value in (name, *more)]
        ids: dict[str, list[Any]] = {name: [] for name, _query, _params in unknown}
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            for name, pk in cursor.fetchall():
                ids[name].append(pk)
        for name, found in ids.items():
            if len(found) <= SPARSE_CONTEXTS:
                result[name] = found
            else:
                result[name] = None
                if len(_DENSE) < DENSE_KEYS_AT_MOST:
                    _DENSE.add(keys[name][0])
        return result

    def _positions_query(self, limit: int, after: Position | None,
                         oldest_first: bool) -> _PositionsQuery | None:
        """The positions' statement in parts (None: nothing can match), after reading the
        actor's or teams' contexts when they are not known to be many."""
        if limit <= 0:
            return None
        contexts = self._contexts()
        sparse = self._sparse(contexts)
        if sparse.get("actor_contexts") == []:
            return None  # the actor never changed anything
        branches: list[str] = []
        params: list[Any] = []
        ranks: set[int] = set()
        for rank, table, ids in self._tables():
            for scope in self._scopes(table):
                sql, branch_params = self._branch(rank, table, ids, scope, limit, after,
                                                  oldest_first)
                for name, found in sparse.items():
                    # A dense set: the table is walked along its time index, each row checked
                    # against the set hashed once ("OR FALSE" keeps the planner from turning
                    # the test into a join, which reads every event of the set first).
                    if found is None:
                        sql = sql.replace(f"e.pgh_context_id IN (SELECT id FROM {name})",
                                          f"(e.pgh_context_id IN (SELECT id FROM {name}) "
                                          "OR FALSE)")
                branches.append(sql)
                params += branch_params
                ranks.add(rank)
        if not branches:
            return None
        with_parts, with_params = [], []
        for name, query, more in contexts:
            found = sparse[name]
            if found is None:
                with_parts.append(f"{name} AS MATERIALIZED ({query})")
                with_params += more
            else:
                with_parts.append(f"{name}(id) AS (SELECT unnest(%s::uuid[]))")
                with_params.append(found)
        direction = "ASC" if oldest_first else "DESC"
        select = (f"SELECT rank, at, id FROM ({' UNION '.join(branches)}) found "
                  f"ORDER BY at {direction}, rank {direction}, id {direction} LIMIT %s")
        return _PositionsQuery(with_parts, with_params, select, [*params, limit], ranks)

    def positions(self, limit: int, *, after: Position | None = None,
                  oldest_first: bool = False) -> list[tuple[int, datetime, int]]:
        """(table rank, time, event id) of the page's events, in order (one query, and one
        more with an actor or team filter whose contexts are not known to be many)."""
        query = self._positions_query(limit, after, oldest_first)
        return [] if query is None else query.run()

    def page(self, limit: int, *, after: Position | None = None,
             oldest_first: bool = False) -> list[AuditEvent]:
        """At most `limit` events following `after` in the order: positions and rows in one
        statement when the lookup spans few tables, else in two (planning the rows' read of
        every table would cost more than the round trip it saves)."""
        query = self._positions_query(limit, after, oldest_first)
        if query is None:
            return []
        if len(query.ranks) > ONE_STATEMENT_TABLES_AT_MOST:
            return read_events(query.run())
        ranks = _ranks()
        events = _read_rows(
            {rank: f"JOIN page ON page.id = e.pgh_id WHERE page.rank = {rank}"
             for rank in sorted(query.ranks)},
            [], with_sql=", ".join([*query.with_parts, f"page AS MATERIALIZED ({query.select})"]),
            with_params=[*query.with_params, *query.params],
        )
        events.sort(key=lambda event: (event.pgh_created_at, ranks[event.pgh_model],
                                       event.pgh_id), reverse=not oldest_first)
        return events

    def __iter__(self) -> Iterator[AuditEvent]:
        """Every matching event, newest first, read page by page."""
        after: Position | None = None
        while True:
            events = self.page(500, after=after)
            yield from events
            if len(events) < 500:
                return
            after = events[-1].position


def _same(a: Any, b: Any) -> bool:
    """jsonb's equality of two decoded JSON values: types must match (true is not 1), numbers
    compare by value (1 = 1.0), objects by their keys, arrays in order."""
    if a is b:
        return True
    kind = type(a)
    if kind is not type(b):
        # Only numbers of two kinds can be equal (bool is its own kind: true is not 1).
        return kind in _NUMBERS and type(b) in _NUMBERS and a == b
    if kind is dict:
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if kind is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


_NUMBERS = (int, float)


def event_diff(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any] | None:
    """The diff pghistory's `Events` gives an event: {field: [was, now]} of the fields (not
    pghistory's own) whose value differs from the object's previous event; None without a
    previous event or without a change. Computed here rather than in SQL (jsonb_each and a
    join per event were most of the page's read)."""
    if previous is None:
        return None
    changed = {}
    for key, value in current.items():
        # pghistory's `Events` leaves out keys LIKE 'pgh_%' ('_' there is any one character).
        if (key.startswith("pgh") and len(key) > 3) or key not in previous:
            continue
        was = previous[key]
        kind = type(value)
        if kind is type(was) and kind is not dict and kind is not list:
            if value != was:  # the usual field: one comparison
                changed[key] = [was, value]
        elif not _same(value, was):
            changed[key] = [was, value]
    return changed or None


@dataclass(frozen=True)
class _Users:
    table: str  # quoted
    pk: str  # quoted column
    username: str  # quoted column


@cache
def _user_join() -> tuple[_Users, str]:
    """The user table's names, and the join that names each event's actor (the context's
    numeric `user`) in the rows' read."""
    model = get_user_model()
    users = _Users(
        table=f'"{model._meta.db_table}"', pk=f'"{cast(Any, model._meta.pk).column}"',
        username=f'"{cast(Any, model._meta.get_field(model.USERNAME_FIELD)).column}"',
    )
    # CASE first: only a whole number that fits is cast (a context's `user` is the user's id,
    # or null; anything else names nobody, as before).
    actor = ("CASE WHEN jsonb_typeof(c.metadata -> 'user') = 'number' "
             "AND c.metadata ->> 'user' ~ '^[0-9]{1,18}$' "
             "THEN (c.metadata ->> 'user')::bigint END")
    return users, f"LEFT JOIN {users.table} u ON u.{users.pk} = {actor}"


def read_events(positions: list[tuple[int, datetime, int]]) -> list[AuditEvent]:
    """The events at `positions`, whole, in the same order, with their actor's name (one
    query)."""
    if not positions:
        return []
    by_rank: dict[int, list[int]] = {}
    for rank, _, pk in positions:
        by_rank.setdefault(rank, []).append(pk)
    ranks = sorted(by_rank)
    found = {(event.pgh_model, event.pgh_id): event for event in _read_rows(
        dict.fromkeys(ranks, "WHERE e.pgh_id = ANY(%s)"), [by_rank[rank] for rank in ranks],
    )}
    tables = event_models_info()
    return [found[(tables[rank].label, pk)] for rank, _, pk in positions
            if (tables[rank].label, pk) in found]


def _read_rows(sources: dict[int, str], params: list[Any], *, with_sql: str = "",
               with_params: list[Any] | None = None) -> list[AuditEvent]:
    """The events each table's `sources[rank]` (a WHERE, or a JOIN and a WHERE) picks, whole,
    with their actor's name and diff, in no particular order (one query)."""
    tables = event_models_info()
    users, join_user = _user_join()
    branches = []
    for rank, source in sources.items():
        table = tables[rank].table
        # Each event with the object's previous event (for the diff): one index probe each.
        # The context and its user are joined once, outside (fewer joins to plan per table).
        branches.append(
            f"SELECT {rank} AS rank, e.pgh_id, e.pgh_created_at, e.pgh_label, "
            f"e.pgh_obj_id::text AS obj_id, to_jsonb(e) AS data, "
            f'(SELECT to_jsonb(p) FROM "{table}" p WHERE p.pgh_obj_id = e.pgh_obj_id '
            f"AND p.pgh_id < e.pgh_id ORDER BY p.pgh_id DESC LIMIT 1) AS previous, "
            f"e.pgh_context_id AS context_id "
            f'FROM "{table}" e {source}'
        )
    sql = (
        (f"WITH {with_sql} " if with_sql else "")
        + f"SELECT r.rank, r.pgh_id, r.pgh_created_at, r.pgh_label, r.obj_id, r.data, "
        f"r.previous, r.context_id, c.metadata, u.{users.username} "
        f"FROM ({' UNION ALL '.join(branches)}) r "
        f"LEFT JOIN {CONTEXT_TABLE} c ON c.id = r.context_id {join_user}"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [*(with_params or []), *params])
        rows = cursor.fetchall()
    events = []
    for rank, pk, at, label, obj_id, current, previous, context_id, context, name in rows:
        table = tables[rank]
        current = jsonb(current) or {}
        events.append(AuditEvent(
            pgh_model=table.label, pgh_id=pk, pgh_created_at=at, pgh_label=label,
            pgh_obj_model=table.tracked, pgh_obj_id=obj_id,
            pgh_data={k: v for k, v in current.items() if not k.startswith("pgh_")},
            pgh_diff=event_diff(current, jsonb(previous)), pgh_context_id=context_id,
            pgh_context=jsonb(context), actor_username=name,
        ))
    return events
