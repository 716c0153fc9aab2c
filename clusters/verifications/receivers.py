"""Signal receivers of the verification queue (connected in `ClustersConfig.ready`)."""

from __future__ import annotations

import logging
from typing import Any

from django.dispatch import receiver

from clusters.models import Cluster
from clusters.signals import inventory_changed
from clusters.verifications.services import verifications_follow_inventory

logger = logging.getLogger(__name__)


@receiver(inventory_changed, dispatch_uid="verifications_follow_inventory")
def follow_inventory_change(sender: Any, *, cluster: Cluster, **kwargs: Any) -> None:
    """A poll changed `cluster`: approvals whose matched nodes changed become stale.

    The poll has committed by now; a failure here is logged rather than failing the poll
    (the findings engine compares approved snapshots with today's matches on its own).
    """
    try:
        stale = verifications_follow_inventory(cluster=cluster)
    except Exception:
        logger.exception("Following the inventory change of %s failed", cluster.name)
        return
    if stale:
        logger.info("Inventory drift on %s made verifications %s stale", cluster.name, stale)
