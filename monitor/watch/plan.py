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
from monitor.config import AUTO_BASELINE_RUNS
from monitor.errors import UsageError
from monitor.stats import MIN_CELL_N, MDRow
from monitor.vocab import POOLED
from monitor.watch.drift import advance, variance

__all__ = ["H_GRID", "N_GRID", "POWER", "PRE", "REPS", "RUNS", "SEED", "Cells", "assess",
           "baselines", "cell_shares", "cell_sizes", "make_plan", "one_shot_n",
           "runs_of_baseline", "sd_from_md", "simulate", "usable_cells"]

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


def baselines(rng: np.random.Generator, n: np.ndarray, nb: np.ndarray,
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
    valid, md_b, _, var = baselines(rng, n, nb, shape, sd)
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
