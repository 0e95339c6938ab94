"""The planner behind `monitor plan`: the run size and CUSUM h that meet a detection target.

Numbers come from a seeded (deterministic) vectorised simulation of the
daemon's detector per pooled country cell WITH baseline estimation error: a
run's cell mean of n_c differences ~ N(mu, sd^2/n_c), its sd from a
chi-square, the baseline B such runs pooled; the rules of monitor.stats.rules
(MIN_CELL_N), and the detector itself: monitor.watch.drift.advance, the code
drift.step runs, on arrays of cells (no replica). bench/stat_validation.py
checks it against the full generator (docs/plan.md). For each run size, h =
the smallest of H_GRID meeting the false-page target (all cells); the plan is
the smallest size at which a shift of --delta pages within --within-runs runs
with p >= 0.8 in the worst cell.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from monitor.catalog import Catalog
from monitor.config import AUTO_BASELINE_RUNS, Topup
from monitor.errors import UsageError
from monitor.stats import MIN_CELL_N, MDRow
from monitor.vocab import POOLED
from monitor.watch import topup
from monitor.watch.drift import advance, variance

__all__ = ["H_GRID", "N_GRID", "POWER", "Cells", "TopupSim", "assess", "assess_topup",
           "cell_shares", "cell_sizes", "make_plan", "one_shot_n", "plan_topup", "runs_of_baseline",
           "sd_from_md", "simulate", "simulate_topup", "usable_cells"]

H_GRID = np.arange(0.5, 16.01, 0.5)
#: Run sizes the planner tries (bisected): steps of 5 triplets where real run sizes lie,
#: so a plan is not 20% larger than it needs to be (issue 14, item 8: a fine grid).
N_GRID = (*range(10, 200, 5), *range(200, 400, 25), 400, 450, 500, 600, 700, 800, 1000, 1200,
          1500, 2000, 3000, 5000, 8000)
POWER = 0.8
SEED = 20261129
REPS, RUNS, PRE = 400, 100, 5  # false alarms: 400 baselines x 100 runs; shift after 5 runs


class Cells(NamedTuple):
    """The pooled country cells, each one's share of a run's triplets, the population."""

    names: list[str]
    shares: list[float]
    population: int


def cell_shares(catalog: Catalog, scenarios: list[str], languages: list[str]) -> Cells:
    # The sampler's population (monitor/measure/sampling.py): the monitored triplets.
    monitored = catalog.monitored(languages)
    trips = [(s, t) for s in scenarios
             for t in catalog.scenarios[s].monitored_triplets(monitored)]
    names = [c for lang in languages for c in catalog.languages.get(lang, ())]
    counts = Counter(c for scen, t in trips for c in {catalog.option(scen, o).country
                                                      for o in t.option_ids})
    return Cells(names, [counts[c] / max(1, len(trips)) for c in names], len(trips))


def usable_cells(cells: Cells, read: Mapping[str, float]) -> Cells:
    """The cells as usable triplets: each share times the share of answers read in its
    country's language (`read`, country -> share; 1 where absent). A triplet counts for a
    country where its option was read in the country's language (and one other, nearly
    always so: docs/statistics.md "Missing answers"), so a run of n triplets holds about
    n x share x read usable ones. One rule for `monitor plan` and `baseline calibrate`."""
    return cells._replace(shares=[s * read.get(c, 1.0)
                                  for c, s in zip(cells.names, cells.shares, strict=True)])


def sd_from_md(md: Sequence[MDRow]) -> float:
    """Pooled sd of the per-triplet differences d from the pooled MD cells."""
    rows = [r for r in md if r.scenario == POOLED and r.n >= 2]
    dof = float(sum(r.n - 1 for r in rows))
    return math.sqrt(sum((r.n - 1) * r.se ** 2 * r.n for r in rows) / dof) if (
        dof > 0) else math.nan


def _baselines(rng: np.random.Generator, n: np.ndarray, nb: np.ndarray,
               shape: tuple[int, int], sd: float
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One baseline per rep with its estimation error, for runs of n per cell against
    nb baseline triplets: (compared cells, baseline MD, its SE, a run's variance v)."""
    valid = np.broadcast_to((n >= 1) & (nb >= MIN_CELL_N), shape)
    md_b = rng.standard_normal(shape) * sd / np.sqrt(nb)
    se_b = sd * np.sqrt(rng.chisquare(np.maximum(nb - 1, 1), shape) / np.maximum(nb - 1, 1)
                        / nb)
    return valid, md_b, se_b, variance(se_b, nb, n)


def cell_sizes(n_run: int, cells: Cells) -> list[int]:
    """A run's expected triplets per country cell (at least 1)."""
    return [max(1, round(n_run * s)) for s in cells.shares]


def simulate(n_cell: np.ndarray, sd: float, *, shift: float, hs: np.ndarray, base_runs: float,
             drift_points: float, min_runs_firing: int, runs: int = RUNS, reps: int = REPS,
             shift_at: int = 0, seed: int = SEED) -> np.ndarray:
    """FIRING entries, shape (h, rep, run, cell): the daemon's detector on normal data.

    The baseline holds `base_runs` times a run's triplets (a fraction for a
    calibration baseline is fine: only the product matters)."""
    rng = np.random.default_rng(seed)
    n = np.asarray(n_cell, float)[None, :]
    nb, shape = n * base_runs, (reps, n.shape[1])
    valid, md_b, _, var = _baselines(rng, n, nb, shape, sd)
    h = np.asarray(hs, float)[:, None, None]
    s_plus, s_minus, alarm_runs = (np.zeros((len(hs), *shape)) for _ in range(3))
    state = np.zeros((len(hs), *shape), np.int8)  # 0 ok, 1 pending, 2 firing
    fired = np.zeros((len(hs), reps, runs, n.shape[1]), bool)
    for t in range(runs):
        mu = shift if t >= shift_at else 0.0
        diff = mu + rng.standard_normal(shape) * sd / np.sqrt(n) - md_b
        new, s_plus, s_minus, alarm_runs = advance(
            state, s_plus, s_minus, alarm_runs, diff, var, valid, delta=drift_points, h=h,
            min_runs_firing=min_runs_firing)
        fired[:, :, t] = (new == 2) & (state != 2)
        state = new
    return fired


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
    valid, md_b, se_b, var = _baselines(rng, n, nb, shape, sd)
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
            charge = (k if alone and t >= shift_at else
                      np.broadcast_to(k.sum(axis=1, keepdims=True), shape) if alone else
                      k.sum(axis=1))
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


def assess(n_run: int, cells: Cells, sd: float, delta: float, fa_target: float,
             within: int, drift_points: float, min_runs_firing: int, auto: int | None,
             hs: np.ndarray = H_GRID, baseline_triplets: int | None = None,
             ) -> tuple[float | None, float | None, float | None]:
    """(h, false pages per 100 runs at h, P(detect delta) in the worst cell) at size n_run,
    against a baseline of `baseline_triplets` (None: the daemon's automatic baseline)."""
    n = np.array(cell_sizes(n_run, cells))
    base_runs = runs_of_baseline(n_run, auto, baseline_triplets)
    fire = simulate(n, sd, shift=0.0, hs=hs, base_runs=base_runs, drift_points=drift_points,
                    min_runs_firing=min_runs_firing)
    fa = fire.sum(axis=(2, 3)).mean(axis=1) / RUNS * 100  # per h
    ok = np.nonzero(fa <= fa_target)[0]
    if not len(ok):
        return None, None, None
    i = int(ok[0])
    det = simulate(n, sd, shift=delta, hs=hs[i:i + 1], base_runs=base_runs,
                   drift_points=drift_points, min_runs_firing=min_runs_firing,
                   runs=PRE + within, shift_at=PRE)[0]
    clean = ~det[:, :PRE].any(axis=1)  # a cell already paging before the shift is no test
    hit = det[:, PRE:].any(axis=1)
    p = (hit & clean).sum(axis=0) / np.maximum(1, clean.sum(axis=0))
    return float(hs[i]), float(fa[i]), float(p.min())  # the worst cell


def make_plan(cells: Cells, sd: float, delta: float, fa_target: float, within: int, *,
              drift_points: float, min_runs_firing: int,
              auto_min_triplets: int | None,
              baseline_triplets: int | None = None) -> dict[str, Any]:
    """The smallest triplets per run on N_GRID (capped at the population) meeting both;
    the gain per run at the design shift is reported as its range over the cells."""
    if not math.isfinite(sd) or sd <= 0:
        raise UsageError(f"sd of paired differences must be a positive number, got {sd}")
    if within < min_runs_firing:
        raise UsageError(f"--within-runs {within} is shorter than alerts.min_runs_firing "
                         f"({min_runs_firing}): a page needs that many runs")
    grid = sorted({min(n, cells.population) for n in N_GRID})
    best: tuple[int, float, float, float] | None = None
    lo, hi = 0, len(grid) - 1
    while lo <= hi:  # detection grows with the run size: bisect the grid
        mid = (lo + hi) // 2
        h, fa, p = assess(grid[mid], cells, sd, delta, fa_target, within, drift_points,
                            min_runs_firing, auto_min_triplets,
                            baseline_triplets=baseline_triplets)
        if p is not None and p >= POWER:
            best, hi = (grid[mid], h or 0.0, fa or 0.0, p), mid - 1
        else:
            lo = mid + 1
    if best is None:
        return {"reachable": False, "triplets_per_run": None, "triplets_per_cell": {},
                "smallest_cell": None, "cusum": None, "expected": None}
    n_run, h, fa, p = best
    b = runs_of_baseline(n_run, auto_min_triplets, baseline_triplets)
    n = cell_sizes(n_run, cells)
    gains = [_gain(drift_points, sd, c, b) for c in n]
    return {"reachable": True, "triplets_per_run": n_run,
            "triplets_per_cell": dict(zip(cells.names, n, strict=True)),
            "smallest_cell": cells.names[n.index(min(n))],
            "cusum": {"h": h, "gain_min": round(min(gains), 2),
                      "gain_max": round(max(gains), 2), "drift_md_points": drift_points,
                      "baseline_runs": round(b, 2),
                      "baseline_triplets": round(b * n_run)},
            "expected": {"false_alarms_per_100": fa, "p_detect": round(p, 3)}}


def _gain(drift_points: float, sd: float, n_cell: float, base_runs: float) -> float:
    """The evidence (nats) a run adds on average once the design shift is there,
    delta^2 / 2v: h / gain runs to an alarm."""
    v = float(variance(sd / math.sqrt(n_cell * base_runs), n_cell * base_runs, n_cell))
    return drift_points**2 / (2 * v)


def runs_of_baseline(n_run: int, auto_min_triplets: int | None,
                     baseline_triplets: int | None = None) -> float:
    """The baseline's size in runs of n_run: a fixed (calibration) baseline's triplets, or
    what the daemon's automatic baseline collects."""
    if baseline_triplets:
        return baseline_triplets / n_run
    return (max(1, math.ceil(auto_min_triplets / n_run)) if auto_min_triplets
            else AUTO_BASELINE_RUNS)


def one_shot_n(sd: float, delta: float) -> int:
    """Triplets containing the country for one two-sided test, alpha .05, power .8."""
    return math.ceil(((1.959964 + 0.841621) * sd / delta) ** 2)
