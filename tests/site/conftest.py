"""Fixtures of the site tests: the web process as `make run` starts it (live_web)."""

from tests.site.live_web import live_web  # noqa: F401
