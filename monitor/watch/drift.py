"""Drift detection per cell (endpoint, scenario, country): pure functions.

(docs/statistics.md, "Drift against the baseline")
- The detector is a two-sided log-likelihood-ratio CUSUM of the run's MD x
  against the baseline's m. With n the run's triplets in the cell, s the
  baseline's per-triplet sd (SE_base sqrt(n_base), at least MIN_SD) and
  v = s^2 / n + SE_base^2 (the run's variance at the baseline's sd, plus the
  baseline's own error, which every later run shares), a run adds
      g+ = delta / v * ((x - m) - delta / 2),   g- = delta / v * (-(x - m) - delta / 2)
  to S+ = max(0, S+ + g+) and S- = max(0, S- + g-): the log likelihood ratio
  of a shift of +-delta (thresholds.drift_md_points) against none. A small
  run weighs little by itself, so no minimum n and no clip are needed, and
  the run's own SE (a handful of discrete scores) never enters.
- Alarm when max(S+, S-) > h (thresholds.cusum_h, in nats). While alarmed a
  sum is capped at CAP_H * h, so the evidence for a shift is bounded and can
  be used up again; a page sets its side's sum to that cap, so every page
  needs the same CAP_H * h nats against the shift to resolve.
- States: OK -> PENDING (a sum above h) -> FIRING (above h in
  alerts.min_runs_firing consecutive runs). PENDING or FIRING -> OK only on
  real recovery: both sums back at 0, i.e. the runs since have given as much
  evidence against the shift as there was for it. Under a persistent shift a
  sum drifts up and never comes back, so a shift is not "resolved" by a
  lucky run; the reason says why a cell resolved.
- The absolute level is a separate condition with hysteresis (`level_step`):
  beyond +-thresholds.md_points once the whole CI lies beyond it in
  LEVEL_RUNS consecutive runs, back within once the whole CI lies inside it
  in LEVEL_RUNS consecutive runs. A stable bias the user accepted in the
  baseline does not drift, so it never pages; its level is shown, and pages
  only where alerts.page_on_level asks for it.
The core (`advance`) works on numpy arrays of cells, so the planner and the
benchmarks run this very code, not a replica.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from monitor.stats import MIN_CELL_N, MDRow, tested
from monitor.vocab import POOLED, AlertState, LevelState, Side

__all__ = ["CAP_H", "CODES", "FIRING", "LEVEL_RUNS", "MIN_SD", "OK", "PENDING", "STATES", "WATCH",
           "CellState", "Observation", "advance", "level_step", "observe", "step", "steps",
           "variance", "watched", "z_score"]

OK, PENDING, FIRING = AlertState.OK, AlertState.PENDING, AlertState.FIRING
CODES = {OK: 0, PENDING: 1, FIRING: 2}  # the state codes of advance()
STATES = {v: k for k, v in CODES.items()}
CAP_H = 2.0
#: Points. Integer scores let a very consistent model's baseline sd come out ~0;
#: below this floor one run's small move would count as near-certain evidence.
MIN_SD = 0.25
LEVEL_RUNS = 2


@dataclass(kw_only=True, frozen=True)
class Observation:
    """One run's MD for a cell next to the baseline's."""

    md: float
    n: int  # the run's triplets in the cell
    ci_lower: float
    ci_upper: float
    md_base: float
    se_base: float
    n_base: int

    @property
    def variance(self) -> float:
        return float(variance(self.se_base, self.n_base, self.n))


def variance(se_base: Any, n_base: Any, n: Any) -> Any:
    """v: a run's MD variance at the baseline's per-triplet sd (at least MIN_SD) for
    its n, plus the baseline's own error (floats or arrays)."""
    sd2 = np.maximum(np.square(se_base) * n_base, MIN_SD**2)
    return sd2 / np.maximum(n, 1) + np.square(se_base)


@dataclass(kw_only=True, frozen=True)
class CellState:
    """What is persisted per cell, so a restart neither forgets nor re-sends."""

    state: str = OK
    s_plus: float = 0.0
    s_minus: float = 0.0
    alarm_runs: int = 0  # consecutive runs with a sum above h
    calm_runs: int = 0  # consecutive runs with both sums at 0
    z: float | None = None
    reason: str = ""
    level: str = LevelState.WITHIN
    level_runs: int = 0  # consecutive runs the opposite level condition has held


def observe(run: MDRow, base: MDRow | None, *, md: float | None = None,
            factor: float = 1.0) -> Observation | None:
    """A run's cell as the detector sees it; None when it cannot be compared. `md` and
    `factor`: the cell with the baseline as covariate (monitor.stats.covariate): the
    adjusted MD, and its variance's share of the raw one, which scales the per-triplet
    sd the increments use (and, conservatively, the baseline's own error with it). The
    interval (the absolute level) stays the raw MD's."""
    if base is None or not tested(run.n, base.n, base.se):
        return None
    return Observation(md=run.md if md is None else md, n=run.n, ci_lower=run.ci_lower,
                       ci_upper=run.ci_upper,
                       md_base=base.md, se_base=base.se * math.sqrt(factor), n_base=base.n)


def z_score(obs: Observation) -> float | None:
    v = obs.variance
    if not math.isfinite(v) or v <= 0 or not math.isfinite(obs.md - obs.md_base):
        return None
    return (obs.md - obs.md_base) / math.sqrt(v)


def advance(state: np.ndarray, s_plus: np.ndarray, s_minus: np.ndarray,
            alarm_runs: np.ndarray, diff: np.ndarray, var: np.ndarray, valid: np.ndarray, *,
            delta: float, h: float | np.ndarray, min_runs_firing: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One run for arrays of cells (broadcasting): state codes 0 ok / 1 pending / 2
    firing, the sums, the alarm-run counts; diff = x - m, var = v; where valid is
    False the cell was not measured and keeps everything."""
    g = delta / np.where(valid, var, 1.0)
    up = np.where(valid, np.maximum(0.0, s_plus + g * (diff - delta / 2)), s_plus)
    down = np.where(valid, np.maximum(0.0, s_minus + g * (-diff - delta / 2)), s_minus)
    hot = np.maximum(up, down) > h
    runs = np.where(valid, np.where(hot, alarm_runs + 1, 0), alarm_runs)
    active = state > 0
    new = np.where(valid & ~active & hot, 1, state)
    new = np.where(valid & (new > 0) & (runs >= min_runs_firing), 2, new)
    new = np.where(valid & active & (up <= 0) & (down <= 0), 0, new)
    cap = CAP_H * np.asarray(h, float)
    # A page starts its hot side at the cap: resolving then takes CAP_H * h nats of
    # evidence against the shift, whatever the sum was when it paged. From h alone a
    # persistent shift's sum falls back to 0 with probability up to e^-h (~1e-3 at
    # h = 7) per page; from the cap e^-2h (~1e-6).
    paged = (new == 2) & (state != 2)
    up = np.where(paged & (up > h), cap, up)
    down = np.where(paged & (down > h), cap, down)
    return new.astype(np.int8), np.minimum(up, cap), np.minimum(down, cap), runs


def level_step(level: str, level_runs: int, obs: Observation, limit: float
               ) -> tuple[str, int]:
    """The absolute-level condition after one run, with hysteresis."""
    lo, hi = obs.ci_lower, obs.ci_upper
    if obs.n < MIN_CELL_N or not (math.isfinite(lo) and math.isfinite(hi)):
        return level, level_runs  # no interval to judge: keep it
    target: LevelState | None
    if level == LevelState.WITHIN:
        target = LevelState.ABOVE if lo > limit else LevelState.BELOW if hi < -limit else None
    elif level == LevelState.ABOVE:
        target = LevelState.BELOW if hi < -limit else LevelState.WITHIN if hi < limit else None
    else:
        target = LevelState.ABOVE if lo > limit else LevelState.WITHIN if lo > -limit else None
    if target is None:
        return level, 0
    runs = level_runs + 1
    return (target, 0) if runs >= LEVEL_RUNS else (level, runs)


#: A per-scenario cell is watched, never FIRING: its runs and its baseline hold a third
#: of the country's triplets each, and there are three times as many cells, so the
#: pooled cells' h would page a stable accepted bias there (seen: FIRING on the
#: dashboard in 20 stable runs). The pooled cell of its country pages.
WATCH = "watch: a per-scenario cell is not paged; the pooled cell is"


def watched(scenario: str, new: CellState) -> CellState:
    """The state a cell of `scenario` keeps: a per-scenario cell's FIRING held at PENDING
    (WATCH). The daemon's evaluation and the replayed history both apply it."""
    if scenario != POOLED and new.state == FIRING:
        return replace(new, state=PENDING, reason=f"{WATCH} ({new.reason})")
    return new


def step(prev: CellState, obs: Observation | None, *, drift_points: float, h: float,
         md_threshold: float, min_runs_firing: int) -> CellState:
    """The cell's state after one more run (obs None: the cell was not measured)."""
    return steps([(prev, obs)], drift_points=drift_points, h=h, md_threshold=md_threshold,
                 min_runs_firing=min_runs_firing)[0]


def steps(cells: Sequence[tuple[CellState, Observation | None]], *, drift_points: float,
          h: float, md_threshold: float, min_runs_firing: int) -> list[CellState]:
    """`step` for several different cells after one run: their CUSUMs advance as one array
    (a replayed history steps a run's few dozen cells at once: numpy called per cell
    cost ~9x the CPU, docs/benchmarks.md section 4)."""
    out = [prev for prev, _ in cells]
    live = [(i, prev, obs) for i, (prev, obs) in enumerate(cells) if obs is not None]
    if not live:  # no evidence either way: keep the states and the sums
        return out
    zs = [z_score(obs) for _, _, obs in live]
    valid = np.array([z is not None for z in zs])
    codes, ups, downs, alarm_runs = advance(
        np.array([CODES[AlertState(prev.state)] for _, prev, _ in live]),
        np.array([prev.s_plus for _, prev, _ in live]),
        np.array([prev.s_minus for _, prev, _ in live]),
        np.array([prev.alarm_runs for _, prev, _ in live]),
        np.array([obs.md - obs.md_base for _, _, obs in live]),
        np.array([obs.variance for _, _, obs in live]),
        valid, delta=drift_points, h=h, min_runs_firing=min_runs_firing)
    for j, (i, prev, obs) in enumerate(live):
        out[i] = _after(prev, obs, zs[j], bool(valid[j]), STATES[int(codes[j])],
                        float(ups[j]), float(downs[j]), int(alarm_runs[j]),
                        drift_points=drift_points, h=h, md_threshold=md_threshold)
    return out


def _after(prev: CellState, obs: Observation, z: float | None, valid: bool, state: str,
           s_plus: float, s_minus: float, runs: int, *, drift_points: float, h: float,
           md_threshold: float) -> CellState:
    """A cell's new state from its CUSUM's step: calm runs, the level, the reason."""
    calm = valid and s_plus <= 0 and s_minus <= 0
    calm_runs = prev.calm_runs + 1 if calm else 0
    level, level_runs = level_step(prev.level, prev.level_runs, obs, md_threshold)
    if state != OK:
        side = Side.UP if s_plus >= s_minus else Side.DOWN
        reason = (f"drift {side}: CUSUM {max(s_plus, s_minus):.1f} > h={h:g} (shift of "
                  f"{drift_points:g} points vs the baseline)" if max(s_plus, s_minus) > h else
                  prev.reason or f"drift {side}: CUSUM {max(s_plus, s_minus):.1f}")
    elif prev.state != OK:
        # Only a page starts at the cap; a PENDING cell's sum never reached it.
        start = f" from its cap of {CAP_H * h:g} nats" if prev.state == FIRING else ""
        reason = (f"recovered: the runs since gave as much evidence against a "
                  f"{drift_points:g}-point shift as there was for it (CUSUM back to 0"
                  f"{start})")
    else:
        reason = ""
    return CellState(state=state, s_plus=s_plus, s_minus=s_minus, alarm_runs=int(runs),
                     calm_runs=calm_runs, z=z, reason=reason, level=level,
                     level_runs=level_runs)
