"""Test data builders (plain functions; no mocks: they write real rows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.utils import timezone

from clusters.models import Cluster, ClusterState, Node, StorageClass

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
