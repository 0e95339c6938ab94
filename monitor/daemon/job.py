"""What a scheduled run does: one job per endpoint, which never raises.

A job checks the daily budget, runs the same `run_endpoint` as
`monitor probe --once`, then (in a worker thread) compares the run with the
baseline, stores drift, the recent-runs JSD and, once per rotation cycle, each
language's JSD against the baseline's (monitor.watch.shape) next to the run's statistics,
refreshes the metrics and tells the alert sinks (Slack, webhook, PagerDuty) about
alert changes. A failing job is
logged and counted (bias_monitor_run_failures_total) and the scheduler goes
on. Cancellation (SIGTERM) interrupts the run cleanly: what arrived is
stored, the run is marked interrupted and is resumed at the next start.
Before each run, interrupted runs are resumed or closed by the policy of
monitor.daemon.recovery. A run without any answer (the endpoint is down) is not
compared with the baseline: it says nothing about the model, and the gauges
keep the last measured values (`last_run_*` shows the outage).
The job runs in a child process of `monitor run` (monitor.daemon.child).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections.abc import Callable
from datetime import UTC, datetime

from monitor.catalog import Catalog
from monitor.config import Endpoint, Settings, setup_for
from monitor.daemon import outbox
from monitor.daemon.metrics import MetricsState
from monitor.daemon.recovery import triage
from monitor.daemon.sinks import Sink
from monitor.daemon.topup import PROGRESS_S, confirm
from monitor.logs import LogLines
from monitor.measure import ChatClient, RunOptions, RunResult, run_endpoint
from monitor.measure.progress import Progress
from monitor.measure.run import make_client
from monitor.measure.sampling import Sampler
from monitor.stats import jsd_of
from monitor.store import Baseline, RunRow, StatRow, Store, Usage
from monitor.vocab import POOLED, RunStatus, StatKind
from monitor.watch import Evaluation, evaluate
from monitor.watch.evaluate import suspects
from monitor.watch.reference import BaselineCache
from monitor.watch.shape import compare, due
from monitor.watch.topup import Verdict

__all__ = ["Daemon"]

log = logging.getLogger(__name__)

#: Bootstrap replicates of the recent-runs JSD (a slow shape signal, per rotation).
WINDOW_BOOT = 500


class Daemon:
    def __init__(self, settings: Settings, catalog: Catalog, store: Store, state: MetricsState,
                 sinks: list[Sink],
                 client_factory: Callable[[Endpoint], ChatClient] | None = None, *,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 reporter: Callable[[str], object] | None = None) -> None:
        self.client_factory = client_factory  # tests may answer without HTTP
        # Writes a finished run's report (monitor.daemon.publish; the run process sets it).
        self.reporter = reporter
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.state = state
        self.sinks = sinks  # Slack, the webhook, PagerDuty: each as configured
        self.clock = clock  # the budget's day
        self.failures: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self._baseline_cache: BaselineCache = {}

    def count_failure(self, endpoint: str, why: str) -> None:
        self.failures[endpoint] = self.failures.get(endpoint, 0) + 1
        self.state.set_flag("run_failures", endpoint, self.failures[endpoint])
        log.warning("endpoint %s: run not completed: %s", endpoint, why)

    async def run_job(self, name: str) -> None:
        endpoint = self.settings.endpoint(name)
        try:
            opts = self._budget(endpoint)
            if opts is None:
                return
            pending = self._interrupted(endpoint)
            if pending:
                log.info("endpoint %s: resuming interrupted run %s", name, pending)
                await self._one(endpoint, RunOptions(resume=pending))
            await self._one(endpoint, opts)
        except asyncio.CancelledError:
            # Shutdown: what arrived is stored and the run is marked interrupted.
            # Ending quietly keeps the scheduler from logging it as a crash.
            log.info("endpoint %s: run interrupted by shutdown; it resumes at the next start",
                     name)
            return
        except Exception as exc:
            self.count_failure(name, f"{type(exc).__name__}: {str(exc)[:300]}")
            # A completed run refreshes the metrics in _after_run; a failed one
            # may still have stored answers.
            try:
                await asyncio.to_thread(self.state.refresh, self.store, name)
            except Exception as refresh_exc:
                log.warning("metrics refresh failed: %s", type(refresh_exc).__name__)

    async def _one(self, endpoint: Endpoint, opts: RunOptions) -> None:
        client = (self.client_factory(endpoint) if self.client_factory
                  else make_client(self.catalog, endpoint))
        # Under an rpm limit a run takes minutes: its start and a progress line every
        # 30 s go to the log, not only its end.
        progress = Progress(LogLines(log), label=f"endpoint {endpoint.name}: ",
                            interval_s=PROGRESS_S)
        result = await run_endpoint(self.settings, self.catalog, self.store, endpoint, opts,
                                    client=client, progress=progress)
        counts = result.status_counts
        if result.run.status == RunStatus.PARTIAL:
            log.warning("endpoint %s: run %s stopped early by the budget (stored as partial)",
                        endpoint.name, result.run.run_id)
            await asyncio.to_thread(self.budget_hit, endpoint)
        log.info("endpoint %s: run %s done: %s", endpoint.name, result.run.run_id, counts)
        if counts["ok"] == 0:
            # No answer says nothing about the model (its id, its bias): no comparison,
            # no notice; the gauges keep the last measured run's values.
            self.count_failure(endpoint.name, f"run {result.run.run_id} produced no results")
            await asyncio.to_thread(self.state.refresh, self.store, endpoint.name)
            await self._report(result.run.run_id)
            await asyncio.to_thread(self.deliver, endpoint)
            return
        verdicts = await self._topup(endpoint, result, client)
        ev = await asyncio.to_thread(self._after_run, endpoint, result, verdicts)
        payloads = [outbox.transition(t) for t in ev.to_notify]
        if not ev.comparable and ev.baseline is not None and "changed" in ev.note:
            payloads.append(outbox.note(ev.note))
        if ev.fingerprint_note:
            log.warning("endpoint %s: %s", endpoint.name, ev.fingerprint_note)
            payloads.append(outbox.note(ev.fingerprint_note))
        await asyncio.to_thread(outbox.queue, self.store, self.sinks, endpoint.name, payloads)
        await self._report(result.run.run_id)
        await asyncio.to_thread(self.deliver, endpoint)

    async def _report(self, run_id: str) -> None:
        """The run's report, before its alerts go out so that their link opens it; the
        messages are queued first, so a crash while writing it loses none."""
        if self.reporter is not None:
            await asyncio.to_thread(self.reporter, run_id)

    def deliver(self, endpoint: Endpoint) -> bool:
        ok = outbox.deliver(self.store, self.sinks, endpoint.name,
                            simulated=endpoint.simulated)
        if not ok:
            self.delivery_failures[endpoint.name] = self.delivery_failures.get(
                endpoint.name, 0) + 1
            self.state.set_flag("delivery_failures", endpoint.name,
                                self.delivery_failures[endpoint.name])
        return ok

    async def _topup(self, endpoint: Endpoint, result: RunResult,
                     client: ChatClient) -> dict[str, Verdict]:
        """The top-up confirmation of the cells this run makes suspect (monitor.daemon.topup);
        a failure is logged and the run is evaluated without it."""
        if not self.settings.topup.enabled or result.run.status != RunStatus.COMPLETE:
            return {}
        try:
            found = await asyncio.to_thread(suspects, self.settings, self.catalog, self.store,
                                            result.run, result.summary,
                                            cache=self._baseline_cache)
            if not found:
                return {}
            fits, usd, calls = self._room(endpoint, len(result.run.languages))
            if not fits:
                log.info("endpoint %s: top-up of %s skipped: today's budget is spent",
                         endpoint.name, ", ".join(s.country for s in found))
                return {}
            return await confirm(self.settings, self.catalog, self.store, endpoint, result.run,
                                 found, client, usd, self._baseline_cache, max_calls=calls)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("endpoint %s: the top-up failed; the run is evaluated without it",
                          endpoint.name)
            return {}

    def _room(self, endpoint: Endpoint, languages: int
              ) -> tuple[bool, float | None, int | None]:
        """Whether today's budget leaves room for a batch of top-up, and the dollars and
        calls it leaves (None: no cap)."""
        b = self.settings.budget
        use = self._today(endpoint)
        batch = self.settings.topup.batch_triplets * languages
        calls = None if b.max_probes_per_day is None else b.max_probes_per_day - use.calls
        if calls is not None and calls < batch:
            return False, None, calls
        if b.max_usd_per_day is None:
            return True, None, calls
        left = b.max_usd_per_day - float(use.cost_usd)
        return left > 0, left, calls

    def _after_run(self, endpoint: Endpoint, result: RunResult,
                   verdicts: dict[str, Verdict] | None = None) -> Evaluation:
        with self.store.session():  # one connection for the whole aftermath
            ev = self._evaluate(endpoint, result, verdicts)
            self.state.refresh(self.store, endpoint.name)
        return ev

    def _evaluate(self, endpoint: Endpoint, result: RunResult,
                  verdicts: dict[str, Verdict] | None = None) -> Evaluation:
        ev = evaluate(self.settings, self.catalog, self.store, result.run, result.summary,
                      cache=self._baseline_cache, verdicts=verdicts)
        if not ev.comparable:
            log.info("endpoint %s: %s", endpoint.name, ev.note)
        if ev.h is not None:  # thresholds.cusum_h: auto
            log.info("endpoint %s: %s", endpoint.name, ev.h.describe())
        for t in ev.transitions:
            log.warning("endpoint %s: %s/%s %s -> %s (%s)", endpoint.name, t.scenario,
                        t.country, t.from_state, t.to_state, t.reason)
        self.state.set_flag("comparable", endpoint.name, int(ev.comparable))
        rows = [StatRow(kind=StatKind.DRIFT, scenario=s, key=c, value=v) for (s, c),
                v in ev.drift.items()]
        if (p := ev.persistence) is not None and math.isfinite(p.rho):
            # How much of a triplet's d comes back when it is asked again (the baseline as
            # covariate, monitor.stats.covariate): the run's pairs, pooled over cells.
            rows.append(StatRow(kind=StatKind.PERSISTENCE, scenario=POOLED, key=POOLED,
                                value=p.rho, ci_lower=p.ci_lower, ci_upper=p.ci_upper,
                                n=p.pairs, p_value=None, extra=json.dumps({"theta": round(p.theta,
                                                                                          4),
                                                           "used": p.used})))
        runs = self.store.runs(endpoint.name)  # read once: the JSD window and the shape check
        window = [r.run_id for r in runs
                  if r.status == RunStatus.COMPLETE
                  and r.catalog_version == result.run.catalog_version]
        window = window[-self.settings.baseline.jsd_window_runs:]
        extra = json.dumps({"window_runs": len(window)})
        rows += [StatRow(kind=StatKind.JSD_WINDOW, scenario=j.scenario, key=j.language,
                         value=j.jsd_bits, ci_lower=j.ci_lower,
                         ci_upper=j.ci_upper, n=j.n, p_value=j.p_value, extra=extra)
                 for j in jsd_of(self.store, window, result.run.languages, seed=result.run.seed,
                                 n_boot=WINDOW_BOOT)]
        if ev.comparable:
            try:
                rows += self._shape(endpoint, result, ev.baseline, runs)
            except Exception:  # informative only: it must not cost the run its drift rows
                log.exception("endpoint %s: the JSD shape check failed; drift is stored",
                              endpoint.name)
        self.store.write_stats(result.run.run_id, rows, replace=False)
        return ev

    def _shape(self, endpoint: Endpoint, result: RunResult, base: Baseline | None,
               runs: list[RunRow]) -> list[StatRow]:
        """Once per rotation cycle since the baseline: each language's excess JSD of the
        cycle's runs against the baseline's (monitor.watch.shape); informative, no page.
        `runs`: the endpoint's runs, oldest first."""
        run = result.run
        if base is None or run.run_id in base.run_ids:
            return []
        # One rotation cycle of the sampler that asked the runs (its strata are cached).
        cycle = Sampler(self.catalog, scenarios=run.scenarios, variants=run.variants,
                        seed=run.seed, triplets_per_run=self.settings.sampling.triplets_per_run,
                        languages=run.languages).runs_per_cycle
        since = [r for r in runs
                 if r.status == RunStatus.COMPLETE and r.catalog_version == base.catalog_version
                 and r.setup == base.setup and r.run_id not in base.run_ids
                 and r.started_at > base.set_at and r.languages == run.languages]
        if not since or since[-1].run_id != run.run_id or not due(len(since), cycle):
            return []
        cycle_ids = [r.run_id for r in since[-cycle:]]
        by_id = {r.run_id: r for r in runs}  # the baseline's runs are the endpoint's too
        base_runs = [by_id[x] for x in base.run_ids if x in by_id]
        if any(r.languages != run.languages for r in base_runs):
            log.info("endpoint %s: the baseline was asked in other languages; the JSD shape "
                     "is not compared", endpoint.name)
            return []
        threshold = self.settings.thresholds.jsd_excess_bits
        now = jsd_of(self.store, cycle_ids, run.languages, seed=run.seed, n_boot=WINDOW_BOOT)
        then = jsd_of(self.store, base.run_ids, run.languages, seed=base_runs[0].seed,
                      n_boot=WINDOW_BOOT)
        out = []
        for r in compare(now, then, threshold):
            if r.changed:
                log.warning("endpoint %s: the JSD of the scores in %s against all languages "
                            "pooled moved from the baseline's by %+.4f bits [%+.4f, %+.4f] over "
                            "the last %d runs (thresholds.jsd_excess_bits %g)", endpoint.name,
                            r.language, r.change_bits, r.ci_lower, r.ci_upper, len(cycle_ids),
                            threshold)
            extra = json.dumps({"cycle_runs": cycle, "runs": len(cycle_ids), "n_base": r.n_base,
                                "cycle_bits": r.cycle_bits, "base_bits": r.base_bits,
                                "threshold_bits": threshold, "changed": r.changed})
            out.append(StatRow(kind=StatKind.JSD_SHIFT, scenario=POOLED, key=r.language,
                               value=r.change_bits, ci_lower=r.ci_lower,
                               ci_upper=r.ci_upper, n=r.n, p_value=None, extra=extra))
        return out

    def _today(self, endpoint: Endpoint) -> Usage:
        """The endpoint's calls and cost since midnight UTC (the budget's day)."""
        day = self.clock().replace(hour=0, minute=0, second=0, microsecond=0)
        return self.store.usage(endpoint.name, since=day)

    def _budget(self, endpoint: Endpoint) -> RunOptions | None:
        """The run's options within today's budget; None when it is spent."""
        b = self.settings.budget
        use = self._today(endpoint)
        calls, usd = use.calls, use.cost_usd
        langs = len(self.settings.sampling.languages)
        triplets = self.settings.sampling.triplets_per_run
        spent = b.max_usd_per_day is not None and usd >= b.max_usd_per_day
        if b.max_probes_per_day is not None:
            triplets = min(triplets, (b.max_probes_per_day - calls) // langs)
        if spent or triplets < 1:
            log.info("endpoint %s: %d probes, $%.4f today", endpoint.name, calls, usd)
            self.budget_hit(endpoint)
            return None
        self.state.set_flag("budget_exhausted", endpoint.name, 0)
        left = None if b.max_usd_per_day is None else b.max_usd_per_day - float(usd)
        return RunOptions(triplets=triplets, max_cost_usd=left)

    def budget_hit(self, endpoint: Endpoint) -> None:
        """Metric, log, and one notice per day (deduplicated in the outbox)."""
        text = (f"daily budget reached on {self.clock():%Y-%m-%d}: no more probes "
                "until midnight UTC (budget.max_usd_per_day / max_probes_per_day)")
        self.state.set_flag("budget_exhausted", endpoint.name, 1)
        self.count_failure(endpoint.name, text)
        outbox.queue(self.store, self.sinks, endpoint.name, [outbox.note(text)])
        self.deliver(endpoint)

    def _interrupted(self, endpoint: Endpoint) -> str | None:
        """The run to resume now, after closing orphans and what is not resumed."""
        for run in self.store.close_orphans(endpoint.name):
            log.warning("endpoint %s: run %s was left running: %s; marked interrupted",
                        endpoint.name, run.run_id, run.reason)
        setup = setup_for(endpoint, [], list(self.catalog.languages)).key
        plan = triage(self.store.runs(endpoint.name), self.catalog.version, setup)
        for run, why in plan.close:
            self.store.close_run(run.run_id, RunStatus.FAILED, why)
            log.warning("endpoint %s: run %s closed as failed, %s (its answers stay stored)",
                        endpoint.name, run.run_id, why)
        return plan.resume.run_id if plan.resume else None
