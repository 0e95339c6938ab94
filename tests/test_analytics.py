"""The DuckDB history path (monitor/analytics.py) gives the numbers of stats.py:
real runs of `monitor probe --once` on the simulated endpoint (with refusals
and garbled answers, so some triplets are incomplete) in a real DuckDB file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from monitor.catalog import load_catalog
from monitor.cli import main
from monitor.stats import jsd_table, md_table
from monitor.store import Store
from monitor.watch.history import HISTORY_COLUMNS, drift_replay, history, jsd_frame, md_frame

MD_VALUES = ["md", "ci_lower", "ci_upper", "se", "n", "did", "did_ci_lower", "did_ci_upper"]
JSD_VALUES = ["jsd_bits", "ci_lower", "ci_upper", "p_value", "n", "plugin_bits",
              "js_distance_bits", "js_distance_nat"]
LOCAL = {lang: list(c) for lang, c in load_catalog().languages.items()}


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four real runs of 36 triplets in six languages (~3% refused, ~3% garbled)."""
    tmp = tmp_path_factory.mktemp("analytics")
    cfg = tmp / "monitor.yaml"
    cfg.write_text(json.dumps({
        "storage": {"path": str(tmp / "monitor.duckdb")},
        "endpoints": [{"name": "sim", "model": "simulated/demo", "max_concurrency": 32,
                       "rpm": 100000, "params": {"bias_points": {"CN": 0.9, "KR": 0.6},
                                                 "noise_sd": 1.0, "refusal_rate": 0.03,
                                                 "garble_rate": 0.03, "seed": 1}}],
        "sampling": {"triplets_per_run": 36, "seed": 0}}), encoding="utf-8")
    for _ in range(4):
        assert main(["probe", "--once", "--config", str(cfg), "--json"]) in (0, 1)
    return tmp / "monitor.duckdb"


def _sorted(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.sort_values(keys, ignore_index=True)


def _assert_md_equal(got: pd.DataFrame, want: pd.DataFrame) -> None:
    got, want = _sorted(got, ["scenario", "country"]), _sorted(want, ["scenario", "country"])
    assert got[["scenario", "country", "language"]].values.tolist() == \
        want[["scenario", "country", "language"]].values.tolist()
    np.testing.assert_allclose(got[MD_VALUES].to_numpy(float), want[MD_VALUES].to_numpy(float),
                               rtol=1e-9, atol=1e-12, equal_nan=True)


def test_md_per_run_equals_md_table(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    got = md_frame(store, runs[0].languages, LOCAL, endpoint="sim")
    assert set(got["run_id"]) == {r.run_id for r in runs}
    incomplete = 0
    for run in runs:
        scores = store.scores_frame([run.run_id])
        incomplete += scores.groupby("triplet_id").size().lt(3 * len(run.languages)).sum()
        _assert_md_equal(got[got["run_id"] == run.run_id],
                         md_table(scores, run.languages, LOCAL))
    assert incomplete > 0  # the incomplete-triplet rule was exercised


def test_pooled_md_equals_md_table_of_the_runs_together(db: Path) -> None:
    store = Store(db)
    ids = [r.run_id for r in store.runs("sim")[:3]]
    got = md_frame(store, store.runs("sim")[0].languages, LOCAL, run_ids=ids, pooled=True)
    assert set(got["run_id"]) == {"pooled"}
    _assert_md_equal(got, md_table(store.scores_frame(ids), store.runs("sim")[0].languages,
                                   LOCAL))


def _assert_jsd_equal(store: Store, seed: int | None = None) -> None:
    runs = store.runs("sim")
    seeds = {r.run_id: r.seed if seed is None else seed for r in runs}
    got = jsd_frame(store, runs[0].languages, seeds, endpoint="sim")
    for run in runs:
        want = _sorted(jsd_table(store.scores_frame([run.run_id]), run.languages,
                                 seed=seeds[run.run_id]), ["scenario", "language"])
        mine = got[got["run_id"] == run.run_id].reset_index(drop=True)
        assert mine[["scenario", "language"]].values.tolist() == \
            want[["scenario", "language"]].values.tolist()
        # The same random draws: p-values are equal, estimates and CIs to rounding.
        assert mine["p_value"].tolist() == want["p_value"].tolist()
        np.testing.assert_allclose(mine[JSD_VALUES].to_numpy(float),
                                   want[JSD_VALUES].to_numpy(float), rtol=1e-9, atol=1e-12)


def test_jsd_per_run_equals_jsd_table(db: Path) -> None:
    _assert_jsd_equal(Store(db))
    _assert_jsd_equal(Store(db), seed=7)  # another seed: other draws, still the same


def test_jsd_ties_of_identical_histograms_count_as_in_stats(db: Path, tmp_path: Path) -> None:
    """Every answer the same: every permuted histogram equals the observed one."""
    copy = tmp_path / "same.duckdb"
    shutil.copy(db, copy)
    store = Store(copy)
    store.query("UPDATE scores SET score = 5 + (label = 'B')::INT")
    _assert_jsd_equal(store)


def test_history_has_md_jsd_and_drift_states_for_every_run(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    hist = history(store, "sim", baseline_runs=[runs[0].run_id], local=LOCAL)
    assert list(hist.columns) == HISTORY_COLUMNS
    assert set(hist["kind"]) == {"md", "jsd"}
    assert list(dict.fromkeys(hist["run_id"])) == [r.run_id for r in runs]  # in time order
    md = hist[hist["kind"] == "md"]
    assert md[md["run_id"] == runs[0].run_id]["state"].isna().all()  # the baseline itself
    later = md[md["run_id"] != runs[0].run_id]
    assert later["state"].isin(["ok", "pending", "firing"]).all()
    assert later["z"].notna().any()
    # The states are drift.step replayed on md_table's numbers.
    want_md = pd.concat([md_table(store.scores_frame([r.run_id]), r.languages, LOCAL)
                         .assign(run_id=r.run_id) for r in runs])
    base = md_table(store.scores_frame([runs[0].run_id]), runs[0].languages, LOCAL)
    want = drift_replay(want_md, base, [r.run_id for r in runs[1:]])
    mine = later[["run_id", "scenario", "key", "state"]].rename(columns={"key": "country"})
    assert _sorted(mine, ["run_id", "scenario", "country"]).values.tolist() == \
        _sorted(want[["run_id", "scenario", "country", "state"]],
                ["run_id", "scenario", "country"]).values.tolist()


def test_history_states_are_those_the_daemon_persists(db: Path, tmp_path: Path) -> None:
    """watch.evaluate after each run (what the daemon does) reaches the states
    that history() replays, run after run."""
    from monitor.config import load_settings
    from monitor.measure.run import finish_run
    from monitor.watch.evaluate import evaluate

    copy = tmp_path / "daemon.duckdb"
    shutil.copy(db, copy)
    store, catalog = Store(copy), load_catalog()
    settings, _ = load_settings(db.parent / "monitor.yaml")
    runs = store.runs("sim")
    # Later runs favour the English-speaking options in English: MD drifts up, then breaches.
    store.query("UPDATE scores SET score = least(10, score + 3) WHERE run_id <> ? AND "
                "language = 'en'", [runs[0].run_id])
    store.set_baseline("sim", [runs[0].run_id], runs[0].catalog_version,
                       store.run_models([runs[0].run_id])[runs[0].run_id], auto=False)
    hist = history(store, "sim", local=LOCAL, jsd=False)  # the active baseline by default
    assert {"pending", "firing"} <= set(hist["state"])  # the replay left OK
    for run in runs[1:]:
        ev = evaluate(settings, catalog, store, finish_run(settings, catalog, store, run))
        assert ev.comparable, ev.note
        mine = {(r.scenario, r.key): (r.state, None if pd.isna(r.z) else round(r.z, 9))
                for r in hist[hist["run_id"] == run.run_id].itertuples()}
        assert mine == {k: (v.state, None if v.z is None else round(v.z, 9))
                        for k, v in ev.states.items()}


def test_history_since_keeps_the_states_of_the_whole_history(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    full = history(store, "sim", baseline_runs=[runs[0].run_id], local=LOCAL, jsd=False)
    late = history(store, "sim", runs[2].started_at, baseline_runs=[runs[0].run_id],
                   local=LOCAL, jsd=False)
    assert set(late["run_id"]) == {r.run_id for r in runs[2:]}
    # The CUSUM carries over from runs before `since`: same states as the full history.
    cols = ["run_id", "scenario", "key", "value", "state"]
    mine = late.reset_index(drop=True)
    theirs = full[full["run_id"].isin(late["run_id"])].reset_index(drop=True)
    assert mine[cols].equals(theirs[cols])
    # z to the last bits: DuckDB's parallel aggregation may sum the SEs in another
    # order from one query to the next (4e-16 seen), which is not a different state.
    np.testing.assert_allclose(mine["z"].to_numpy(float), theirs["z"].to_numpy(float),
                               rtol=1e-12, atol=1e-12, equal_nan=True)


def test_no_runs_gives_an_empty_history(tmp_path: Path) -> None:
    hist = history(Store(tmp_path / "empty.duckdb"), "nobody", local=LOCAL)
    assert hist.empty and list(hist.columns) == HISTORY_COLUMNS
