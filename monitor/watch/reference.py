"""A baseline as runs are compared with it (`Reference`), read once per baseline and
shared by one run's suspects, top-ups and evaluation: its scope (monitor.watch.scope),
its MD cells, its per-triplet d for the covariate (CUPED, monitor.stats.covariate),
and the CUSUM's h sized against it (`thresholds.cusum_h: auto`: `baseline_h`, the
planner's rule)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from monitor.config import CUSUM_H, Settings
from monitor.context import Context
from monitor.stats import (
    Adjusted,
    BaseTable,
    MDRow,
    Persistence,
    base_table_of,
    covariate_of,
    md_covariate_of,
    md_of,
)
from monitor.store import Baseline, RunRow
from monitor.watch.plan import (
    H_GRID,
    REPS,
    RUNS,
    Cells,
    assess,
    cell_shares,
    runs_of_baseline,
    sd_from_md,
)
from monitor.watch.ports import WatchStore
from monitor.watch.scope import Scope

__all__ = ["DerivedH", "Reference", "ReferenceCache", "auto_h", "baseline_h", "covariate",
           "detector_h", "md_and_covariate", "reference"]


class DerivedH(NamedTuple):
    """`thresholds.cusum_h: auto`, sized against one baseline (baseline_h)."""

    h: float
    false_alarms_per_100: float | None  # expected at the planner's h; None: out of reach
    sd: float
    baseline_triplets: int
    planned: float | None = None  # the planner's h, when a floor raised it

    def describe(self) -> str:
        if not math.isfinite(self.sd) or self.sd <= 0:
            return f"h {self.h:g} (the default: the baseline gives no sd to size h from)"
        fa = ("the false-page target is out of reach, the highest h on the grid" if
              self.false_alarms_per_100 is None else
              f"{self.false_alarms_per_100:g} false pages per 100 runs expected" if
              self.false_alarms_per_100 > 0 else
              f"no false page in the planner's {REPS * RUNS} simulated runs")
        head = (f"h {self.h:g} from the baseline (sd {self.sd:.2f}, "
                f"{self.baseline_triplets} triplets)")
        if self.planned is None:
            return f"{head}: {fa}"
        return (f"{head}: the planner's h {self.planned:g} for the CUSUM alone ({fa}) raised "
                f"to {self.h:g}: with the top-up on, its alpha sets the false pages and h the "
                "evidence a resolve needs")


def baseline_h(cells: Cells, sd: float, n_run: int, baseline_triplets: int | None, *,
               fa_target: float, drift_points: float, min_runs_firing: int,
               auto_min_triplets: int | None = None, floor: float = 0.0) -> DerivedH:
    """The smallest h of H_GRID at which the CUSUM alone meets `fa_target` false pages
    per 100 runs against a baseline of this sd and size (`evaluate`, the plan's own
    rule), at least `floor`. With the top-up on the daemon passes floor = CUSUM_H:
    then the top-up's alpha sets the false pages and h the evidence a resolve needs
    (CAP_H * h); a lower h bought no page and cost false "resolved" (bench/auto_h.py),
    while a small baseline still raises h. baseline_triplets None: the daemon's
    automatic baseline (auto_min_triplets, as `evaluate` has it)."""
    size = (baseline_triplets if baseline_triplets is not None
            else round(runs_of_baseline(n_run, auto_min_triplets) * n_run))
    if not math.isfinite(sd) or sd <= 0 or size < 1:
        return DerivedH(max(CUSUM_H, floor), None, math.nan, size)
    h, fa, _ = assess(n_run, cells, sd, drift_points, fa_target, 3, drift_points,
                        min_runs_firing, auto_min_triplets, baseline_triplets=size)
    if h is None:
        return DerivedH(float(H_GRID[-1]), None, sd, size)
    if h < floor:
        return DerivedH(floor, fa, sd, size, planned=h)
    return DerivedH(h, fa, sd, size)


def auto_h(settings: Settings, cells: Cells, sd: float,
           baseline_triplets: int | None) -> DerivedH:
    """`thresholds.cusum_h: auto` as the daemon sizes it for these settings: their run
    size, target and detector, floored at CUSUM_H while the top-up is on. One rule for
    the daemon (`detector_h`), `monitor plan` and `monitor baseline calibrate`."""
    t = settings.thresholds
    return baseline_h(cells, sd, settings.sampling.triplets_per_run, baseline_triplets,
                      fa_target=t.false_alarms_per_100, drift_points=t.drift_md_points,
                      min_runs_firing=settings.alerts.min_runs_firing,
                      auto_min_triplets=settings.baseline.auto_min_triplets,
                      floor=CUSUM_H if settings.topup.enabled else 0.0)


@dataclass
class Reference:
    """A baseline as runs are compared with it, read once: its scope, its MD cells (in
    the languages of the runs compared), and, when first asked for, its per-triplet d
    for the covariate and the CUSUM's h."""

    baseline: Baseline
    scope: Scope
    triplets: int  # its runs' triplets (the planner sizes h with them)
    md: list[MDRow]
    table: BaseTable | None = None
    h: DerivedH | None = None  # thresholds.cusum_h: auto, sized once per baseline

    def cells(self) -> dict[tuple[str, str], MDRow]:
        return {(r.scenario, r.country): r for r in self.md}


#: Owned by the caller: (endpoint, baseline set_at, languages) -> its Reference; one
#: run's suspects, top-ups and evaluation (and a daemon's next runs) share it.
ReferenceCache = dict[tuple[str, str, tuple[str, ...]], Reference]


def reference(ctx: Context[WatchStore], run: RunRow,
              cache: ReferenceCache | None = None) -> Reference | None:
    """The endpoint's baseline as `run` is compared with it (None: no baseline yet)."""
    baseline = ctx.store.baseline(run.endpoint)
    if baseline is None:
        return None
    key = (run.endpoint, str(baseline.set_at), tuple(run.languages))
    ref = cache.get(key) if cache is not None else None
    if ref is None:
        runs = [r for r in ctx.store.runs(run.endpoint) if r.run_id in set(baseline.run_ids)]
        ref = Reference(baseline=baseline, scope=Scope.of_baseline(baseline, runs),
                        triplets=sum(r.triplets for r in runs),
                        md=md_of(ctx.store, baseline.run_ids, run.languages,
                                 ctx.catalog.languages))
        if cache is not None:
            cache.clear()
            cache[key] = ref
    return ref


def covariate(ctx: Context[WatchStore], run_ids: list[str], run: RunRow, ref: Reference
              ) -> tuple[dict[str, Adjusted], Persistence | None]:
    """The pooled cells of `run_ids` (run's, or its top-up's) with the baseline's answers
    as covariate (CUPED, monitor.stats.covariate); nothing when baseline.covariate is off
    or the adjustment does not pay."""
    table = _table(ctx, run, ref)
    if table is None:
        return {}, None
    adj, pers = covariate_of(ctx.store, run_ids, table, run.languages, ctx.catalog.languages)
    return (adj if pers.used else {}), pers


def md_and_covariate(ctx: Context[WatchStore], run_ids: list[str], run: RunRow,
                     ref: Reference | None) -> tuple[list[MDRow], dict[str, Adjusted]]:
    """The MD of `run_ids` (a top-up's) and `covariate`'s adjusted cells, from one read."""
    table = _table(ctx, run, ref)
    md, cov = md_covariate_of(ctx.store, run_ids, table, run.languages, ctx.catalog.languages)
    return md, (cov[0] if cov is not None and cov[1].used else {})


def _table(ctx: Context[WatchStore], run: RunRow, ref: Reference | None) -> BaseTable | None:
    """The baseline's covariate table, read once per baseline (None: no covariate)."""
    if ref is None or not ctx.settings.baseline.covariate:
        return None
    if ref.table is None:
        ref.table = base_table_of(ctx.store, ref.baseline.run_ids, run.languages,
                                  ctx.catalog.languages)
    return ref.table


def detector_h(ctx: Context[WatchStore], run: RunRow, ref: Reference
               ) -> tuple[float, DerivedH | None]:
    """The CUSUM's h for runs against `ref`: thresholds.cusum_h, or with `auto` the
    planner's h for thresholds.false_alarms_per_100 at this baseline's sd and size
    (`baseline_h`; seeded, so every run of a baseline gets the same)."""
    settings = ctx.settings
    t = settings.thresholds
    if t.cusum_h != "auto":
        return float(t.cusum_h), None
    if ref.h is None:
        cells = cell_shares(ctx.catalog, settings.sampling.scenarios, run.languages)
        ref.h = auto_h(settings, cells, sd_from_md(ref.md), ref.triplets)
    return ref.h.h, ref.h
