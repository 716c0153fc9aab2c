"""Fixtures shared by the job tests (the notification ones live in notify_support)."""

from tests.jobs.notify_support import (  # noqa: F401
    connections,
    eager_notifications,
    receiver,
    resolver,
)
