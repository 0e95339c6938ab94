"""RateLimiter: no 60 s window holds more than rpm attempts (counted until 60 s after
each attempt ends), and a bound on holders.

All on a fake clock: the injected sleep advances the clock, so minutes of
rate limiting run in milliseconds.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from monitor.measure.ratelimit import WINDOW_S, RateLimiter

T = TypeVar("T")


class FakeClock:
    """A clock that only moves when someone sleeps on it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        assert seconds >= 0, f"asked to sleep a negative time: {seconds}"
        self.slept.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)  # let the other tasks run, as a real sleep would


def _limiter(rpm: int, max_concurrency: int, clock: FakeClock) -> RateLimiter:
    return RateLimiter(rpm, max_concurrency, clock=clock, sleep=clock.sleep)


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """asyncio.run with a real-time guard: a leaked slot fails instead of hanging."""
    return asyncio.run(asyncio.wait_for(coro, timeout=5.0))


def _max_in_any_window(starts: list[float]) -> int:
    """The most start times inside any half-open window [t, t + 60 s)."""
    return max(sum(1 for s in starts if t <= s < t + WINDOW_S) for t in starts)


def test_rpm_window_is_never_exceeded_and_not_over_throttled() -> None:
    clock = FakeClock()
    starts: list[float] = []

    async def one(limiter: RateLimiter) -> None:
        async with limiter:
            starts.append(clock())

    async def main() -> None:
        limiter = _limiter(10, 100, clock)
        await asyncio.gather(*(one(limiter) for _ in range(35)))

    _run(main())
    assert len(starts) == 35
    assert starts == sorted(starts)
    assert _max_in_any_window(starts) <= 10
    # 35 requests at 10 rpm need three full windows. The first 10 go at once
    # (an empty window is not paced); each later batch starts as soon as the
    # window frees a token, and its tokens are handed out one per 3 s (half the
    # mean 6 s spacing) so that the burst does not repeat every minute.
    paced = [0.0, 3.0, 6.0, 9.0, 12.0, 15.0, 18.0, 21.0, 24.0, 27.0]
    assert starts == pytest.approx([0.0] * 10 + [60.0 + p for p in paced]
                                   + [120.0 + p for p in paced] + [180.0 + p for p in paced[:5]])


def test_window_slides_from_each_start_rather_than_fixed_minutes() -> None:
    clock = FakeClock()
    starts: list[float] = []

    async def main() -> None:
        limiter = _limiter(2, 10, clock)
        async with limiter:
            starts.append(clock())
        clock.now = 30.0  # the second request comes half a minute later
        async with limiter:
            starts.append(clock())
        for _ in range(3):
            async with limiter:
                starts.append(clock())

    _run(main())
    # Each new start waits exactly until the oldest of the last two is 60 s old.
    assert starts == pytest.approx([0.0, 30.0, 60.0, 90.0, 120.0])
    assert _max_in_any_window(starts) <= 2


def test_a_start_just_inside_the_window_still_waits_for_its_end() -> None:
    clock = FakeClock()
    starts: list[float] = []

    async def main() -> None:
        limiter = _limiter(1, 1, clock)
        async with limiter:
            starts.append(clock())
        clock.now = 59.5
        async with limiter:
            starts.append(clock())

    _run(main())
    assert starts == pytest.approx([0.0, 60.0])
    assert clock.slept == pytest.approx([0.5])


def test_no_sleep_while_under_the_rpm_limit() -> None:
    clock = FakeClock()

    async def main() -> None:
        limiter = _limiter(5, 5, clock)
        for _ in range(5):
            async with limiter:
                pass

    _run(main())
    assert clock.slept == []
    assert clock.now == 0.0


def test_max_concurrency_bounds_concurrent_holders() -> None:
    clock = FakeClock()
    in_flight = 0
    peak = 0
    done = 0

    async def one(limiter: RateLimiter) -> None:
        nonlocal in_flight, peak, done
        async with limiter:
            in_flight += 1
            peak = max(peak, in_flight)
            for _ in range(5):  # hold the slot across several task switches
                await asyncio.sleep(0)
            in_flight -= 1
        done += 1

    async def main() -> None:
        limiter = _limiter(1000, 3, clock)
        await asyncio.gather(*(one(limiter) for _ in range(12)))

    _run(main())
    assert done == 12
    assert peak == 3  # bounded, and the bound is actually used
    assert in_flight == 0


def test_slot_is_released_when_the_body_raises() -> None:
    clock = FakeClock()

    async def main() -> int:
        limiter = _limiter(1000, 1, clock)
        for _ in range(3):
            with pytest.raises(RuntimeError):
                async with limiter:
                    raise RuntimeError("boom")
        # The single slot is free again: this does not hang.
        async with asyncio.timeout(1.0), limiter:
            return 1

    assert _run(main()) == 1


def test_a_caller_cancelled_while_waiting_for_a_token_gives_its_slot_back() -> None:
    clock = FakeClock()

    async def never(_: float) -> None:
        await asyncio.Event().wait()

    async def main() -> float:
        limiter = RateLimiter(1, 1, clock=clock, sleep=never)
        async with limiter:
            pass
        entered = asyncio.Event()

        async def waiter() -> None:
            async with limiter:  # holds the only slot, waits for the rpm window
                entered.set()

        task = asyncio.create_task(waiter())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not entered.is_set()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        clock.now = WINDOW_S  # the window is free again; the slot must be too
        async with asyncio.timeout(1.0), limiter:
            return clock()

    assert _run(main()) == WINDOW_S


@pytest.mark.parametrize(("rpm", "max_concurrency"), [(0, 1), (-1, 1), (1, 0)])
def test_invalid_limits_are_rejected(rpm: int, max_concurrency: int) -> None:
    with pytest.raises(ValueError, match=">= 1"):
        RateLimiter(rpm, max_concurrency)
