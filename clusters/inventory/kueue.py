"""The inventory poll's part for a Kueue cluster: its ClusterQueues and LocalQueues, read once
per poll through the gateway and kept as the quota view (`KueueQueues`) that the findings
engine, the queues API and the cluster page read.

A failed read (Kueue not installed: 404; no RBAC for it: 403; a timeout) never fails the poll
of the nodes: the error is recorded with the queues and the last good queues stay. What Kueue
reports is untrusted: `clusters.kueue` reads it into bounded views.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from django.utils import timezone

from clusters.credentials import CredentialError, credentials_for
from clusters.inventory import conf
from clusters.k8s import KubeError, list_cluster_queues, list_local_queues
from clusters.kueue import (
    MAX_CLUSTER_QUEUES,
    MAX_LOCAL_QUEUES,
    ClusterQueueView,
    LocalQueueView,
    cluster_queue_view,
    cluster_queues_in,
    local_queue_view,
    local_queues_in,
)
from clusters.models import AdmissionMode, Cluster, KueueQueues

logger = logging.getLogger(__name__)

_ERROR_MAX = 2000


@dataclass(frozen=True)
class KueueRead:
    """What one poll read of Kueue (the queues), or why it could not (`error`)."""

    cluster_queues: tuple[ClusterQueueView, ...] = ()
    local_queues: tuple[LocalQueueView, ...] = ()
    error: str = ""
    read_at: datetime | None = None


def read_kueue(cluster: Cluster) -> KueueRead | None:
    """The cluster's queues now (None unless it admits through Kueue); never raises for a
    cluster error, which comes back as `error`."""
    if cluster.admission != AdmissionMode.KUEUE:
        return None
    try:
        credentials = credentials_for(cluster)
        timeout, attempts = conf.kube_timeout(), conf.read_attempts()
        cluster_queues = list_cluster_queues(credentials=credentials, timeout=timeout,
                                             attempts=attempts, max_items=MAX_CLUSTER_QUEUES)
        local_queues = list_local_queues(credentials=credentials, timeout=timeout,
                                         attempts=attempts, max_items=MAX_LOCAL_QUEUES)
    except (KubeError, CredentialError) as error:
        logger.info("kueue read of %s failed: %s", cluster.name, error)
        return KueueRead(error=f"{type(error).__name__}: {error}"[:_ERROR_MAX])
    return KueueRead(
        cluster_queues=cluster_queues_in(cluster_queue_view(q) for q in cluster_queues),
        local_queues=local_queues_in(local_queue_view(q) for q in local_queues),
        read_at=timezone.now(),
    )


def store_kueue(*, cluster: Cluster, read: KueueRead | None) -> None:
    """Keep what `read_kueue` read (inside the poll's transaction): the queues when they were
    read, else the error beside the last good queues."""
    if read is None:
        return
    stored, _created = KueueQueues.objects.get_or_create(cluster=cluster)
    if read.error:
        if stored.error != read.error:
            stored.error = read.error
            stored.save(update_fields=["error"])
        return
    stored.cluster_queues = [q.as_dict() for q in read.cluster_queues]
    stored.local_queues = [q.as_dict() for q in read.local_queues]
    stored.read_at = read.read_at
    stored.error = ""
    stored.save(update_fields=["cluster_queues", "local_queues", "read_at", "error"])
