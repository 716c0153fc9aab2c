"""The API's request rate limits: DRF's sliding windows, counted in one Redis round trip.

DRF's SimpleRateThrottle reads the caller's request times (a pickled list) from the cache and
writes them back: two round trips per request, and two requests at the same moment can both
read the old list (one is then not counted). Here a Lua script trims, counts and adds to a
sorted set of request times atomically. The window, the limit (`DEFAULT_THROTTLE_RATES`), who
is counted together and the answer's Retry-After are DRF's.
"""

from __future__ import annotations

import uuid
from typing import Any

from rest_framework import throttling
from rest_framework.request import Request

# KEYS[1]: the window's sorted set; ARGV: now, window seconds, limit, a unique member.
# Answers {1 if allowed else 0, requests in the window (this one included if allowed),
# the oldest request time in it (a string; "" when none)}.
_WINDOW_SCRIPT = """
local now, window, limit = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
local allowed = 0
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('EXPIRE', KEYS[1], math.ceil(window))
  count = count + 1
  allowed = 1
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return {allowed, count, oldest[2] or ''}
"""


class OneTripRateThrottle(throttling.SimpleRateThrottle):
    """SimpleRateThrottle's `allow_request` and `wait` over `_WINDOW_SCRIPT`."""

    cache_format = "throttle:%(scope)s:%(ident)s"  # a sorted set (DRF's keys hold a list)
    num_requests: int  # set from the rate by SimpleRateThrottle.__init__
    duration: int
    _script: Any = None

    def allow_request(self, request: Request, view: Any) -> bool:
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        self.now = self.timer()
        allowed, self._count, oldest = self._run_script()
        self._oldest = float(oldest) if oldest else self.now
        return bool(allowed)

    def wait(self) -> float | None:
        """DRF's: the rest of the oldest request's window shared by the requests left."""
        remaining = self.duration - (self.now - self._oldest) if self._count else self.duration
        available = self.num_requests - self._count + 1
        if available <= 0:
            return None
        return remaining / float(available)

    def _run_script(self) -> tuple[int, int, str]:
        backend: Any = self.cache  # rlark_site.foundation.cache.SharedClientRedisCache
        client = backend.redis_client()
        script = OneTripRateThrottle._script
        if script is None:
            script = OneTripRateThrottle._script = client.register_script(_WINDOW_SCRIPT)
        key = backend.make_and_validate_key(self.key)
        member = f"{self.now!r}:{uuid.uuid4().hex}"
        allowed, count, oldest = script(keys=[key], client=client,
                                        args=[repr(self.now), self.duration, self.num_requests,
                                              member])
        return int(allowed), int(count), oldest.decode() if isinstance(oldest, bytes) else oldest


class AnonRateThrottle(OneTripRateThrottle, throttling.AnonRateThrottle):
    """Unauthenticated requests, per address (DRF's `anon` scope)."""


class UserRateThrottle(OneTripRateThrottle, throttling.UserRateThrottle):
    """Authenticated requests, per user (DRF's `user` scope)."""
