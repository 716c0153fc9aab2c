"""Selector matching against the global inventory (every cluster; gone nodes excluded).

Label containment (`labels @> {...}`) is answered by the GIN index on `Node.labels`.
Results are the `clusters.types` value objects the findings engine consumes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from django.db import connection

from clusters.types import MatchedNode, SelectorMatch, selector_key

_NODES_SQL = """
SELECT c.name, n.name, n.namespace, n.gpu, n.devices, n.ready
FROM clusters_node n JOIN clusters_cluster c ON c.id = n.cluster_id
WHERE NOT n.gone AND n.labels @> %s::jsonb
ORDER BY c.name, n.name
"""

# For each single condition: the distinct clusters its matches lie in (one round trip).
_CONDITIONS_SQL = """
SELECT cond.i, array_agg(DISTINCT c.name ORDER BY c.name)
FROM unnest(%s::jsonb[]) WITH ORDINALITY AS cond(j, i)
JOIN clusters_node n ON n.labels @> cond.j AND NOT n.gone
JOIN clusters_cluster c ON c.id = n.cluster_id
GROUP BY cond.i
"""


def _node(row: tuple[object, ...]) -> MatchedNode:
    cluster, name, namespace, gpu, devices, ready = row
    device_items = devices if isinstance(devices, dict) else json.loads(str(devices or "{}"))
    return MatchedNode(
        cluster=str(cluster), name=str(name), namespace=str(namespace),
        gpu=gpu if isinstance(gpu, int) else None,
        devices=tuple(sorted((k, int(v)) for k, v in device_items.items() if v is not None)),
        ready=bool(ready),
    )


def match_selector(selector: Mapping[str, str]) -> SelectorMatch:
    """Every non-gone node of every cluster whose labels contain all the conditions.

    An empty selector matches nothing here: RLark never places a role without a condition.
    """
    if not selector:
        return SelectorMatch(nodes=())
    conditions = sorted(selector.items())
    with connection.cursor() as cursor:
        cursor.execute(_NODES_SQL, [json.dumps(dict(conditions))])
        nodes = tuple(_node(row) for row in cursor.fetchall())
        cursor.execute(_CONDITIONS_SQL, [[json.dumps({k: v}) for k, v in conditions]])
        per_condition = {int(i): frozenset(names) for i, names in cursor.fetchall()}
    condition_clusters = tuple(
        (cond, per_condition.get(index, frozenset()))
        for index, cond in enumerate(conditions, start=1)
    )
    return SelectorMatch(nodes=nodes, condition_clusters=condition_clusters)


def match_many(
    selectors: Iterable[Mapping[str, str]],
) -> dict[tuple[tuple[str, str], ...], SelectorMatch]:
    """Matches for several selectors, keyed like `CheckContext.matches` (duplicates computed once)."""
    result: dict[tuple[tuple[str, str], ...], SelectorMatch] = {}
    for selector in selectors:
        key = selector_key(dict(selector))
        if key not in result:
            result[key] = match_selector(dict(selector))
    return result
