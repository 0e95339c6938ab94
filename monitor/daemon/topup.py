"""The top-up confirmation, asked: fresh triplets for each suspected cell of a run.

After a run's own sample is stored and before the run is evaluated, each
pooled country cell whose CUSUM the run would take past topup.suspect_h
(monitor.watch.evaluate.suspects) is topped up: batches of
topup.batch_triplets fresh triplets holding the country, none of the run's own
(Sampler.topup, seeded by the run), each asked in every language of the run,
until the SPRT of monitor.watch.topup confirms or dismisses the shift or
topup.max_triplets are asked. The answers go to a run row of their own,
`<run id>-topup-<country>` with status "topup", so that they are stored and
counted (calls, cost, the daily budget) but never enter the run's statistics,
baselines or reports: the run's MD stays the estimate of its own sample. The
verdicts are stored with the run (run_stats kind "topup") and feed evaluate().
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from monitor.catalog import Catalog
from monitor.config import Endpoint, Settings, Setup, setup_for
from monitor.measure.budget import CostGuard
from monitor.measure.llm import ChatClient
from monitor.measure.run import ask
from monitor.measure.sampling import Sampler
from monitor.store import Baseline, RunRow, StatRow, Store
from monitor.store import owner as owners
from monitor.vocab import POOLED, RunStatus, Side, StatKind
from monitor.watch import topup
from monitor.watch.evaluate import Suspect
from monitor.watch.reference import BaselineCache, md_and_covariate

__all__ = ["Room", "confirm", "topup_run_id"]

log = logging.getLogger(__name__)

#: Seconds between a long top-up's progress lines in the daemon's log.
PROGRESS_S = 30.0


def topup_run_id(run_id: str, country: str) -> str:
    return f"{run_id}-topup-{country}"


@dataclass
class Room:
    """What today's budget leaves the top-ups of a run: dollars, checked call by call
    (`guard`), and calls (budget.max_probes_per_day), checked batch by batch, so that no
    batch is asked that the day's probes cannot hold. Shared by the run's top-ups."""

    guard: CostGuard
    calls: int | None  # None: no cap on the day's probes
    spent: bool = False  # a top-up was stopped by the budget

    def triplets(self, want: int, languages: int) -> int:
        """How many of `want` triplets (each asked in `languages`) the day still holds."""
        if self.calls is None:
            return want
        fit = min(want, self.calls // max(languages, 1))
        self.spent = self.spent or fit < want
        return fit

    def used(self, calls: int) -> None:
        if self.calls is not None:
            self.calls = max(self.calls - calls, 0)


async def confirm(settings: Settings, catalog: Catalog, store: Store, endpoint: Endpoint,
                  run: RunRow, found: list[Suspect], client: ChatClient,
                  max_cost_usd: float | None, cache: BaselineCache | None = None,
                  max_calls: int | None = None) -> dict[str, topup.Verdict]:
    """Top up every suspected cell; the verdicts by country (also stored with the run).
    `max_cost_usd` / `max_calls`: the dollars and calls today's budget still allows
    (None: no cap); `cache`: the baseline as evaluate reads it
    (monitor.watch.evaluate.BaselineCache)."""
    sampler = Sampler.of_run(catalog, run)
    own = {s.triplet.id for s in sampler.sample(run.run_index)}
    setup = setup_for(endpoint, run.languages, list(catalog.languages))
    room = Room(CostGuard(max_cost_usd), max_calls)
    baseline = await asyncio.to_thread(store.baseline, run.endpoint)
    verdicts: dict[str, topup.Verdict] = {}
    tp = settings.topup
    for sus in found:
        side = Side.of(sus.side)
        # A top-up can take minutes under an rpm limit (up to topup.max_triplets in
        # every language): its start is said, not only its end.
        log.info("endpoint %s: run %s: %s suspected %s (CUSUM %.1f nats > topup.suspect_h "
                 "%g): asking fresh triplets in batches of %d, at most %d (%d calls)",
                 endpoint.name, run.run_id, sus.country, side, sus.cusum, tp.suspect_h,
                 tp.batch_triplets, tp.max_triplets, tp.max_triplets * len(run.languages))
        v = await _one(settings, catalog, store, endpoint, run, sus, sampler, own, setup,
                       client, room, baseline, cache)
        verdicts[sus.country] = v
        log.info("endpoint %s: run %s: top-up of %s (%s, CUSUM %.1f): %s after %d triplets, "
                 "MD %+.2f vs baseline %+.2f, SPRT %.1f nats", endpoint.name, run.run_id,
                 sus.country, side, sus.cusum, v.word, v.asked, v.md, sus.base.md, v.llr)
        if room.guard.refused or room.spent:
            left = [s.country for s in found if s.country not in verdicts]
            log.warning("endpoint %s: run %s: top-up of %s stopped by today's budget "
                        "(budget.max_usd_per_day / max_probes_per_day)%s", endpoint.name,
                        run.run_id, sus.country,
                        f"; {', '.join(left)} wait for the next run" if left else "")
            break  # the budget is spent: the other suspects wait for the next run
    await asyncio.to_thread(store.write_stats, run.run_id, _rows(verdicts), replace=False)
    return verdicts


async def _one(settings: Settings, catalog: Catalog, store: Store, endpoint: Endpoint,
               run: RunRow, sus: Suspect, sampler: Sampler, own: set[str], setup: Setup,
               client: ChatClient, room: Room, baseline: Baseline | None,
               cache: BaselineCache | None) -> topup.Verdict:
    tp = settings.topup
    now = datetime.now(UTC)
    row = replace(run, run_id=topup_run_id(run.run_id, sus.country), triplets=0,
                  planned_calls=0, started_at=now, finished_at=None, status=RunStatus.TOPUP,
                  owner=owners.token(), heartbeat_at=now,
                  reason=f"top-up of {sus.country} for run {run.run_id}", attempts=1)
    # A top-up row made here holds nothing yet, and each batch asks triplets no earlier
    # batch did: only a resumed one needs its stored answers looked up.
    resumed = await asyncio.to_thread(store.get_run, row.run_id) is not None
    if not resumed:
        await asyncio.to_thread(store.create_run, row)
    asked, n, md, ci, value = 0, 0, math.nan, (math.nan, math.nan), 0.0
    decision = topup.UNDECIDED
    langs = len(run.languages)
    said = time.monotonic()
    while asked < tp.max_triplets and decision == topup.UNDECIDED:
        k = room.triplets(min(tp.batch_triplets, tp.max_triplets - asked), langs)
        if k < 1:
            break  # the day's probes are spent: what is there is what the test has
        specs = sampler.topup(run.run_index, sus.country, asked, k, own)
        if not specs:
            break  # every fresh triplet holding the country is asked
        not_asked = await ask(catalog, store, endpoint, row, setup, specs, client, room.guard,
                              resumed=True, stop_status=None, look_up=resumed)
        room.used(len(specs) * langs - not_asked)
        asked += len(specs)
        # The fresh triplets are in a calibration baseline too: the same covariate as
        # the run's own cells (the shown MD stays the raw one).
        rows, adj = await asyncio.to_thread(md_and_covariate, settings, catalog, store,
                                            [row.run_id], run, baseline, cache)
        cell = next((r for r in rows if r.scenario == POOLED and r.country == sus.country),
                    None)
        if cell is not None and cell.n > 0:
            n, md, ci = cell.n, cell.md, (cell.ci_lower, cell.ci_upper)
            a = adj.get(sus.country)
            x, factor = (a.md, a.factor) if a is not None else (md, 1.0)
            value = float(topup.llr(n, x - sus.base.md, sus.base.se * math.sqrt(factor),
                                    sus.base.n, sus.side, settings.thresholds.drift_md_points))
            decision = int(topup.decide(value, tp.alpha, tp.beta))
        if decision == topup.UNDECIDED and time.monotonic() - said >= PROGRESS_S:
            said = time.monotonic()
            yes, no = topup.bounds(tp.alpha, tp.beta)
            log.info("endpoint %s: top-up of %s for run %s: %d fresh triplets asked (%d calls), "
                     "SPRT %.1f nats (confirms at %.1f, dismisses at %.1f)", endpoint.name,
                     sus.country, run.run_id, asked, asked * langs, value, yes, no)
        if not_asked:
            break  # the budget refused calls: what is there is what the test has
    v = topup.Verdict(country=sus.country, side=sus.side, decision=decision, n=n, md=md, ci=ci,
                      llr=value, asked=asked, run_id=row.run_id)
    await asyncio.to_thread(store.finish_run, row.run_id, RunStatus.TOPUP,
                            f"top-up of {sus.country} for run {run.run_id}: {v.word}")
    return v


def _rows(verdicts: dict[str, topup.Verdict]) -> list[StatRow]:
    return [StatRow(kind=StatKind.TOPUP, scenario=POOLED, key=v.country, value=v.md,
                    ci_lower=v.ci[0], ci_upper=v.ci[1], n=v.n, p_value=None,
                    extra=json.dumps({"decision": v.word, "side": v.side, "llr": round(v.llr, 3),
                                "asked": v.asked, "run_id": v.run_id}))
            for v in verdicts.values()]
