"""The comparison's test on tiny arrays: Wald's bounds shared out over countries, the
likelihood ratios, a stopped test keeping its outcome, the verdicts; the pairs (aligned
on the triplets both sides answered, their difference a unit of the stats kernels);
the simulation `monitor plan --compare` and the benchmark run."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.compare import plan as cp
from monitor.compare import sequential as sq
from monitor.compare.pairs import Look, aligned, difference, latest
from monitor.stats import md_rows
from monitor.store import UnitScores
from monitor.vocab import POOLED, Change
from tests.support.helpers import write_config

LOCAL = [("CN", "zh"), ("US", "en")]


def test_the_bounds_share_alpha_over_the_countries() -> None:
    a, b = sq.bounds(0.05, 0.1, 9)
    assert a == pytest.approx(math.log(0.9 / (0.05 / 9)))
    assert b == pytest.approx(math.log(0.1 / (1 - 0.05 / 9)))
    assert sq.bounds(0.05, 0.1, 1)[0] < a  # one country: a lower bar


def test_the_likelihood_ratio_is_walds_for_many_pairs() -> None:
    n, x, s, m = 4000, 0.3, 5.0, 0.5  # shifts small against the sd
    up, down = sq.llr(n, x, s, m)
    assert up == pytest.approx(m * n / s**2 * (x - m / 2), rel=0.02)
    assert down == pytest.approx(m * n / s**2 * (-x - m / 2), rel=0.02)
    # identical answers on both sides: no spread, no shift; the floor keeps it finite
    up, down = sq.llr(10, 0.0, 0.0, 0.5)
    assert up == down < sq.bounds(0.05, 0.1, 9)[1]


def test_a_test_decides_only_from_min_pairs_and_then_keeps_its_outcome() -> None:
    limits = sq.bounds(0.05, 0.1, 2)
    up, down = np.zeros(2, np.int8), np.zeros(2, np.int8)
    few = np.array([sq.MIN_PAIRS - 1] * 2)
    up, down = sq.step(up, down, few, np.array([3.0, 0.0]), np.array([0.5, 0.5]), 0.5, limits)
    assert up.tolist() == down.tolist() == [sq.OPEN, sq.OPEN]
    n = np.array([40, 40])
    up, down = sq.step(up, down, n, np.array([1.5, 0.0]), np.array([0.8, 0.8]), 0.5, limits)
    assert sq.verdicts(up, down).tolist() == [sq.REGRESSION, sq.NO_CHANGE]
    # later data the other way change nothing: the outcome stands
    up, down = sq.step(up, down, n * 2, np.array([-1.5, 1.5]), np.array([0.8, 0.8]), 0.5, limits)
    assert sq.verdicts(up, down).tolist() == [sq.REGRESSION, sq.NO_CHANGE]
    assert sq.CHANGE[sq.IMPROVEMENT] == Change.IMPROVEMENT


def _units(keys: list[int], scores: np.ndarray, countries: np.ndarray) -> UnitScores:
    u = len(keys)
    return UnitScores(languages=["en", "zh"], groups=["pooled"], group=np.zeros(u, np.int32),
                      scenarios=["university"], scenario=np.zeros(u, np.int32),
                      countries=["CN", "US"], country=countries, scores=scores,
                      triplet=np.array(keys, np.uint64), answered=np.ones(scores.shape, bool))


def test_pairs_are_the_triplets_both_sides_answered_and_their_difference_is_paired() -> None:
    rng = np.random.default_rng(1)
    cc = np.tile(np.array([[0, 1, -1]], np.int32), (6, 1))
    base = _units([1, 2, 3, 4, 5, 3], rng.integers(100, 1001, (6, 2, 3)), cc)
    cand = _units([3, 5, 1, 9, 2], rng.integers(100, 1001, (5, 2, 3)), cc[:5].copy())
    cand.country[4] = [1, 0, -1]  # triplet 2 with its options elsewhere: never paired
    cand.answered[2, 1, 0] = False  # triplet 1 not read in zh for one option: no pair
    assert latest(base).triplet.tolist() == [1, 2, 4, 5, 3]  # the later answer of 3
    b, c = aligned(base, cand)
    assert c.triplet.tolist() == b.triplet.tolist() == [3, 5]
    assert (b.scores[0] == base.scores[5]).all()
    diff = difference(b, c)
    got = {r.country: r for r in md_rows(diff, LOCAL) if r.scenario == POOLED}
    for country in ("CN", "US"):
        want = ({r.country: r.md for r in md_rows(c, LOCAL)}[country]
                - {r.country: r.md for r in md_rows(b, LOCAL)}[country])
        assert got[country].md == pytest.approx(want)
    look = Look(diff, LOCAL, keys={3, 5})
    assert look.n.tolist() == [2, 2]


def test_the_simulated_test_keeps_its_error_rates(shipped_catalog: Catalog) -> None:
    """A small replica of docs/benchmarks.md section 9 (normal pairs, sd 1.6)."""
    pop = cp.population(shipped_catalog, ["university", "relocation", "travel"],
                        ["en", "ja", "zh", "fr", "de", "ko"])
    n = pop.holds.shape[0]  # every monitored triplet of the six languages (1,870)
    assert n > 1000 and pop.holds.shape[1] == 9 and pop.holds.sum(axis=1).tolist() == [3] * n
    none = cp.simulate(pop, cp.normal_draw(pop.holds, np.zeros(9), 1.6), margin=0.5,
                       max_triplets=n, reps=300)
    null = cp.summary(none, 12)
    assert null["p_false_regression"] <= 0.07 and null["p_inconclusive"] == 0
    shift = np.zeros(9)
    shift[pop.names.index("FR")] = 0.5
    moved = cp.summary(cp.simulate(pop, cp.normal_draw(pop.holds, shift, 1.6), margin=0.5,
                                   max_triplets=n, reps=300),
                       12, shifted=pop.names.index("FR"))
    assert moved["p_regression"] >= 0.85
    assert cp.paired_sd(1.3, 0.23) == pytest.approx(1.3 * math.sqrt(1.54))


def test_plan_compare_gives_the_calls_live_and_against_the_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("monitor.commands.plan_compare.REPS", 100)
    cfg = write_config(tmp_path, [{"name": "x", "model": "simulated/demo"}])
    assert main(["plan", "--compare", "--sd", "1.3", "--persistence", "0.23", "--json",
                 "--config", str(cfg)]) == 0
    doc = json.loads(capsys.readouterr().out)["compare_plans"][0]
    assert doc["sd_pair"] == pytest.approx(1.613, abs=0.001) and doc["worst_country"] == "FR"
    live, stored = doc["live"], doc["against_baseline"]
    assert (live["calls_per_triplet"], stored["calls_per_triplet"]) == (12, 6)
    assert stored["no_change"]["calls_mean"] < live["no_change"]["calls_mean"] <= 12000
    assert live["change"]["p_regression"] > 0.8
