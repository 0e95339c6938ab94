"""A run's review: everything that follows its calls, the same for `monitor probe --once`
and the daemon.

    measured run (still `running`)
      -> top-ups of the cells it makes suspect (monitor.review.topup; stored as they go)
      -> evaluation against the baseline (monitor.watch.evaluate: states, transitions,
         the automatic baseline), the JSD window and the per-cycle shape
      -> ONE transaction: the review's statistics (drift, persistence, JSD window and
         shape, the review row), the alert states and their events, the automatic
         baseline, the messages owed to the sinks, and the run's end (complete, partial
         or failed)

So a run is evaluated exactly once: a review interrupted (SIGTERM, Ctrl-C, a
crash, SIGKILL) leaves the run `interrupted` (or `running` with a dead owner,
which recovery closes as interrupted), and resuming it redoes the review from
the stored top-up progress, asking no call twice. Nothing is sent here: the
messages are queued; the daemon delivers them, `probe --once` leaves them to
the daemon.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.alerts import payloads, queue
from monitor.config import Endpoint
from monitor.context import Context
from monitor.measure import ChatClient, RunResult
from monitor.measure.budget import Allowance
from monitor.measure.run import despite_cancels
from monitor.review.ports import ReviewStore
from monitor.review.topup import confirm
from monitor.review.windows import shape, window
from monitor.stats import JSDRow
from monitor.store import RunRow, StatRow
from monitor.vocab import POOLED, RunStatus, StatKind
from monitor.watch import Evaluation, ReferenceCache, evaluate, reference, suspects
from monitor.watch.shape import ShapeRow
from monitor.watch.topup import Verdict

__all__ = ["Review", "review_run"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class Review:
    """What a run's review found and stored."""

    run: RunRow  # as the review ended it
    result: RunResult
    evaluation: Evaluation | None  # None: the run has no answer to compare
    topups: dict[str, Verdict] = field(default_factory=dict)
    jsd_window: list[JSDRow] = field(default_factory=list)
    shape: list[ShapeRow] = field(default_factory=list)
    stats: list[StatRow] = field(default_factory=list)  # what the review stored
    messages: list[str] = field(default_factory=list)  # outbox items queued


def _review_row(ev: Evaluation | None, verdicts: dict[str, Verdict], queued: int) -> StatRow:
    """The review itself, stored with the run: whether it was compared (the
    bias_monitor_baseline_comparable gauge reads it) and why not."""
    extra: dict[str, Any] = {"note": ev.note if ev else "no answer: not compared",
                             "topups": sorted(verdicts), "messages": queued}
    if ev is not None and ev.baseline is not None:
        extra["baseline_set_at"] = ev.baseline.set_at.isoformat()
    if ev is not None and ev.h is not None:
        extra["h"] = ev.h.h
    return StatRow(kind=StatKind.REVIEW, scenario=POOLED, key=POOLED,
                   value=float(bool(ev and ev.comparable)), extra=json.dumps(extra))


def _evaluation_rows(ev: Evaluation) -> list[StatRow]:
    rows = [StatRow(kind=StatKind.DRIFT, scenario=s, key=c, value=v)
            for (s, c), v in ev.drift.items()]
    if (p := ev.persistence) is not None and math.isfinite(p.rho):
        # How much of a triplet's d comes back when it is asked again (the baseline as
        # covariate, monitor.stats.covariate): the run's pairs, pooled over cells.
        rows.append(StatRow(kind=StatKind.PERSISTENCE, scenario=POOLED, key=POOLED,
                            value=p.rho, ci_lower=p.ci_lower, ci_upper=p.ci_upper, n=p.pairs,
                            extra=json.dumps({"theta": round(p.theta, 4), "used": p.used})))
    return rows


async def review_run(ctx: Context[ReviewStore], endpoint: Endpoint, result: RunResult,
                     client: ChatClient, *, allowance: Allowance, sinks: list[str],
                     cache: ReferenceCache | None = None) -> Review:
    """Review a measured run (run_endpoint's `hold`) and end it; `sinks`: the names of
    the sinks its messages are owed to (monitor.alerts.owed); `cache`: the baseline as
    read for earlier runs (a daemon keeps it)."""
    try:
        return await _review(ctx, endpoint, result, client, allowance, sinks, cache)
    except BaseException as exc:
        why = ("interrupted during its review (top-up, evaluation) by a signal or shutdown"
               if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
               else f"interrupted by an error during its review: {type(exc).__name__}: "
                    f"{str(exc)[:200]}")

        async def mark() -> None:
            await asyncio.to_thread(ctx.store.finish_run, result.run.run_id,
                                    RunStatus.INTERRUPTED, why)

        await despite_cancels(mark())
        log.warning("endpoint %s: run %s %s; it resumes where it stopped", endpoint.name,
                    result.run.run_id, why)
        raise


async def _review(ctx: Context[ReviewStore], endpoint: Endpoint, result: RunResult,
                  client: ChatClient, allowance: Allowance, sinks: list[str],
                  cache: ReferenceCache | None) -> Review:
    store = ctx.store
    run = replace(result.run, status=result.status, reason=result.reason)  # as it ends
    if result.status == RunStatus.FAILED:  # no answer says nothing about the model
        stats = [_review_row(None, {}, 0)]
        await asyncio.to_thread(_commit, ctx, run, None, stats, [], sinks)
        return Review(run=_ended(store, run), result=result, evaluation=None, stats=stats)
    ref = await asyncio.to_thread(reference, ctx, run, cache)
    verdicts: dict[str, Verdict] = {}
    if ctx.settings.topup.enabled and run.status == RunStatus.COMPLETE:
        found = await asyncio.to_thread(suspects, ctx, run, result.summary, ref)
        if found:
            try:
                verdicts = await confirm(ctx, endpoint, run, found, client, allowance, ref)
            except Exception:  # the run is evaluated without it; its answers are stored
                log.exception("endpoint %s: the top-up failed; the run is evaluated "
                              "without it", endpoint.name)
    return await asyncio.to_thread(_conclude, ctx, run, result, ref, verdicts, sinks)


def _conclude(ctx: Context[ReviewStore], run: RunRow, result: RunResult, ref: Any,
              verdicts: dict[str, Verdict], sinks: list[str]) -> Review:
    store = ctx.store
    with store.session():  # one connection for the whole conclusion
        ev = evaluate(ctx, run, result.summary, ref=ref, verdicts=verdicts)
        _log(run, ev)
        runs = [run if r.run_id == run.run_id else r for r in store.runs(run.endpoint)]
        jsd, stats = window(ctx, run, runs)
        found: list[ShapeRow] = []
        if ev.comparable and ref is not None:
            try:
                found, rows = shape(ctx, run, ref, runs)
                stats += rows
            except Exception:  # informative only: it must not cost the run its drift rows
                log.exception("endpoint %s: the JSD shape check failed; drift is stored",
                              run.endpoint)
        notes = [n for n in (ev.announce, ev.fingerprint_note) if n]
        items = payloads(ev.to_notify, notes) if ev.to_notify or notes else []
        stats = _evaluation_rows(ev) + stats + [_review_row(ev, verdicts, len(items))]
        _commit(ctx, run, ev, stats, items, sinks)
        ended = _ended(store, run)
    return Review(run=ended, result=result, evaluation=ev, topups=verdicts, jsd_window=jsd,
                  shape=found, stats=stats, messages=items)


def _log(run: RunRow, ev: Evaluation) -> None:
    if not ev.comparable:
        log.info("endpoint %s: %s", run.endpoint, ev.note)
    if ev.h is not None:  # thresholds.cusum_h: auto
        log.info("endpoint %s: %s", run.endpoint, ev.h.describe())
    if ev.fingerprint_note:
        log.warning("endpoint %s: %s", run.endpoint, ev.fingerprint_note)
    for t in ev.transitions:
        log.warning("endpoint %s: %s/%s %s -> %s (%s)", run.endpoint, t.scenario, t.country,
                    t.from_state, t.to_state, t.reason)


def _commit(ctx: Context[ReviewStore], run: RunRow, ev: Evaluation | None,
            stats: list[StatRow], items: list[str], sinks: list[str]) -> None:
    """Everything the review changes, in one transaction: all of it, or none."""
    store = ctx.store
    with store.transaction():
        store.write_stats(run.run_id, stats, replace=False)
        if ev is not None and ev.new_baseline:
            store.set_baseline(run.endpoint, ev.new_baseline, auto=True)
        if ev is not None and (ev.cells or ev.events):
            store.save_alert_states(run.endpoint, ev.cells, ev.events)
        if items:
            queue(store, sinks, run.endpoint, items)
        store.finish_run(run.run_id, RunStatus(run.status), run.reason)


def _ended(store: ReviewStore, run: RunRow) -> RunRow:
    return store.get_run(run.run_id) or run
