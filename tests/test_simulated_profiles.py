"""The simulated model's realism knobs (issue 14): persistent triplet x language effects,
call-level noise, and the `realistic` profile reached through LiteLLM's provider."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from scipy.stats import t

from monitor.catalog import VARIANTS, Catalog
from monitor.cli import main
from monitor.measure.prompts import build_prompt
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import PROFILES, SimParams, answer
from tests.support.helpers import write_config

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]


def _scores(catalog: Catalog, params: SimParams, triplets: int = 60) -> np.ndarray:
    """(prompt, label) scores of the first run's prompts: an array prompts x 3."""
    sampler = Sampler(catalog, scenarios=sorted(catalog.scenarios), variants=list(VARIANTS),
                      seed=1, triplets_per_run=triplets, languages=LANGS)
    out = []
    for spec in sampler.sample(0):
        for lang in LANGS:
            prompt = build_prompt(catalog, spec, lang)
            got = answer(prompt.messages, params).scores
            out.append([got[lab] for lab in "ABC"])
    return np.array(out, float)


def test_a_persistent_effect_survives_a_new_seed_and_noise_does_not(
        shipped_catalog: Catalog) -> None:
    kw: dict[str, Any] = {"bias_points": 0.0, "noise_sd": 1.5}
    fixed = [_scores(shipped_catalog, SimParams(**kw, persistence=1.0, seed=s)) for s in (1, 2)]
    assert (fixed[0] == fixed[1]).all()  # all of the noise persistent: the same answer
    fresh = [_scores(shipped_catalog, SimParams(**kw, persistence=0.0, seed=s)) for s in (1, 2)]
    half = [_scores(shipped_catalog, SimParams(**kw, persistence=0.5, seed=s)) for s in (1, 2)]
    r_fresh = np.corrcoef(fresh[0].ravel(), fresh[1].ravel())[0, 1]
    r_half = np.corrcoef(half[0].ravel(), half[1].ravel())[0, 1]
    # Scores share the options' quality either way; the persistent half adds to that.
    assert r_half > r_fresh + 0.05, (r_half, r_fresh)
    with pytest.raises(ValueError, match=r"persistence 1\.5 must lie in"):
        SimParams.from_params({"persistence": 1.5})


def test_call_level_noise_moves_the_three_options_of_a_call_together(
        shipped_catalog: Catalog) -> None:
    def within_call_corr(call_sd: float) -> float:
        s = _scores(shipped_catalog, SimParams(bias_points=0.0, noise_sd=0.5, call_sd=call_sd,
                                               seed=3))
        q = _scores(shipped_catalog, SimParams(bias_points=0.0, noise_sd=0.0, seed=3))
        dev = s - q  # the noise of each score (quality removed; rounding aside)
        return float(np.corrcoef(dev[:, 0], dev[:, 1])[0, 1])

    assert abs(within_call_corr(0.0)) < 0.15
    assert within_call_corr(1.0) > 0.5


def test_no_new_knob_changes_an_answer_of_the_demo_model(shipped_catalog: Catalog) -> None:
    # The knobs draw nothing unless set: answers (and the pinned demo run) stay as they were.
    a = _scores(shipped_catalog, SimParams(bias_points=0.5, seed=9), triplets=10)
    b = _scores(shipped_catalog, SimParams.from_params(
        {"bias_points": 0.5, "seed": 9, "call_sd": 0.0, "persistence": 0.0}), triplets=10)
    assert (a == b).all()


def test_the_realistic_profile_through_litellm_has_the_larger_sd(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert SimParams.from_params({}, profile="realistic").persistence == 0.3
    # The endpoint's params override the profile key by key.
    assert SimParams.from_params({"noise_sd": 0.5}, profile="realistic").noise_sd == 0.5
    assert SimParams.from_params({}, profile="demo") == SimParams()
    sds = {}
    for profile in ("demo", "realistic"):
        folder = tmp_path / profile
        folder.mkdir()
        cfg = write_config(folder, [{"name": profile, "model": f"simulated/{profile}",
                                     "rpm": 100000, "max_concurrency": 64,
                                     "params": {"bias_points": 0.0, "seed": 4}}],
                           sampling={"triplets_per_run": 100})
        assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
        md = json.loads(capsys.readouterr().out)["endpoints"][0]["md"]
        rows = [r for r in md if r["scenario"] == "all" and r["n"] >= 2]
        num = sum((r["n"] - 1) * r["n"] * ((r["ci_upper"] - r["ci_lower"]) / 2 /
                                          t.ppf(0.975, r["n"] - 1)) ** 2 for r in rows)
        sds[profile] = math.sqrt(num / sum(r["n"] - 1 for r in rows))
    assert 0.85 < sds["demo"] < 1.05, sds
    assert 1.15 < sds["realistic"] < 1.5, sds
    assert PROFILES["realistic"]["call_sd"] > 0
