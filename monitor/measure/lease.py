"""A run holds its endpoint: replicas sharing one database take turns.

On a shared store (PostgreSQL, storage.url_env) whoever asks an endpoint - a
scheduled run with its review and top-up, `probe --once`, `baseline calibrate` -
first takes the endpoint's lease (monitor.store.coordination) and renews it every
third of `storage.lease_seconds` while it works. So one process at a time asks an
endpoint, budgets are spent by one at a time (the day's calls are read from the
shared store), and a process that dies stops renewing: after the lease a replica
takes its run over. A holder that finds its lease gone (it could not renew in time:
cut off from the database, frozen) stops its run at once, as at SIGTERM (stored,
interrupted), so that it never asks beside the one that took over.

On a DuckDB file (one machine) nothing is held: the daemon runs an endpoint once at
a time, and `probe --once` beside it makes a run of its own, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Protocol

from monitor.errors import StoreError
from monitor.store.coordination import endpoint_lease

__all__ = ["LeaseStore", "hold"]

log = logging.getLogger(__name__)


class LeaseStore(Protocol):
    shared: bool

    def acquire_lease(self, name: str, holder: str, seconds: float) -> bool: ...

    def renew_lease(self, name: str, holder: str, seconds: float) -> bool: ...

    def release_lease(self, name: str, holder: str) -> None: ...


@asynccontextmanager
async def hold(store: LeaseStore, endpoint: str, holder: str, seconds: float, *,
               wait_s: float = 0.0) -> AsyncIterator[bool]:
    """Yield whether this process holds `endpoint` (always, on an unshared store), waiting
    up to `wait_s` for another's hold to end; while held it is renewed, and the task is
    cancelled if the hold is lost."""
    if not store.shared:
        yield True
        return
    name = endpoint_lease(endpoint)
    deadline = time.monotonic() + wait_s
    while not await asyncio.to_thread(store.acquire_lease, name, holder, seconds):
        if time.monotonic() >= deadline:
            yield False
            return
        await asyncio.sleep(min(0.5, max(0.05, deadline - time.monotonic())))
    task = asyncio.current_task()
    renewer = asyncio.ensure_future(_renew(store, name, holder, seconds, task))
    try:
        yield True
    finally:
        renewer.cancel()
        await asyncio.gather(renewer, return_exceptions=True)
        with contextlib.suppress(StoreError, asyncio.CancelledError):  # else it expires
            await asyncio.shield(asyncio.to_thread(store.release_lease, name, holder))


async def _renew(store: LeaseStore, name: str, holder: str, seconds: float,
                 task: asyncio.Task[object] | None) -> None:
    renewed = time.monotonic()
    while True:
        await asyncio.sleep(seconds / 3)
        try:
            if await asyncio.to_thread(store.renew_lease, name, holder, seconds):
                renewed = time.monotonic()
                continue
            why = "another replica holds it now"
        except StoreError as exc:  # the database is away: try again while the hold lasts
            if time.monotonic() - renewed < seconds * 0.9:
                log.warning("%s: could not renew the lease (%s); retrying", name, exc)
                continue
            why = f"it could not be renewed in time ({exc})"
        log.error("%s: lease lost (%s); stopping this run (stored, resumable)", name, why)
        if task is not None:
            task.cancel()
        return
