"""The money left today, guarded call by call."""

from __future__ import annotations

import asyncio

__all__ = ["CostGuard"]


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
