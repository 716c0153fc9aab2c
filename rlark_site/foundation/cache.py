"""The Redis cache with one client per connection pool instead of one per cache call.

Django's RedisCacheClient builds a new `redis.Redis` around the (shared) pool for every get, set
or incr; building one fills its table of response callbacks, about as much CPU as the command's
round trip itself (throttling alone makes two cache calls per API request). A Redis client is
safe to share (it takes a connection from the pool per command), so each pool gets one.
"""

from __future__ import annotations

from typing import Any

from django.core.cache.backends.redis import RedisCache, RedisCacheClient


class SharedClientRedisCacheClient(RedisCacheClient):
    def __init__(self, servers: list[str], **options: Any) -> None:
        super().__init__(servers, **options)
        self._clients: dict[int, Any] = {}

    def get_client(self, key: Any = None, *, write: bool = False) -> Any:
        # Django's private helpers (django-stubs does not declare them)
        pool = self._get_connection_pool(write)  # type: ignore[attr-defined]
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(  # type: ignore[attr-defined]
                connection_pool=pool)
        return client


class SharedClientRedisCache(RedisCache):
    """`django.core.cache.backends.redis.RedisCache`, with `SharedClientRedisCacheClient`."""

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = SharedClientRedisCacheClient
