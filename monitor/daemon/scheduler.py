"""`monitor run`: the daemon. The only module that imports apscheduler.

An AsyncIOScheduler (APScheduler 3.x, UTC) calls `RunLauncher.run_job(endpoint)`
on the configured cron or `every:` schedule: one job per endpoint,
coalesce=True, misfire grace of half a period. A replica runs at most
schedule.max_concurrent_runs run processes at once; a slot waits for room at
most the grace (monitor.daemon.launcher). On a store of its own a run that
overruns its slot makes the next one skip; a skip (also a slot that found no
room) is counted in bias_monitor_runs_skipped_total, logged at INFO at most
every 10 minutes, and is not a failure. A never-measured or stale endpoint, or
one with an interrupted run to resume (monitor.daemon.recovery), is run once at
start. SIGTERM / SIGINT stop the scheduler, interrupt in-flight runs cleanly
(stored, resumable) and exit 0. /metrics, /healthz and /report (each run's
report, written by the run process into report.dir) are served on metrics.host:port; a port that is
taken is a configuration error (exit 2), not a traceback.
Each run is a short-lived child process (monitor.daemon.launcher).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from monitor.catalog import Catalog, load_catalog
from monitor.config import Settings, deprecations, load_settings, parse_every, setup_for
from monitor.daemon.fleet import watch
from monitor.daemon.launcher import RunLauncher
from monitor.daemon.recovery import triage
from monitor.errors import ConfigError
from monitor.serve.exporter import MetricsServer, make_registry
from monitor.serve.metrics import MetricsState
from monitor.store import Store, open_store

__all__ = ["make_trigger", "period_seconds", "serve"]

log = logging.getLogger("monitor.daemon.scheduler")


#: Replicas sharing a store fire `every:` slots at multiples of the period since this
#: moment, so that they agree on what a slot is (cron slots are minutes already).
EPOCH = datetime(2000, 1, 1, tzinfo=UTC)


def make_trigger(settings: Settings, source: Path, *, aligned: bool = False) -> BaseTrigger:
    sch = settings.schedule
    if sch.every:
        return IntervalTrigger(seconds=parse_every(sch.every), timezone=UTC,
                               start_date=EPOCH if aligned else None)
    if not sch.cron:
        raise ConfigError(f"{source}: schedule: set `cron` or `every`")
    try:
        return CronTrigger.from_crontab(sch.cron, timezone=UTC)
    except ValueError as exc:
        raise ConfigError(f"{source}: schedule.cron: {sch.cron!r} is not a cron expression "
                          f"({exc}); e.g. '0 */6 * * *'") from None


def slot_of(settings: Settings) -> Callable[[datetime], datetime]:
    """The slot a moment falls in: the aligned `every:` period, else the cron's minute."""
    if settings.schedule.every:
        period = parse_every(settings.schedule.every)
        return lambda now: EPOCH + timedelta(
            seconds=math.floor((now - EPOCH).total_seconds() / period) * period)
    return lambda now: now.replace(second=0, microsecond=0)


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
    # A broken catalog (or overlay) fails here, not per run.
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    trigger = make_trigger(settings, source, aligned=settings.storage.url_env is not None)
    settings.require_keys(settings.endpoints, source)
    for ep in settings.endpoints:  # a missing system prompt file fails here, not per run
        setup_for(ep, settings.sampling.languages, list(catalog.languages))
    for line in deprecations(settings, source):
        log.warning("%s", line)
    # Pages must not vanish: a sink that cannot deliver is said at start, not at the
    # first page (its messages wait in the outbox, and the metrics and /healthz say so).
    for line in settings.alerts.unready():
        log.warning("%s: %s", source, line)
    store = open_store(settings.storage)
    return asyncio.run(_main(settings, config, source, store, trigger, catalog))


def _wants_run_now(store: Store, endpoint: str, catalog_version: str,
                   setup: str = "default") -> bool:
    """Close runs left by dead processes; True when one waits to be resumed."""
    for run in store.close_orphans(endpoint):
        log.warning("endpoint %s: run %s was left running: %s; marked interrupted",
                    endpoint, run.run_id, run.reason)
    return triage(store.runs(endpoint), catalog_version, setup).resume is not None


def _report_folder(settings: Settings) -> Path | None:
    """The folder /report serves; None when report.enabled is false."""
    if not settings.report.enabled:
        return None
    folder = settings.report.folder(settings.storage.path)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # the runs go on; each says its report was not written
        log.warning("report.dir %s cannot be created (%s); runs are not affected, /report "
                    "has nothing to serve until it can", folder, exc.strerror or exc)
    return folder


async def _main(settings: Settings, config: Path | None, source: Path, store: Store,
                trigger: BaseTrigger, catalog: Catalog) -> int:
    state = MetricsState()
    period = period_seconds(trigger)
    # Replicas sharing a store: each slot is claimed by one, and a run another left is
    # taken over by the watcher (fleet.py), not at start.
    shared = store.shared
    # A claimed slot's run waits for the endpoint's lease (held by the run of its last
    # slot, usually) almost until the next slot: half a period skipped slots whenever a
    # loaded machine made runs outlast it, while nine tenths never stacks two waiters.
    daemon = RunLauncher(config, store, state, slot=slot_of(settings) if shared else None,
                         lease_wait_s=period * 0.9 if shared else 0.0,
                         max_runs=settings.schedule.max_concurrent_runs, room_wait_s=period / 2)
    sinks = settings.alerts.ready()
    state.set_sinks(len(sinks))
    resume_now = set()
    for ep in settings.endpoints:
        await asyncio.to_thread(state.prime, store, ep.name)
        setup = setup_for(ep, [], list(catalog.languages)).key
        if not shared and await asyncio.to_thread(_wants_run_now, store, ep.name,
                                                  catalog.version, setup):
            resume_now.add(ep.name)
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
                       "alert_sinks": sinks,
                       "uptime_seconds": round(now - daemon.started, 1)}

    host, port = settings.metrics.host, settings.metrics.port
    reports = _report_folder(settings)
    try:
        server = MetricsServer(make_registry(state), host, port, health, reports).start()
    except OSError as exc:
        raise ConfigError(f"{source}: metrics.host / metrics.port: cannot listen on "
                          f"{host}:{port} ({exc.strerror or exc}); set metrics.port to a free "
                          "port (or stop the process that holds it)") from None
    log.info("metrics on http://%s:%d/metrics (health: /healthz%s)", settings.metrics.host,
             server.port, f"; reports: /report from {reports}" if reports else "")

    def skipped(event: JobExecutionEvent) -> None:
        why = ("the previous run is still going" if event.code == EVENT_JOB_MAX_INSTANCES
               else "missed by more than the grace time")
        daemon.count_skip(str(event.job_id), why)

    scheduler.add_listener(skipped, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)
    now = datetime.now(UTC)
    last = state.snapshot().last_run_ts
    for ep in settings.endpoints:
        stale = (ep.name not in last or time.time() - last[ep.name] > period
                 or ep.name in resume_now)
        scheduler.add_job(daemon.run_job, trigger, args=[ep.name], id=ep.name, name=ep.name,
                          # The launcher bounds the runs; a slot that comes while one goes
                          # on reaches it, to wait for room or be counted as skipped.
                          coalesce=True, max_instances=settings.schedule.max_concurrent_runs + 1,
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
    log.info("scheduler started: %d endpoint(s), period %.0fs, UTC%s", len(settings.endpoints),
             period, f"; sharing {store.where} with other replicas" if shared else "")
    watcher = (asyncio.ensure_future(watch(daemon, [ep.name for ep in settings.endpoints],
                                           settings.storage.lease_seconds, period))
               if shared else None)
    while not stop.is_set():
        daemon.heartbeat = time.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=5)
    if watcher is not None:
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
    log.info("stopping: interrupting %d run(s) in flight", len(daemon.running))
    scheduler.shutdown(wait=False)
    for task in list(daemon.running):
        task.cancel()
    await asyncio.gather(*daemon.running, return_exceptions=True)
    server.stop()
    log.info("stopped")
    return 0
