"""Per-endpoint limits: calls in flight and requests per minute.

The rpm limit is a sliding 60 s window over the start times of attempts
(retries included), so no 60 s window ever holds more than `rpm` requests,
which is what providers enforce. The clock and sleep are injected for tests.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

__all__ = ["RateLimiter"]

WINDOW_S = 60.0


class RateLimiter:
    """`async with limiter:` holds a concurrency slot and one rpm token."""

    def __init__(self, rpm: int, max_concurrency: int, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep) -> None:
        if rpm < 1 or max_concurrency < 1:
            raise ValueError("rpm and max_concurrency must be >= 1")
        self.rpm = rpm
        self._clock = clock
        self._sleep = sleep
        self._starts: deque[float] = deque()
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max_concurrency)

    async def _token(self) -> None:
        async with self._lock:  # one waiter at a time keeps the window exact
            while True:
                now = self._clock()
                while self._starts and now - self._starts[0] >= WINDOW_S:
                    self._starts.popleft()
                if len(self._starts) < self.rpm:
                    self._starts.append(now)
                    return
                await self._sleep(self._starts[0] + WINDOW_S - now)

    async def __aenter__(self) -> RateLimiter:
        await self._slots.acquire()
        try:
            await self._token()
        except BaseException:
            self._slots.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._slots.release()
