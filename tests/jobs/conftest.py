"""Fixtures shared by the job tests (the notification ones live in notify_support)."""

from tests.jobs.notify_support import eager_notifications, receiver  # noqa: F401
