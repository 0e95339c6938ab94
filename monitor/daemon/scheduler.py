"""`monitor run`: the daemon. The only module that imports apscheduler.

An AsyncIOScheduler (APScheduler 3.x, UTC) calls `Daemon.run_job(endpoint)`
on the configured cron or `every:` schedule: one job per endpoint,
coalesce=True and max_instances=1 (a run that overruns its slot makes the
next one skip: counted in bias_monitor_runs_skipped_total, logged at INFO at
most every SKIP_LOG_S; a skip is not a failure), misfire grace of half a
period. A never-measured or stale endpoint, or one with an interrupted run
to resume (monitor.daemon.recovery), is run once at start. SIGTERM / SIGINT stop
the scheduler, interrupt in-flight runs cleanly (stored, resumable) and exit
0. /metrics and /healthz are served on metrics.host:port; a port that is
taken is a configuration error (exit 2), not a traceback.

Each run is a short-lived child process (`python -m monitor.daemon.job`, the
same Daemon.run_job as in-process): LiteLLM, pandas and SciPy are about
300 MB that the scheduler would otherwise hold for good between runs. This
process keeps the schedule, the metrics (read back from DuckDB after each
run) and the failure counts; a child that crashes or is killed is a failed
run, never a dead daemon. On SIGTERM the child gets SIGTERM too, stores what
arrived and marks its run interrupted, as an in-process run does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.base import BaseTrigger
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.interval import IntervalTrigger

from monitor.catalog import load_catalog
from monitor.config import Settings, load_settings, parse_every
from monitor.daemon.exporter import MetricsServer, make_registry
from monitor.daemon.metrics import MetricsState
from monitor.daemon.recovery import triage
from monitor.errors import ConfigError
from monitor.store import Store

__all__ = ["make_trigger", "period_seconds", "serve"]

log = logging.getLogger("monitor.daemon.scheduler")


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


SKIP_LOG_S = 600.0


def serve(config: Path | None) -> int:
    settings, source = load_settings(config)
    catalog = load_catalog(settings.catalog.path)  # a broken catalog fails here, not per run
    trigger = make_trigger(settings, source)
    settings.require_keys(settings.endpoints, source)
    store = Store(settings.storage.path)
    return asyncio.run(_main(settings, config, source, store, trigger, catalog.version))


class ChildJobs:
    """The scheduler's side of a job: one `python -m monitor.daemon.job` process per run."""

    STOP_GRACE_S = 25.0  # after SIGTERM, the child's time to store and mark its run
    COMMAND = (sys.executable, "-m", "monitor.daemon.job")  # tests swap in a stand-in

    def __init__(self, config: Path | None, store: Store, state: MetricsState) -> None:
        self.config = config
        self.store = store
        self.state = state
        self.started = time.time()
        self.heartbeat = time.time()
        self.running: set[asyncio.Task[Any]] = set()
        self.failures: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self.skips: dict[str, int] = {}
        self._skip_logged: dict[str, float] = {}

    def count_failure(self, endpoint: str, why: str | None, n: int = 1) -> None:
        self.failures[endpoint] = self.failures.get(endpoint, 0) + n
        self.state.set_flag("run_failures", endpoint, self.failures[endpoint])
        if why is not None:  # None: the child has logged it already
            log.warning("endpoint %s: run not completed: %s", endpoint, why)

    def count_skip(self, endpoint: str, why: str) -> None:
        """A slot that found the previous run still going: counted, not a failure."""
        self.skips[endpoint] = self.skips.get(endpoint, 0) + 1
        self.state.set_flag("runs_skipped", endpoint, self.skips[endpoint])
        now = time.monotonic()
        if now - self._skip_logged.get(endpoint, -SKIP_LOG_S) >= SKIP_LOG_S:
            self._skip_logged[endpoint] = now
            log.info("endpoint %s: scheduled slot skipped (%s); %d skipped since start",
                     endpoint, why, self.skips[endpoint])

    async def run_job(self, name: str) -> None:
        task = asyncio.current_task()
        if task is not None:
            self.running.add(task)
        read_fd, write_fd = os.pipe()
        # A thread reads the report while the child runs; it ends at EOF, when the
        # child (holding the only write end once _child has closed ours) exits.
        reading = asyncio.ensure_future(asyncio.to_thread(_read_all, read_fd))
        try:
            code = await self._child(name, write_fd)  # closes write_fd, whatever happens
            report = await reading
            if code is None:
                return  # shutdown: the child stored its answers and marked the run
            self._apply(name, report, code)
            if code != 0:
                await asyncio.to_thread(self._reap, name, code)
            await asyncio.to_thread(self.state.refresh, self.store, name)
        except asyncio.CancelledError:
            return  # shutdown before the child started: nothing to interrupt
        except Exception as exc:  # a job never raises into the scheduler
            self.count_failure(name, f"{type(exc).__name__}: {str(exc)[:300]}")
        finally:
            if task is not None:
                self.running.discard(task)
            if not reading.done():  # write_fd is closed: EOF is at most a moment away
                with contextlib.suppress(BaseException):
                    await asyncio.shield(reading)
            os.close(read_fd)

    def _reap(self, name: str, code: int) -> None:
        """A child that died (OOM, SIGKILL) leaves its run `running`: close it now,
        so that the next run resumes it."""
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        for run in self.store.close_orphans(name):
            log.warning("endpoint %s: run %s was left running by its process (%s); marked "
                        "interrupted, resumed by the next run", name, run.run_id, how)

    async def _child(self, name: str, report_fd: int) -> int | None:
        """The child's exit code, or None when the run was interrupted by shutdown."""
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        args = [*self.COMMAND[1:], "--endpoint", name, "--report-fd", str(report_fd),
                "--log-level", str(level)]
        if self.config is not None:
            args += ["--config", str(self.config)]
        # Its own session: a terminal's Ctrl-C reaches only this process, which
        # then stops the child itself (below), once.
        try:
            proc = await asyncio.create_subprocess_exec(self.COMMAND[0], *args,
                                                        start_new_session=True,
                                                        pass_fds=(report_fd,))
        finally:
            os.close(report_fd)  # only the child holds the write end now
        try:
            return await proc.wait()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), self.STOP_GRACE_S)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            log.info("endpoint %s: run interrupted by shutdown; it resumes at the next start",
                     name)
            return None

    def _apply(self, name: str, report: bytes, code: int) -> None:
        try:
            data = json.loads(report) if report else None
        except ValueError:
            data = None
        if code != 0 or not data:
            self.count_failure(name, f"run process exited with code {code}")
            return
        if data["failures"]:
            self.count_failure(name, None, int(data["failures"]))
        if data["delivery_failures"]:
            self.delivery_failures[name] = (self.delivery_failures.get(name, 0)
                                            + int(data["delivery_failures"]))
            self.state.set_flag("delivery_failures", name, self.delivery_failures[name])
        for flag, value in data["flags"].items():
            self.state.set_flag(flag, name, int(value))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _wants_run_now(store: Store, endpoint: str, catalog_version: str) -> bool:
    """Close runs left by dead processes; True when one waits to be resumed."""
    for run in store.close_orphans(endpoint):
        log.warning("endpoint %s: run %s was left running: %s; marked interrupted",
                    endpoint, run.run_id, run.reason)
    return triage(store.runs(endpoint), catalog_version).resume is not None


async def _main(settings: Settings, config: Path | None, source: Path, store: Store,
                trigger: BaseTrigger, catalog_version: str) -> int:
    state = MetricsState()
    daemon = ChildJobs(config, store, state)
    resume_now = set()
    for ep in settings.endpoints:
        await asyncio.to_thread(state.refresh, store, ep.name)
        for flag in ("run_failures", "delivery_failures", "runs_skipped"):
            state.set_flag(flag, ep.name, 0)  # every series from the start, for rate()
        if await asyncio.to_thread(_wants_run_now, store, ep.name, catalog_version):
            resume_now.add(ep.name)
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

    host, port = settings.metrics.host, settings.metrics.port
    try:
        server = MetricsServer(make_registry(state), host, port, health).start()
    except OSError as exc:
        raise ConfigError(f"{source}: metrics.host / metrics.port: cannot listen on "
                          f"{host}:{port} ({exc.strerror or exc}); set metrics.port to a free "
                          "port (or stop the process that holds it)") from None
    log.info("metrics on http://%s:%d/metrics (health: /healthz)", settings.metrics.host,
             server.port)

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
