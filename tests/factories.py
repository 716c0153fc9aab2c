"""Test data builders (plain functions; no mocks: they write real rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.db import connection
from django.utils import timezone

from clusters.models import Cluster, ClusterState, Node, StorageClass
from jobs.records.confirmation import confirmation_confirm, confirmation_request
from jobs.records.services import deployment_parameters_fill_from_job

REPO = Path(__file__).resolve().parent.parent
DEMO_FLEET = REPO / "deploy" / "fleets" / "demo.yaml"


def _count(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def load_fleet_rows(fleet: Path | dict[str, Any] = DEMO_FLEET, *,
                    api_url_base: str = "http://127.0.0.1:1") -> list[Cluster]:
    """Create Cluster/Node/StorageClass rows straight from a fleet description.

    For tests that need an inventory but are not about polling (polling tests go through the
    simulator and the real client instead).
    """
    data = yaml.safe_load(fleet.read_text()) if isinstance(fleet, Path) else fleet
    now = timezone.now()
    clusters = []
    for spec in data["clusters"]:
        cluster = Cluster.objects.create(
            name=spec["name"], namespace=spec["namespace"],
            api_url=f"{api_url_base}/{spec['name']}", state=ClusterState.OK,
            last_polled_at=now, last_success_at=now, generation=1,
        )
        StorageClass.objects.bulk_create(
            StorageClass(cluster=cluster, name=name) for name in spec.get("storage_classes", [])
        )
        nodes = []
        for node in spec.get("nodes", []):
            alloc = node.get("allocatable", {}) or {}
            nodes.append(Node(
                cluster=cluster, name=node["name"], namespace=spec["namespace"],
                labels=node.get("labels", {}), gpu=_count(alloc.get("nvidia.com/gpu")),
                devices={k: _count(v) for k, v in alloc.items() if k.startswith("rlinf.io/")},
                ready=node.get("ready", True),
            ))
        Node.objects.bulk_create(nodes)
        clusters.append(cluster)
    return clusters


_BULK_NODES_SQL = """
INSERT INTO clusters_node (cluster_id, name, namespace, labels, gpu, devices, ready, gone,
                           first_seen, resource_version)
SELECT %(cluster_id)s, format('%%s-node-%%s', %(cluster)s, lpad(i::text, 5, '0')),
       %(namespace)s,
       jsonb_build_object('rlinf.io/pool', 'big', 'topology.rlinf.io/cluster', %(cluster)s,
                          'rlinf.io/rack', format('rack-%%s', i %% 20)),
       8, '{"rlinf.io/rdma": 4}'::jsonb, i %% %(not_ready_every)s <> 0, false, now(), '1'
FROM generate_series(1, %(nodes)s) AS i
"""


def bulk_fleet(clusters: int, nodes_per_cluster: int, *,
               not_ready_every: int = 50) -> list[Cluster]:
    """A large inventory inserted in one statement per cluster (clusters `big-00`, ...): every
    node carries `rlinf.io/pool=big`, its `topology.rlinf.io/cluster` and one of 20 racks;
    8 GPUs; every `not_ready_every`-th node of a cluster is NotReady."""
    now = timezone.now()
    created = []
    with connection.cursor() as cursor:
        for index in range(clusters):
            name = f"big-{index:02d}"
            cluster = Cluster.objects.create(
                name=name, namespace=f"rl-{name}", api_url=f"http://127.0.0.1:1/{name}",
                state=ClusterState.OK, last_polled_at=now, last_success_at=now, generation=1,
            )
            cursor.execute(_BULK_NODES_SQL, {
                "cluster_id": cluster.pk, "cluster": name, "namespace": cluster.namespace,
                "nodes": nodes_per_cluster, "not_ready_every": not_ready_every,
            })
            created.append(cluster)
    return created


def confirmed_parameters(job: Any, *, admin: Any, user: Any | None = None) -> Any:
    """Make the job's deployment parameters describe it ("Fill from job") and have `admin`
    confirm them for it, through the real services (the gate stays as strict as ever).

    The job must link a deployment-parameters record already; returns it, confirmed.
    """
    actor = user if user is not None else job.created_by
    parameters = deployment_parameters_fill_from_job(
        parameters=job.deployment_parameters, job=job, user=actor
    )
    if parameters.confirmation_state != "pending" or parameters.confirmation_job_id != job.pk:
        parameters = confirmation_request(parameters=parameters, user=actor, job=job)
    return confirmation_confirm(parameters_id=parameters.pk, admin=admin, note="checked")


def stored_request(*, team: Any, user: Any, cluster: str, selector: dict[str, str],
                   for_header_role: bool = False, requested_gpu: int | None = None,
                   requested_devices: dict[str, int] | None = None,
                   requested_host_paths: list[str] | None = None) -> Any:
    """A pending verification row written directly, with the snapshot the request service stores
    for today's matches (its own `_snapshot`), whatever the placement checks say.

    Only for tests about how a request with failing checks is shown or judged: the service
    refuses to create one (a pending request gets there only when the inventory drifts after it
    was made; `drifted_request` takes that route).
    """
    from clusters.matching import match_selector
    from clusters.models import Verification
    from clusters.verifications.selectors import selector_key_text
    from clusters.verifications.services import _generations, _snapshot

    target = Cluster.objects.get(name=cluster)
    return Verification.objects.create(
        team=team, cluster=target, selector=selector, selector_key=selector_key_text(selector),
        for_header_role=for_header_role, requested_gpu=requested_gpu,
        requested_devices=requested_devices or {},
        requested_host_paths=sorted(requested_host_paths or []), requested_by=user,
        **_snapshot(match_selector(selector), target, _generations()),
    )


def drifted_request(*, hidden: list[str], **request: Any) -> Any:
    """A request made while the nodes named `hidden` were gone from the inventory (so it passed
    the placement checks), after which they came back and the open request followed the
    inventory (`verifications_follow_inventory`), as a poll would have it."""
    from clusters.verifications.services import (
        verification_request,
        verifications_follow_inventory,
    )

    nodes = Node.objects.filter(name__in=hidden)
    clusters = list(Cluster.objects.filter(nodes__name__in=hidden).distinct())
    assert len(clusters) >= 1 and nodes.count() == len(hidden), hidden
    nodes.update(gone=True)
    verification = verification_request(**request)
    nodes.update(gone=False)
    for cluster in clusters:
        Cluster.objects.filter(pk=cluster.pk).update(generation=cluster.generation + 1)
        cluster.refresh_from_db()
        verifications_follow_inventory(cluster=cluster)
    verification.refresh_from_db()
    return verification
