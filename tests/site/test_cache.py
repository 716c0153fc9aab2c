"""The Redis cache backend: Django's, with one Redis client per connection pool."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.core.cache import cache, caches

from rlark_site.foundation.cache import SharedClientRedisCache

pytestmark = pytest.mark.usefixtures("private_cache")


def _client(**arguments: Any) -> Any:
    """The Redis client this thread's cache sends a command with."""
    backend: Any = caches["default"]
    return backend._cache.get_client(**arguments)


def test_every_call_uses_the_pools_one_client() -> None:
    assert isinstance(caches["default"], SharedClientRedisCache)
    client = _client()
    assert _client(key="some key", write=True) is client
    assert _client() is client


def test_the_cache_answers_as_djangos() -> None:
    assert cache.get("missing", "default") == "default"
    cache.set("number", 1, 60)
    assert cache.add("number", 5, 60) is False
    assert cache.incr("number", 2) == 3
    cache.set_many({"a": {"nested": [1, 2.5]}, "b": "text"}, 60)
    assert cache.get_many(["a", "b", "missing"]) == {"a": {"nested": [1, 2.5]}, "b": "text"}
    assert cache.touch("a", 60) is True
    cache.delete_many(["a", "number"])
    assert cache.get("a") is None and cache.get("number") is None
    assert cache.get("b") == "text"


def test_each_thread_has_its_own_cache_and_client() -> None:
    here = _client()
    seen: list[object] = []
    worker = threading.Thread(target=lambda: seen.append(_client()))
    worker.start()
    worker.join()
    assert seen and seen[0] is not here
