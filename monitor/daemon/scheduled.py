"""What the run process does for one scheduled slot of an endpoint, which never raises.

    today's budget (monitor.measure.budget) -> recovery of an interrupted run
    (monitor.daemon.recovery: resumed, or closed with why) -> the run, as
    `monitor probe --once` makes it (monitor.measure) -> its review
    (monitor.review: top-ups, evaluation, one transaction) -> its report
    (monitor.serve.publish) -> the messages the outbox owes, delivered
    (monitor.alerts)

A failing slot is logged and counted (bias_monitor_run_failures_total) and the
scheduler goes on. Cancellation (SIGTERM) interrupts the run or its review
cleanly: what arrived is stored, the run is marked interrupted and resumes at
the next start, its review included. A run without any answer (the endpoint is
down) is not compared: it says nothing about the model, and the gauges keep
the last measured values (`last_run_*` show the outage). The counts the
scheduler cannot read back from the store (failures, deliveries that failed,
the budget's flag) go to it when the process ends (monitor.daemon.child).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from monitor.alerts import Sink, deliver, note, owed, queue
from monitor.catalog import Catalog
from monitor.config import Endpoint, Settings, setup_for
from monitor.context import Context
from monitor.daemon.launcher import SLOT_SKIPPED, child_counts
from monitor.daemon.recovery import triage
from monitor.logs import LogLines
from monitor.measure import ChatClient, RunOptions, run_endpoint
from monitor.measure.budget import Allowance
from monitor.measure.lease import hold
from monitor.measure.progress import Progress
from monitor.measure.run import make_client
from monitor.review import review_run
from monitor.store import Store
from monitor.store import owner as owners
from monitor.vocab import RunStatus
from monitor.watch import ReferenceCache

__all__ = ["PROGRESS_S", "ScheduledRun"]

log = logging.getLogger(__name__)

#: Seconds between a long run's progress lines in the log.
PROGRESS_S = 30.0


class RunReporter(Protocol):
    """Writes the reports the daemon serves (monitor.serve.publish.Reporter)."""

    def __call__(self, run_id: str) -> object:
        """A finished run's report, before its messages go out (they link to it)."""

    def fleet(self) -> object:
        """The fleet page of every endpoint in the store, after the slot."""


class ScheduledRun:
    """One endpoint's scheduled slots in a run process (a test or a bench may run many
    slots with one: the baseline read once stays in `cache`)."""

    def __init__(self, settings: Settings, catalog: Catalog, store: Store, sinks: list[Sink],
                 *, client_factory: Callable[[Endpoint], ChatClient] | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 reporter: RunReporter | None = None) -> None:
        self.ctx = Context(settings, catalog, store)
        self.sinks = sinks  # Slack, the webhook, PagerDuty: each as configured
        self.client_factory = client_factory  # tests may answer without HTTP
        self.clock = clock  # the budget's day
        self.reporter = reporter  # writes the reports (monitor.serve.publish)
        self.cache: ReferenceCache = {}
        self.failures: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self.budget_exhausted: dict[str, int] = {}
        self.skipped: dict[str, int] = {}  # slots another process's run held up too long

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    @property
    def store(self) -> Store:
        return self.ctx.store

    def counts(self, endpoint: str) -> dict[str, Any]:
        """What the scheduler is told when the process ends (monitor.daemon.child)."""
        flags = ({"budget_exhausted": self.budget_exhausted[endpoint]}
                 if endpoint in self.budget_exhausted else {})
        return child_counts(failures=self.failures.get(endpoint, 0),
                            delivery_failures=self.delivery_failures.get(endpoint, 0),
                            flags=flags, skipped=self.skipped.get(endpoint, 0))

    def count_failure(self, endpoint: str, why: str) -> None:
        self.failures[endpoint] = self.failures.get(endpoint, 0) + 1
        log.warning("endpoint %s: run not completed: %s", endpoint, why)

    async def run(self, name: str, *, resume_only: bool = False, wait_s: float = 0.0) -> None:
        """The slot of endpoint `name`; `resume_only`: only take over an interrupted (or
        abandoned) run, start no new one (a replica taking over a dead one's run);
        `wait_s`: how long another process's hold of the endpoint may delay it."""
        try:
            ran = False
            async with hold(self.store, name, owners.token(),
                            self.settings.storage.lease_seconds, wait_s=wait_s) as held:
                if not held:
                    if resume_only:  # several replicas saw the run unattended: one took it
                        log.info("endpoint %s: another replica took its run over", name)
                        return
                    log.info(SLOT_SKIPPED, name, wait_s)
                    self.skipped[name] = self.skipped.get(name, 0) + 1
                    return
                ran = await self._slot(name, resume_only)
            if ran and self.reporter is not None:
                # After the lease: the page reads every endpoint, and another replica's
                # slot of this one need not wait for it.
                await asyncio.to_thread(self.reporter.fleet)
        except asyncio.CancelledError:
            # Shutdown: what arrived is stored and the run is marked interrupted.
            # Ending quietly keeps the scheduler from logging it as a crash.
            log.info("endpoint %s: run interrupted by shutdown; it resumes at the next start",
                     name)
        except Exception as exc:
            self.count_failure(name, f"{type(exc).__name__}: {str(exc)[:300]}")

    async def _slot(self, name: str, resume_only: bool) -> bool:
        """Whether a run was made (or resumed)."""
        endpoint = self.settings.endpoint(name)
        allowance = Allowance.today(self.settings.budget, self.store, name, self.clock())
        langs = len(self.settings.sampling.languages)
        if allowance.spent or allowance.run_size(1, langs) < 1:
            log.info("endpoint %s: %s", name, allowance.describe())
            await asyncio.to_thread(self.budget_hit, endpoint)
            return False
        self.budget_exhausted[name] = 0
        pending = await asyncio.to_thread(self._interrupted, endpoint)
        if pending:
            log.info("endpoint %s: resuming interrupted run %s", name, pending)
            await self._one(endpoint, RunOptions(resume=pending), allowance)
        size = allowance.run_size(self.settings.sampling.triplets_per_run, langs)
        if size >= 1 and not resume_only:
            await self._one(endpoint, RunOptions(triplets=size), allowance)
        return bool(pending) or (size >= 1 and not resume_only)

    async def _one(self, endpoint: Endpoint, opts: RunOptions, allowance: Allowance) -> None:
        client = (self.client_factory(endpoint) if self.client_factory
                  else make_client(self.ctx.catalog, endpoint))
        # Under an rpm limit a run takes minutes: its start and a progress line every
        # 30 s go to the log, not only its end.
        progress = Progress(LogLines(log), label=f"endpoint {endpoint.name}: ",
                            interval_s=PROGRESS_S)
        result = await run_endpoint(self.ctx, endpoint, opts, allowance=allowance,
                                    progress=progress, client=client, hold=True)
        review = await review_run(self.ctx, endpoint, result, client, allowance=allowance,
                                  sinks=owed(self.sinks), cache=self.cache)
        run = review.run
        log.info("endpoint %s: run %s done: %s", endpoint.name, run.run_id,
                 result.status_counts)
        if run.status == RunStatus.PARTIAL:
            log.warning("endpoint %s: run %s stopped early by the budget (stored as partial)",
                        endpoint.name, run.run_id)
            await asyncio.to_thread(self.budget_hit, endpoint)
        if run.status == RunStatus.FAILED:
            self.count_failure(endpoint.name, f"run {run.run_id} produced no results")
        if self.reporter is not None:
            # Before its messages go out, so that their link opens it; they are queued
            # already, so a crash while writing it loses none.
            await asyncio.to_thread(self.reporter, run.run_id)
        await asyncio.to_thread(self.deliver, endpoint)

    def deliver(self, endpoint: Endpoint) -> bool:
        ok = deliver(self.store, self.sinks, endpoint.name, simulated=endpoint.simulated)
        if not ok:
            self.delivery_failures[endpoint.name] = (
                self.delivery_failures.get(endpoint.name, 0) + 1)
        return ok

    def budget_hit(self, endpoint: Endpoint) -> None:
        """The flag, the log, and one notice per day (deduplicated in the outbox)."""
        text = (f"daily budget reached on {self.clock():%Y-%m-%d}: no more probes "
                "until midnight UTC (budget.max_usd_per_day / max_probes_per_day)")
        self.budget_exhausted[endpoint.name] = 1
        self.count_failure(endpoint.name, text)
        queue(self.store, owed(self.sinks), endpoint.name, [note(text)])
        self.deliver(endpoint)

    def _interrupted(self, endpoint: Endpoint) -> str | None:
        """The run to resume now, after closing orphans and what is not resumed."""
        store = self.store
        leased = owners.token() if store.shared else None  # we hold the endpoint's lease
        for run in store.close_orphans(endpoint.name, leased_by=leased):
            log.warning("endpoint %s: run %s was left running: %s; marked interrupted",
                        endpoint.name, run.run_id, run.reason)
        setup = setup_for(endpoint, [], list(self.ctx.catalog.languages)).key
        plan = triage(store.runs(endpoint.name), self.ctx.catalog.version, setup)
        for run, why in plan.close:
            store.close_run(run.run_id, RunStatus.FAILED, why)
            log.warning("endpoint %s: run %s closed as failed, %s (its answers stay stored)",
                        endpoint.name, run.run_id, why)
        return plan.resume.run_id if plan.resume else None
