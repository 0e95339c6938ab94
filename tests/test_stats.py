"""Statistics: hand-computed MD / DiD / JSD on tiny tables, and calibration
against the simulated endpoint's known injected bias."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy.spatial.distance import jensenshannon

from monitor.catalog import VARIANTS, Catalog
from monitor.measure.parse import parse_answer
from monitor.measure.prompts import build_prompt
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import SimParams, answer
from monitor.stats import complete_units, coverage, jsd_bits, jsd_table, md_table

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]


def _rows(unit: str, scenario: str, countries: dict[str, str],
          scores: dict[str, dict[str, float]]) -> list[dict[str, object]]:
    return [{"run_id": "r", "triplet_id": unit, "language": lang, "label": lab,
             "option_id": f"{unit}{lab}", "country": countries[lab], "score": s,
             "scenario": scenario, "variant": "plain"}
            for lang, by_label in scores.items() for lab, s in by_label.items()]


def _tiny() -> pd.DataFrame:
    u1 = _rows("u1", "university", {"A": "CN", "B": "US", "C": "FR"},
               {"en": {"A": 6, "B": 7, "C": 5}, "zh": {"A": 8, "B": 7, "C": 5}})
    u2 = _rows("u2", "university", {"A": "CN", "B": "GB", "C": "JP"},
               {"en": {"A": 5, "B": 6, "C": 6}, "zh": {"A": 6, "B": 5, "C": 5}})
    return pd.DataFrame(u1 + u2)


def test_md_and_did_by_hand() -> None:
    md = md_table(_tiny(), ["en", "zh"], {"en": ["US", "GB"], "zh": ["CN"]})
    cn = md[(md["country"] == "CN") & (md["scenario"] == "university")].iloc[0]
    # u1: d = 8 - 7 = 1; u2: d = 6 - 5.5 = 0.5.
    assert cn["md"] == pytest.approx(0.75) and cn["n"] == 2
    half = 12.706204736 * math.sqrt(0.125) / math.sqrt(2)
    assert (cn["ci_lower"], cn["ci_upper"]) == pytest.approx((0.75 - half, 0.75 + half))
    # DiD: u1 others' zh deviation 0 -> 1; u2 others' (5-5.5) = -0.5 -> 0.5 - (-0.5) = 1.
    assert cn["did"] == pytest.approx(1.0)
    us = md[(md["country"] == "US") & (md["scenario"] == "all")].iloc[0]
    assert us["md"] == pytest.approx(0.0) and us["n"] == 1 and math.isnan(us["ci_lower"])
    gb = md[(md["country"] == "GB") & (md["scenario"] == "all")].iloc[0]
    assert gb["md"] == pytest.approx(6 - 5.5)


def test_incomplete_triplets_are_left_out() -> None:
    df = _tiny()
    df = df[~((df["triplet_id"] == "u2") & (df["language"] == "zh") & (df["label"] == "C"))]
    wide = complete_units(df, ["en", "zh"])
    assert set(wide["unit"]) == {"r/u1"}
    md = md_table(df, ["en", "zh"], {"en": ["US"], "zh": ["CN"]})
    assert md[(md["country"] == "CN")]["n"].max() == 1


def test_jsd_bits_by_hand() -> None:
    assert jsd_bits(np.array([1.0, 0]), np.array([0.5, 0.5])) == pytest.approx(
        0.811278124459 - 0.5)
    assert jsd_bits(np.array([1.0, 0]), np.array([0, 1.0])) == pytest.approx(1.0)
    assert jsd_bits(np.array([3.0, 1]), np.array([3.0, 1])) == pytest.approx(0.0)
    p, g = np.array([2.0, 5, 3]), np.array([4.0, 4, 2])
    assert jsd_bits(p, g) == pytest.approx(jensenshannon(p, g, base=2) ** 2)


def _random_table(rng: np.random.Generator, n: int, shift: dict[str, float]) -> pd.DataFrame:
    rows = []
    for i in range(n):
        base = rng.integers(3, 9, size=3)
        for lang in LANGS:
            noisy = np.clip(base + rng.integers(-1, 2, size=3) + shift.get(lang, 0), 1, 10)
            rows += [{"run_id": "r", "triplet_id": f"t{i}", "language": lang, "label": lab,
                      "option_id": f"o{i}{lab}", "country": "XX", "score": float(s),
                      "scenario": "travel", "variant": "plain"}
                     for lab, s in zip("ABC", noisy, strict=True)]
    return pd.DataFrame(rows)


def test_jsd_excess_detects_a_shifted_language_and_not_the_others() -> None:
    df = _random_table(np.random.default_rng(1), 80, {"ko": 3})
    jsd = jsd_table(df, LANGS, seed=3).set_index(["scenario", "language"])
    ko = jsd.loc[("all", "ko")]
    assert ko["jsd_bits"] > 0.05 and ko["p_value"] < 0.01 and ko["ci_lower"] > 0
    for lang in ("en", "fr", "de"):
        row = jsd.loc[("all", lang)]
        assert row["plugin_bits"] > row["jsd_bits"]  # the excess removes small-n bias
        assert row["ci_lower"] <= row["jsd_bits"] + 0.01 and row["ci_upper"] >= 0
    assert jsd.loc[("all", "en"), "js_distance_nat"] == pytest.approx(
        math.sqrt(jsd.loc[("all", "en"), "plugin_bits"] * math.log(2)))


def test_coverage_counts_statuses() -> None:
    calls = pd.DataFrame({"language": ["en", "en", "zh", "zh"],
                          "status": ["ok", "failed", "refused", "ok"]})
    cov = coverage(calls, ["en", "zh", "ko"]).set_index("language")
    assert cov.loc["en", "ratio"] == 0.5 and cov.loc["zh", "scored"] == 1
    assert cov.loc["ko", "asked"] == 0 and math.isnan(cov.loc["ko", "ratio"])


def simulate_run(catalog: Catalog, bias: float, seed: int, triplets: int = 40) -> pd.DataFrame:
    """One run of the simulated endpoint, without HTTP: sample, ask, parse."""
    sampler = Sampler(catalog, scenarios=sorted(catalog.scenarios), variants=list(VARIANTS),
                      seed=seed, triplets_per_run=triplets)
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
                      "score": p.score, "scenario": spec.triplet.scenario,
                      "variant": spec.variant} for lab, p in parsed.options.items()]
    return pd.DataFrame(rows)


@pytest.mark.slow
def test_md_ci_covers_the_injected_bias_in_simulation(shipped_catalog: Catalog) -> None:
    bias, runs = 0.9, 100
    truth = bias - bias / len(LANGS)  # the bias is only in the local language
    local = {lang: list(c) for lang, c in shipped_catalog.languages.items()}
    covered = total = 0
    estimates = []
    for seed in range(runs):
        md = md_table(simulate_run(shipped_catalog, bias, seed), LANGS, local)
        row = md[(md["scenario"] == "all") & (md["country"] == "CN")]
        if row.empty or math.isnan(row.iloc[0]["ci_lower"]):
            continue
        total += 1
        estimates.append(row.iloc[0]["md"])
        covered += row.iloc[0]["ci_lower"] <= truth <= row.iloc[0]["ci_upper"]
    assert total >= 95
    assert covered / total >= 0.90, (covered, total)
    assert abs(np.mean(estimates) - truth) < 0.15


@pytest.mark.slow
def test_jsd_excess_is_near_zero_without_bias(shipped_catalog: Catalog) -> None:
    overall = []
    for seed in range(12):
        jsd = jsd_table(simulate_run(shipped_catalog, 0.0, seed), LANGS, seed=seed, n_boot=300)
        row = jsd[(jsd["scenario"] == "all") & (jsd["language"] == "overall")].iloc[0]
        overall.append(row["jsd_bits"])
        assert row["ci_lower"] == 0.0  # the CI reaches 0: no evidence of divergence
    assert abs(float(np.mean(overall))) < 0.003
    plugin = jsd_table(simulate_run(shipped_catalog, 0.0, 99), LANGS)
    # ...whereas the plug-in value alone is clearly above 0 (its small-n bias).
    assert plugin[plugin["language"] == "overall"]["plugin_bits"].iloc[0] > 0.003
