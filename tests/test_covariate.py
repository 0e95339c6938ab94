"""The baseline as covariate (CUPED, monitor.stats.covariate) on synthetic units: the
adjusted MD moves with a shift as the raw one does, its spread over runs shrinks by
the share the persistence explains, and it is left alone where it would not pay."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.catalog import Catalog
from monitor.stats import adjust, base_table, md_rows
from monitor.store import Store, UnitScores
from tests.support.db import rows
from tests.support.helpers import DirectSimClient, sim_daemon, write_config

LANGS = ["l0", "l1", "l2", "l3", "l4", "l5"]
LOCAL = [(f"C{i}", lang) for i, lang in enumerate(LANGS)]
POP = 600


def _population(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each triplet's three countries (distinct) and its persistent effect per
    (language, option), in points."""
    countries = np.stack([rng.choice(6, 3, replace=False) for _ in range(POP)])
    return countries, rng.standard_normal((POP, len(LANGS), 3))


def _units(idx: np.ndarray, countries: np.ndarray, fixed: np.ndarray, persistence: float,
           rng: np.random.Generator, shift: float = 0.0) -> UnitScores:
    """Triplets idx asked once in every language: 5.5 + sqrt(p) fixed + sqrt(1 - p)
    fresh noise (+ shift for C0's options asked in l0), in hundredths."""
    fresh = rng.standard_normal((idx.size, len(LANGS), 3))
    pts = 5.5 + np.sqrt(persistence) * fixed[idx] + np.sqrt(1 - persistence) * fresh
    c = countries[idx]
    pts[:, 0, :] += shift * (c == 0)
    scores = np.clip(np.round(pts * 100), 100, 1000).astype(np.int64)
    return UnitScores(languages=LANGS, groups=["pooled"], group=np.zeros(idx.size, np.int32),
                      scenarios=["s"],
                      scenario=np.zeros(idx.size, np.int32), countries=[c for c, _ in LOCAL],
                      country=c.astype(np.int32),
                      scores=scores, triplet=idx.astype(np.uint64) * 7919 + 1,
                      answered=np.ones(scores.shape, bool))


def _runs(persistence: float, shift: float, reps: int = 300, n: int = 40
          ) -> tuple[np.ndarray, np.ndarray, list[bool], float]:
    """C0's raw and adjusted MD over reps runs against one baseline holding every
    triplet once; whether the adjustment was used; the baseline's MD of C0."""
    rng = np.random.default_rng(7)
    countries, fixed = _population(rng)
    base = _units(np.arange(POP), countries, fixed, persistence, rng)
    m = next(r.md for r in md_rows(base, LOCAL) if r.country == "C0" and r.scenario == "all")
    table = base_table(base, LOCAL)
    raw, adj, used = [], [], []
    for _ in range(reps):
        run = _units(rng.choice(POP, n, replace=False), countries, fixed, persistence, rng,
                     shift)
        cells, pers = adjust(run, table, LOCAL)
        raw.append(cells["C0"].raw)
        adj.append(cells["C0"].md)
        used.append(pers.used)
        md = next(r.md for r in md_rows(run, LOCAL) if r.country == "C0" and r.scenario == "all")
        assert cells["C0"].raw == pytest.approx(md)  # the raw MD is md_rows' own
        assert cells["C0"].covered == cells["C0"].n  # every triplet is in the baseline
    return np.array(raw), np.array(adj), used, m


def test_with_persistence_the_adjusted_md_is_unbiased_and_tighter() -> None:
    raw, adj, used, m = _runs(0.6, 0.0)
    assert all(used)
    # Unbiased: both centre on the baseline's MD (no shift), within 3 standard errors.
    for x in (raw, adj):
        assert abs(x.mean() - m) < 3 * x.std() / np.sqrt(x.size)
    ratio = adj.var() / raw.var()
    # rho between two asks of a triplet's d is ~0.6 here, so the variance drops to ~0.64.
    assert 0.5 < ratio < 0.8, ratio


def test_a_shift_moves_the_adjusted_md_as_much_as_the_raw_one() -> None:
    raw0, adj0, _, _ = _runs(0.6, 0.0, reps=200)
    raw1, adj1, _, _ = _runs(0.6, 0.6, reps=200)
    moved_raw, moved_adj = raw1.mean() - raw0.mean(), adj1.mean() - adj0.mean()
    assert moved_raw > 0.3
    se = np.sqrt(adj0.var() / adj0.size + adj1.var() / adj1.size + raw0.var() / raw0.size
                 + raw1.var() / raw1.size)
    assert abs(moved_adj - moved_raw) < 3 * se


def test_without_persistence_it_is_not_used() -> None:
    raw, adj, used, _ = _runs(0.0, 0.0, reps=100)
    # rho's interval lies above 0 by chance in ~2.5% of runs only; else x is used as is.
    assert sum(used) <= 10
    same = [u is False and a == r for u, a, r in zip(used, adj, raw, strict=True)]
    assert sum(same) == len(used) - sum(used)


def test_triplets_the_baseline_never_asked_are_left_unadjusted() -> None:
    rng = np.random.default_rng(3)
    countries, fixed = _population(rng)
    half = np.arange(POP // 2)
    base = _units(half, countries, fixed, 0.6, rng)
    run = _units(np.arange(POP // 2 - 20, POP // 2 + 20), countries, fixed, 0.6, rng)
    cells, pers = adjust(run, base_table(base, LOCAL), LOCAL)
    c0 = cells["C0"]
    assert 0 < c0.covered < c0.n
    if pers.used:
        # The variance factor counts only the covered share.
        assert 1 - pers.rho**2 < c0.factor < 1


# The daemon's own job: a baseline that holds every triplet of one scenario, then runs
# that re-ask them; the simulated model with 60% of its noise persistent per (triplet,
# language, option), or with none.
SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 64, "rpm": 100000}


def _daemon_runs(tmp_path: Path, catalog: Catalog, persistence: float, covariate: bool,
                 runs: int) -> list[tuple[Any, ...]]:
    cfg = write_config(tmp_path, [{**SIM, "params": {"bias_points": 0.0, "noise_sd": 1.0,
                                                      "persistence": persistence}}],
                       sampling={"triplets_per_run": 125, "scenarios": ["relocation"],
                                 "languages": ["en", "zh", "ja"]},
                       baseline={"auto_min_triplets": 125, "covariate": covariate},
                       topup={"enabled": False})
    daemon, _, store = sim_daemon(cfg, catalog)
    for i in range(runs):
        daemon.client_factory = lambda ep, i=i: DirectSimClient(  # type: ignore[assignment]
            {**ep.params, "seed": 300 + i}, catalog.root)
        asyncio.run(daemon.run("sim"))
    assert store.baseline("sim") is not None
    return rows(store.path, "SELECT value, ci_lower, ci_upper, n, extra FROM run_stats "
                            "WHERE kind = 'persistence' ORDER BY run_id")


@pytest.mark.slow
def test_the_daemon_measures_persistence_and_uses_the_covariate_where_it_pays(
        tmp_path: Path, shipped_catalog: Catalog) -> None:
    # One run of 125 is every monitored relocation triplet at en, zh, ja: the baseline
    # (set by the 2nd run, which is compared with it), then runs that re-ask them.
    got = _daemon_runs(tmp_path, shipped_catalog, 0.6, True, 4)
    assert len(got) == 3, got
    for value, lo, hi, n, extra in got:
        assert lo <= value <= hi and n >= 3 * 100  # 3 cells per triplet
        assert value > 0.25 and json.loads(extra)["used"] is True, (value, extra)
    # The measured persistence is what `monitor plan` reads.
    with Store(tmp_path / "monitor.duckdb") as store:
        mean = store.persistence("sim")
    assert mean is not None and mean[1] == len(got)
    assert mean[0] == pytest.approx(sum(v * n for v, _, _, n, _ in got)
                                    / sum(n for *_, n, _ in got))


@pytest.mark.slow
def test_no_covariate_when_it_is_off(tmp_path: Path, shipped_catalog: Catalog) -> None:
    assert _daemon_runs(tmp_path, shipped_catalog, 0.6, False, 3) == []


def test_the_detector_sees_the_adjusted_md_at_its_smaller_variance() -> None:
    from monitor.stats import MDRow
    from monitor.watch.drift import observe

    run = MDRow(scenario="all", country="C0", language="l0", md=0.40, ci_lower=0.0, ci_upper=0.8,
                se=0.2, n=40, did=0.0, did_ci_lower=-1.0, did_ci_upper=1.0)
    base = MDRow(scenario="all", country="C0", language="l0", md=0.10, ci_lower=0.05,
                 ci_upper=0.15, se=0.03, n=1000, did=0.0, did_ci_lower=-1.0, did_ci_upper=1.0)
    raw, adj = observe(run, base), observe(run, base, md=0.25, factor=0.64)
    assert raw is not None and adj is not None
    assert raw.md == 0.40 and adj.md == 0.25
    assert adj.variance == pytest.approx(0.64 * raw.variance)
    # The interval (the absolute level's condition) stays the raw MD's.
    assert (adj.ci_lower, adj.ci_upper) == (run.ci_lower, run.ci_upper)
