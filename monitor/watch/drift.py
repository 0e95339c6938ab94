"""Drift detection per cell (endpoint, scenario, country): pure functions.

(docs/statistics.md, "Drift against the baseline")
- z = (MD_now - MD_base) / sqrt(SE_now^2 + SE_base^2); leaving out SE_base
  doubles false alarms.
- Two-sided CUSUM on z: S+ = max(0, S+ + z - k), S- = max(0, S- - z - k),
  alarm when max(S+, S-) > h; k is half the design shift
  (thresholds.drift_md_points) in z units of this run, but at least K_MIN:
  when runs are too small to resolve the design shift (k would be tiny) the
  CUSUM would drift up on noise alone and page weekly. A run adds at most
  Z_CLIP to a sum (the increment z - k is clipped, not z), so one odd run
  (t-based SEs from few triplets have heavy tails) cannot cross h alone while
  a real shift keeps adding up. Clipping z itself, as an earlier version did,
  made a cell whose k reached Z_CLIP (large runs) blind to any drift
  (bench/stat_validation.py found it).
- An absolute threshold breaches only when the whole MD CI lies beyond
  +-thresholds.md_points (never on a point estimate).
- States: OK -> PENDING (alarm or breach) -> FIRING (the alarm held for
  alerts.min_runs_firing runs) -> OK after 2 consecutive runs with |z| < 1
  and no breach; the CUSUM restarts at 0 after a reset to OK.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from monitor.vocab import AlertState

__all__ = ["CALM_RUNS", "CALM_Z", "FIRING", "K_MIN", "OK", "PENDING", "Z_CLIP", "CellState",
           "Observation", "step", "z_score"]

OK, PENDING, FIRING = AlertState.OK, AlertState.PENDING, AlertState.FIRING
CALM_Z = 1.0
CALM_RUNS = 2
K_MIN = 0.5
Z_CLIP = 4.0


@dataclass(frozen=True)
class Observation:
    """One run's MD for a cell next to the baseline's."""

    md: float
    se: float
    ci_lower: float
    ci_upper: float
    n: int
    md_base: float
    se_base: float


@dataclass(frozen=True)
class CellState:
    """What is persisted per cell, so a restart neither forgets nor re-sends."""

    state: str = OK
    s_plus: float = 0.0
    s_minus: float = 0.0
    alarm_runs: int = 0  # consecutive runs with an alarm or breach
    calm_runs: int = 0  # consecutive runs with |z| < 1 and no breach
    z: float | None = None
    reason: str = ""


def z_score(obs: Observation) -> float | None:
    var = obs.se**2 + obs.se_base**2
    if not math.isfinite(var) or var <= 0 or not math.isfinite(obs.md - obs.md_base):
        return None
    return (obs.md - obs.md_base) / math.sqrt(var)


def step(prev: CellState, obs: Observation | None, *, drift_points: float, h: float,
         md_threshold: float, min_runs_firing: int) -> CellState:
    """The cell's state after one more run (obs None: the cell was not measured)."""
    if obs is None:
        return prev  # no evidence either way: keep the state and the sums
    z = z_score(obs)
    breach = (math.isfinite(obs.ci_lower) and obs.ci_lower > md_threshold) or (
        math.isfinite(obs.ci_upper) and obs.ci_upper < -md_threshold)
    s_plus, s_minus = prev.s_plus, prev.s_minus
    if z is not None:
        sigma = math.sqrt(obs.se**2 + obs.se_base**2)
        k = max(K_MIN, drift_points / (2 * sigma))
        s_plus = max(0.0, s_plus + min(Z_CLIP, z - k))
        s_minus = max(0.0, s_minus + min(Z_CLIP, -z - k))
    alarm = max(s_plus, s_minus) > h
    reasons = []
    if alarm:
        side = "up" if s_plus >= s_minus else "down"
        reasons.append(f"drift {side} (CUSUM {max(s_plus, s_minus):.1f} > h={h:g})")
    if breach:
        reasons.append(f"CI beyond +-{md_threshold:g}")
    hot = alarm or breach
    alarm_runs = prev.alarm_runs + 1 if hot else 0
    calm = (z is not None and abs(z) < CALM_Z and not breach)
    calm_runs = prev.calm_runs + 1 if calm else 0
    state = prev.state
    if prev.state == OK and hot:
        state = PENDING
    if state in (PENDING, FIRING) and alarm_runs >= min_runs_firing:
        state = FIRING
    if prev.state in (PENDING, FIRING) and calm_runs >= CALM_RUNS:
        state = OK
    if state == OK and prev.state != OK:
        s_plus = s_minus = 0.0  # restart after a reset
        alarm_runs = 0
    return CellState(state, s_plus, s_minus, alarm_runs, calm_runs, z, "; ".join(reasons))
