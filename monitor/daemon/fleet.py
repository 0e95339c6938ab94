"""A replica among others sharing one store (storage.url_env): what it watches between its
own slots.

- Takeover: every half lease, the endpoints whose run was left `running` or
  `interrupted` by a process that no longer holds their lease (a replica killed,
  or stopped by SIGTERM in a rolling update) get a resume-only run process here:
  it takes the lease, closes the run as interrupted and resumes it, asking only
  what is missing (monitor.daemon.scheduled). Replicas racing for it are
  serialised by the lease; the losers' processes exit at once. A takeover that
  leaves the run as it was (the daily budget spent) is retried less and less
  often, at most a period apart, not every half lease until midnight.
- Metrics: every endpoint's series are read back from the store at most a
  period (and at least 5 s, at most 60 s) apart, so /metrics and /healthz show
  the runs other replicas made: a replica is not stale because another one ran
  the slot.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from monitor.daemon.launcher import RunLauncher
from monitor.errors import StoreError

__all__ = ["watch"]

log = logging.getLogger(__name__)


async def watch(launcher: RunLauncher, endpoints: Sequence[str], lease_s: float,
                period: float) -> None:
    """Until cancelled (the daemon's shutdown)."""
    every = max(1.0, lease_s / 2)
    refresh_every = min(60.0, max(5.0, period))
    refreshed = time.monotonic()
    takeovers: set[asyncio.Future[None]] = set()  # referenced until done
    tries: dict[str, tuple[int, float]] = {}  # endpoint -> (takeovers tried, last one)
    while True:
        await asyncio.sleep(every)
        try:
            left = await asyncio.to_thread(launcher.store.unattended, endpoints)
            tries = {name: tried for name, tried in tries.items() if name in left}
            for name in left:
                n, last = tries.get(name, (0, 0.0))
                if name not in launcher.active and \
                        time.monotonic() - last >= min(period, every * (2 ** n - 1)):
                    tries[name] = (n + 1, time.monotonic())
                    log.info("endpoint %s: a run was left by a replica that no longer holds "
                             "it; taking it over", name)
                    job = asyncio.ensure_future(launcher.run_job(name, resume_only=True))
                    takeovers.add(job)
                    job.add_done_callback(takeovers.discard)
            if time.monotonic() - refreshed >= refresh_every:
                refreshed = time.monotonic()
                for name in endpoints:
                    await asyncio.to_thread(launcher.state.refresh, launcher.store, name)
        except StoreError as exc:  # the database is away: the next round tries again
            log.warning("replica watch: %s", exc)
