"""The drift state machine: z, CUSUM, OK -> PENDING -> FIRING -> OK."""

from __future__ import annotations

import math

from monitor.watch.drift import FIRING, OK, PENDING, CellState, Observation, step, z_score

KW = {"drift_points": 0.3, "h": 5.0, "md_threshold": 0.5, "min_runs_firing": 2}


def obs(md: float, se: float = 0.1, base: float = 0.0, se_base: float = 0.1,
        n: int = 30) -> Observation:
    half = 2.0 * se
    return Observation(md, se, md - half, md + half, n, base, se_base)


def test_z_uses_both_standard_errors() -> None:
    assert z_score(obs(0.5, se=0.3, se_base=0.4)) == 0.5 / 0.5
    assert z_score(Observation(1, 0, 1, 1, 1, 0, 0)) is None


def test_no_drift_stays_ok_and_cusum_stays_small() -> None:
    state = CellState()
    for md in (0.05, -0.1, 0.08, -0.02, 0.1, -0.07) * 5:
        state = step(state, obs(md), **KW)
        assert state.state == OK
    assert max(state.s_plus, state.s_minus) < KW["h"]


def test_sustained_drift_goes_pending_then_firing_then_recovers() -> None:
    state = CellState()
    seen = []
    for md in (0.45, 0.45, 0.45, 0.45):  # z = 3.2 per run, k = 1.06
        state = step(state, obs(md, base=0.0), **KW)
        seen.append(state.state)
    assert seen[0] == OK and PENDING in seen and seen[-1] == FIRING
    assert "drift up" in state.reason
    state = step(state, obs(0.02), **KW)
    assert state.state == FIRING  # one calm run is not enough
    state = step(state, obs(-0.03), **KW)
    assert state.state == OK and state.s_plus == 0.0 and state.s_minus == 0.0


def test_downward_drift_is_detected_too() -> None:
    state = CellState()
    for _ in range(4):
        state = step(state, obs(-0.45), **KW)
    assert state.state == FIRING and "drift down" in state.reason


def test_absolute_threshold_needs_the_whole_ci_beyond_it() -> None:
    # Point estimate above 0.5 but the CI reaches below: no breach, and no drift
    # because the baseline sits at the same value.
    wide = Observation(0.7, 0.2, 0.3, 1.1, 30, 0.7, 0.2)
    assert step(CellState(), wide, **KW).state == OK
    narrow = Observation(0.7, 0.05, 0.6, 0.8, 30, 0.7, 0.05)
    after = step(CellState(), narrow, **KW)
    assert after.state == PENDING and "CI beyond" in after.reason


def test_missing_observation_keeps_state() -> None:
    s = CellState(PENDING, 6.0, 0.0, 1, 0, 2.0, "x")
    assert step(s, None, **KW) == s


def test_single_run_firing_when_configured() -> None:
    state = step(CellState(), obs(0.9), **{**KW, "min_runs_firing": 1})
    assert state.state == FIRING
    assert math.isfinite(state.z or math.nan)
