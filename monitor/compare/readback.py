"""A stored comparison read back (`monitor compare --show`): its verdicts as stored
with the candidate's run, its numbers recomputed from the stored answers (the same
pairs the comparison ended on), read-only."""

from __future__ import annotations

from monitor.compare.outcome import Result, read_pairs, stored_tests, summarise
from monitor.compare.ports import CompareStore
from monitor.compare.start import order_of
from monitor.context import Context
from monitor.errors import UsageError
from monitor.vocab import RunStatus, StatKind

__all__ = ["show"]


def show(ctx: Context[CompareStore], compare_id: str) -> Result:
    store = ctx.store
    c = store.get_comparison(compare_id)
    if c is None:
        raise UsageError(f"--show {compare_id}: no such comparison in {store.path}")
    if c.status != RunStatus.COMPLETE:
        raise UsageError(f"--show {compare_id}: the comparison is {c.status} ({c.reason}); "
                         f"finish it with `monitor compare --resume {compare_id}`")
    runs = [r for r in (store.get_run(x) for x in (c.baseline_run_id, c.candidate_run_id)
                        if x) if r is not None]
    tests, triplets = stored_tests([st for _, st in store.stats_of(
        [c.candidate_run_id], kind=StatKind.COMPARE)])
    _, reference = order_of(ctx, c, runs[-1])
    pairs = read_pairs(ctx, c, runs[-1].languages, reference)
    return summarise(ctx, c, runs, pairs, tests, triplets)
