"""A whole history recomputed (monitor.watch.history): the same engine as one run,
and the drift states the daemon persists, on real runs of `monitor probe --once`
(simulated endpoint with refusals and garbled answers, so some triplets are
incomplete) in a real DuckDB file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import duckdb
import pytest

from monitor.catalog import load_catalog
from monitor.cli import main
from monitor.config import CUSUM_H, load_settings
from monitor.context import Context
from monitor.measure import finish_run
from monitor.stats import jsd_of, md_of
from monitor.store import Store
from monitor.watch import evaluate, history
from monitor.watch.reference import detector_h, reference

LOCAL = load_catalog().languages


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four real runs of 36 triplets in six languages (~3% refused, ~3% garbled)."""
    tmp = tmp_path_factory.mktemp("history")
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


def _sql(path: Path, sql: str, params: list[object] | None = None) -> None:
    con = duckdb.connect(str(path))  # a test's own edit of the stored answers
    try:
        con.execute(sql, params or [])
    finally:
        con.close()


def test_each_runs_numbers_in_a_history_are_its_own(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    md = md_of(store, [r.run_id for r in runs], runs[0].languages, LOCAL, by_run=True)
    jsd = jsd_of(store, [r.run_id for r in runs], runs[0].languages,
                 seed={r.run_id: r.seed for r in runs}, by_run=True)
    incomplete = 0
    for run in runs:
        alone = md_of(store, [run.run_id], run.languages, LOCAL)
        mine = [r for r in md if r.group == run.run_id]
        # repr: NaN (no CI at n = 1) equals itself there, to the last bit elsewhere.
        assert [repr((r.scenario, r.country, r.md, r.ci_lower, r.n, r.did)) for r in mine] == [
            repr((r.scenario, r.country, r.md, r.ci_lower, r.n, r.did)) for r in alone]
        stored = {(st.scenario, st.key): st.value for _, st in store.stats_of([run.run_id],
                                                                           kind="md")}
        assert {(r.scenario, r.country): r.md for r in alone} == stored  # as the run wrote
        j_alone = jsd_of(store, [run.run_id], run.languages, seed=run.seed)
        assert [repr((r.jsd_bits, r.p_value, r.ci_lower)) for r in j_alone] == [
            repr((r.jsd_bits, r.p_value, r.ci_lower)) for r in jsd if r.group == run.run_id]
        calls = store.calls_frame([run.run_id])
        incomplete += int((calls["status"] != "ok").sum())
    assert incomplete > 0  # the incomplete-triplet rule was exercised


def test_jsd_ties_of_identical_histograms_count_as_ties(db: Path, tmp_path: Path) -> None:
    """Every answer the same: every permuted histogram equals the observed one, so every
    shuffle ties the plug-in value and p is 1 (a tie counts as >=)."""
    copy = tmp_path / "same.duckdb"
    shutil.copy(db, copy)
    _sql(copy, "UPDATE scores SET score = 5 + (label = 'B')::INT")
    store = Store(copy)
    run = store.runs("sim")[0]
    rows = jsd_of(store, [run.run_id], run.languages, seed=run.seed)
    assert rows and all(r.p_value == 1.0 and r.jsd_bits <= 1e-12 for r in rows)


def test_history_has_md_jsd_and_a_state_for_every_later_run(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    hist = history(store, "sim", LOCAL, baseline_runs=[runs[0].run_id], h=CUSUM_H)
    assert hist.runs == [r.run_id for r in runs]  # in time order
    assert {r.group for r in hist.md} == {r.run_id for r in runs}
    assert {r.group for r in hist.jsd} == {r.run_id for r in runs}
    assert not any(k[0] == runs[0].run_id for k in hist.states)  # the baseline itself
    later = {k: v for k, v in hist.states.items() if k[0] != runs[0].run_id}
    assert {s for s, _ in later.values()} <= {"ok", "pending", "firing"}
    assert any(z is not None for _, z in later.values())


def test_history_states_are_those_the_daemon_persists(db: Path, tmp_path: Path) -> None:
    """watch.evaluate after each run (what a run's review does, storing what it returns)
    reaches the states that history() replays, run after run."""
    copy = tmp_path / "daemon.duckdb"
    shutil.copy(db, copy)
    runs = Store(copy).runs("sim")
    # Later runs favour the English-speaking options in English: MD drifts up, then breaches.
    _sql(copy, "UPDATE scores SET score = least(10, score + 3) WHERE run_id <> ? AND "
               "language = 'en'", [runs[0].run_id])
    store, catalog = Store(copy), load_catalog()
    settings, _ = load_settings(db.parent / "monitor.yaml")
    store.set_baseline("sim", [runs[0]], auto=False)
    ctx = Context(settings, catalog, store)
    # The h the daemon sizes against this baseline (thresholds.cusum_h: auto).
    h, _ = detector_h(ctx, runs[1], reference(ctx, runs[1]))
    hist = history(store, "sim", LOCAL, jsd=False, h=h)  # the active baseline by default
    assert {"pending", "firing"} <= {s for s, _ in hist.states.values()}  # it left OK
    for run in runs[1:]:
        result = finish_run(ctx, run)
        ev = evaluate(ctx, result.run, result.summary, ref=reference(ctx, result.run))
        assert ev.comparable, ev.note
        store.save_alert_states("sim", ev.cells, ev.events)  # as the run's review does
        mine = {(s, c): v for (r, s, c), v in hist.states.items() if r == run.run_id}
        assert mine == {k: (v.state, v.z) for k, v in ev.states.items()}


def test_history_since_keeps_the_states_of_the_whole_history(db: Path) -> None:
    store = Store(db)
    runs = store.runs("sim")
    full = history(store, "sim", LOCAL, baseline_runs=[runs[0].run_id], jsd=False, h=CUSUM_H)
    late = history(store, "sim", LOCAL, since=runs[2].started_at,
                   baseline_runs=[runs[0].run_id], jsd=False, h=CUSUM_H)
    assert late.runs == [r.run_id for r in runs[2:]]
    assert {r.group for r in late.md} == set(late.runs)
    # The CUSUM carries over from runs before `since`: the same states as the full history.
    assert {k: v for k, v in full.states.items() if k[0] in late.runs} == {
        k: v for k, v in late.states.items() if k[0] in late.runs}


def test_no_runs_gives_an_empty_history(tmp_path: Path) -> None:
    hist = history(Store(tmp_path / "empty.duckdb"), "nobody", LOCAL)
    assert hist.runs == [] and hist.md == [] and hist.states == {}


def test_an_auto_h_must_be_given_to_replay(db: Path) -> None:
    # thresholds.cusum_h: auto (the default) is sized against the baseline with the
    # catalog's cells, which a replay does not have: it says so instead of guessing.
    store = Store(db)
    runs = store.runs("sim")
    with pytest.raises(ValueError, match="cusum_h is auto; pass the h"):
        history(store, "sim", LOCAL, baseline_runs=[runs[0].run_id], jsd=False)


def test_the_replay_watches_per_scenario_cells_as_the_daemon_does() -> None:
    """A shift of 1.5 points in CN, pooled and in its university cell: the pooled cell
    fires in the replay, the scenario cell stays pending with the watch reason's state
    (the daemon holds it there; the replay showed it FIRING)."""
    from monitor.config import Alerts, Thresholds
    from monitor.stats import MDRow
    from monitor.watch.history import replay

    def row(scenario: str, md: float, group: str) -> MDRow:
        return MDRow(scenario=scenario, country="CN", language="zh", md=md, ci_lower=md - 0.3,
                     ci_upper=md + 0.3, se=0.15, n=40, did=md, did_ci_lower=md - 0.3,
                     did_ci_upper=md + 0.3, group=group)

    base = [row("all", 0.0, "pooled"), row("university", 0.0, "pooled")]
    runs = [f"r{i}" for i in range(6)]
    md = [row(sc, 1.5, r) for r in runs for sc in ("all", "university")]
    states = replay(md, base, runs, thresholds=Thresholds(), alerts=Alerts(), h=7.0)
    assert states[("r5", "all", "CN")][0] == "firing"
    scen = [states[(r, "university", "CN")][0] for r in runs]
    assert "pending" in scen and "firing" not in scen
