"""What the scheduler calls: one job per endpoint, which never raises.

A job checks the daily budget, runs the same `run_endpoint` as
`monitor probe --once`, then (in a worker thread) compares the run with the
baseline, stores drift and the recent-runs JSD next to the run's statistics,
refreshes the metrics and tells Slack about alert changes. A failing job is
logged and counted (bias_monitor_run_failures_total) and the scheduler goes
on. Cancellation (SIGTERM) interrupts the run cleanly: what arrived is
stored, the run is marked interrupted and is resumed at the next start.
Before each run, interrupted runs are resumed or closed by the policy of
monitor.daemon.recovery. A run without any answer (the endpoint is down) is not
compared with the baseline: it says nothing about the model, and the gauges
keep the last measured values (`last_run_*` shows the outage).

`python -m monitor.daemon.job --endpoint NAME --report-fd N` runs one job in a
child process: `monitor run` starts one per scheduled run, so that LiteLLM,
pandas and SciPy (about 300 MB) live only as long as a run and the
long-lived scheduler stays small. The child writes what the parent cannot
read back from DuckDB (failure counts, flags) as JSON to the pipe N - no
file that a killed parent would leave behind.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.catalog import Catalog, load_catalog
from monitor.config import Endpoint, Settings, load_settings
from monitor.daemon.metrics import MetricsState
from monitor.daemon.recovery import triage
from monitor.daemon.slack import SlackNotifier
from monitor.errors import MonitorError
from monitor.logs import setup_logging
from monitor.measure.llm import LLMClient
from monitor.measure.run import RunOptions, RunResult, run_endpoint
from monitor.stats import jsd_table
from monitor.store import Store
from monitor.watch.evaluate import Evaluation, Mover, Transition, evaluate

__all__ = ["Daemon"]

log = logging.getLogger("monitor.daemon.job")


class Daemon:
    def __init__(self, settings: Settings, catalog: Catalog, store: Store, state: MetricsState,
                 notifier: SlackNotifier,
                 client_factory: Callable[[Endpoint], LLMClient] | None = None) -> None:
        self.client_factory = client_factory  # tests may answer without HTTP
        self.settings = settings
        self.catalog = catalog
        self.store = store
        self.state = state
        self.notifier = notifier
        self.failures: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self._baseline_cache: dict[tuple[str, str], Any] = {}

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
        client = self.client_factory(endpoint) if self.client_factory else None
        result = await run_endpoint(self.settings, self.catalog, self.store, endpoint, opts,
                                    client=client)
        counts = result.status_counts
        if result.run.status == "partial":
            log.warning("endpoint %s: run %s stopped early by the budget (stored as partial)",
                        endpoint.name, result.run.run_id)
            await asyncio.to_thread(self.budget_hit, endpoint)
        log.info("endpoint %s: run %s done: %s", endpoint.name, result.run.run_id, counts)
        if counts["ok"] == 0:
            # No answer says nothing about the model (its id, its bias): no comparison,
            # no notice; the gauges keep the last measured run's values.
            self.count_failure(endpoint.name, f"run {result.run.run_id} produced no results")
            await asyncio.to_thread(self.state.refresh, self.store, endpoint.name)
            await asyncio.to_thread(self.deliver, endpoint)
            return
        ev = await asyncio.to_thread(self._after_run, endpoint, result)
        payloads = [json.dumps({"kind": "transition", **asdict(t)}) for t in ev.to_notify]
        if not ev.comparable and ev.baseline is not None and "changed" in ev.note:
            payloads.append(json.dumps({"kind": "note", "text": ev.note}))
        if ev.fingerprint_note:
            log.warning("endpoint %s: %s", endpoint.name, ev.fingerprint_note)
            payloads.append(json.dumps({"kind": "note", "text": ev.fingerprint_note}))
        await asyncio.to_thread(self._queue, endpoint.name, payloads)
        await asyncio.to_thread(self.deliver, endpoint)

    def _queue(self, endpoint: str, payloads: list[str]) -> None:
        """Owed messages go to the outbox first, so a Slack outage or a restart
        loses none and a delivered one is never sent again."""
        if not self.notifier.enabled:
            return
        fresh = []
        for p in payloads:
            if json.loads(p)["kind"] == "note" and self.store.query(
                    "SELECT 1 FROM outbox WHERE endpoint = ? AND payload = ?", [endpoint, p]):
                continue  # this notice was already queued once
            fresh.append(p)
        if fresh:
            self.store.outbox_add(endpoint, fresh)

    def deliver(self, endpoint: Endpoint) -> bool:
        pending = self.store.outbox_pending(endpoint.name)
        if not pending or not self.notifier.enabled:
            return True
        transitions, notes = [], []
        for _, payload in pending:
            data = json.loads(payload)
            if data.pop("kind") == "note":
                notes.append(data["text"])
            else:
                transitions.append(_transition(data))
        ok = self.notifier.send(endpoint.name, transitions, simulated=endpoint.simulated,
                                note="; ".join(notes) or None)
        if not ok:
            self.delivery_failures[endpoint.name] = self.delivery_failures.get(
                endpoint.name, 0) + 1
            self.state.set_flag("delivery_failures", endpoint.name,
                                self.delivery_failures[endpoint.name])
        if ok:
            self.store.outbox_delivered([i for i, _ in pending])
            self.store.mark_notified(endpoint.name, [(t.scenario, t.country)
                                                     for t in transitions])
        return ok

    def _after_run(self, endpoint: Endpoint, result: RunResult) -> Evaluation:
        with self.store.session():  # one connection for the whole aftermath
            ev = self._evaluate(endpoint, result)
            self.state.refresh(self.store, endpoint.name)
        return ev

    def _evaluate(self, endpoint: Endpoint, result: RunResult) -> Evaluation:
        ev = evaluate(self.settings, self.catalog, self.store, result,
                      cache=self._baseline_cache)
        if not ev.comparable:
            log.info("endpoint %s: %s", endpoint.name, ev.note)
        for t in ev.transitions:
            log.warning("endpoint %s: %s/%s %s -> %s (%s)", endpoint.name, t.scenario,
                        t.country, t.from_state, t.to_state, t.reason)
        self.state.set_flag("comparable", endpoint.name, int(ev.comparable))
        rows: list[dict[str, Any]] = [
            {"kind": "drift", "scenario": s, "key": c, "value": v, "n": None}
            for (s, c), v in ev.drift.items()]
        window = [r.run_id for r in self.store.runs(endpoint.name)
                  if r.status == "complete" and r.catalog_version == result.run.catalog_version]
        window = window[-self.settings.baseline.jsd_window_runs:]
        scores = self.store.scores_frame(window)
        for r in jsd_table(scores, result.run.languages, seed=result.run.seed,
                           n_boot=500).to_dict("records"):
            rows.append({"kind": "jsd_window", "scenario": r["scenario"], "key": r["language"],
                         "value": r["jsd_bits"], "ci_lower": r["ci_lower"],
                         "ci_upper": r["ci_upper"], "n": r["n"], "p_value": r["p_value"]})
        for row in rows:
            if row["kind"] == "jsd_window":
                row["extra"] = json.dumps({"window_runs": len(window)})
        self.store.add_stats(result.run.run_id, rows)
        return ev

    def _budget(self, endpoint: Endpoint) -> RunOptions | None:
        """The run's options within today's budget; None when it is spent."""
        b = self.settings.budget
        day = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
        calls, usd = self.store.query(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM probe_calls WHERE endpoint = ? "
            "AND created_at >= ?", [endpoint.name, day])[0]
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
        """Metric, log, and one Slack notice per day (deduplicated in the outbox)."""
        text = (f"daily budget reached on {datetime.now(UTC):%Y-%m-%d}: no more probes "
                "until midnight UTC (budget.max_usd_per_day / max_probes_per_day)")
        self.state.set_flag("budget_exhausted", endpoint.name, 1)
        self.count_failure(endpoint.name, text)
        self._queue(endpoint.name, [json.dumps({"kind": "note", "text": text})])
        self.deliver(endpoint)

    def _interrupted(self, endpoint: Endpoint) -> str | None:
        """The run to resume now, after closing orphans and what is not resumed."""
        for run in self.store.close_orphans(endpoint.name):
            log.warning("endpoint %s: run %s was left running: %s; marked interrupted",
                        endpoint.name, run.run_id, run.reason)
        plan = triage(self.store.runs(endpoint.name), self.catalog.version)
        for run, why in plan.close:
            self.store.close_run(run.run_id, "failed", why)
            log.warning("endpoint %s: run %s closed as failed, %s (its answers stay stored)",
                        endpoint.name, run.run_id, why)
        return plan.resume.run_id if plan.resume else None


def _transition(data: dict[str, Any]) -> Transition:
    movers = [Mover(**m) for m in data.pop("movers", [])]
    return Transition(**{**data, "ci": tuple(data["ci"]), "ci_base": tuple(data["ci_base"]),
                         "movers": movers})


# --- one job in a child process (what `monitor run` starts) --------------------------------

def child_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m monitor.daemon.job")
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--report-fd", type=int, required=True,
                    help="pipe the JSON report is written to for the parent")
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    setup_logging(args.log_level)
    try:
        settings, _ = load_settings(args.config)
        store = Store(settings.storage.path)
        catalog = load_catalog(settings.catalog.path)
    except MonitorError as exc:  # one line, as from the CLI; the parent counts the failure
        log.error("endpoint %s: run not started: %s", args.endpoint, exc)
        return exc.exit_code
    daemon = Daemon(settings, catalog, store, MetricsState(),
                    SlackNotifier(settings.alerts.slack))

    async def main() -> None:
        job = asyncio.ensure_future(daemon.run_job(args.endpoint))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):  # interrupt the run, store it, exit 0
            loop.add_signal_handler(sig, job.cancel)
        await job

    asyncio.run(main())
    snap = daemon.state.snapshot()
    name = args.endpoint
    flags = {f: getattr(snap, f)[name] for f in ("comparable", "budget_exhausted")
             if name in getattr(snap, f)}
    with os.fdopen(args.report_fd, "w", encoding="utf-8") as fh:
        json.dump({"failures": daemon.failures.get(name, 0),
                   "delivery_failures": daemon.delivery_failures.get(name, 0),
                   "flags": flags}, fh)
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
