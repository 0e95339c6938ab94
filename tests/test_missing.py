"""Every answered cell used (monitor.stats.missing): on complete data nothing changes; with
answers missing more in a lenient language, MD is still what was injected."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from monitor.stats.md import md_rows
from monitor.stats.missing import fill
from monitor.store import UnitScores
from monitor.vocab import POOLED

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
LOCAL = [("US", "en"), ("JP", "ja"), ("CN", "zh"), ("FR", "fr"), ("DE", "de"), ("KR", "ko")]
BIAS = {"CN": 1.2, "KR": 0.6}
SHIFT = np.array([0.0, -0.3, 0.0, 0.0, -0.2, 1.0])  # ko lenient to every option
LOSS = np.array([0.05, 0.10, 0.20, 0.10, 0.15, 0.30])  # ko loses most


def _units(n: int, seed: int, *, lose: bool) -> UnitScores:
    rng = np.random.default_rng(seed)
    country = rng.integers(0, len(LOCAL), size=(n, 3))
    quality = rng.uniform(4.5, 7.5, size=(n, 1, 3))
    local = np.array([[LANGS.index(LOCAL[c][1]) for c in row] for row in country])
    is_local = np.arange(len(LANGS))[None, :, None] == local[:, None, :]
    bias = np.vectorize(lambda c: BIAS.get(LOCAL[c][0], 0.0))(country)[:, None, :]
    score = quality + SHIFT[None, :, None] + bias * is_local + rng.normal(0, 1, (n, 6, 3))
    hundredths = np.rint(np.clip(score, 1, 10) * 100).astype(np.int64)
    # a call answers its three options or none: a language's answer is lost as a whole
    answered = np.repeat(rng.random((n, 6, 1)) >= (LOSS[None, :, None] if lose else 0), 3, 2)
    return UnitScores(languages=LANGS, groups=["pooled"], group=np.zeros(n, np.int32),
                      scenarios=["s"], scenario=np.zeros(n, np.int32),
                      countries=[c for c, _ in LOCAL], country=country.astype(np.int32),
                      scores=np.where(answered, hundredths, 0),
                      triplet=np.arange(n, dtype=np.uint64),
                      answered=answered)


def _pooled(units: UnitScores) -> dict[str, tuple[float, float, float, int]]:
    return {r.country: (r.md, r.ci_lower, r.ci_upper, r.n)
            for r in md_rows(units, LOCAL) if r.scenario == POOLED}


def test_complete_data_is_left_as_it_is() -> None:
    units = _units(300, 1, lose=False)
    assert fill(units) is units
    assert _pooled(fill(units)) == _pooled(units.complete())


def test_missing_answers_fill_from_the_language_effects_and_md_stays_unbiased() -> None:
    """With ~16% of answers lost (30% in ko, the lenient language), complete units are
    ~35% of all: the filled estimator keeps every unit whose local answer was read, and
    its MD holds the injected one; dropping ko's leniency from the fill (each missing
    cell at its row's answered mean) would move MD by ~0.3 / 6 per lost ko answer."""
    units = _units(3000, 7, lose=True)
    assert units.complete().scores.shape[0] < 0.45 * 3000
    md = _pooled(fill(units))
    for country, lang in LOCAL:
        # MD holds the language's leniency too (DiD takes it out)
        expected = BIAS.get(country, 0.0) * 5 / 6 + SHIFT[LANGS.index(lang)] - SHIFT.mean()
        _, lo, hi, n = md[country]
        assert lo - 0.05 <= expected <= hi + 0.05, (country, md[country])
        holding = (units.country == [c for c, _ in LOCAL].index(country)).any(axis=1)
        local_read = (units.answered[:, LANGS.index(lang), 0]
                      & (units.answered[:, :, 0].sum(axis=1) >= 2))
        assert n == int((holding & local_read).sum())
    filled = fill(units)
    assert (filled.scores[units.answered] == units.scores[units.answered]).all()


def _groups(parts: list[UnitScores]) -> UnitScores:
    """The parts as groups (runs) of one UnitScores, in order."""
    return UnitScores(languages=LANGS, groups=[f"r{i}" for i in range(len(parts))],
                      group=np.concatenate([np.full(u.scores.shape[0], i, np.int32)
                                            for i, u in enumerate(parts)]),
                      scenarios=["s"], scenario=np.concatenate([u.scenario for u in parts]),
                      countries=parts[0].countries,
                      country=np.concatenate([u.country for u in parts]),
                      scores=np.concatenate([u.scores for u in parts]),
                      triplet=np.concatenate([u.triplet for u in parts]),
                      answered=np.concatenate([u.answered for u in parts]))


def test_a_run_is_filled_the_same_alone_and_with_other_runs() -> None:
    """One engine for one run and for many: the report's history (md_of by run over every
    run) found a run's MD a hundredth of a point off the one the daemon computed for it
    alone, because one global stop iterated its fit further when other runs were in it."""
    # Runs of 12 triplets: the old global stop filled a cell otherwise in these two sets
    # (seeds 10-13 and 140-143; 5 of 60 such sets).
    for first in (10, 140):
        parts = [_units(12, first + k, lose=True) for k in range(4)]
        together = fill(_groups(parts)).scores
        start = 0
        for part in parts:
            alone = fill(_groups([part])).scores
            assert (together[start:start + len(alone)] == alone).all(), first
            start += len(alone)


def test_a_run_on_the_lossy_profile_uses_the_answers_the_complete_rule_dropped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The simulated `lossy` profile refuses or garbles 5-20% per language; the run's
    JSON says how much was used: far more answers than the complete triplets hold."""
    from monitor.cli import main

    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(json.dumps({
        "storage": {"path": str(tmp_path / "m.duckdb")},
        "endpoints": [{"name": "lossy", "model": "simulated/lossy", "rpm": 100000,
                       "max_concurrency": 16, "params": {"bias_points": {"CN": 0.9}}}],
        "sampling": {"triplets_per_run": 40, "seed": 0}}), encoding="utf-8")
    assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
    ep = json.loads(capsys.readouterr().out)["endpoints"][0]
    use = ep["usable"]
    cov = {r["language"]: r["ratio"] for r in ep["coverage"]}
    assert min(cov.values()) < 0.95 and len(set(cov.values())) > 2  # losses differ
    assert use["triplets"] == 40 and use["complete"] < 36
    assert use["answers_used"] >= 0.9 * (use["answers_asked"] * min(cov.values()))
    assert use["answers_used"] > use["complete"] * 6
    cn = next(r for r in ep["md"] if r["country"] == "CN" and r["scenario"] == "all")
    assert cn["n"] > 0
    # the report says it too, in its headline and its JSON
    out = tmp_path / "report"
    assert main(["report", "--config", str(cfg), "--out", str(out)]) == 0
    capsys.readouterr()
    doc = json.loads((out / "lossy.json").read_text(encoding="utf-8"))
    assert doc["usable"]["answers_used"] == use["answers_used"]
    assert "answers used by MD" in doc["headline"]


def test_monitor_runs_shows_what_each_run_used_as_probe_says_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`monitor runs` counts a lossy run's usable data with the rule `probe --once` uses:
    fewer answers used than asked, the same numbers in its JSON and its text."""
    from monitor.cli import main

    cfg = tmp_path / "monitor.yaml"
    cfg.write_text(json.dumps({
        "storage": {"path": str(tmp_path / "m.duckdb")},
        "endpoints": [{"name": "lossy", "model": "simulated/lossy", "rpm": 100000,
                       "max_concurrency": 16}],
        "sampling": {"triplets_per_run": 30, "seed": 1}}), encoding="utf-8")
    probed = []
    for _ in range(2):
        assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
        probed.append(json.loads(capsys.readouterr().out)["endpoints"][0])
    assert main(["runs", "--config", str(cfg), "--json"]) == 0
    runs = {r["run_id"]: r for r in json.loads(capsys.readouterr().out)["runs"]}
    assert len(runs) == 2
    for ep in probed:
        use = runs[ep["run_id"]]["usable"]
        assert use == ep["usable"]
        assert 0 < use["answers_used"] < use["answers_asked"] == runs[ep["run_id"]]["calls"]
        assert use["complete"] < use["triplets"] == 30
    assert main(["runs", "--config", str(cfg)]) == 0
    text = capsys.readouterr().out
    for ep in probed:
        use = ep["usable"]
        line = next(x for x in text.splitlines() if x.startswith(ep["run_id"]))
        share = round(100 * use["answers_used"] / use["answers_asked"])
        assert f" {use['complete']}/{use['triplets']} {share:>3}% " in line, line
