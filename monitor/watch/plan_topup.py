"""The planner's detector with its top-up (monitor.watch.topup) on normal data: what
`monitor plan`, `monitor baseline calibrate` and the benchmarks simulate of a daemon
that confirms suspects with fresh triplets (monitor.watch.plan has the CUSUM alone
and what both share)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from monitor.config import Topup
from monitor.watch import topup
from monitor.watch.drift import advance
from monitor.watch.plan import (
    N_GRID,
    POWER,
    PRE,
    REPS,
    RUNS,
    SEED,
    Cells,
    baselines,
    cell_sizes,
    runs_of_baseline,
)

__all__ = ["TopupSim", "assess_topup", "plan_topup", "simulate_topup"]


class TopupSim(NamedTuple):
    """simulate_topup's output, each of shape (rep, run, cell)."""

    fired: np.ndarray  # the run took the cell to FIRING
    asked: np.ndarray  # fresh triplets the run's top-up asked
    state: np.ndarray  # state code after the run (0 ok, 1 pending, 2 firing)


def simulate_topup(n_cell: np.ndarray, sd: float, *, shift: float, h: float,
                   tp: Topup, base_triplets: np.ndarray, drift_points: float,
                   min_runs_firing: int, runs: int = RUNS, reps: int = REPS,
                   shift_at: int = 0, seed: int = SEED,
                   run_triplets: float | None = None, alone: bool = False) -> TopupSim:
    """The daemon's detector with the top-up confirmation (monitor.watch.topup) on
    normal data; a baseline of base_triplets per cell, with its estimation error
    (one baseline per rep). A run's top-ups share one limit (topup.run_limit: the
    per-run share of run_triplets, and what the last runs' top-ups left of the window's
    mean share; the daemon tops its suspects up one after another, here their batches
    take turns until the run's limit), and each stops once neither bound is in reach
    (topup.reachable); a cell whose last top-up ended inconclusive waits until its sum
    passes where it was (topup.held). `alone`: each cell has the run's whole limit, as
    when one country shifts and is the run's only suspect (the shift is applied to
    every cell at once here, to read each cell's P3 from one simulation); before the
    shift its window is charged with every cell's top-ups (the other countries' noise
    spends the same window), after it with its own."""
    window = topup.window_runs(tp.max_run_share, tp.mean_run_share)
    rng = np.random.default_rng(seed)
    n = np.asarray(n_cell, float)[None, :]
    nb = np.broadcast_to(np.asarray(base_triplets, float)[None, :], n.shape)
    shape = (reps, n.shape[1])
    valid, md_b, se_b, var = baselines(rng, n, nb, shape, sd)
    s_plus, s_minus, alarm_runs = (np.zeros(shape) for _ in range(3))
    state = np.zeros(shape, np.int8)
    fired = np.zeros((reps, runs, n.shape[1]), bool)
    asked = np.zeros((reps, runs, n.shape[1]), np.int32)
    states = np.zeros((reps, runs, n.shape[1]), np.int8)
    last_side = np.zeros(shape, np.int8)  # the last inconclusive top-up's side (0: none)
    last_sum = np.zeros(shape)
    # Triplets the top-ups of the last window - 1 runs asked, per rep (per cell `alone`).
    spent = np.zeros((*(shape if alone else shape[:1]), window - 1))
    for t in range(runs):
        limit = (np.full(spent.shape[:-1], math.inf) if run_triplets is None else
                 topup.run_limit(run_triplets, spent.sum(axis=-1), tp.max_run_share,
                                 tp.mean_run_share))
        mu = shift if t >= shift_at else 0.0
        diff = mu + rng.standard_normal(shape) * sd / np.sqrt(n) - md_b
        new, s_plus, s_minus, alarm_runs = advance(
            state, s_plus, s_minus, alarm_runs, diff, var, valid, delta=drift_points, h=h,
            min_runs_firing=min_runs_firing)
        hot, side = topup.suspect(new, s_plus, s_minus, tp.suspect_h)
        hot &= valid & ~topup.held(s_plus, s_minus, side, last_side, last_sum)
        # The sequential test on fresh draws, batch by batch, for the suspected cells.
        total = np.zeros(shape)
        k = np.zeros(shape)
        decision = np.zeros(shape, np.int8)
        open_ = hot.copy()
        while open_.any() and (k < tp.max_triplets).any():
            step = np.where(open_, np.minimum(tp.batch_triplets, tp.max_triplets - k), 0)
            # the run's limit: cells take their batch in order until it is spent
            if alone:
                step = np.minimum(step, np.maximum(limit - k, 0))
            else:
                room = limit[:, None] - k.sum(axis=1, keepdims=True)
                step = np.where(np.cumsum(step, axis=1) <= room, step, 0)
            open_ &= step > 0
            total += np.where(step > 0, mu * step + rng.standard_normal(shape) * sd
                              * np.sqrt(np.maximum(step, 1)), 0.0)
            k += step
            fresh = np.where(k > 0, total / np.maximum(k, 1), 0.0) - md_b
            value = topup.llr(k, fresh, se_b, nb, side, drift_points)
            d = topup.decide(value, tp.alpha, tp.beta)
            decision = np.where(open_, d, decision)
            open_ &= (d == topup.UNDECIDED) & (k < tp.max_triplets) & topup.reachable(
                tp.max_triplets, fresh, se_b, nb, side, drift_points, tp.alpha, tp.beta)
        asked[:, t] = k
        if window > 1:
            if not alone:
                charge = k.sum(axis=1)
            elif t < shift_at:  # every country's noise top-ups spend the shared window
                charge = np.broadcast_to(k.sum(axis=1, keepdims=True), shape)
            else:
                charge = k
            spent = np.concatenate([spent[..., 1:], charge[..., None]], axis=-1)
        # A suspect the run's limit left unasked has no verdict: its hold stays as it was.
        tested = hot & (k > 0)
        undecided = tested & (decision == topup.UNDECIDED)
        last_side = np.where(tested, np.where(undecided, side, 0), last_side).astype(np.int8)
        last_sum = np.where(undecided, np.where(side > 0, s_plus, s_minus), last_sum)
        new, s_plus, s_minus, alarm_runs = topup.apply(new, s_plus, s_minus, alarm_runs, hot,
                                                       side, decision, h)
        fired[:, t] = (new == 2) & (state != 2)
        states[:, t] = state = new
    return TopupSim(fired, asked, states)


def assess_topup(n_run: int, cells: Cells, sd: float, delta: float, within: int,
                 drift_points: float, min_runs_firing: int, auto: int | None,
                 tp: Topup, h: float, baseline_triplets: int | None = None,
                 reps: int = REPS) -> dict[str, Any]:
    """The detector with its top-up at run size n_run: false pages per 100 runs (mean
    over baselines and their spread), P(detect delta within `within` runs) in the
    worst cell and over cells, and the triplets asked per run (each in every language):
    the mean with no shift, the mean while a shift is being confirmed, the largest."""
    n = np.array(cell_sizes(n_run, cells))
    base = n * runs_of_baseline(n_run, auto, baseline_triplets)
    null = simulate_topup(n, sd, shift=0.0, h=h, tp=tp, base_triplets=base,
                          drift_points=drift_points, min_runs_firing=min_runs_firing, reps=reps,
                          run_triplets=n_run)
    fa = null.fired.sum(axis=(1, 2)) / RUNS * 100  # per baseline
    per_run = n_run + null.asked.sum(axis=2)
    det = simulate_topup(n, sd, shift=delta, h=h, tp=tp, base_triplets=base,
                         drift_points=drift_points, min_runs_firing=min_runs_firing,
                         runs=PRE + within, shift_at=PRE, reps=reps, seed=SEED + 1,
                         run_triplets=n_run, alone=True)
    clean = ~det.fired[:, :PRE].any(axis=1)
    hit = det.fired[:, PRE:].any(axis=1)
    p = (hit & clean).sum(axis=0) / np.maximum(1, clean.sum(axis=0))
    flaps = ((null.state[:, 1:] == 1) & (null.state[:, :-1] == 0)).sum(axis=(1, 2))
    return {"triplets_per_run": n_run,
            "false_alarms_per_100": round(float(fa.mean()), 3),
            "false_alarms_per_100_spread": {
                "p50": float(np.percentile(fa, 50)), "p90": float(np.percentile(fa, 90)),
                "max": float(fa.max())},
            "p_detect": round(float(p.min()), 3), "p_detect_mean": round(float(p.mean()), 3),
            "worst_cell": cells.names[int(p.argmin())],
            "triplets_asked_mean": round(float(per_run.mean()), 1),
            # one country shifting alone (the simulation shifts each cell at once)
            "triplets_asked_shifted": round(float(
                n_run + det.asked[:, PRE:].mean()), 1),
            "triplets_asked_max": int(per_run.max()),
            "pending_per_100": round(float(flaps.mean()) / RUNS * 100, 2)}


def plan_topup(cells: Cells, sd: float, delta: float, fa_target: float, within: int, *,
               drift_points: float, min_runs_firing: int, auto_min_triplets: int | None,
               tp: Topup, h: float, baseline_triplets: int | None = None
               ) -> dict[str, Any] | None:
    """The smallest run size on N_GRID at which the detector with its top-up meets both
    targets (None: none does)."""
    grid = sorted({min(n, cells.population) for n in N_GRID})
    best = None
    lo, hi = 0, len(grid) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        r = assess_topup(grid[mid], cells, sd, delta, within, drift_points, min_runs_firing,
                         auto_min_triplets, tp, h, baseline_triplets)
        if r["p_detect"] >= POWER and r["false_alarms_per_100"] <= fa_target:
            best, hi = r, mid - 1
        else:
            lo = mid + 1
    return best
