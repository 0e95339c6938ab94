"""Per-endpoint limits: calls in flight and requests per minute.

The rpm limit is a sliding 60 s window over attempts (retries included), so
no 60 s window at the server ever holds more than `rpm` requests, which is
what providers enforce. A token counts from the attempt's start until 60 s
after its END: the request reaches the server some time after its token is
granted (client set-up, a busy event loop: 0.1-1 s on a first batch), so a
window over start times alone let a later, faster request land inside the
server's window of an earlier, slower one. Every request has reached the
server by the time its attempt ends, so a window over the ends always holds.
The clock and sleep are injected for tests.
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
        self._ends: deque[float] = deque()  # end times of finished attempts, oldest first
        self._held = 0  # tokens of attempts still in flight: they never expire
        self._full_at = -float("inf")  # when a caller last found the window full
        self._last_grant = -float("inf")
        self._ended = asyncio.Event()
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(max_concurrency)

    async def _token(self) -> None:
        async with self._lock:  # one waiter at a time keeps the window exact
            while True:
                now = self._clock()
                while self._ends and now - self._ends[0] >= WINDOW_S:
                    self._ends.popleft()
                free = len(self._ends) + self._held < self.rpm
                if not free:
                    self._full_at = now
                # Within a window of having been full, grants are paced (see above).
                paced = now - self._full_at < WINDOW_S
                turn = self._last_grant + WINDOW_S / self.rpm / 2 if paced else now
                if free and turn <= now:
                    self._held += 1
                    self._last_grant = now
                    return
                if free:
                    await self._sleep(turn - now)  # a token is free; its turn is not yet
                else:
                    if self._ends:
                        await self._sleep(self._ends[0] + WINDOW_S - now)
                    else:  # every token is in flight: the first to end starts its 60 s
                        self._ended.clear()
                        await self._ended.wait()
                    # Waking up to a token the window just freed: saturated from here on.
                    self._full_at = self._clock()

    async def __aenter__(self) -> RateLimiter:
        await self._slots.acquire()
        try:
            await self._token()
        except BaseException:
            self._slots.release()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._held -= 1
        self._ends.append(self._clock())
        self._ended.set()
        self._slots.release()
