"""The top-up confirmation, asked: fresh triplets for each suspected cell of a run.

Before a run is evaluated, each pooled country cell whose CUSUM the run would
take past topup.suspect_h (monitor.watch.evaluate.suspects) is topped up:
batches of topup.batch_triplets fresh triplets holding the country, none of
the run's own (Sampler.topup, seeded by the run), each asked in every language
of the run, until the SPRT of monitor.watch.topup confirms or dismisses the
shift or topup.max_triplets are asked. The answers go to a run row of their
own, `<run id>-topup-<country>` with status "topup", so that they are stored
and counted (calls, cost, the daily budget) but never enter the run's
statistics, baselines or reports: the run's MD stays the estimate of its own
sample. Each verdict is stored with the run (run_stats kind "topup") as soon
as it is reached.

Resuming (a run interrupted during its review): a cell with a stored verdict
keeps it; a cell whose top-up was under way goes on where it stopped - its
stored answers are tested first, then the batch they end in is completed and
the next batches asked - so the verdict is the one an uninterrupted top-up
would have reached. The batches stay within the run's Allowance (the dollars
and calls today's budget leaves, shared with the run and its other top-ups).
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from monitor.config import Endpoint, Setup, Topup, setup_for
from monitor.context import Context
from monitor.measure.budget import Allowance
from monitor.measure.calls import ChatClient
from monitor.measure.run import ask
from monitor.measure.sampling import Sampler
from monitor.review.ports import ReviewStore
from monitor.stats import nullable
from monitor.store import RunRow, StatRow
from monitor.store import owner as owners
from monitor.vocab import POOLED, TOPUP_INFIX, RunStatus, Side, StatKind
from monitor.watch import topup
from monitor.watch.evaluate import Suspect
from monitor.watch.reference import Reference, md_and_covariate

__all__ = ["PROGRESS_S", "confirm", "topup_run_id"]

log = logging.getLogger(__name__)

#: Seconds between a long top-up's progress lines in the log.
PROGRESS_S = 30.0


def topup_run_id(run_id: str, country: str) -> str:
    return f"{run_id}{TOPUP_INFIX}{country}"


@dataclass(frozen=True, kw_only=True)
class _Cell:
    """What one top-up needs beyond the context: the run, its sampler and setup."""

    endpoint: Endpoint
    run: RunRow
    sampler: Sampler
    own: frozenset[str]  # the run's own triplets: never asked again
    setup: Setup
    client: ChatClient
    ref: Reference | None


def _stored(store: ReviewStore, run_id: str) -> dict[str, topup.Verdict]:
    """The verdicts this run's top-ups reached before an interruption."""
    return {st.key: topup.Verdict.of_row(st)
            for _, st in store.stats_of([run_id], kind=StatKind.TOPUP)}


def _row(v: topup.Verdict) -> StatRow:
    return StatRow(kind=StatKind.TOPUP, scenario=POOLED, key=v.country, value=v.md,
                   ci_lower=v.ci[0], ci_upper=v.ci[1], n=v.n, p_value=None,
                   extra=json.dumps({"decision": v.word, "side": v.side,
                                     "llr": round(v.llr, 3), "asked": v.asked,
                                     "run_id": v.run_id, "why": v.why, "did": nullable(v.did),
                                     "did_ci_lower": nullable(v.did_ci[0]),
                                     "did_ci_upper": nullable(v.did_ci[1]),
                                     "did_n": v.did_n, "did_md": nullable(v.did_md),
                                     "cusum": nullable(v.cusum)}))


async def confirm(ctx: Context[ReviewStore], endpoint: Endpoint, run: RunRow,
                  found: Sequence[Suspect], client: ChatClient, allowance: Allowance,
                  ref: Reference | None) -> dict[str, topup.Verdict]:
    """Top up every suspected cell within `allowance`; the verdicts by country (each
    also stored with the run as it is reached)."""
    store, tp = ctx.store, ctx.settings.topup
    verdicts = await asyncio.to_thread(_stored, store, run.run_id)
    sampler = Sampler.of_run(ctx.catalog, run)
    own = frozenset(s.triplet.id for s in sampler.sample(run.run_index))
    cell = _Cell(endpoint=endpoint, run=run, sampler=sampler, own=own,
                 setup=setup_for(endpoint, run.languages, list(ctx.catalog.languages)),
                 client=client, ref=ref)
    # The run's top-ups share one limit in calls (topup.max_run_share of its plan, and
    # what the last runs' top-ups left of topup.mean_run_share), so a run stays near its
    # slot and runs near their plan on average; what earlier top-ups of it asked (a
    # resumed review) counts.
    window = topup.window_runs(tp.max_run_share, tp.mean_run_share)
    before = 0 if window == 1 else await asyncio.to_thread(
        store.topup_calls_before, endpoint.name, run.started_at, window - 1)
    limit = int(topup.run_limit(run.planned_calls, before, tp.max_run_share,
                                tp.mean_run_share))
    room = _Room(limit=limit,
                 spent=sum(v.asked for v in verdicts.values()) * len(run.languages),
                 why=_limit_words(tp, run.planned_calls, before, window, limit))
    for sus in found:
        if sus.country in verdicts:
            continue  # reached before an interruption: kept
        if room.left(len(run.languages)) < 1:
            log.info("endpoint %s: run %s: top-up of %s skipped: the run's top-ups asked "
                     "their limit, %s", endpoint.name, run.run_id, sus.country, room.why)
            break
        if not allowance.fits(tp.batch_triplets, len(run.languages)):
            log.info("endpoint %s: run %s: top-up of %s skipped: today's budget is spent "
                     "(budget.max_usd_per_day / max_probes_per_day)", endpoint.name,
                     run.run_id, sus.country)
            break
        # A top-up can take minutes under an rpm limit (up to topup.max_triplets in
        # every language): its start is said, not only its end.
        log.info("endpoint %s: run %s: %s suspected %s (CUSUM %.1f nats > topup.suspect_h "
                 "%g): asking fresh triplets in batches of %d, at most %d (%d calls)",
                 endpoint.name, run.run_id, sus.country, Side.of(sus.side), sus.cusum,
                 tp.suspect_h, tp.batch_triplets, tp.max_triplets,
                 tp.max_triplets * len(run.languages))
        v = await _one(ctx, cell, sus, allowance, room)
        verdicts[sus.country] = v
        await asyncio.to_thread(store.write_stats, run.run_id, [_row(v)], replace=False)
        log.info("endpoint %s: run %s: top-up of %s (%s, CUSUM %.1f): %s after %d triplets, "
                 "MD %+.2f vs baseline %+.2f, SPRT %.1f nats", endpoint.name, run.run_id,
                 sus.country, Side.of(sus.side), sus.cusum, v.word, v.asked, v.md, sus.base.md,
                 v.llr)
        if v.why:
            log.warning("endpoint %s: run %s: top-up of %s stopped early: %s", endpoint.name,
                        run.run_id, sus.country, v.why)
        if allowance.stopped:
            left = [s.country for s in found if s.country not in verdicts]
            log.warning("endpoint %s: run %s: top-up of %s stopped by today's budget "
                        "(budget.max_usd_per_day / max_probes_per_day)%s", endpoint.name,
                        run.run_id, sus.country,
                        f"; {', '.join(left)} wait for the next run" if left else "")
            break  # the budget is spent: the other suspects wait for the next run
    return verdicts


def _limit_words(tp: Topup, planned: int, before: int, window: int, limit: int) -> str:
    """The run's `limit` in calls and where it comes from (monitor.watch.topup.run_limit:
    the top-ups of the window's W - 1 runs before asked `before`)."""
    if tp.mean_run_share is None or limit >= int(tp.max_run_share * planned):
        return (f"{limit} calls (topup.max_run_share {tp.max_run_share:g} of the run's "
                f"{planned} planned)")
    return (f"{limit} calls: the top-ups of the last {window - 1} runs asked {before} of "
            f"the {int(tp.mean_run_share * window * planned)} that topup.mean_run_share "
            f"{tp.mean_run_share:g} allows over {window} runs of {planned} planned calls")


@dataclass(kw_only=True)
class _Room:
    """The calls a run's top-ups may still ask (monitor.watch.topup.run_limit)."""

    limit: int
    spent: int
    why: str  # the limit in words, for the log

    def left(self, langs: int) -> int:
        """Whole triplets (each in every language) still within the limit."""
        return max(0, self.limit - self.spent) // max(langs, 1)


async def _one(ctx: Context[ReviewStore], cell: _Cell, sus: Suspect,
               allowance: Allowance, room: _Room) -> topup.Verdict:
    store, tp, run = ctx.store, ctx.settings.topup, cell.run
    now = datetime.now(UTC)
    row = replace(run, run_id=topup_run_id(run.run_id, sus.country), triplets=0,
                  planned_calls=0, started_at=now, finished_at=None, status=RunStatus.TOPUP,
                  owner=owners.token(), heartbeat_at=now,
                  reason=f"top-up of {sus.country} for run {run.run_id}", attempts=1)
    resumed = await asyncio.to_thread(store.get_run, row.run_id) is not None
    asked = stored = 0
    if not resumed:
        await asyncio.to_thread(store.create_run, row)
    else:  # go on where it stopped: the batch its stored answers end in, completed
        done = await asyncio.to_thread(store.done_calls, row.run_id)
        stored = len({t for t, _ in done})
        asked = stored // tp.batch_triplets * tp.batch_triplets
    langs = len(run.languages)
    state = _test(ctx, cell, sus, row.run_id) if resumed else None
    said = time.monotonic()
    why = ""
    while state is None or (state[4] == topup.UNDECIDED and asked < tp.max_triplets):
        if state is not None and (why := _futile(ctx, sus, state)):
            break  # confirmation is out of reach at the cap: asking more only spends
        k = allowance.triplets(min(tp.batch_triplets, tp.max_triplets - asked,
                                   room.left(langs)), langs)
        if k < 1:
            if room.left(langs) < 1:
                why = f"the run's top-ups reached their limit, {room.why}"
            break  # the day's probes are spent: what is there is what the test has
        specs = cell.sampler.topup(run.run_index, sus.country, asked, k, set(cell.own))
        if not specs:
            break  # every fresh triplet holding the country is asked
        not_asked = await ask(ctx, cell.endpoint, row, cell.setup, specs, cell.client,
                              allowance, resumed=True, stop_status=None, look_up=resumed)
        asked += len(specs)
        room.spent += len(specs) * langs
        state = await asyncio.to_thread(_test, ctx, cell, sus, row.run_id)
        if state[4] == topup.UNDECIDED and time.monotonic() - said >= PROGRESS_S:
            said = time.monotonic()
            yes, no = topup.bounds(tp.alpha, tp.beta)
            log.info("endpoint %s: top-up of %s for run %s: %d fresh triplets asked (%d calls), "
                     "SPRT %.1f nats (confirms at %.1f, dismisses at %.1f)", cell.endpoint.name,
                     sus.country, run.run_id, asked, asked * langs, state[3], yes, no)
        if not_asked:
            break  # the budget refused calls: what is there is what the test has
    asked = max(asked, stored)
    n, md, ci, value, decision, _ = state or (0, math.nan, (math.nan, math.nan), 0.0,
                                              topup.UNDECIDED, math.nan)
    did, did_ci, did_n, did_md = _pooled_did(ctx, cell, sus, row.run_id)
    v = topup.Verdict(country=sus.country, side=sus.side, decision=decision, n=n, md=md,
                      ci=ci, llr=value, asked=asked, run_id=row.run_id,
                      why=why if decision == topup.UNDECIDED else "", did=did, did_ci=did_ci,
                      did_n=did_n, did_md=did_md, cusum=sus.cusum)
    await asyncio.to_thread(store.finish_run, row.run_id, RunStatus.TOPUP,
                            f"top-up of {sus.country} for run {run.run_id}: {v.word}")
    return v


def _futile(ctx: Context[ReviewStore], sus: Suspect,
            state: tuple[int, float, tuple[float, float], float, int, float]) -> str:
    """Why the top-up cannot confirm at its cap (monitor.watch.topup.reachable), or ""."""
    tp, delta = ctx.settings.topup, ctx.settings.thresholds.drift_md_points
    _, md, _, _, _, se = state
    if not math.isfinite(se) or bool(topup.reachable(tp.max_triplets, md - sus.base.md, se,
                                                     sus.base.n, sus.side, delta, tp.alpha,
                                                     tp.beta)):
        return ""
    need = topup.baseline_needed(tp.max_triplets, se, sus.base.n, delta, tp.alpha, tp.beta)
    fix = (f"recalibrate with {need} triplets per cell (monitor baseline calibrate "
           f"--triplets-per-cell {need})" if need is not None else
           "no baseline would do at this cap: raise topup.max_triplets")
    return (f"baseline too thin for {sus.country} (n={sus.base.n}, SE {se:.2f}): a shift of "
            f"{delta:g} cannot be confirmed within topup.max_triplets {tp.max_triplets}; "
            f"{fix}")


def _pooled_did(ctx: Context[ReviewStore], cell: _Cell, sus: Suspect, topup_run_id: str
                ) -> tuple[float, tuple[float, float], int, float]:
    """The country's DiD on the run and its top-up's triplets pooled, its 95% CI, n and
    the MD of the same triplets: the data that decide the page say bias or leniency
    (monitor.watch.transition.did_verdict)."""
    rows, _ = md_and_covariate(ctx, [cell.run.run_id, topup_run_id], cell.run, None)
    found = next((r for r in rows if r.scenario == POOLED and r.country == sus.country), None)
    if found is None:
        return math.nan, (math.nan, math.nan), 0, math.nan
    return found.did, (found.did_ci_lower, found.did_ci_upper), found.n, found.md


def _test(ctx: Context[ReviewStore], cell: _Cell, sus: Suspect, run_id: str
          ) -> tuple[int, float, tuple[float, float], float, int, float]:
    """The SPRT on the top-up's stored answers: (n, MD, its CI, the LLR, the decision,
    the baseline's SE as the test uses it: scaled by the covariate's factor).
    The fresh triplets are in a calibration baseline too: the same covariate as the
    run's own cells (the shown MD stays the raw one)."""
    rows, adj = md_and_covariate(ctx, [run_id], cell.run, cell.ref)
    found = next((r for r in rows if r.scenario == POOLED and r.country == sus.country), None)
    if found is None or found.n < 1:
        return 0, math.nan, (math.nan, math.nan), 0.0, topup.UNDECIDED, math.nan
    a = adj.get(sus.country)
    x, factor = (a.md, a.factor) if a is not None else (found.md, 1.0)
    se = sus.base.se * math.sqrt(factor)
    value = float(topup.llr(found.n, x - sus.base.md, se, sus.base.n, sus.side,
                            ctx.settings.thresholds.drift_md_points))
    tp = ctx.settings.topup
    return (found.n, found.md, (found.ci_lower, found.ci_upper), value,
            int(topup.decide(value, tp.alpha, tp.beta)), se)
