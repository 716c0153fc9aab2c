"""Clearing only the cache keys a test owns.

`cache.clear()` flushes the whole Redis db, throttle counters of other tests sharing it
included; tests clear their own key prefix instead (SCAN by the prefix, then `delete_many`).
"""

from __future__ import annotations

import redis
from django.conf import settings
from django.core.cache import cache

__all__ = ["OBSERVE_PREFIX", "clear_prefix"]

OBSERVE_PREFIX = "observe:"  # jobs.observe.live: shared snapshots, log reads, their locks


def clear_prefix(prefix: str) -> int:
    """Delete every cache key that starts with `prefix` (as the code names it); how many."""
    location = settings.CACHES["default"]["LOCATION"]
    client = redis.Redis.from_url(location)
    try:
        pattern = cache.make_key(prefix) + "*"
        full = [raw.decode() for raw in client.scan_iter(match=pattern, count=500)]
    finally:
        client.close()
    head = cache.make_key("")
    names = [key[len(head):] for key in full if key.startswith(head)]
    if names:
        cache.delete_many(names)
    return len(names)
