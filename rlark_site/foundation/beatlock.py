"""One Celery beat at a time: a Redis lock held by the beat process for as long as it runs.

A beat that starts while another holds the lock waits (a hot standby) and takes over within
`RLARK_BEAT_LOCK_TTL` seconds of the holder's death. The holder renews the lock every third
of that time; if it ever finds the lock lost (Redis flushed, the process frozen past the TTL
and another beat took over), it exits at once rather than schedule beside the new holder.
Connected to Celery's `beat_init` signal in `rlark_site/celery.py`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import redis
from redis.exceptions import LockError

logger = logging.getLogger(__name__)

LOCK_NAME = "rlark:beat-lock"


class BeatLock:
    """The beat lock in one Redis database (the broker's)."""

    def __init__(self, url: str, *, ttl: float, name: str = LOCK_NAME) -> None:
        self.ttl = ttl
        self.name = name
        self._client = redis.Redis.from_url(url)
        self._lock = self._client.lock(name, timeout=ttl, thread_local=False)

    def try_acquire(self) -> bool:
        """Take the lock if it is free; whether this process now holds it."""
        return bool(self._lock.acquire(blocking=False))

    def wait_acquire(self, *, poll: float) -> None:
        """Block until this process holds the lock."""
        if not self.try_acquire():
            logger.warning("another beat holds %s; waiting as a standby", self.name)
            while not self.try_acquire():
                threading.Event().wait(poll)
        logger.warning("this beat holds %s", self.name)

    def renew(self) -> bool:
        """Reset the lock's TTL; False when this process no longer holds it."""
        try:
            self._lock.reacquire()
        except LockError:
            return False
        return True

    def release(self) -> None:
        try:
            self._lock.release()
        except LockError:
            pass  # expired or taken over: nothing of ours to release


def _keep_renewing(lock: BeatLock, stop: threading.Event) -> None:
    while not stop.wait(lock.ttl / 3):
        if not lock.renew():
            logger.critical("beat lost %s to another beat; exiting", lock.name)
            os._exit(3)  # a beat without the lock must stop scheduling at once


def hold_beat_lock(url: str, *, ttl: float) -> tuple[BeatLock, threading.Event]:
    """Wait for the lock, then keep it renewed in a daemon thread (set the event to stop)."""
    lock = BeatLock(url, ttl=ttl)
    lock.wait_acquire(poll=max(ttl / 3, 0.2))
    stop = threading.Event()
    name = f"beat-lock-{socket.gethostname()}"
    threading.Thread(target=_keep_renewing, args=(lock, stop), name=name, daemon=True).start()
    return lock, stop


def on_beat_init(**_: Any) -> None:
    """Celery `beat_init` handler: hold the lock before the first tick, release it at exit."""
    import atexit

    from django.conf import settings

    lock, stop = hold_beat_lock(settings.CELERY_BROKER_URL, ttl=settings.RLARK_BEAT_LOCK_TTL)

    def release() -> None:
        stop.set()
        lock.release()

    atexit.register(release)
