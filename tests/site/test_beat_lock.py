"""The beat lock: one holder at a time, handed over on release or expiry, loss detected."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from django.conf import settings

from rlark_site.foundation.beatlock import BeatLock


@pytest.fixture
def lock_name() -> Iterator[str]:
    name = f"rlark:test-beat-lock:{uuid.uuid4().hex}"
    yield name
    redis.Redis.from_url(settings.CELERY_BROKER_URL).delete(name)


def beat_lock(name: str, ttl: float = 30.0) -> BeatLock:
    return BeatLock(settings.CELERY_BROKER_URL, ttl=ttl, name=name)


def test_a_second_beat_cannot_take_a_held_lock(lock_name: str) -> None:
    first, second = beat_lock(lock_name), beat_lock(lock_name)
    assert first.try_acquire()
    assert not second.try_acquire()
    assert first.renew()


def test_a_released_lock_goes_to_the_standby(lock_name: str) -> None:
    first, second = beat_lock(lock_name), beat_lock(lock_name)
    assert first.try_acquire()
    first.release()
    assert second.try_acquire()
    assert not first.renew()


def test_an_expired_holder_finds_its_lock_lost(lock_name: str) -> None:
    first, second = beat_lock(lock_name, ttl=0.3), beat_lock(lock_name, ttl=0.3)
    assert first.try_acquire()
    time.sleep(0.5)  # the holder froze past its TTL
    assert second.try_acquire()
    assert not first.renew()
