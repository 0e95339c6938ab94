"""`monitor baseline calibrate`: one large run that becomes the endpoint's baseline.

A baseline of many small runs carries an error that every later run shares (the
detector compares each run with the baseline's mean), which forces a higher h or
more calls per run. A calibration run asks each country cell about
--triplets-per-cell triplets at once (capped at the monitored population: one full
rotation cycle), is stored like any run, and is accepted as the baseline when it
completes. It says what it will ask and what that costs before the first call
(--dry-run stops there), refuses to start when the estimate exceeds --max-cost-usd,
shows progress, and is resumable: Ctrl-C / SIGTERM keep every answer and print the
command that resumes it (`--resume RUN_ID`), after which it becomes the baseline.

Exit codes as `monitor probe --once`: 0 the baseline is set (or --dry-run); 2 usage;
3 the run produced no results, or stopped early at --max-cost-usd (kept, not
accepted); 4 storage; 130 / 143 interrupted.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping

import numpy as np

from monitor.catalog import load_catalog
from monitor.commands.plan import READ_RUNS, cost_per_call, read_shares, stored_usage
from monitor.commands.probe import endpoints_for, run_until_stopped
from monitor.config import Endpoint, Settings, load_settings
from monitor.context import Context
from monitor.errors import EXIT_NO_RESULTS, UsageError
from monitor.measure.budget import Allowance
from monitor.measure.progress import Progress
from monitor.measure.run import RunResult, run_endpoint
from monitor.measure.start import RunOptions
from monitor.store import Store, open_store
from monitor.vocab import POOLED, RunStatus
from monitor.watch.plan import (
    Cells,
    assess,
    cell_shares,
    sd_from_md,
    usable_cells,
)
from monitor.watch.plan_topup import assess_topup
from monitor.watch.reference import auto_h

__all__ = ["DEFAULT_TRIPLETS_PER_CELL", "READ_RUNS", "calibrate_command", "calibration_size",
           "read_shares"]

DEFAULT_TRIPLETS_PER_CELL = 1000


def calibration_size(cells: Cells, per_cell: int, read: Mapping[str, float] | None = None
                     ) -> int:
    """Triplets that give the smallest cell `per_cell` usable triplets, capped at the
    population. `read`: the share of a cell's triplets whose answer in its country's
    language is read (monitor.watch.plan.usable_cells), 1 by default."""
    smallest = min((u for u in usable_cells(cells, read or {}).shares if u > 0), default=0.0)
    if smallest <= 0:
        return cells.population
    return min(cells.population, math.ceil(per_cell / smallest))


def _announce(endpoint: Endpoint, settings: Settings, store: Store, triplets: int,
              cells: Cells, per_cell: int, max_cost: float | None,
              read: Mapping[str, float]) -> None:
    langs = settings.sampling.languages
    calls = triplets * len(langs)
    per = {name: round(triplets * share * read.get(name, 1.0))
           for name, share in zip(cells.names, cells.shares, strict=True)}
    low = min(per, key=lambda c: per[c]) if per else "-"
    high = max(per, key=lambda c: per[c]) if per else "-"
    whole = (" (every monitored triplet: one full rotation cycle)"
             if triplets == cells.population else "")
    per_call, note = cost_per_call(endpoint, stored_usage(store, endpoint.name))
    if per_call is not None:
        cost = f"about ${calls * per_call:.2f} ({note})"
    elif endpoint.simulated and endpoint.cost_per_1k_tokens.input is None:
        cost = "$0 (simulated, no prices set)"
    else:  # nothing to price it by yet: the run itself still stops at --max-cost-usd
        cost = note + ("; --max-cost-usd stops the run when it is reached"
                       if max_cost is not None else "")
    short = ("" if per.get(low, 0) >= per_cell else
             f" (fewer than the {per_cell} asked for: the catalogue has no more)")
    lost = sorted((c for c, r in read.items() if r < 0.99 and c in per), key=read.__getitem__)
    if lost:
        short += (f" (usable: sized for the answers read on its stored runs, e.g. "
                  f"{', '.join(f'{c} {read[c]:.0%}' for c in lost[:3])})")
    # The rpm ceiling, not the model, usually sets how long it takes.
    minutes = calls / endpoint.rpm
    print(f"calibration of {endpoint.name}: {triplets} triplets{whole} x {len(langs)} "
          f"languages = {calls} calls; per country cell about {per.get(low, 0)} ({low}) to "
          f"{per.get(high, 0)} ({high}) triplets{short}; at most {endpoint.rpm} calls/min: "
          f"{f'at least {minutes:.0f} min' if minutes >= 1 else 'under a minute'}; "
          f"cost: {cost}", file=sys.stderr)
    if max_cost is not None and per_call is not None and calls * per_call > max_cost:
        raise UsageError(f"endpoint {endpoint.name}: the calibration would cost about "
                         f"${calls * per_call:.2f}, over --max-cost-usd {max_cost:g}; lower "
                         "--triplets-per-cell or raise --max-cost-usd")


def _accept(store: Store, result: RunResult, settings: Settings, cells: Cells,
            per_cell: int) -> None:
    run = result.run
    store.set_baseline(run.endpoint, [run], auto=False)
    model = run.model_id
    sd = sd_from_md(result.md)
    print(f"baseline of {run.endpoint}: calibration run {run.run_id}, {run.triplets} "
          f"triplets, model {model or run.model}; sd of the paired differences "
          + (f"{sd:.3f}" if math.isfinite(sd) else "n/a"))
    print("  country  MD [95% CI] n   DiD: MD net of the language's leniency [95% CI]")

    def ci(lo: float, hi: float) -> str:
        return "[   n/a   ]" if not math.isfinite(lo) else f"[{lo:+.2f}, {hi:+.2f}]"

    for r in result.md:
        if r.scenario == POOLED:
            print(f"  {r.country} ({r.language})  {r.md:+.2f} {ci(r.ci_lower, r.ci_upper)} "
                  f"n={r.n}   {r.did:+.2f} {ci(r.did_ci_lower, r.did_ci_upper)}")
    # Plainly, when lost answers left cells short of what was asked for
    asked = {c: min(per_cell, round(run.triplets * sh))
             for c, sh in zip(cells.names, cells.shares, strict=True)}
    thin = [r for r in result.md if r.scenario == POOLED and r.n < 0.8 * asked.get(r.country, 0)]
    if thin:
        worst = min(r.n / asked[r.country] for r in thin)
        print(f"  thin: {', '.join(f'{r.country} n={r.n} of ~{asked[r.country]}' for r in thin)}"
              f": answers lost in those languages left the cells short; the baseline is set, "
              f"but its error weighs on every later comparison (a top-up may stop as "
              f"'baseline too thin'); to fill them, `monitor baseline calibrate "
              f"--triplets-per-cell {math.ceil(per_cell / max(worst, 0.05))}`")
    print("  persistence of triplet x language effects: every later run re-asks triplets "
          "of this baseline and measures it (run_stats kind persistence); the detector "
          "uses the baseline as covariate where it pays, `monitor plan` plans with it")
    if math.isfinite(sd) and sd > 0:
        _expect(settings, cells, sd, run.triplets)


def _expect(settings: Settings, cells: Cells, sd: float, base_triplets: int) -> None:
    """What the configured detector does against this baseline (monitor.watch.plan)."""
    t, tp, n = settings.thresholds, settings.topup, settings.sampling.triplets_per_run
    mrf = settings.alerts.min_runs_firing
    h = t.cusum_h
    if h == "auto":
        derived = auto_h(settings, cells, sd, base_triplets)
        h = derived.h
        print(f"  thresholds.cusum_h auto, for runs of {n} triplets: {derived.describe()}")
    if tp.enabled:
        r = assess_topup(n, cells, sd, t.drift_md_points, 3, t.drift_md_points, mrf, None,
                           tp, h, base_triplets)
        langs = len(settings.sampling.languages)
        print(f"  expected at {n} triplets per run with the top-up: "
              f"{r['false_alarms_per_100']:g} false pages per 100 runs, a "
              f"{t.drift_md_points:g}-point shift paged within 3 runs with p "
              f"{r['p_detect']:g} in the worst cell ({r['worst_cell']}), about "
              f"{r['triplets_asked_mean'] * langs:.0f} calls per run; `monitor plan` sizes "
              "the runs for a target")
    else:
        _, fa, p = assess(n, cells, sd, t.drift_md_points, math.inf, 3, t.drift_md_points,
                            mrf, None, hs=np.array([h]), baseline_triplets=base_triplets)
        print(f"  expected at {n} triplets per run, h = {h:g}: {fa:g} false pages per "
              f"100 runs, p(detect within 3 runs) {p:g}; `monitor plan` sizes the runs")


def calibrate_command(args: argparse.Namespace) -> int:
    settings, config_path = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    per_cell = args.triplets_per_cell
    if per_cell < 1:
        raise UsageError(f"--triplets-per-cell {per_cell}: must be a positive number")
    max_cost = args.max_cost_usd
    if max_cost is not None and not max_cost > 0:
        raise UsageError(f"--max-cost-usd {max_cost}: must be a positive amount")
    with open_store(settings.storage) as store:
        endpoints = endpoints_for(settings, args.endpoint, args.resume, store)
        settings.require_keys(endpoints, config_path)
        s = settings.sampling
        cells = cell_shares(catalog, s.scenarios, s.languages)
        for endpoint in endpoints:
            read = read_shares(store, endpoint.name, catalog, s.languages).by_country
            triplets = calibration_size(cells, per_cell, read)
            if not args.resume:
                _announce(endpoint, settings, store, triplets, cells, per_cell, max_cost, read)
            if args.dry_run:
                continue
            opts = RunOptions(triplets=triplets, resume=args.resume)
            ctx = Context(settings, catalog, store)
            # Not the daily budget: a calibration is one deliberate run with its own cap.
            work = run_endpoint(ctx, endpoint, opts, allowance=Allowance(usd=max_cost),
                                progress=Progress(label=f"[{endpoint.name}] "))
            result = run_until_stopped(ctx, endpoint, work, opts, config_path,
                                       command="monitor baseline calibrate",
                                       what="calibration ")
            if isinstance(result, int):
                return result
            if result.run.status != RunStatus.COMPLETE:
                why = ("stopped early at --max-cost-usd" if result.run.status ==
                       RunStatus.PARTIAL else result.run.reason or result.run.status)
                print(f"monitor: error: calibration run {result.run.run_id} of "
                      f"{endpoint.name} did not complete ({why}); its answers are stored, the "
                      "baseline is unchanged", file=sys.stderr)
                return EXIT_NO_RESULTS
            _accept(store, result, settings, cells, per_cell)
    return 0
