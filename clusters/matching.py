"""Selector matching against the global inventory (every cluster; gone nodes excluded).

Label containment (`labels @> {...}`) is answered by the GIN (jsonb_path_ops) index on
`Node.labels`; which clusters each single condition reaches is read from `ClusterLabel`, the
per-cluster count of every label pair that triggers on `Node` keep current. Results are the
`clusters.types` value objects the findings engine consumes; `describe_match` turns one into
the body of `POST /api/v1/selector-matches/`, and `parse_selector_input` turns user input into
a selector or the findings saying why not.

Cost: one query for the matched nodes. For two or more conditions, first one indexed lookup
of the clusters each condition reaches; the nodes are then read only when some cluster
carries every condition. (One condition reaches exactly the clusters of its matches.)
`bench/selector_match.py` measures it against a plain in-memory scan. The API's answer
(`describe_selector`, cached by `describe_match_cached`) does not read every match: its
counts and minima are aggregated in PostgreSQL and only the nodes it lists are read.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import connection
from django.utils.translation import gettext

from clusters.labels import parse_selector_text, selector_problems, unparseable_problem
from clusters.types import (
    ClusterCount,
    ConditionClusters,
    MatchedNode,
    SelectorMatch,
    confining_conditions,
    node_ref,
    selector_key,
)
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.findings import Finding

SelectorKey = tuple[tuple[str, str], ...]
T = TypeVar("T")

# Answers list at most this many nodes (the default, and the most a client may ask for);
# counts per cluster are always complete.
NODES_PAGE_DEFAULT = 50
NODES_PAGE_MAX = 500

# COLLATE "C": the order is code-point order whatever the database's collation, which is
# also Python's order (the Header role's namespace is that of the first match).
_NODES_SQL = """
SELECT c.name, n.name, n.namespace, n.gpu, n.devices::text, n.ready
FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
WHERE NOT n.gone AND n.labels @> %s::jsonb
ORDER BY c.name COLLATE "C", n.name COLLATE "C"
"""

# The clusters whose present nodes carry each condition (one row per condition and cluster),
# through the unique (key, value, cluster) index of `ClusterLabel`.
_CONDITION_CLUSTERS_SQL = """
SELECT l.key, l.value, c.name
FROM unnest(%s::text[], %s::text[]) AS cond(k, v)
JOIN clusters_clusterlabel l ON l.key = cond.k AND l.value = cond.v
JOIN clusters_cluster c ON c.id = l.cluster_id
"""


class DeviceParser:
    """Allocatable device JSON repeats across nodes: parse each distinct text once per query
    (as `MatchedNode.devices`: sorted pairs, unreported amounts left out)."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[tuple[str, int], ...]] = {}

    def __call__(self, text: str | None) -> tuple[tuple[str, int], ...]:
        key = text or "{}"
        parsed = self._seen.get(key)
        if parsed is None:
            items = json.loads(key).items()
            parsed = tuple(sorted((k, int(v)) for k, v in items if v is not None))
            self._seen[key] = parsed
        return parsed


def _fetch_nodes(condition_json: str) -> tuple[MatchedNode, ...]:
    devices = DeviceParser()
    with connection.cursor() as cursor:
        cursor.execute(_NODES_SQL, [condition_json])
        rows = cursor.fetchall()
    return tuple(
        MatchedNode(
            cluster=cluster, name=name, namespace=namespace, gpu=gpu,
            devices=devices(device_text), ready=ready,
        )
        for cluster, name, namespace, gpu, device_text, ready in rows
    )


def _fetch_condition_clusters(conditions: Sequence[tuple[str, str]]) -> ConditionClusters:
    reached: dict[tuple[str, str], set[str]] = {cond: set() for cond in conditions}
    with connection.cursor() as cursor:
        cursor.execute(
            _CONDITION_CLUSTERS_SQL, [[k for k, _ in conditions], [v for _, v in conditions]]
        )
        for key, value, cluster in cursor.fetchall():
            reached[(key, value)].add(cluster)
    return tuple((cond, frozenset(reached[cond])) for cond in conditions)


def match_selector(selector: Mapping[str, str]) -> SelectorMatch:
    """Every non-gone node of every cluster whose labels contain all the conditions.

    An empty selector matches nothing here: RLark never places a role without a condition.
    When no cluster carries every condition, nothing can match and no node is read.
    """
    if not selector:
        return SelectorMatch(nodes=())
    conditions = sorted(selector.items())
    if len(conditions) == 1:
        return assembled_match(conditions, _fetch_nodes(json.dumps(dict(conditions))), ())
    condition_clusters = _fetch_condition_clusters(conditions)
    candidates = frozenset.intersection(*(clusters for _, clusters in condition_clusters))
    nodes = _fetch_nodes(json.dumps(dict(conditions))) if candidates else ()
    return assembled_match(conditions, nodes, condition_clusters)


def assembled_match(conditions: Sequence[tuple[str, str]], nodes: tuple[MatchedNode, ...],
                    reached: ConditionClusters) -> SelectorMatch:
    """The `SelectorMatch` of a selector's sorted `conditions` from its matched `nodes` (in
    (cluster, node) code-point order) and, for two or more conditions, the clusters each
    single condition reaches (`reached`, read from `ClusterLabel`; a condition missing from it
    reaches none). One condition reaches exactly the clusters of its matches."""
    if len(conditions) == 1:
        return SelectorMatch(
            nodes=nodes, condition_clusters=((conditions[0], frozenset(n.cluster for n in nodes)),)
        )
    found = dict(reached)
    return SelectorMatch(nodes=nodes, condition_clusters=tuple(
        (cond, found.get(cond, frozenset())) for cond in conditions))


def condition_clusters(selector: Mapping[str, str]) -> ConditionClusters:
    """For each single condition of `selector`: the clusters whose present nodes carry it
    (one indexed query; no node is read)."""
    return _fetch_condition_clusters(sorted(selector.items())) if selector else ()


def match_many(selectors: Iterable[Mapping[str, str]]) -> dict[SelectorKey, SelectorMatch]:
    """Matches for several selectors, keyed like `CheckContext.matches` (duplicates once)."""
    result: dict[SelectorKey, SelectorMatch] = {}
    for selector in selectors:
        key = selector_key(dict(selector))
        if key not in result:
            result[key] = match_selector(dict(selector))
    return result


@dataclass(frozen=True)
class NodeWindow:
    """Which part of a long node list an answer carries: `limit` nodes from `offset`."""

    offset: int = 0
    limit: int = NODES_PAGE_DEFAULT

    def page(self, nodes: Sequence[T], total: int | None = None) -> tuple[list[T], int | None]:
        """The window's slice of `nodes`, and the offset of the next page (None at the end)."""
        total = len(nodes) if total is None else total
        end = self.offset + self.limit
        return list(nodes[self.offset:end]), end if end < total else None


def node_window(offset: object = None, limit: object = None) -> NodeWindow:
    """A window from request input (query parameters or body fields); 400 when out of range."""
    try:
        start = int(str(offset)) if offset not in (None, "") else 0
        size = int(str(limit)) if limit not in (None, "") else NODES_PAGE_DEFAULT
    except ValueError:
        start = size = -1
    if start < 0 or not 1 <= size <= NODES_PAGE_MAX:
        raise ApplicationError(
            gettext("nodes_offset must be 0 or more and nodes_limit between 1 and %(max)d.")
            % {"max": NODES_PAGE_MAX},
            extra={"field": "nodes_limit"}, status_code=400,
        )
    return NodeWindow(offset=start, limit=size)


FIRST_PAGE = NodeWindow()


def describe_match(match: SelectorMatch, *, cluster: str,
                   window: NodeWindow = FIRST_PAGE) -> dict[str, Any]:
    """The `POST selector-matches/` body: `match` judged against the chosen `cluster`.

    `confined` is true when there is at least one match and every match lies in `cluster`;
    `confining_conditions` are the single conditions whose own matches all lie in `cluster`.
    The answer's size does not grow with the fleet: `per_cluster` counts every match, `nodes`
    is the window's page of them (`nodes_next_offset` asks for the next one) and
    `foreign_nodes` the first of those outside `cluster` (`foreign_count` counts them all).
    """
    foreign = match.foreign_nodes(cluster)
    return _answer(
        cluster=cluster, window=window, count=match.count, per_cluster=match.per_cluster(),
        nodes=window.page(match.nodes)[0], foreign_count=len(foreign),
        foreign=foreign[:window.limit], confining=match.confining_conditions(cluster),
        gpu_max=match.gpu_max(), devices_max=match.devices_max(),
    )


def _answer(*, cluster: str, window: NodeWindow, count: int,
            per_cluster: Sequence[ClusterCount], nodes: Sequence[MatchedNode],
            foreign_count: int, foreign: Sequence[MatchedNode],
            confining: Iterable[tuple[str, str]], gpu_max: int | None,
            devices_max: Mapping[str, int]) -> dict[str, Any]:
    """The answer's shape, once, for `describe_match` (from a match in memory) and
    `describe_selector` (from PostgreSQL's aggregates)."""
    end = window.offset + window.limit
    return {
        "cluster": cluster,
        "count": count,
        "per_cluster": [asdict(c) for c in per_cluster],
        "nodes": [{**node_ref(n), "ready": n.ready, "gpu": n.gpu} for n in nodes],
        "nodes_offset": window.offset,
        "nodes_limit": window.limit,
        "nodes_next_offset": end if end < count else None,
        "clusters": sorted(c.cluster for c in per_cluster),
        "confined": count > 0 and not foreign_count,
        "confining_conditions": [{"key": k, "value": v} for k, v in confining],
        "foreign_count": foreign_count,
        "foreign_nodes": [node_ref(n) for n in foreign],
        "gpu_max": gpu_max,
        "devices_max": dict(devices_max),
    }


# `describe_match` of a selector computed in the database, without reading every match: the
# matches grouped by cluster and allocatable devices (a fleet repeats a few device sets), with
# the counts and GPU minima of each group; then only the nodes the answer lists, the window's
# page and the first matches outside the chosen cluster. Orders are code-point orders, as above.
_GROUPS_SQL = """
SELECT c.name, n.devices::text, count(*), count(*) FILTER (WHERE n.ready), count(n.gpu),
    min(n.gpu)
FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
WHERE NOT n.gone AND n.labels @> %(selector)s::jsonb
GROUP BY c.name, n.devices
"""
_LISTED_SQL = """
(SELECT false, c.name, n.name, n.namespace, n.ready, n.gpu
 FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
 WHERE NOT n.gone AND n.labels @> %(selector)s::jsonb
 ORDER BY c.name COLLATE "C", n.name COLLATE "C" OFFSET %(offset)s LIMIT %(page)s)
UNION ALL
(SELECT true, c.name, n.name, n.namespace, n.ready, n.gpu
 FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
 WHERE NOT n.gone AND n.labels @> %(selector)s::jsonb AND c.name <> %(cluster)s
 ORDER BY c.name COLLATE "C", n.name COLLATE "C" LIMIT %(foreign)s)
"""


@dataclass
class _ClusterGroups:
    """What the grouped matches of one cluster add up to."""

    count: int = 0
    ready: int = 0
    gpus_known: int = 0
    gpu_min: int | None = None


def _match_groups(condition_json: str) -> tuple[dict[str, _ClusterGroups], dict[str, int], int]:
    """(per cluster: counts and GPU minimum; the devices every match reports with their
    minima; the number of matches), from the grouped matches (one query)."""
    devices = DeviceParser()
    clusters: dict[str, _ClusterGroups] = {}
    reported: dict[str, list[int]] = {}  # device -> [matches reporting it, smallest]
    with connection.cursor() as cursor:
        cursor.execute(_GROUPS_SQL, {"selector": condition_json})
        rows = cursor.fetchall()
    for cluster, device_text, count, ready, gpus_known, gpu_min in rows:
        entry = clusters.setdefault(cluster, _ClusterGroups())
        entry.count += count
        entry.ready += ready
        entry.gpus_known += gpus_known
        if gpu_min is not None:
            entry.gpu_min = gpu_min if entry.gpu_min is None else min(entry.gpu_min, gpu_min)
        for name, value in devices(device_text):
            seen = reported.setdefault(name, [0, value])
            seen[0] += count
            seen[1] = min(seen[1], value)
    total = sum(entry.count for entry in clusters.values())
    every = {name: least for name, (n, least) in sorted(reported.items()) if n == total}
    return clusters, every, total


def _listed_nodes(condition_json: str, *, cluster: str, window: NodeWindow, total: int,
                  foreign: int) -> tuple[list[MatchedNode], list[MatchedNode]]:
    """(the window's page of the matches, the first `window.limit` outside `cluster`)."""
    page_size = max(0, min(window.limit, total - window.offset))
    foreign_size = min(window.limit, foreign)
    if not page_size and not foreign_size:
        return [], []
    with connection.cursor() as cursor:
        cursor.execute(_LISTED_SQL, {
            "selector": condition_json, "cluster": cluster, "offset": window.offset,
            "page": page_size, "foreign": foreign_size,
        })
        rows = sorted(cursor.fetchall(), key=lambda row: (row[0], row[1], row[2]))
    nodes = [MatchedNode(cluster=c, name=name, namespace=ns, gpu=gpu, ready=ready)
             for _outside, c, name, ns, ready, gpu in rows]
    pages = [n for n, row in zip(nodes, rows, strict=True) if not row[0]]
    return pages, [n for n, row in zip(nodes, rows, strict=True) if row[0]]


def describe_selector(selector: Mapping[str, str], *, cluster: str,
                      window: NodeWindow = FIRST_PAGE) -> dict[str, Any]:
    """`describe_match(match_selector(selector), cluster=cluster, window=window)`, the same
    answer, without reading every matched node: counts and minima come from the matches
    grouped in PostgreSQL and only the listed nodes are read (a broad selector matches a
    whole fleet). Two queries (one more for two or more conditions, as `match_selector`)."""
    if not selector:
        return describe_match(SelectorMatch(nodes=()), cluster=cluster, window=window)
    conditions = sorted(selector.items())
    reached: ConditionClusters = ()
    if len(conditions) > 1:
        reached = _fetch_condition_clusters(conditions)
        if not frozenset.intersection(*(clusters for _, clusters in reached)):
            return describe_match(SelectorMatch(nodes=(), condition_clusters=reached),
                                  cluster=cluster, window=window)
    condition_json = json.dumps(dict(conditions))
    per_cluster, devices_max, count = _match_groups(condition_json)
    if len(conditions) == 1:  # its only condition reaches exactly the clusters of its matches
        reached = ((conditions[0], frozenset(per_cluster)),)
    foreign_count = sum(e.count for name, e in per_cluster.items() if name != cluster)
    nodes, foreign = _listed_nodes(condition_json, cluster=cluster, window=window, total=count,
                                   foreign=foreign_count)
    gpu_known = count > 0 and all(e.gpus_known == e.count for e in per_cluster.values())
    gpu_minima = [e.gpu_min for e in per_cluster.values() if e.gpu_min is not None]
    return _answer(
        cluster=cluster, window=window, count=count,
        per_cluster=[ClusterCount(name, e.count, e.ready)
                     for name, e in sorted(per_cluster.items())],
        nodes=nodes, foreign_count=foreign_count, foreign=foreign,
        confining=confining_conditions(reached, cluster),
        gpu_max=min(gpu_minima) if gpu_known else None, devices_max=devices_max,
    )


# Live match answers are cached this long (seconds) under a key that changes with the fleet:
# its clusters and their generations (read in one query) and a counter every committed
# inventory change moves (`forget_matches`, on `inventory_changed`: readiness and allocatable
# changes do not move a generation). The answer is the same for every user (the inventory is
# global), so the key holds no team.
MATCH_CACHE_SECONDS = 60
_INVENTORY_VERSION_KEY = "clusters:inventory-version"
_FLEET_VERSION_SQL = (
    "SELECT count(*), coalesce(sum(generation), 0)::bigint, coalesce(max(id), 0) "
    "FROM clusters_cluster"
)


def forget_matches(**_kwargs: Any) -> None:
    """Cached match answers are obsolete (the inventory changed): move the version."""
    try:
        cache.incr(_INVENTORY_VERSION_KEY)
    except ValueError:  # not set yet (or evicted)
        cache.set(_INVENTORY_VERSION_KEY, 1, timeout=None)


def describe_match_cached(selector: Mapping[str, str], *, cluster: str,
                          window: NodeWindow = FIRST_PAGE) -> dict[str, Any]:
    """`describe_match(match_selector(selector), ...)`, from the cache while the inventory
    has not changed (a broad selector reads every node of the fleet; its answer does not)."""
    with connection.cursor() as cursor:
        cursor.execute(_FLEET_VERSION_SQL)
        fleet = cursor.fetchone()
    version = cache.get(_INVENTORY_VERSION_KEY, 0)
    identity = json.dumps(
        [sorted(selector.items()), cluster, window.offset, window.limit, list(fleet), version]
    )
    key = "clusters:match:" + hashlib.sha256(identity.encode()).hexdigest()
    answer: dict[str, Any] | None = cache.get(key)
    if answer is None:
        answer = describe_selector(selector, cluster=cluster, window=window)
        cache.set(key, answer, MATCH_CACHE_SECONDS)
    return answer


class SelectorInputError(ApplicationError):
    """The selector the user gave cannot be matched; `extra["findings"]` says why."""

    def __init__(self, problems: Sequence[Finding]) -> None:
        findings = [p.as_dict() for p in problems]
        super().__init__(
            gettext("The selector is not valid."), extra={"findings": findings}, status_code=400
        )
        self.problems = tuple(problems)


def _input_pairs(raw: object, field: str) -> tuple[object, list[Finding]]:
    """The conditions in `raw`, and the parts of text input that are not conditions at all."""
    if isinstance(raw, str):
        pairs, unparseable = parse_selector_text(raw)
        return pairs, [unparseable_problem(part, field=field) for part in unparseable]
    if isinstance(raw, Mapping):
        return list(raw.items()), []
    return raw, []


def parse_selector_input(raw: object, *, field: str = "selector") -> dict[str, str]:
    """A selector from user input: a `{key: value}` object, a list of `[key, value]` pairs, or
    text (`key=value` separated by commas or new lines).

    Raises `SelectorInputError` (400, with findings) when the input breaks the selector rules
    of `clusters.labels`: empty, bad key or value syntax, or a key given twice.
    """
    pairs, problems = _input_pairs(raw, field)
    if pairs or not problems:
        problems += selector_problems(pairs, field=field)  # type: ignore[arg-type]
    if problems:
        raise SelectorInputError(problems)
    return {str(k): str(v) for k, v in pairs}  # type: ignore[union-attr, attr-defined]
