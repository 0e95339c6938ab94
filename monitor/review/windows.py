"""The slow JSD signals of a run's review: the recent runs pooled, and once per rotation
cycle each language's JSD against the baseline's (monitor.watch.shape).

- JSD window: the excess JSD per language of the last baseline.jsd_window_runs
  finished runs in the run's scope (monitor.watch.scope), the run included
  (run_stats kind jsd_window; the exporter's bias_monitor_jsd_bits).
- Shape: when the runs since the baseline in its scope cover a whole rotation
  cycle (Sampler.runs_per_cycle), their pooled JSD per language against the
  baseline's (kind jsd_shift); informative, it never pages.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence

from monitor.context import Context
from monitor.measure.sampling import Sampler
from monitor.stats import JSDRow, jsd_of
from monitor.store import RunRow, StatRow
from monitor.vocab import POOLED, StatKind
from monitor.watch import Reference, Scope, WatchStore
from monitor.watch.shape import ShapeRow, compare, due

__all__ = ["WINDOW_BOOT", "shape", "window"]

log = logging.getLogger(__name__)

#: Bootstrap replicates of the recent-runs JSD (a slow shape signal, per rotation).
WINDOW_BOOT = 500


def window(ctx: Context[WatchStore], run: RunRow, runs: Sequence[RunRow]
           ) -> tuple[list[JSDRow], list[StatRow]]:
    """The recent-runs JSD (`runs`: the endpoint's, oldest first, `run` as it ends)."""
    pooled = [r.run_id for r in Scope.of(run).pools(runs)]
    pooled = pooled[-ctx.settings.baseline.jsd_window_runs:]
    rows = jsd_of(ctx.store, pooled, run.languages, seed=run.seed, n_boot=WINDOW_BOOT)
    extra = json.dumps({"window_runs": len(pooled)})
    return rows, [StatRow(kind=StatKind.JSD_WINDOW, scenario=j.scenario, key=j.language,
                          value=j.jsd_bits, ci_lower=j.ci_lower, ci_upper=j.ci_upper, n=j.n,
                          p_value=j.p_value, extra=extra) for j in rows]


def shape(ctx: Context[WatchStore], run: RunRow, ref: Reference, runs: Sequence[RunRow]
          ) -> tuple[list[ShapeRow], list[StatRow]]:
    """Each language's JSD over the last rotation cycle against the baseline's, when the
    runs since the baseline complete a cycle with `run` (else nothing)."""
    base = ref.baseline
    if run.run_id in base.run_ids:
        return [], []
    cycle = Sampler(ctx.catalog, scenarios=run.scenarios, variants=run.variants, seed=run.seed,
                    triplets_per_run=ctx.settings.sampling.triplets_per_run,
                    languages=run.languages).runs_per_cycle
    scope = Scope.of(run)
    since = [r for r in scope.pools(runs)
             if r.run_id not in base.run_ids and r.started_at > base.set_at
             and set(r.languages) == set(run.languages)]
    if not since or since[-1].run_id != run.run_id or not due(len(since), cycle):
        return [], []
    base_runs = [r for r in runs if r.run_id in set(base.run_ids)]
    if any(set(r.languages) != set(run.languages) for r in base_runs):
        log.info("endpoint %s: the baseline was asked in other languages; the JSD shape "
                 "is not compared", run.endpoint)
        return [], []
    threshold = ctx.settings.thresholds.jsd_excess_bits
    cycle_ids = [r.run_id for r in since[-cycle:]]
    now = jsd_of(ctx.store, cycle_ids, run.languages, seed=run.seed, n_boot=WINDOW_BOOT)
    then = jsd_of(ctx.store, base.run_ids, run.languages, seed=base_runs[0].seed,
                  n_boot=WINDOW_BOOT)
    found = compare(now, then, threshold)
    stats = []
    for r in found:
        if r.changed:
            log.warning("endpoint %s: the JSD of the scores in %s against all languages "
                        "pooled moved from the baseline's by %+.4f bits [%+.4f, %+.4f] over "
                        "the last %d runs (thresholds.jsd_excess_bits %g)", run.endpoint,
                        r.language, r.change_bits, r.ci_lower, r.ci_upper, len(cycle_ids),
                        threshold)
        extra = json.dumps({"cycle_runs": cycle, "runs": len(cycle_ids), "n_base": r.n_base,
                            "cycle_bits": r.cycle_bits, "base_bits": r.base_bits,
                            "threshold_bits": threshold, "changed": r.changed})
        stats.append(StatRow(kind=StatKind.JSD_SHIFT, scenario=POOLED, key=r.language,
                             value=r.change_bits, ci_lower=r.ci_lower, ci_upper=r.ci_upper,
                             n=r.n, p_value=None, extra=extra))
    return found, stats
