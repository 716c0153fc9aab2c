"""`ClusterLabel` stays equal to the label pairs of the present nodes, whoever writes them."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from django.db import connection

from clusters.models import Cluster, ClusterLabel, Node
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db


def recounted() -> Counter[tuple[int, str, str]]:
    """The pairs counted from scratch from every present node, in Python."""
    counts: Counter[tuple[int, str, str]] = Counter()
    for cluster_id, labels in Node.objects.filter(gone=False).values_list("cluster_id", "labels"):
        if isinstance(labels, dict):
            counts.update((cluster_id, k, v) for k, v in labels.items())
    return counts


def indexed() -> Counter[tuple[int, str, str]]:
    rows = ClusterLabel.objects.values_list("cluster_id", "key", "value", "nodes")
    assert all(nodes > 0 for *_, nodes in rows), "a pair no present node carries was kept"
    return Counter({(c, k, v): n for c, k, v, n in rows})


def test_a_loaded_fleet_is_indexed_as_it_is_inserted() -> None:
    load_fleet_rows()
    assert indexed() == recounted()
    gpu_a = Cluster.objects.get(name="gpu-a")
    a100 = ClusterLabel.objects.get(cluster=gpu_a, key="rlinf.io/gpu-model", value="a100")
    assert a100.nodes == 13


def test_relabelling_vanishing_returning_and_deleting_nodes_keep_the_index_exact() -> None:
    load_fleet_rows()
    a100 = Node.objects.filter(labels__contains={"rlinf.io/gpu-model": "a100"})
    a100.filter(name__startswith="b-").update(labels={"rlinf.io/gpu-model": "h100"})
    assert indexed() == recounted()
    assert not ClusterLabel.objects.filter(
        cluster__name="gpu-b", key="rlinf.io/gpu-model", value="a100"
    ).exists()

    Node.objects.filter(name__in=["a-head-01", "a-cpu-01"]).update(gone=True)
    assert indexed() == recounted()
    Node.objects.filter(name="a-head-01").update(gone=False)
    assert indexed() == recounted()

    Node.objects.filter(cluster__name="cpu-c").delete()
    assert indexed() == recounted()
    assert not ClusterLabel.objects.filter(cluster__name="cpu-c").exists()


def test_bookkeeping_updates_and_raw_sql_are_seen_too() -> None:
    load_fleet_rows()
    before = indexed()
    Node.objects.update(resource_version="42")  # no label changes: nothing to count
    assert indexed() == before
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE clusters_node SET labels = labels || '{\"extra\": \"yes\"}'::jsonb "
            "WHERE name LIKE 'c-%%'"
        )
    assert indexed() == recounted()
    assert sum(n for (_, k, _v), n in indexed().items() if k == "extra") == 10


def test_non_object_labels_count_nothing() -> None:
    cluster = load_fleet_rows()[0]
    Node.objects.create(cluster=cluster, name="odd", namespace="ns", labels=["not", "a", "map"])
    assert indexed() == recounted()
    assert not ClusterLabel.objects.filter(key__in=["0", "1", "2"]).exists()


def test_a_cluster_and_its_pairs_can_be_deleted() -> None:
    clusters = load_fleet_rows()
    clusters[0].delete()
    assert not ClusterLabel.objects.filter(cluster_id=clusters[0].id).exists()
    assert indexed() == recounted()


def test_random_write_sequences_keep_the_index_exact() -> None:
    cluster, other = load_fleet_rows()[:2]
    rng = random.Random(7)
    keys, values = ["k1", "k2", "k3"], ["a", "b", "c"]

    def labels() -> dict[str, str]:
        return {k: rng.choice(values) for k in rng.sample(keys, rng.randint(0, 3))}

    names = [f"r-{i}" for i in range(12)]
    for step in range(60):
        op = rng.choice(["insert", "relabel", "gone", "back", "delete", "move"])
        pick = rng.sample(names, rng.randint(1, 4))
        if op == "insert":
            Node.objects.bulk_create(
                [Node(cluster=rng.choice([cluster, other]), name=n, namespace="ns", labels=labels())
                 for n in pick],
                ignore_conflicts=True,
            )
        elif op == "relabel":
            for node in Node.objects.filter(name__in=pick):
                node.labels = labels()
                node.save(update_fields=["labels"])
        elif op == "gone":
            Node.objects.filter(name__in=pick).update(gone=True)
        elif op == "back":
            Node.objects.filter(name__in=pick).update(gone=False)
        elif op == "delete":
            Node.objects.filter(name__in=pick).delete()
        else:
            Node.objects.filter(name__in=pick, cluster=cluster).exclude(
                name__in=Node.objects.filter(cluster=other).values("name")
            ).update(cluster=other)
        assert indexed() == recounted(), f"after step {step} ({op} {pick})"
