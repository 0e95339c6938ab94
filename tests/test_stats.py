"""Statistics: hand-computed MD / DiD / JSD on tiny stored runs, the kernels' edge
cases, and calibration against the simulated endpoint's known injected bias. The
numbers come from the engine (monitor.stats) reading a real DuckDB file."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.spatial.distance import jensenshannon

from monitor.catalog import VARIANTS, Catalog
from monitor.measure.parse import parse_answer
from monitor.measure.prompts import build_prompt
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import SimParams, answer
from monitor.stats import MDRow, jsd_bits, jsd_of, md_of, summarise
from monitor.store import Store
from tests.support.helpers import store_scores

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]


def _rows(unit: str, scenario: str, countries: dict[str, str],
          scores: dict[str, dict[str, float]], run: str = "r") -> list[dict[str, Any]]:
    return [{"run_id": run, "triplet_id": f"{scenario}/{unit}", "language": lang,
             "label": lab, "option_id": f"{unit}{lab}", "country": countries[lab], "score": s}
            for lang, by_label in scores.items() for lab, s in by_label.items()]


def _tiny() -> list[dict[str, Any]]:
    u1 = _rows("u1", "university", {"A": "CN", "B": "US", "C": "FR"},
               {"en": {"A": 6, "B": 7, "C": 5}, "zh": {"A": 8, "B": 7, "C": 5}})
    u2 = _rows("u2", "university", {"A": "CN", "B": "GB", "C": "JP"},
               {"en": {"A": 5, "B": 6, "C": 6}, "zh": {"A": 6, "B": 5, "C": 5}})
    return u1 + u2


def _store(tmp_path: Path, rows: list[dict[str, Any]]) -> Store:
    store = Store(tmp_path / "m.duckdb")
    store_scores(store, rows)
    return store


def _cell(md: list[MDRow], scenario: str, country: str) -> MDRow:
    [row] = [r for r in md if r.scenario == scenario and r.country == country]
    return row


def test_md_and_did_by_hand(tmp_path: Path) -> None:
    md = md_of(_store(tmp_path, _tiny()), ["r"], ["en", "zh"],
               {"en": ["US", "GB"], "zh": ["CN"]})
    cn = _cell(md, "university", "CN")
    # u1: d = 8 - 7 = 1; u2: d = 6 - 5.5 = 0.5.
    assert cn.md == pytest.approx(0.75) and cn.n == 2
    half = 12.706204736 * math.sqrt(0.125) / math.sqrt(2)
    assert (cn.ci_lower, cn.ci_upper) == pytest.approx((0.75 - half, 0.75 + half))
    # DiD: u1 others' zh deviation 0 -> 1; u2 others' (5-5.5) = -0.5 -> 0.5 - (-0.5) = 1.
    assert cn.did == pytest.approx(1.0)
    us = _cell(md, "all", "US")
    assert us.md == pytest.approx(0.0) and us.n == 1 and math.isnan(us.ci_lower)
    assert _cell(md, "all", "GB").md == pytest.approx(6 - 5.5)
    # The order: the asked languages' countries as languages.yaml lists them, the
    # scenarios sorted, the pooled cell last.
    assert [(r.country, r.scenario) for r in md] == [
        ("US", "university"), ("US", "all"), ("GB", "university"), ("GB", "all"),
        ("CN", "university"), ("CN", "all")]


def test_a_thin_scenario_cell_takes_its_pooled_cells_spread(tmp_path: Path) -> None:
    # university: two CN units with the same d = +1 (own sd 0: a zero-width CI);
    # travel: six with d = 0, 1, 2, 0, 1, 2 (its own spread); relocation: one.
    rows = [r for i in range(2) for r in _rows(
        f"u{i}", "university", {"A": "CN", "B": "US", "C": "FR"},
        {"en": {"A": 6, "B": 7, "C": 5}, "zh": {"A": 8, "B": 7, "C": 5}})]
    for i in range(6):
        rows += _rows(f"t{i}", "travel", {"A": "CN", "B": "US", "C": "FR"},
                      {"en": {"A": 5, "B": 6, "C": 6}, "zh": {"A": 5 + 2 * (i % 3), "B": 6,
                                                              "C": 6}})
    rows += _rows("r0", "relocation", {"A": "CN", "B": "US", "C": "FR"},
                  {"en": {"A": 4, "B": 6, "C": 6}, "zh": {"A": 7, "B": 6, "C": 6}})
    md = md_of(_store(tmp_path, rows), ["r"], ["en", "zh"], {"en": ["US"], "zh": ["CN"]})
    pooled, uni = _cell(md, "all", "CN"), _cell(md, "university", "CN")
    rel, travel = _cell(md, "relocation", "CN"), _cell(md, "travel", "CN")
    d = [1.0, 1.0] + [(2 * (i % 3)) / 2 for i in range(6)] + [1.5]  # zh - mean(en, zh)
    assert pooled.n == 9 and pooled.md == pytest.approx(float(np.mean(d)))
    sd = float(np.std(d, ddof=1))
    t8 = 2.306004135
    assert uni.n == 2 and uni.md == pytest.approx(1.0)
    assert (uni.ci_lower, uni.ci_upper) == pytest.approx(
        (1.0 - t8 * sd / math.sqrt(2), 1.0 + t8 * sd / math.sqrt(2)))
    assert uni.se == pytest.approx(sd / math.sqrt(2))
    # n = 1: an interval at last, at the pooled spread
    assert rel.n == 1 and rel.ci_upper - rel.ci_lower == pytest.approx(2 * t8 * sd)
    # n >= MIN_CELL_N (5): its own spread, its own degrees of freedom
    own = float(np.std(d[2:8], ddof=1))
    assert travel.n == 6 and travel.ci_upper - travel.md == pytest.approx(
        2.570581836 * own / math.sqrt(6))
    assert rel.ci_lower <= rel.md <= rel.ci_upper


def test_md_is_exact_whatever_the_summation_order(tmp_path: Path) -> None:
    # 1/6 is not a binary fraction: float sums of many d's drift with their order;
    # the engine sums integers, so one run alone and the same run among others agree.
    rng = np.random.default_rng(5)
    rows = []
    for i in range(300):
        s = rng.integers(1, 11, size=(6, 3))
        rows += _rows(f"u{i}", "travel", {"A": "CN", "B": "US", "C": "FR"},
                      {lang: dict(zip("ABC", map(float, s[j]), strict=True))
                       for j, lang in enumerate(LANGS)}, run=f"r{i % 3}")
    store = _store(tmp_path, rows)
    local = {"zh": ["CN"], "en": ["US"], "fr": ["FR"]}
    alone = md_of(store, ["r1"], LANGS, local)
    together = [r for r in md_of(store, ["r0", "r1", "r2"], LANGS, local, by_run=True)
                if r.group == "r1"]
    assert [(r.md, r.ci_lower, r.se, r.did) for r in alone] == [
        (r.md, r.ci_lower, r.se, r.did) for r in together]
    d = []  # by hand, exactly, in fractions of 1/6
    for i in range(1, 300, 3):
        unit = [r for r in rows if r["triplet_id"] == f"travel/u{i}"]
        score = {(r["language"], r["label"]): r["score"] for r in unit}
        d.append(score[("zh", "A")] - sum(score[(lg, "A")] for lg in LANGS) / 6)
    assert _cell(alone, "all", "CN").md == pytest.approx(float(np.mean(d)), rel=1e-12)


def test_an_incomplete_triplet_counts_where_its_local_answer_was_read(tmp_path: Path) -> None:
    """u2's JP option lost its Chinese answer: CN's cell still has both units, its MD
    what the complete data gave (CN's own row is whole); a unit whose CN option lost its
    Chinese answer is not counted for CN. JSD keeps to the complete units."""
    rows = [r for r in _tiny() if not (r["triplet_id"] == "university/u2"
                                      and r["language"] == "zh" and r["label"] == "C")]
    local = {"en": ["US"], "zh": ["CN"]}
    cn = _cell(md_of(_store(tmp_path, rows), ["r"], ["en", "zh"], local), "all", "CN")
    assert cn.n == 2 and cn.md == pytest.approx(0.75)
    rows = [r for r in _tiny() if not (r["triplet_id"] == "university/u2"
                                      and r["language"] == "zh" and r["label"] == "A")]
    (tmp_path / "b").mkdir()
    store = _store(tmp_path / "b", rows)
    cn = _cell(md_of(store, ["r"], ["en", "zh"], local), "all", "CN")
    assert cn.n == 1 and cn.md == pytest.approx(1.0)
    rows = [r for r in _random_rows(np.random.default_rng(2), 12, {})
            if not (r["language"] == "ko" and r["triplet_id"] in ("travel/t0", "travel/t1"))]
    (tmp_path / "c").mkdir()
    assert {r.n for r in jsd_of(_store(tmp_path / "c", rows), ["r"], LANGS, seed=0)} == {10}


def test_jsd_bits_by_hand() -> None:
    assert jsd_bits(np.array([1.0, 0]), np.array([0.5, 0.5])) == pytest.approx(
        0.811278124459 - 0.5)
    assert jsd_bits(np.array([1.0, 0]), np.array([0, 1.0])) == pytest.approx(1.0)
    assert jsd_bits(np.array([3.0, 1]), np.array([3.0, 1])) == pytest.approx(0.0)
    p, g = np.array([2.0, 5, 3]), np.array([4.0, 4, 2])
    assert jsd_bits(p, g) == pytest.approx(jensenshannon(p, g, base=2) ** 2)


def _random_rows(rng: np.random.Generator, n: int, shift: dict[str, float]
                 ) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        base = rng.integers(3, 9, size=3)
        for lang in LANGS:
            noisy = np.clip(base + rng.integers(-1, 2, size=3) + shift.get(lang, 0), 1, 10)
            rows += [{"run_id": "r", "triplet_id": f"travel/t{i}", "language": lang,
                      "label": lab, "option_id": f"o{i}{lab}", "country": "XX",
                      "score": float(s)} for lab, s in zip("ABC", noisy, strict=True)]
    return rows


def test_jsd_excess_detects_a_shifted_language_and_not_the_others(tmp_path: Path) -> None:
    store = _store(tmp_path, _random_rows(np.random.default_rng(1), 80, {"ko": 3}))
    jsd = {(r.scenario, r.language): r for r in jsd_of(store, ["r"], LANGS, seed=3)}
    ko = jsd[("all", "ko")]
    assert ko.jsd_bits > 0.05 and ko.p_value < 0.01 and ko.ci_lower > 0
    for lang in ("en", "fr", "de"):
        row = jsd[("all", lang)]
        assert row.plugin_bits > row.jsd_bits  # the excess removes small-n bias
        assert row.ci_lower <= row.jsd_bits + 0.01 and row.ci_upper >= 0
    assert jsd[("all", "en")].js_distance_nat == pytest.approx(
        math.sqrt(jsd[("all", "en")].plugin_bits * math.log(2)))


def test_jsd_of_one_run_does_not_depend_on_its_batch(tmp_path: Path) -> None:
    rows = _random_rows(np.random.default_rng(2), 30, {"zh": 1})
    rows += [{**r, "run_id": "q"} for r in _random_rows(np.random.default_rng(3), 30, {})]
    store = _store(tmp_path, rows)
    alone = jsd_of(store, ["r"], LANGS, seed=4)
    batched = [r for r in jsd_of(store, ["r", "q"], LANGS, seed={"r": 4, "q": 4}, by_run=True)
               if r.group == "r"]
    assert [(r.jsd_bits, r.ci_lower, r.ci_upper, r.p_value) for r in alone] == [
        (r.jsd_bits, r.ci_lower, r.ci_upper, r.p_value) for r in batched]


def test_coverage_counts_statuses(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from monitor.store import CALL_COLUMNS, SCORE_COLUMNS

    store = Store(tmp_path / "m.duckdb")
    calls = [("en", "t1", "ok"), ("en", "t2", "failed"), ("zh", "t1", "refused"),
             ("zh", "t2", "ok")]
    store.write_batch({c: [{"run_id": "r", "triplet_id": t, "language": lang, "status": st,
                            "created_at": datetime.now(UTC)}.get(c) for lang, t, st in calls]
                       for c, _ in CALL_COLUMNS}, {c: [] for c, _ in SCORE_COLUMNS})
    cov = {r.language: r for r in summarise(store, "r", ["en", "zh", "ko"], {}, seed=0).coverage}
    assert cov["en"].ratio == 0.5 and cov["zh"].scored == 1
    assert cov["ko"].asked == 0 and math.isnan(cov["ko"].ratio)


def simulate_run(catalog: Catalog, bias: float, seed: int,
                 triplets: int = 40) -> list[dict[str, Any]]:
    """One run of the simulated endpoint, without HTTP: sample, ask, parse."""
    sampler = Sampler(catalog, scenarios=sorted(catalog.scenarios), variants=list(VARIANTS),
                      seed=seed, triplets_per_run=triplets, languages=LANGS)
    params = SimParams(bias_points=bias, noise_sd=1.0, seed=seed)  # every local country
    rows = []
    for spec in sampler.sample(0):
        for lang in LANGS:
            prompt = build_prompt(catalog, spec, lang)
            parsed = parse_answer(answer(prompt.messages, params).text, prompt.names,
                                  catalog.prompts[lang].refusals)
            assert parsed.status == "ok", parsed.detail
            rows += [{"run_id": f"s{seed}", "triplet_id": spec.triplet.id, "language": lang,
                      "label": lab, "option_id": prompt.labels[lab],
                      "country": catalog.option(spec.triplet.scenario,
                                                prompt.labels[lab]).country,
                      "score": p.score, "variant": spec.variant}
                     for lab, p in parsed.options.items()]
    return rows


@pytest.mark.slow
def test_md_ci_covers_the_injected_bias_in_simulation(shipped_catalog: Catalog,
                                                      tmp_path: Path) -> None:
    bias, runs = 0.9, 100
    truth = bias - bias / len(LANGS)  # the bias is only in the local language
    store = Store(tmp_path / "m.duckdb")
    for seed in range(runs):
        store_scores(store, simulate_run(shipped_catalog, bias, seed))
    covered = total = 0
    estimates = []
    for row in md_of(store, [f"s{seed}" for seed in range(runs)], LANGS,
                     shipped_catalog.languages, by_run=True):
        if row.scenario != "all" or row.country != "CN" or math.isnan(row.ci_lower):
            continue
        total += 1
        estimates.append(row.md)
        covered += row.ci_lower <= truth <= row.ci_upper
    assert total >= 95
    assert covered / total >= 0.90, (covered, total)
    assert abs(np.mean(estimates) - truth) < 0.15


@pytest.mark.slow
def test_jsd_excess_is_near_zero_without_bias(shipped_catalog: Catalog, tmp_path: Path) -> None:
    store = Store(tmp_path / "m.duckdb")
    for seed in range(12):
        store_scores(store, simulate_run(shipped_catalog, 0.0, seed))
    rows = jsd_of(store, [f"s{seed}" for seed in range(12)], LANGS,
                  seed={f"s{seed}": seed for seed in range(12)}, by_run=True, n_boot=300)
    overall = [r for r in rows if r.scenario == "all" and r.language == "overall"]
    assert len(overall) == 12
    for row in overall:
        assert row.ci_lower == 0.0  # the CI reaches 0: no evidence of divergence
        # ...whereas the plug-in value alone is clearly above 0 (its small-n bias).
        assert row.plugin_bits > 0.003
    assert abs(float(np.mean([r.jsd_bits for r in overall]))) < 0.003


@pytest.mark.parametrize("n", [30, 360, 1200])
def test_jsd_lookup_table_and_direct_terms_agree_exactly(n: int) -> None:
    # A long history looks T(c, g) up in a table, one run computes it directly
    # (no 6-12 MB table in a probe run): a run's numbers must not depend on which.
    from monitor.stats.jsd import _Table

    table, direct = _Table(n, 6, lookups=10**12), _Table(n, 6, lookups=0)
    assert table.flat is not None and direct.flat is None
    rng = np.random.default_rng(n)
    c = rng.integers(0, n + 1, (10, 400))
    g = c + rng.integers(0, 5 * n + 1, (10, 400))
    index = (c * table.stride + g).astype(np.float32 if table.size < 2**24 else float)
    assert np.array_equal(table.jsd(index), direct.jsd(index))
    # and both are the JSD of the histograms they index (n scores in a language,
    # 6 n pooled)
    hist_c = rng.multinomial(n, np.full(10, 0.1)).astype(float)
    hist_g = hist_c + rng.multinomial(5 * n, np.linspace(1, 2, 10) / 15)
    idx = (hist_c * table.stride + hist_g)[:, None]
    expected = float(jsd_bits(hist_c, hist_g))
    assert expected > 1e-3
    assert abs(float(direct.jsd(idx)[0]) - expected) < 1e-12
