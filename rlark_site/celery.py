"""The Celery app. Schedules live in one place: `beat_schedule` below; queues and routes in
`rlark_site/settings/tasks.py`; one beat at a time through `rlark_site/foundation/beatlock.py`."""

from __future__ import annotations

import os

from celery import Celery
from celery.signals import beat_init, setup_logging

from rlark_site.foundation.beatlock import on_beat_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_site.settings")

app = Celery("rlark")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks(["clusters", "jobs"])
beat_init.connect(on_beat_init, weak=False)


@setup_logging.connect(weak=False)
def _use_django_logging(**_: object) -> None:
    """Workers and beat log through Django's LOGGING (RLARK_LOG_FORMAT), not Celery's own."""
    from logging.config import dictConfig

    from django.conf import settings

    dictConfig(settings.LOGGING)


@app.on_after_finalize.connect
def _schedule(sender: Celery, **_: object) -> None:
    from django.conf import settings

    sender.conf.beat_schedule = {
        "poll-inventories": {
            "task": "clusters.tasks.poll_due_clusters",
            "schedule": float(settings.RLARK_INVENTORY_DUE_CHECK),
        },
        "sync-job-status": {
            "task": "jobs.tasks.sync_submitted_jobs",
            "schedule": float(settings.RLARK_STATUS_POLL_INTERVAL),
        },
        "read-training-progress": {
            "task": "jobs.tasks.sync_training_progress",
            "schedule": float(settings.RLARK_PROGRESS_POLL_INTERVAL),
        },
        "find-first-signals": {
            "task": "jobs.tasks.sync_first_signals",
            "schedule": float(settings.RLARK_STATUS_POLL_INTERVAL),
        },
        "resume-stalled-submissions": {
            "task": "jobs.tasks.resume_stalled_submissions",
            "schedule": 30.0,
        },
    }
