"""The budget: what a run and its top-ups may still spend, in dollars and in calls.

One `Allowance` per run, shared by the run and its review's top-ups
(monitor.review.topup), so that they never spend together more than the day
leaves: `budget.max_usd_per_day` is admitted call by call (`CostGuard`: the
spend so far plus the calls in flight at the dearest call seen), and
`budget.max_probes_per_day` batch by batch (`triplets`: no batch is asked that
the day's probes cannot hold). The day is the UTC day of the endpoint's stored
calls, so a restart, `probe --once` and the daemon all count against it.
`monitor baseline calibrate` has no daily budget but its own dollar cap
(--max-cost-usd): an Allowance of that cap and no call cap.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Protocol

from monitor.config import Budget
from monitor.store import Usage

__all__ = ["Allowance", "CostGuard", "UsageStore"]


class UsageStore(Protocol):
    def usage(self, endpoint: str, since: datetime | None = None) -> Usage: ...


class CostGuard:
    """Admits a call only while the spend so far plus the calls in flight (at
    the dearest call seen) stays within the budget, so it is never exceeded."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0
        self.dearest: float | None = None
        self.in_flight = 0
        self.refused = 0
        self._cond = asyncio.Condition()

    async def admit(self) -> bool:
        if self.limit is None:
            return True
        async with self._cond:
            # Until one call has been priced, one call at a time.
            await self._cond.wait_for(lambda: self.dearest is not None or self.in_flight == 0)
            if self.spent + (self.in_flight + 1) * (self.dearest or 0.0) > self.limit:
                self.refused += 1
                return False
            self.in_flight += 1
            return True

    async def settle(self, cost: float | None) -> None:
        if self.limit is None:
            return
        async with self._cond:
            self.in_flight -= 1
            self.spent += cost or 0.0
            self.dearest = max(self.dearest or 0.0, cost or 0.0)
            self._cond.notify_all()


class Allowance:
    """What may still be spent: dollars (None: no cap), admitted call by call by `guard`,
    and calls (None: no cap), admitted batch by batch by `triplets`."""

    def __init__(self, *, usd: float | None = None, calls: int | None = None,
                 usage: Usage | None = None) -> None:
        self.guard = CostGuard(usd)
        self.calls = calls
        self.usage = usage  # what today had spent when the allowance was made
        self.cut = False  # a batch was cut short by the calls left

    @classmethod
    def today(cls, budget: Budget, store: UsageStore, endpoint: str, now: datetime
              ) -> Allowance:
        """What `budget` leaves `endpoint` for the rest of `now`'s UTC day."""
        day = now.replace(hour=0, minute=0, second=0, microsecond=0)
        use = store.usage(endpoint, since=day)
        usd = None if budget.max_usd_per_day is None else max(
            budget.max_usd_per_day - float(use.cost_usd), 0.0)
        calls = None if budget.max_probes_per_day is None else max(
            budget.max_probes_per_day - use.calls, 0)
        return cls(usd=usd, calls=calls, usage=use)

    @property
    def spent(self) -> bool:
        """Nothing is left: no call may be asked."""
        return self.calls == 0 or (self.guard.limit is not None and self.guard.limit <= 0)

    @property
    def stopped(self) -> bool:
        """The budget stopped asking: a call was refused or a batch cut short."""
        return self.cut or self.guard.refused > 0

    def fits(self, triplets: int, languages: int) -> bool:
        """Whether a batch of `triplets` (each in `languages`) fits whole."""
        return not self.spent and (self.calls is None or self.calls >= triplets * languages)

    def run_size(self, want: int, languages: int) -> int:
        """A run's triplets (each asked in `languages`) within the calls left."""
        return want if self.calls is None else min(want, self.calls // max(languages, 1))

    def triplets(self, want: int, languages: int) -> int:
        """How many of `want` triplets (each asked in `languages`) the calls left hold;
        a batch cut short marks the allowance `stopped`."""
        if self.calls is None:
            return want
        fit = min(want, self.calls // max(languages, 1))
        self.cut = self.cut or fit < want
        return fit

    def used(self, calls: int) -> None:
        """`calls` were asked (their dollars are the guard's)."""
        if self.calls is not None:
            self.calls = max(self.calls - calls, 0)

    def describe(self) -> str:
        use = self.usage
        return "" if use is None else f"{use.calls} probes, ${use.cost_usd:.4f} today"
