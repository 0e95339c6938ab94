"""`monitor plan`: run size, CUSUM h and cost from sd, delta and the targets."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from monitor.catalog import Catalog
from monitor.cli import main
from monitor.watch.plan import cell_shares, make_plan, one_shot_n, simulate
from tests.support.helpers import write_config

SIM = {"name": "sim", "model": "simulated/demo", "max_concurrency": 32, "rpm": 100000,
       "params": {"bias_points": {"CN": 0.6, "KR": 0.3}, "noise_sd": 1.0, "seed": 3},
       "cost_per_1k_tokens": {"input": 0.5, "output": 1.5}}
LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
SCEN = ["university", "relocation", "travel"]


def _plan(cfg: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, Any]:
    assert main(["plan", "--config", str(cfg), "--json", *extra]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def test_engine_matches_the_closed_form_one_shot_power() -> None:
    # statistics.md: n = ((z.975 + z.8) sd / delta)^2 = 71 for sd 1.5, delta 0.5.
    n = one_shot_n(1.5, 0.5)
    assert n == 71
    # One run, one alarm enough, a baseline so long its error vanishes: the LLR
    # increment delta/v (x - delta/2) exceeds h exactly when x > 1.96 sqrt(v) for
    # h = delta/v (1.96 sqrt(v) - delta/2), i.e. the one-shot test, whose power at
    # that n is 0.8.
    delta, v = 0.5, 1.5**2 / n
    h = delta / v * (1.959964 * math.sqrt(v) - delta / 2)
    fired = simulate(np.array([n]), 1.5, shift=0.5, hs=np.array([h]), base_runs=100_000,
                     drift_points=delta, min_runs_firing=1, runs=1, reps=20_000, seed=1)
    assert 0.78 <= fired.mean() <= 0.82


def test_no_shift_rarely_fires_and_a_higher_h_fires_less() -> None:
    fired = simulate(np.array([20, 8]), 1.0, shift=0.0, hs=np.array([3.0, 8.0]), base_runs=10,
                     drift_points=0.3, min_runs_firing=2, runs=100, reps=200)
    per_100 = fired.sum(axis=(1, 2, 3)) / 200
    assert per_100[0] > per_100[1] and per_100[1] < 3


def test_larger_sd_needs_more_triplets_and_a_smaller_delta_too(
        shipped_catalog: Catalog) -> None:
    cells = cell_shares(shipped_catalog, SCEN, LANGS)
    kw: dict[str, Any] = {"drift_points": 0.3, "min_runs_firing": 2, "auto_min_triplets": None}
    low = make_plan(cells, 0.8, 0.5, 1.0, 3, **kw)
    high = make_plan(cells, 1.6, 0.5, 1.0, 3, **kw)
    small = make_plan(cells, 0.8, 0.35, 1.0, 3, **kw)
    assert low["reachable"] and high["reachable"] and small["reachable"]
    assert high["triplets_per_run"] > low["triplets_per_run"]
    assert small["triplets_per_run"] > low["triplets_per_run"]
    # Detection within 3 runs needs about a one-shot test's worth of triplets per cell
    # over those runs: not wildly fewer, not wildly more.
    smallest = min(low["triplets_per_cell"].values())
    assert one_shot_n(0.8, 0.5) / 3 <= smallest <= 3 * one_shot_n(0.8, 0.5)
    assert low["expected"]["p_detect"] >= 0.8
    assert low["expected"]["false_alarms_per_100"] <= 1.0


def test_json_with_given_sd_and_no_database_created(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [SIM], schedule={"every": "6h", "cron": None})
    doc = _plan(cfg, capsys, "--sd", "1.0", "--delta", "0.5")
    (p,) = doc["plans"]
    assert p["endpoint"] == "sim" and p["sd_source"] == "--sd" and p["reachable"] is True
    assert set(p["triplets_per_cell"]) == {"US", "GB", "CA", "AU", "JP", "CN", "FR", "DE", "KR"}
    assert p["calls_per_day"] == p["triplets_per_run"] * 6 * 4
    assert p["cusum"]["h"] > 0 and 0 < p["cusum"]["gain_min"] <= p["cusum"]["gain_max"]
    assert p["cost_per_day_usd"] is None and p["cost_note"].startswith("unknown")
    assert p["one_shot_triplets_per_cell"] == one_shot_n(1.0, 0.5)
    assert not (tmp_path / "monitor.duckdb").exists()  # planning never creates a database
    assert p["read"] == {"share": {}, "runs": 0,
                         "source": "no stored runs: every answer counted as read (1.0)"}
    assert p["calls_per_run"] == p["triplets_per_run"] * 6


def test_the_plan_scales_by_the_answers_the_endpoints_runs_read(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Half the Korean answers refused: the planned run grows so that KR's cell still
    holds its usable triplets, and the plan says which shares it used, from how many runs."""
    lossy = {**SIM, "params": {**SIM["params"], "refusal_rate": {"ko": 0.5}}}
    cfg = write_config(tmp_path, [lossy], sampling={"triplets_per_run": 40},
                       schedule={"every": "6h", "cron": None})
    args = ("--sd", "1.0", "--delta", "0.5", "--baseline-triplets", "2000")
    (before,) = _plan(cfg, capsys, *args)["plans"]
    for _ in range(2):
        assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
    capsys.readouterr()
    (after,) = _plan(cfg, capsys, *args)["plans"]
    read = after["read"]
    assert read["runs"] == 2 and set(read["share"]) == set(LANGS)
    assert 0.35 < read["share"]["ko"] < 0.65 and read["share"]["en"] == 1.0
    assert read["source"].startswith("answers read per language on the latest 2 runs: en 100%")
    assert f"ko {read['share']['ko']:.0%}" in read["source"]
    # KR (ko) limits the plan now: more triplets and calls per run, KR's usable n about
    # the smallest cell's before (grid steps apart); the other cells hold their asked share.
    assert after["triplets_per_run"] > before["triplets_per_run"]
    assert after["calls_per_run"] == after["triplets_per_run"] * 6
    assert after["calls_per_day"] == after["calls_per_run"] * 4
    assert after["triplets_per_cell"]["KR"] >= 0.8 * min(before["triplets_per_cell"].values())
    assert after["triplets_per_cell"]["KR"] == min(after["triplets_per_cell"].values())
    n, m = after["triplets_per_run"], before["triplets_per_run"]
    us = after["triplets_per_cell"]["US"]
    assert abs(us - before["triplets_per_cell"]["US"] * n / m) <= 1 + 0.05 * us
    ratio = after["triplets_per_cell"]["KR"] / (before["triplets_per_cell"]["KR"] * n / m)
    assert abs(ratio - read["share"]["ko"]) < 0.05
    assert main(["plan", "--config", str(cfg), *args]) == 0
    assert "sized for usable triplets, answers read per language on the latest 2 runs" \
        in capsys.readouterr().out


def test_sd_estimated_from_a_real_probe_runs_baseline(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [SIM], sampling={"triplets_per_run": 40},
                       schedule={"every": "1d", "cron": None})
    assert main(["plan", "--config", str(cfg)]) == 2  # nothing stored, no --sd
    err = capsys.readouterr().err
    assert "no baseline and no complete run" in err and "--sd" in err
    assert "`monitor baseline calibrate`" in err and "`monitor probe --once`" in err
    assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
    capsys.readouterr()
    # Runs stored, no baseline yet: the sd comes from the runs an automatic one would take.
    (before,) = _plan(cfg, capsys, "--delta", "0.5", "--baseline-triplets", "2000")["plans"]
    assert before["sd_source"] == "stored runs (1 runs, 40 triplets; no baseline yet)"
    assert main(["baseline", "set", "--latest", "1", "--config", str(cfg)]) == 0
    capsys.readouterr()
    # A baseline the user set stays until replaced: one run of 40 triplets carries an
    # error every later run shares, too large for the target at any run size.
    (small,) = _plan(cfg, capsys, "--delta", "0.5")["plans"]
    assert small["reachable"] is False and small["baseline_triplets"] == 40
    assert small["baseline_model"] == "the stored baseline, set by the user"
    assert main(["plan", "--config", str(cfg), "--delta", "0.5"]) == 0
    assert "`monitor baseline calibrate` sets a larger one" in capsys.readouterr().out
    (p,) = _plan(cfg, capsys, "--delta", "0.5", "--baseline-triplets", "2000")["plans"]
    assert p["sd_source"].startswith("baseline (1 runs, 40 triplets)")
    assert p["sd"] == before["sd"]  # the same run, as baseline or not
    # noise_sd 1 on integer scores: sd of d = sqrt(5/6 * (1 + 1/12)) ~ 0.95 per option.
    assert 0.6 < p["sd"] < 1.3
    assert p["mean_tokens_per_call"] > 0
    assert p["cost_per_day_usd"] > 0 and "cost_per_1k_tokens" in p["cost_note"]
    assert p["calls_per_day"] == p["triplets_per_run"] * 6
    # The same plan with that sd given by hand: identical (seeded, deterministic).
    (q,) = _plan(cfg, capsys, "--delta", "0.5", "--sd", str(p["sd"]),
                 "--baseline-triplets", "2000")["plans"]
    assert q["triplets_per_run"] == p["triplets_per_run"] and q["cusum"] == p["cusum"]


@pytest.mark.parametrize("extra, words", [
    (["--sd", "0"], "--sd must be positive"),
    (["--sd", "abc"], "--sd 'abc' is not a number"),
    (["--sd", "1", "--delta", "-0.2"], "--delta must be positive"),
    (["--sd", "1", "--false-alarms-per-100", "x"], "is not a number"),
    (["--sd", "1", "--within-runs", "1.5"], "is not a whole number"),
    (["--sd", "1", "--within-runs", "1"], "min_runs_firing"),
    (["--sd", "1", "--endpoint", "nope"], "no endpoint named 'nope'"),
])
def test_bad_input_exits_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                         extra: list[str], words: str) -> None:
    cfg = write_config(tmp_path, [SIM])
    assert main(["plan", "--config", str(cfg), *extra]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("monitor: error:") and words in err


def test_unreachable_target_is_reported_not_invented(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [SIM])
    (p,) = _plan(cfg, capsys, "--sd", "5", "--delta", "0.1")["plans"]
    assert p["reachable"] is False and p["triplets_per_run"] is None
    assert p["calls_per_day"] is None and p["cusum"] is None
    assert main(["plan", "--config", str(cfg), "--sd", "5", "--delta", "0.1"]) == 0
    assert "not reachable" in capsys.readouterr().out


def test_the_sprt_top_up_of_a_certain_shift_confirms_at_alpha_rate() -> None:
    # The sequential test alone (a baseline so long its error vanishes, the suspect
    # level at 0 so every cell is topped up every run): with no shift it confirms at
    # most alpha of the time (Wald), with a shift of delta at about 1 - beta.
    from monitor.config import Topup
    from monitor.watch.plan_topup import simulate_topup
    # suspect_h 0 is below what the config allows: built as the simulation takes it
    tp = Topup.model_construct(suspect_h=0.0, alpha=0.05, beta=0.1, batch_triplets=5,
                               max_triplets=2000)
    base = np.array([10**7])
    kw: dict[str, Any] = {"h": 1e9, "tp": tp, "base_triplets": base, "drift_points": 0.5,
                          "min_runs_firing": 2, "runs": 1, "reps": 4000}
    null = simulate_topup(np.array([1]), 1.0, shift=0.0, **kw)
    real = simulate_topup(np.array([1]), 1.0, shift=0.5, **kw)
    # One run of one triplet picks the side (up with p 0.6 under the shift, down 0.23),
    # and a top-up on the wrong side cannot confirm: about 0.6 * 0.9 confirm.
    assert null.fired.mean() <= 0.05
    assert 0.5 <= real.fired.mean() <= 0.6
    assert (null.asked > 0).mean() > 0.3 and null.asked.max() <= 2000


def test_plan_reports_the_detector_with_its_top_up(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [SIM], sampling={"triplets_per_run": 40})
    doc = _plan(cfg, capsys, "--sd", "0.95", "--baseline-triplets", "3000")
    top = doc["plans"][0]["topup"]
    assert top["suspect_h"] == 2.5 and top["max_triplets"] == 300
    now = top["current"]
    assert now["triplets_per_run"] == 40 and now["triplets_asked_mean"] > 40
    assert now["triplets_asked_max"] <= 40 + 9 * 300
    assert 0 <= now["false_alarms_per_100"] <= now["false_alarms_per_100_spread"]["max"]
    assert top["plan"] is None or top["plan"]["p_detect"] >= 0.8
    (tmp_path / "off").mkdir()
    off = write_config(tmp_path / "off", [SIM], topup={"enabled": False})
    assert _plan(off, capsys, "--sd", "0.95")["plans"][0]["topup"] is None
    assert main(["plan", "--config", str(off), "--sd", "0.95"]) == 0
    assert "top-up: off (topup.enabled)" in capsys.readouterr().out


def test_plan_with_persistence_sizes_the_detector_that_uses_the_covariate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = write_config(tmp_path, [SIM], sampling={"triplets_per_run": 40})
    args = ("--sd", "0.95", "--baseline-triplets", "1919")
    none = _plan(cfg, capsys, *args)["plans"][0]["topup"]
    with_p = _plan(cfg, capsys, *args, "--persistence", "0.6")["plans"][0]["topup"]
    assert none["persistence"] == {"rho": 0.0, "source": "none measured yet",
                                   "sd_seen_by_the_detector": 0.95}
    assert with_p["persistence"]["sd_seen_by_the_detector"] == pytest.approx(0.95 * 0.8)
    # The detector sees 0.64 of the variance: fewer triplets per run meet the target.
    assert with_p["plan"]["triplets_per_run"] < none["plan"]["triplets_per_run"]
    assert with_p["current"]["p_detect"] > none["current"]["p_detect"]
    assert main(["plan", "--config", str(cfg), *args, "--persistence", "0.6"]) == 0
    assert "the baseline as covariate (CUPED): persistence 0.6" in capsys.readouterr().out
    assert main(["plan", "--config", str(cfg), *args, "--persistence", "1.5"]) == 2
    assert "--persistence 1.5: must lie in [0, 1)" in capsys.readouterr().err
    (tmp_path / "off").mkdir()
    off = write_config(tmp_path / "off", [SIM], baseline={"covariate": False})
    top = _plan(off, capsys, *args, "--persistence", "0.6")["plans"][0]["topup"]
    assert top["persistence"]["rho"] == 0.0
    assert top["persistence"]["source"] == "baseline.covariate is off"
