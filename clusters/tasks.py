"""Background work of the clusters app: the inventory poll.

Beat runs `poll_due_clusters` every few seconds (schedule in `rlark_site/celery.py`); it
queues one `poll_cluster_task` per due cluster, so a slow or failing cluster only ever
occupies its own task.
"""

from __future__ import annotations

import logging
import time

from celery import shared_task

from clusters.inventory import conf, services
from clusters.metrics import record_poll

logger = logging.getLogger(__name__)


@shared_task(
    name="clusters.tasks.poll_due_clusters",
    ignore_result=True,
    soft_time_limit=30,
    time_limit=60,
)
def poll_due_clusters() -> list[int]:
    """Fan out: one poll task for every enabled cluster whose `next_poll_at` has come."""
    return services.poll_due_clusters()


@shared_task(
    name="clusters.tasks.poll_cluster_task",
    ignore_result=True,
    soft_time_limit=conf.task_soft_time_limit(),
    time_limit=conf.task_time_limit(),
)
def poll_cluster_task(cluster_id: int) -> None:
    """Poll one cluster's inventory."""
    started = time.monotonic()
    result = services.poll_cluster(cluster_id=cluster_id)
    # Every outcome is counted: `busy` (another poll holds the cluster's lease) and `skipped`
    # (the cluster is disabled or gone) too; only polls that called the cluster are timed.
    timed = result.outcome in (services.PollOutcome.OK, services.PollOutcome.FAILED)
    record_poll(cluster=result.cluster, outcome=result.outcome.value,
                seconds=time.monotonic() - started if timed else None)
    logger.info("inventory poll %s", result.summary())
