"""A comparison asked: batch by batch, both sides at once, a look after each batch.

Each batch takes the next BATCH_TRIPLETS triplets of the comparison's order
(monitor.compare.start) that hold a country still undecided, so that once most
countries are decided the calls go to those left (a triplet with none of them is
passed over, never asked). The batch is asked of both endpoints at the same time
(monitor.measure.run.ask for each side's run, concurrently: the same triplets,
languages, variants and option orders, interleaved in time), then the test
(monitor.compare.sequential) looks at the pairs of the triplets asked so far. It
stops when every country is decided, at --max-calls (counted as triplets x
languages x sides), when today's budget of either endpoint cannot hold a batch
(budget.max_probes_per_day / max_usd_per_day, as for any run), or when the
population is used up.

Resuming (Ctrl-C, SIGTERM, a crash): the batches are replayed in order from the
stored answers, each look on the triplets of the batches up to it only, so the
countries are decided at the same batches as without the interruption; the first
batch not wholly stored is completed (what is stored is not asked again) and the
comparison goes on. Its verdicts are the ones an uninterrupted comparison reaches.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from monitor.compare import sequential as sq
from monitor.compare.outcome import Result, TestState, read_pairs, stat_rows, summarise
from monitor.compare.pairs import Look, difference, restrict
from monitor.compare.ports import CompareStore
from monitor.compare.start import Prepared
from monitor.context import Context
from monitor.measure.budget import Allowance
from monitor.measure.calls import ChatClient
from monitor.measure.run import ask, despite_cancels
from monitor.measure.sampling import ProbeSpec
from monitor.measure.writer import import_spools
from monitor.stats import local_pairs
from monitor.vocab import Arm, RunStatus

__all__ = ["Budgets", "run_comparison"]


@dataclass(kw_only=True)
class Budgets:
    """Each side's client and what today's budget leaves its endpoint."""

    clients: dict[Arm, ChatClient]
    allowances: dict[Arm, Allowance]
    progress_s: float = 5.0
    _said: float = field(default=-1e9)


@dataclass(kw_only=True)
class _Test:
    names: list[str]
    up: np.ndarray
    down: np.ndarray
    codes: np.ndarray
    calls: np.ndarray
    l_up: np.ndarray
    l_down: np.ndarray

    @classmethod
    def new(cls, names: list[str]) -> _Test:
        k = len(names)
        return cls(names=names, up=np.zeros(k, np.int8), down=np.zeros(k, np.int8),
                   codes=np.zeros(k, np.int8), calls=np.zeros(k, np.int64),
                   l_up=np.zeros(k), l_down=np.zeros(k))

    def look(self, lk: Look, margin: float, limits: tuple[float, float], calls: int) -> None:
        open_ = self.codes == sq.OPEN
        self.up, self.down = sq.step(self.up, self.down, lk.n, lk.mean, lk.sd, margin, limits)
        up, down = sq.llr(lk.n, lk.mean, lk.sd, margin)
        self.l_up = np.where(open_, up, self.l_up)
        self.l_down = np.where(open_, down, self.l_down)
        self.codes = np.where(open_, sq.verdicts(self.up, self.down), self.codes).astype(np.int8)
        self.calls = np.where(open_, calls, self.calls)

    def open(self) -> set[str]:
        return {n for n, c in zip(self.names, self.codes, strict=True) if c == sq.OPEN}

    def states(self) -> dict[str, TestState]:
        return {n: TestState(change=sq.CHANGE[int(c)], calls=int(k), llr_up=float(u),
                             llr_down=float(d))
                for n, c, k, u, d in zip(self.names, self.codes, self.calls, self.l_up,
                                         self.l_down, strict=True)}


def _holds(ctx: Context[CompareStore], spec: ProbeSpec, names: set[str]) -> set[str]:
    scen = ctx.catalog.scenarios[spec.triplet.scenario]
    return {scen.options[o].country for o in spec.triplet.option_ids} & names


async def run_comparison(ctx: Context[CompareStore], p: Prepared, budgets: Budgets) -> Result:
    """Ask, look and stop as the module says; store the verdicts and end the comparison.
    On a signal or an error the comparison is marked interrupted and the exception
    goes on (its answers are stored; `--resume` goes on)."""
    c, store = p.comparison, ctx.store
    try:
        return await _run(ctx, p, budgets)
    except BaseException as exc:
        why = ("interrupted by a signal (SIGTERM, Ctrl-C)"
               if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt)
               else f"interrupted by an error: {type(exc).__name__}: {exc}"[:300])
        await despite_cancels(asyncio.to_thread(store.end_comparison, c.compare_id,
                                                RunStatus.INTERRUPTED, why))
        raise


async def _run(ctx: Context[CompareStore], p: Prepared, budgets: Budgets) -> Result:
    c, store = p.comparison, ctx.store
    langs = p.languages
    local = local_pairs(langs, ctx.catalog.languages)
    test = _Test.new([x for x, _ in local])
    limits = sq.bounds(c.alpha, c.beta, len(local))
    if p.resumed:
        for side in p.sides:
            await asyncio.to_thread(import_spools, store, side.run.run_id)
    keys = await asyncio.to_thread(store.triplet_keys, [s.triplet.id for s in p.order])
    names = set(test.names)
    holds = [_holds(ctx, s, names) for s in p.order]
    asked: list[ProbeSpec] = []
    pos, reason = 0, ""
    while True:
        open_ = test.open()
        if not open_:
            reason = "every country decided"
            break
        room = c.max_calls // p.calls_per_triplet - len(asked)
        k = min(c.batch_triplets, room)
        if k < 1:
            reason = f"--max-calls {c.max_calls} reached"
            break
        for side in p.sides:  # an endpoint on both sides pays for both
            share = sum(budgets.allowances[x.arm] is budgets.allowances[side.arm]
                        for x in p.sides)
            k = min(k, budgets.allowances[side.arm].triplets(k, len(langs) * share))
        if k < 1:
            reason = ("today's budget is spent (budget.max_probes_per_day / max_usd_per_day)")
            break
        batch: list[ProbeSpec] = []
        while pos < len(p.order) and len(batch) < k:
            if holds[pos] & open_:
                batch.append(p.order[pos])
            pos += 1
        if not batch:
            reason = "every triplet of the population was asked"
            break
        not_asked = await asyncio.gather(*(
            ask(ctx, side.endpoint, side.run, side.setup, batch, budgets.clients[side.arm],
                budgets.allowances[side.arm], resumed=True, stop_status=None)
            for side in p.sides))
        asked += batch
        pairs = await asyncio.to_thread(read_pairs, ctx, c, langs, p.reference)
        lk = Look(difference(*pairs), local, {keys[s.triplet.id] for s in asked})
        test.look(lk, c.margin, limits, len(asked) * p.calls_per_triplet)
        _progress(budgets, c.compare_id, len(asked) * p.calls_per_triplet, test)
        if any(not_asked):
            reason = "today's budget is spent (budget.max_probes_per_day / max_usd_per_day)"
            break
    pairs = restrict(await asyncio.to_thread(read_pairs, ctx, c, langs, p.reference),
                     {keys[s.triplet.id] for s in asked})
    runs = [s.run for s in p.sides]
    res = await asyncio.to_thread(summarise, ctx, c, runs, pairs, test.states(), len(asked))
    res = replace(res, comparison=replace(c, status=RunStatus.COMPLETE, reason=reason,
                                          outcome=res.outcome))
    with store.transaction():
        store.write_stats(c.candidate_run_id, stat_rows(res))
        for side in p.sides:
            store.finish_run(side.run.run_id, RunStatus.COMPARE,
                             f"the {side.arm} of comparison {c.compare_id}: {reason}")
        store.end_comparison(c.compare_id, RunStatus.COMPLETE, reason, res.outcome)
    return res


def _progress(b: Budgets, cid: str, calls: int, test: _Test) -> None:
    now = time.monotonic()
    left = sorted(test.open())
    if now - b._said < b.progress_s and left:
        return
    b._said = now
    print(f"[compare {cid}] {calls} calls; {len(test.names) - len(left)} of "
          f"{len(test.names)} countries decided" + (f", open: {', '.join(left)}" if left
                                                     else ""), file=sys.stderr, flush=True)
