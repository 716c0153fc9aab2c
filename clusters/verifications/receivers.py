"""Signal receivers of the verification queue (connected in `ClustersConfig.ready`)."""

from __future__ import annotations

from typing import Any

from django.dispatch import receiver

from clusters.models import Cluster
from clusters.signals import inventory_changed
from clusters.verifications.services import verifications_follow_inventory


@receiver(inventory_changed, dispatch_uid="verifications_follow_inventory")
def follow_inventory_change(sender: Any, *, cluster: Cluster, **kwargs: Any) -> None:
    """A poll changed `cluster`: approvals whose matched nodes changed become stale."""
    verifications_follow_inventory(cluster=cluster)
