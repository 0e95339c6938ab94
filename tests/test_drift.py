"""The drift detector: LLR CUSUM, OK -> PENDING -> FIRING -> OK on real recovery,
and the absolute level as its own condition with hysteresis."""

from __future__ import annotations

import math

import numpy as np
import pytest

from monitor.vocab import LevelState
from monitor.watch.drift import (
    CAP_H,
    FIRING,
    MIN_SD,
    OK,
    PENDING,
    CellState,
    Observation,
    advance,
    step,
    variance,
    z_score,
)

KW = {"drift_points": 0.5, "h": 5.0, "md_threshold": 0.5, "min_runs_firing": 2}
SD, N, N_BASE = 1.0, 20, 400  # per-triplet sd; triplets in the cell per run and in the baseline


def obs(md: float, base: float = 0.0, n: int = N, ci_half: float | None = None) -> Observation:
    half = 2.0 * SD / math.sqrt(n) if ci_half is None else ci_half
    return Observation(md=md, n=n, ci_lower=md - half, ci_upper=md + half, md_base=base,
                       se_base=SD / math.sqrt(N_BASE), n_base=N_BASE)


def run(values: list[float], state: CellState | None = None, **kw: float) -> list[CellState]:
    out, s = [], state or CellState()
    for md in values:
        s = step(s, obs(md), **{**KW, **kw})  # type: ignore[arg-type]
        out.append(s)
    return out


def test_variance_is_the_baselines_sd_at_the_runs_n_plus_the_baselines_error() -> None:
    o = obs(0.3)
    assert o.variance == pytest.approx(SD**2 / N + SD**2 / N_BASE)
    assert z_score(o) == pytest.approx(0.3 / math.sqrt(o.variance))
    # A baseline whose sd came out ~0 (integer scores) is floored at MIN_SD.
    flat = Observation(md=0.3, n=10, ci_lower=0.3, ci_upper=0.3, md_base=0.0, se_base=0.0,
                       n_base=50)
    assert flat.variance == pytest.approx(MIN_SD**2 / 10)
    assert variance(np.array([0.0, 0.05]), 400, 20).shape == (2,)


def test_the_increment_is_the_log_likelihood_ratio_of_the_design_shift() -> None:
    o = obs(0.6)
    s = step(CellState(), o, **KW)  # type: ignore[arg-type]
    delta = KW["drift_points"]
    assert s.s_plus == pytest.approx(delta / o.variance * (0.6 - delta / 2))
    assert s.s_minus == 0.0  # max(0, negative)


def test_a_small_run_weighs_little_and_no_minimum_n_is_needed() -> None:
    big = step(CellState(), obs(0.6, n=40), **KW)  # type: ignore[arg-type]
    small = step(CellState(), obs(0.6, n=2), **KW)  # type: ignore[arg-type]
    assert 0 < small.s_plus < big.s_plus / 10


def test_no_drift_stays_ok() -> None:
    rng = np.random.default_rng(1)
    states = run(list(rng.normal(0, SD / math.sqrt(N), 300)))
    assert {s.state for s in states} <= {OK, PENDING}
    assert sum(s.state == FIRING for s in states) == 0


def test_sustained_drift_goes_pending_then_firing_and_resolves_only_on_recovery() -> None:
    states = run([0.8] * 4)
    seen = [s.state for s in states]
    assert seen == [PENDING, FIRING, FIRING, FIRING]  # 0.8 at n=20: 5.2 nats a run > h
    assert "drift up" in states[-1].reason and "h=5" in states[-1].reason
    assert states[-1].s_plus == CAP_H * KW["h"]  # evidence is capped while alarmed
    calm = run([0.0] * 6, states[-1])
    assert calm[0].state == FIRING  # one calm run is not recovery
    assert calm[1].state == FIRING
    first_ok = next(i for i, s in enumerate(calm) if s.state == OK)
    assert first_ok >= 3  # the capped evidence (10 nats) is used up at ~2.4 nats a run
    assert calm[first_ok].reason.startswith("recovered")
    assert calm[first_ok].reason.endswith("(CUSUM back to 0 from its cap of 10 nats)")
    pending = run([0.8], CellState())[0]
    assert pending.state == PENDING
    back = run([0.0] * 3, pending)
    # A PENDING cell never paged, so its sum never stood at the cap.
    assert back[-1].state == OK and back[-1].reason.endswith("(CUSUM back to 0)")
    assert calm[first_ok].s_plus == 0.0 and calm[first_ok].alarm_runs == 0


def test_a_page_starts_at_the_cap_so_every_page_needs_the_same_evidence_to_resolve() -> None:
    # 0.55 at n=20 adds 2.9 nats a run: 8.6 when it pages at the 3rd run, set to the
    # cap (10), not left where it was (from h, a persistent shift's sum fell back to 0
    # in ~1e-3 of pages).
    states = run([0.55] * 3)
    assert [s.state for s in states] == [OK, PENDING, FIRING]
    assert states[-1].s_plus == CAP_H * KW["h"]
    code, up, _, _ = advance(np.array([1, 1]), np.array([6.0, 6.0]), np.zeros(2),
                             np.ones(2, int), np.array([0.3, 0.3]), np.array([0.05, 0.05]),
                             np.array([True, False]), delta=0.5, h=5.0, min_runs_firing=2)
    assert list(code) == [2, 1] and list(up) == [10.0, 6.0]  # a cell not measured keeps all


def test_downward_drift_is_detected_too() -> None:
    states = run([-0.5] * 4)  # 2.4 nats a run: above h at the 3rd, FIRING at the 4th
    assert [s.state for s in states] == [OK, OK, PENDING, FIRING]
    assert "drift down" in states[-1].reason


def test_a_persistent_shift_never_resolves_by_luck() -> None:
    # 200 runs of a real 0.5-point shift, noise at the run's n: FIRING throughout
    # once it fired, no "resolved" (the old |z| < 1 rule resolved ~3.7 per 100 runs).
    rng = np.random.default_rng(7)
    states = run(list(0.5 + rng.normal(0, SD / math.sqrt(N), 200)))
    fired_at = next(i for i, s in enumerate(states) if s.state == FIRING)
    assert fired_at <= 3
    assert all(s.state == FIRING for s in states[fired_at:])


def test_a_stable_accepted_bias_never_pages_and_its_level_does_not_flap() -> None:
    # The baseline holds a bias of 1.0 and the runs keep it: no drift, so no page;
    # the level is beyond +-0.5 (whole CI above it) and stays so, once.
    rng = np.random.default_rng(3)
    s, states, level_changes = CellState(), [], 0
    for md in 1.0 + rng.normal(0, SD / math.sqrt(N), 200):
        new = step(s, obs(float(md), base=1.0), **KW)  # type: ignore[arg-type]
        level_changes += new.level != s.level
        states.append(new.state)
        s = new
    assert FIRING not in states
    assert s.level == LevelState.ABOVE and level_changes == 1


def test_the_level_needs_two_runs_to_enter_and_two_to_leave() -> None:
    s = step(CellState(), obs(1.2), **KW)  # type: ignore[arg-type]
    assert s.level == LevelState.WITHIN and s.level_runs == 1
    s = step(s, obs(1.2), **KW)  # type: ignore[arg-type]
    assert s.level == LevelState.ABOVE
    s = step(s, obs(0.45, ci_half=0.1), **KW)  # point inside, CI straddles: stays
    assert s.level == LevelState.ABOVE and s.level_runs == 0
    s = step(s, obs(0.1, ci_half=0.1), **KW)  # whole CI inside: one of two
    assert s.level == LevelState.ABOVE
    s = step(s, obs(0.1, ci_half=0.1), **KW)  # type: ignore[arg-type]
    assert s.level == LevelState.WITHIN
    # Small cells (no interval to judge) keep the level.
    tiny = Observation(md=3.0, n=2, ci_lower=2.9, ci_upper=3.1, md_base=0.0, se_base=0.05,
                       n_base=400)
    assert step(s, tiny, **KW).level == LevelState.WITHIN  # type: ignore[arg-type]


def test_missing_observation_keeps_state() -> None:
    s = CellState(state=PENDING, s_plus=6.0, s_minus=0.0, alarm_runs=1, calm_runs=0, z=2.0,
                  reason="x")
    assert step(s, None, **KW) == s  # type: ignore[arg-type]


def test_single_run_firing_when_configured() -> None:
    state = step(CellState(), obs(0.9), **{**KW, "min_runs_firing": 1})  # type: ignore[arg-type]
    assert state.state == FIRING
    assert math.isfinite(state.z or math.nan)


def test_the_array_core_is_the_same_detector_as_step() -> None:
    # The planner and the benchmarks run `advance` on arrays; it must be step.
    rng = np.random.default_rng(11)
    cells = 50
    diffs = rng.normal(0.2, 0.3, (60, cells))
    ns = rng.integers(1, 40, cells)
    var = variance(SD / math.sqrt(N_BASE), N_BASE, ns)
    code = np.zeros(cells, np.int8)
    up, down, runs = np.zeros(cells), np.zeros(cells), np.zeros(cells)
    scalar = [CellState() for _ in range(cells)]
    names = {0: OK, 1: PENDING, 2: FIRING}
    for t in range(60):
        code, up, down, runs = advance(code, up, down, runs, diffs[t], var,
                                       np.ones(cells, bool), delta=0.5, h=5.0,
                                       min_runs_firing=2)
        for c in range(cells):
            o = Observation(md=float(diffs[t, c]), n=int(ns[c]), ci_lower=math.nan,
                            ci_upper=math.nan, md_base=0.0,
                            se_base=SD / math.sqrt(N_BASE), n_base=N_BASE)
            scalar[c] = step(scalar[c], o, **KW)  # type: ignore[arg-type]
            assert scalar[c].state == names[int(code[c])]
            assert scalar[c].s_plus == pytest.approx(up[c], abs=1e-12)
            assert scalar[c].s_minus == pytest.approx(down[c], abs=1e-12)
