"""`monitor run`: the daemon. The only module that imports apscheduler.

An AsyncIOScheduler (APScheduler 3.x, UTC) calls `Daemon.run_job(endpoint)`
on the configured cron or `every:` schedule: one job per endpoint,
coalesce=True and max_instances=1 (a run that overruns its slot makes the
next one skip, which is logged and counted), misfire grace of half a period.
A never-measured or stale endpoint is run once at start. SIGTERM / SIGINT
stop the scheduler, interrupt in-flight runs cleanly (stored, resumable) and
exit 0. /metrics and /healthz are served on metrics.host:port.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from monitor.alerts import SlackNotifier
from monitor.catalog import load_catalog
from monitor.config import Settings, load_settings, parse_every
from monitor.daemon import Daemon
from monitor.errors import ConfigError
from monitor.exporter import MetricsServer, make_registry
from monitor.metrics import MetricsState
from monitor.store import Store

__all__ = ["make_trigger", "period_seconds", "serve"]

log = logging.getLogger("monitor.scheduler")


def make_trigger(settings: Settings, source: Path) -> BaseTrigger:
    sch = settings.schedule
    if sch.every:
        return IntervalTrigger(seconds=parse_every(sch.every), timezone=UTC)
    if not sch.cron:
        raise ConfigError(f"{source}: schedule: set `cron` or `every`")
    try:
        return CronTrigger.from_crontab(sch.cron, timezone=UTC)
    except ValueError as exc:
        raise ConfigError(f"{source}: schedule.cron: {sch.cron!r} is not a cron expression "
                          f"({exc}); e.g. '0 */6 * * *'") from None


def period_seconds(trigger: BaseTrigger) -> float:
    """The time between two fire times (for staleness and misfire grace)."""
    now = datetime.now(UTC)
    first = trigger.get_next_fire_time(None, now)
    second = trigger.get_next_fire_time(first, first + timedelta(seconds=1)) if first else None
    if first is None or second is None:
        return 3600.0
    return max(1.0, float((second - first).total_seconds()))


def serve(config: Path | None) -> int:
    settings, source = load_settings(config)
    catalog = load_catalog(settings.catalog.path)
    trigger = make_trigger(settings, source)
    settings.require_keys(settings.endpoints, source)
    store = Store(settings.storage.path)
    return asyncio.run(_main(settings, catalog, store, trigger))


async def _main(settings: Settings, catalog: Any, store: Store, trigger: BaseTrigger) -> int:
    state = MetricsState()
    for ep in settings.endpoints:
        await asyncio.to_thread(state.refresh, store, ep.name)
    daemon = Daemon(settings, catalog, store, state, SlackNotifier(settings.alerts.slack))
    period = period_seconds(trigger)
    scheduler = AsyncIOScheduler(timezone=UTC)

    def health() -> tuple[bool, dict[str, Any]]:
        now = time.time()
        alive = scheduler.running and now - daemon.heartbeat < 30
        ages = {ep: round(now - ts, 1) for ep, ts in state.snapshot().last_run_ts.items()}
        limit = 2 * period + 300
        fresh = all(a < limit for a in ages.values()) if ages else now - daemon.started < limit
        # The status code follows liveness only: a stale run (budget spent,
        # provider down) must page through the RunStale alert, not make an
        # orchestrator restart a healthy process in a loop.
        return alive, {"scheduler_alive": alive, "last_run_age_seconds": ages,
                       "stale": not fresh, "stale_after_seconds": limit,
                       "uptime_seconds": round(now - daemon.started, 1)}

    server = MetricsServer(make_registry(state), settings.metrics.host, settings.metrics.port,
                           health).start()
    log.info("metrics on http://%s:%d/metrics (health: /healthz)", settings.metrics.host,
             server.port)

    def skipped(event: JobExecutionEvent) -> None:
        why = "still running (overran its slot)" if event.code == EVENT_JOB_MAX_INSTANCES \
            else "missed its slot"
        daemon.count_failure(str(event.job_id), f"scheduled run skipped: previous run {why}"
                             if event.code == EVENT_JOB_MAX_INSTANCES else why)

    scheduler.add_listener(skipped, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
    now = datetime.now(UTC)
    last = state.snapshot().last_run_ts
    for ep in settings.endpoints:
        stale = ep.name not in last or time.time() - last[ep.name] > period
        scheduler.add_job(daemon.run_job, trigger, args=[ep.name], id=ep.name, name=ep.name,
                          coalesce=True, max_instances=1,
                          misfire_grace_time=max(1, int(period / 2)),
                          next_run_time=now if stale else None)
        if not stale:  # add_job with next_run_time=None would pause it
            job = scheduler.get_job(ep.name)
            if job is not None:
                job.resume()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    scheduler.start()
    log.info("scheduler started: %d endpoint(s), period %.0fs, UTC", len(settings.endpoints),
             period)
    while not stop.is_set():
        daemon.heartbeat = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=5)
    log.info("stopping: interrupting %d run(s) in flight", len(daemon.running))
    scheduler.shutdown(wait=False)
    for task in list(daemon.running):
        task.cancel()
    await asyncio.gather(*daemon.running, return_exceptions=True)
    server.stop()
    log.info("stopped")
    return 0
