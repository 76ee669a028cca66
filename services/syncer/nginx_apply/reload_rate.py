"""How often nginx may reload: ingress-nginx's `--sync-rate-limit` as a token bucket.

ingress-nginx waits on a token bucket before every sync: it holds one token (burst 1) and gains `--sync-rate-limit`
tokens a second (0.3 by default), so syncs come at most once every 3.3 s after the first. pyngress limits reloads
only, which are what cost (new workers, the old ones draining): routes, endpoints and certificates reach nginx's Lua
at once whatever the bucket holds. A change that needs a reload while the bucket is empty waits for its token; the
sync that takes it applies the model of that moment, so changes made meanwhile become one reload (the last wins).

No I/O and no timers here: the caller asks, and the clock is injected (tests step it by hand).
"""
from __future__ import annotations

import time
from typing import Callable


# Refills add up in floating point: at ready_at() the bucket may hold 0.9999999 of a token.
_ROUNDING = 1e-9


class ReloadRateLimiter:
    """A token bucket: `burst` tokens when full, refilled at `per_second`; a reload takes one."""

    def __init__(self, per_second: float, *, burst: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        if not per_second > 0 or burst < 1:
            raise ValueError(f"a reload rate needs a rate above 0 and a burst of at least 1, got {per_second}, {burst}")
        self.per_second = per_second
        self.burst = burst
        self.clock = clock
        self._tokens = float(burst)  # full at start: the first reload never waits
        self._counted_at = clock()

    def _refill(self) -> float:
        now = self.clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._counted_at) * self.per_second)
        self._counted_at = now
        return now

    def ready(self) -> bool:
        """Whether a reload may happen now."""
        self._refill()
        return self._tokens >= 1.0 - _ROUNDING

    def take(self) -> None:
        """Count a reload that happened."""
        self._refill()
        self._tokens -= 1.0

    def ready_at(self) -> float:
        """The clock's time at which `ready()` turns true (now, or in the past, when it is true already)."""
        now = self._refill()
        return now + max(0.0, 1.0 - self._tokens) / self.per_second
