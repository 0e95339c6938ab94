"""Storage: schema versioning, refusing foreign files, batched writes, runs and stats."""

from __future__ import annotations

import hashlib
import math
import os
from dataclasses import replace
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from monitor.errors import StoreError
from monitor.store import (
    APP,
    CALL_COLUMNS,
    MIGRATIONS,
    SCORE_COLUMNS,
    AlertEvent,
    CellRecord,
    RunRow,
    StatRow,
    Store,
)

LANGS = ["en", "ja", "zh", "fr", "de", "ko"]
SCENARIOS = ["university", "relocation", "travel"]
VARIANTS = ["plain", "cot", "female", "male"]
TEXTS = [
    "Option A: Harvard University\nScore: 8\nStrengths: 1. ...",
    "选项A：北京大学\n评分：9\n优点：历史悠久、学术声誉高",
    "選択肢B：東京大学　スコア：７（全角）",
    "선택지 C: 서울대학교 — 점수: 6",
    "Note: l'université « Sorbonne » — 7/10; Straße; naïve café",
    'emoji 🎓🌏👩‍🔬 and quotes \' " ` and a backslash \\ and a tab\t',
    "עברית ومرحبا mixed RTL text",
]
TZS = [UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5, minutes=-30))]


# -- builders -----------------------------------------------------------------------------


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _columns(rows: list[dict[str, Any]], cols: tuple[tuple[str, str], ...]) -> dict[str, list[Any]]:
    return {c: [r[c] for r in rows] for c, _ in cols}


def _call(run_id: str, i: int, *, status: str = "ok", **over: Any) -> dict[str, Any]:
    """One probe_calls row shaped like monitor.measure.run._records builds it."""
    scenario = SCENARIOS[i % 3]
    failed = status == "failed"
    sparse = i % 7 == 3  # a provider that reports no usage, cost or fingerprint
    row: dict[str, Any] = {
        "run_id": run_id, "triplet_id": f"{scenario}:t{i // len(LANGS):04d}",
        "language": LANGS[i % len(LANGS)], "endpoint": "gpt4o-prod", "scenario": scenario,
        "target_id": f"opt-{i % 11}", "pair_id": f"p{i % 100:03d}",
        "variant": VARIANTS[i % 4], "option_order": "opt-1,opt-2,opt-3",
        "prompt_hash": hashlib.sha256(str(i).encode()).hexdigest()[:16],
        "catalog_version": "2024.1-abc123", "status": status,
        "detail": None if status == "ok" or failed else f"{status}: no scores found",
        "raw_text": None if failed else TEXTS[i % len(TEXTS)] + f" #{i}",
        "error": "Timeout: request took longer than 60s" if failed else None,
        "latency_s": None if failed else 0.25 + i / 1000,
        "input_tokens": None if failed or sparse else 700 + i,
        "output_tokens": None if failed or sparse else 300 + i % 50,
        "cost_usd": None if failed or sparse else i * 1.5e-6,
        "model_id": None if failed else "gpt-4o-2024-08-06",
        "fingerprint": None if failed or sparse else f"fp_{i % 5}",
        "attempts": 4 if failed else 1 + i % 3,
        "created_at": datetime(2024, 5, 1, 12, 0, tzinfo=TZS[i % 3])
        + timedelta(seconds=i, microseconds=(i * 7919) % 1_000_000),
        "answer_format": "json_schema" if i % 5 == 2 else "text",
    }
    row.update(over)
    return row


def _scores(call: dict[str, Any], n: int = 3) -> list[dict[str, Any]]:
    return [{"run_id": call["run_id"], "triplet_id": call["triplet_id"],
             "language": call["language"], "label": "ABC"[k], "option_id": f"opt-{k + 1}",
             "country": ["US", "CN", "JP"][k], "is_target": k == 1,
             "score": None if k == 2 and call["variant"] == "cot" else 1.0 + (k * 3.5) % 10,
             "strengths": k + 1, "weaknesses": None if k == 0 else 3 - k}
            for k in range(n)]


def _batch(calls: list[dict[str, Any]],
           scores: list[dict[str, Any]]) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    return _columns(calls, CALL_COLUMNS), _columns(scores, SCORE_COLUMNS)


def _empty_scores() -> dict[str, list[Any]]:
    return {c: [] for c, _ in SCORE_COLUMNS}


def _py(v: Any) -> Any:
    """A DataFrame cell as the plain Python value that was written."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, pd.Timestamp):
        return v.to_pydatetime()
    return v.item() if hasattr(v, "item") else v


def _records(df: pd.DataFrame, cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted((tuple(_py(r[c]) for c in cols) for r in df.to_dict("records")), key=repr)


def _expected(rows: list[dict[str, Any]], cols: list[str]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r[c] for c in cols) for r in rows), key=repr)


def _run(run_id: str = "r1", *, endpoint: str = "gpt4o-prod", run_index: int = 0, seed: int = 0,
         catalog_version: str = "2024.1", scenarios: list[str] | None = None,
         started_at: datetime | None = None) -> RunRow:
    return RunRow(run_id=run_id, endpoint=endpoint, model="openai/gpt-4o", simulated=False,
                  run_index=run_index, seed=seed, catalog_version=catalog_version,
                  scenarios=list(SCENARIOS if scenarios is None else scenarios),
                  languages=["en", "zh"], variants=["plain", "cot"], triplets=40,
                  planned_calls=80,
                  started_at=started_at or datetime(2024, 5, 1, 6, 0, 0, 123456, tzinfo=UTC),
                  finished_at=None, status="running")


def _stats(run_id: str, keys: list[tuple[str, str, float]]) -> list[StatRow]:
    return [StatRow(kind="md", scenario=scen, key=key, value=value, ci_lower=value - 0.5,
                    ci_upper=value + 0.5, n=12, p_value=None, extra='{"se": 0.25}')
            for scen, key, value in keys]


def _tables(path: Path) -> dict[str, int]:
    con = duckdb.connect(str(path))
    try:
        names = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()]
        return {n: con.execute(f'SELECT count(*) FROM "{n}"').fetchall()[0][0] for n in names}
    finally:
        con.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "monitor.duckdb"


@pytest.fixture
def store(db: Path) -> Store:
    return Store(db)


# -- schema -------------------------------------------------------------------------------


def test_new_file_is_tagged_and_fully_migrated(db: Path) -> None:
    assert not db.exists()
    with Store(db) as s:
        assert s.schema_version == len(MIGRATIONS)
    assert db.is_file()
    con = duckdb.connect(str(db))
    try:
        meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
    finally:
        con.close()
    assert meta == {"app": APP, "schema_version": str(len(MIGRATIONS))}
    assert {"meta", "runs", "probe_calls", "scores", "run_stats"} <= set(_tables(db))


def test_reopening_keeps_data_and_does_not_migrate_again(db: Path) -> None:
    s = Store(db)
    s.create_run(_run())
    call = _call("r1", 0)
    s.write_batch(*_batch([call], _scores(call)))
    s.close()
    before = _tables(db)

    again = Store(db)
    assert again.schema_version == len(MIGRATIONS)
    assert again.get_run("r1") == _run()
    assert again.done_calls("r1") == {(call["triplet_id"], call["language"])}
    assert len(again.scores_frame(["r1"])) == 3
    again.close()
    assert _tables(db) == before  # meta still two rows, no table recreated or emptied


def test_an_older_schema_is_upgraded_keeping_its_data(db: Path) -> None:
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', '1')", [APP])
    for sql in MIGRATIONS[0]:
        con.execute(sql)
    con.close()
    s = Store(db)
    s.create_run(_run("old"))
    assert s.schema_version == len(MIGRATIONS)
    assert [r.run_id for r in Store(db).runs()] == ["old"]


def test_a_text_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.duckdb"
    path.write_bytes(b"hello, not a database")
    _assert_refused_untouched(path)


def test_random_bytes_are_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "random.duckdb"
    path.write_bytes(os.urandom(64 * 1024))
    _assert_refused_untouched(path)


def _assert_refused_untouched(path: Path) -> None:
    digest, listing = _sha(path), sorted(os.listdir(path.parent))
    with pytest.raises(StoreError) as info:
        Store(path)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(path) in msg and "DuckDB" in msg and "storage.path" in msg
    assert _sha(path) == digest
    assert sorted(os.listdir(path.parent)) == listing  # no .wal or other file left behind


def test_another_applications_database_is_refused_and_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "crm.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name VARCHAR)")
    con.execute("INSERT INTO customers VALUES (1, 'Ann'), (2, '王芳')")
    con.close()
    digest = _sha(path)

    with pytest.raises(StoreError, match="another application") as info:
        Store(path)
    assert str(path) in str(info.value) and "customers" in str(info.value)
    assert _sha(path) == digest
    con = duckdb.connect(str(path))
    try:
        assert con.execute("SELECT table_name FROM information_schema.tables").fetchall() == [
            ("customers",)]
        assert con.execute("SELECT * FROM customers ORDER BY id").fetchall() == [
            (1, "Ann"), (2, "王芳")]
    finally:
        con.close()


@pytest.mark.parametrize("ddl", [
    ["CREATE TABLE meta (key VARCHAR, value VARCHAR)",
     "INSERT INTO meta VALUES ('app', 'some-other-tool'), ('schema_version', '1')"],
    ["CREATE TABLE meta (id INTEGER, payload VARCHAR)", "INSERT INTO meta VALUES (1, 'x')"],
])
def test_a_foreign_meta_table_is_refused_and_unchanged(tmp_path: Path, ddl: list[str]) -> None:
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    for sql in ddl:
        con.execute(sql)
    con.close()
    before = _tables(path)
    with pytest.raises(StoreError, match="bias-monitor") as info:
        Store(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)
    assert _tables(path) == before


def test_a_newer_schema_is_refused_with_upgrade_advice(db: Path) -> None:
    Store(db).create_run(_run())
    newer = len(MIGRATIONS) + 3
    con = duckdb.connect(str(db))
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(newer)])
    con.close()
    with pytest.raises(StoreError, match="upgrade") as info:
        Store(db)
    assert str(db) in str(info.value) and str(newer) in str(info.value)
    con = duckdb.connect(str(db))
    try:
        assert con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall() == [
            (str(newer),)]
        assert con.execute("SELECT run_id FROM runs").fetchall() == [("r1",)]
    finally:
        con.close()


def test_a_missing_folder_is_named_and_not_created(tmp_path: Path) -> None:
    folder = tmp_path / "no" / "such"
    with pytest.raises(StoreError) as info:
        Store(folder / "monitor.duckdb")
    assert str(folder) in str(info.value)
    assert not (tmp_path / "no").exists()


def test_a_relative_path_in_the_working_directory(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert Store("monitor.duckdb").schema_version == len(MIGRATIONS)
    assert (tmp_path / "monitor.duckdb").is_file()


# -- write_batch --------------------------------------------------------------------------


def test_batch_of_500_calls_and_1500_scores_round_trips(store: Store) -> None:
    calls = [_call("r1", i) for i in range(500)]
    calls[17]["raw_text"] = ("长文本 long answer ✓ " * 60_000)[:1_048_576]
    scores = [s for c in calls for s in _scores(c)]
    assert len(scores) == 1500
    assert len({(c["triplet_id"], c["language"]) for c in calls}) == 500
    assert any(c["input_tokens"] is None for c in calls)
    assert any(s["score"] is None for s in scores)

    store.write_batch(*_batch(calls, scores))

    names = [c for c, _ in CALL_COLUMNS]
    got = store.calls_frame(["r1"], with_text=True)
    assert len(got) == 500
    assert _records(got, names) == _expected(calls, names)
    big = got.loc[got["triplet_id"] == calls[17]["triplet_id"]]
    big = big.loc[big["language"] == calls[17]["language"], "raw_text"].iloc[0]
    assert len(big) == 1_048_576 and big == calls[17]["raw_text"]

    no_text = store.calls_frame(["r1"])
    assert "raw_text" not in no_text.columns and len(no_text) == 500

    by_call = {(c["triplet_id"], c["language"]): c for c in calls}
    expected = [{**s, "scenario": by_call[(s["triplet_id"], s["language"])]["scenario"],
                 "variant": by_call[(s["triplet_id"], s["language"])]["variant"]}
                for s in scores]
    names = [c for c, _ in SCORE_COLUMNS] + ["scenario", "variant"]
    sf = store.scores_frame(["r1"])
    assert len(sf) == 1500
    assert _records(sf, names) == _expected(expected, names)


def test_timestamps_keep_the_instant_and_microseconds(store: Store) -> None:
    calls = [_call("r1", i) for i in range(3)]
    store.write_batch(_columns(calls, CALL_COLUMNS), _empty_scores())
    got = store.calls_frame(["r1"]).sort_values("triplet_id")
    for ts, call in zip(got["created_at"], sorted(calls, key=lambda c: c["triplet_id"]),
                        strict=True):
        assert ts.to_pydatetime() == call["created_at"]
        assert ts.tzinfo is not None


def test_failed_unparseable_and_refused_calls_round_trip(store: Store) -> None:
    calls = [_call("r1", 0, status="failed"), _call("r1", 1, status="unparseable"),
             _call("r1", 2, status="refused"), _call("r1", 3)]
    store.write_batch(*_batch(calls, _scores(calls[3])))
    names = [c for c, _ in CALL_COLUMNS]
    assert _records(store.calls_frame(["r1"], with_text=True), names) == _expected(calls, names)
    assert {(c["triplet_id"], c["language"]) for c in calls[1:]} == store.done_calls("r1")
    assert set(store.scores_frame(["r1"])["triplet_id"]) == {calls[3]["triplet_id"]}


def test_a_resumed_call_replaces_its_failed_row(store: Store) -> None:
    failed = _call("r1", 0, status="failed")
    other = _call("r1", 1)
    store.write_batch(*_batch([failed, other], _scores(other)))
    key = (failed["triplet_id"], failed["language"])
    assert key not in store.done_calls("r1")

    retried = _call("r1", 0, attempts=2)
    for _ in range(2):  # writing the same batch twice is idempotent too
        store.write_batch(*_batch([retried], _scores(retried)))

    calls = store.calls_frame(["r1"], with_text=True)
    assert len(calls) == 2
    row = calls.loc[(calls["triplet_id"] == key[0]) & (calls["language"] == key[1])]
    assert len(row) == 1
    assert (row["status"].iloc[0], row["attempts"].iloc[0]) == ("ok", 2)
    assert _py(row["error"].iloc[0]) is None
    assert row["raw_text"].iloc[0] == retried["raw_text"]
    assert key in store.done_calls("r1")
    assert len(store.scores_frame(["r1"])) == 6


def test_done_calls_is_per_run_and_excludes_failed(store: Store) -> None:
    a = [_call("r1", i, status=s) for i, s in enumerate(["ok", "failed", "refused",
                                                           "unparseable", "failed"])]
    b = [_call("r2", 9)]
    store.write_batch(*_batch(a + b, []))
    assert store.done_calls("r1") == {(c["triplet_id"], c["language"])
                                      for c in a if c["status"] != "failed"}
    assert store.done_calls("r2") == {(b[0]["triplet_id"], b[0]["language"])}
    assert store.done_calls("nope") == set()


def test_frames_select_the_requested_runs(store: Store) -> None:
    calls = [_call("r1", 0), _call("r2", 1), _call("r3", 2)]
    store.write_batch(*_batch(calls, [s for c in calls for s in _scores(c)]))
    assert set(store.calls_frame(["r1", "r3"])["run_id"]) == {"r1", "r3"}
    assert set(store.scores_frame(["r2"])["run_id"]) == {"r2"}
    assert store.calls_frame([]).empty


def test_an_empty_batch_writes_nothing(store: Store) -> None:
    store.write_batch(*_batch([], []))
    assert store.calls_frame(["r1"]).empty


def _short(cols: dict[str, list[Any]], column: str) -> dict[str, list[Any]]:
    return {**cols, column: cols[column][:-1]}


@pytest.mark.parametrize("column", ["run_id", "status", "created_at"])
def test_unequal_call_columns_raise_and_write_nothing(store: Store, column: str) -> None:
    kept = _call("r1", 0)
    store.write_batch(*_batch([kept], _scores(kept)))
    new = [_call("r1", i) for i in (1, 2)]
    calls, scores = _batch(new, [s for c in new for s in _scores(c)])
    with pytest.raises(ValueError, match="unequal"):
        store.write_batch(_short(calls, column), scores)
    assert set(store.calls_frame(["r1"])["triplet_id"]) == {kept["triplet_id"]}
    assert len(store.scores_frame(["r1"])) == 3


@pytest.mark.parametrize("column", ["run_id", "score", "weaknesses"])
def test_unequal_score_columns_roll_back_the_calls(store: Store, column: str) -> None:
    new = [_call("r1", i) for i in (1, 2)]
    calls, scores = _batch(new, [s for c in new for s in _scores(c)])
    with pytest.raises(ValueError, match="unequal"):
        store.write_batch(calls, _short(scores, column))
    assert store.calls_frame(["r1"]).empty
    assert store.done_calls("r1") == set()


def test_first_column_empty_others_not_is_unequal(store: Store) -> None:
    calls, _ = _batch([_call("r1", 0)], [])
    with pytest.raises(ValueError, match="unequal"):
        store.write_batch({**calls, "run_id": []}, _empty_scores())
    assert store.calls_frame(["r1"]).empty


def test_a_database_error_in_the_scores_rolls_back_the_calls(store: Store) -> None:
    call = _call("r1", 0)
    scores = _scores(call)
    scores[1]["strengths"] = 2**40  # does not fit the INTEGER column
    with pytest.raises(StoreError, match="out of range") as info:
        store.write_batch(*_batch([call], scores))
    assert "\n" not in str(info.value)
    assert store.calls_frame(["r1"]).empty
    ok = _call("r1", 1)  # and the store is still usable
    store.write_batch(*_batch([ok], _scores(ok)))
    assert len(store.scores_frame(["r1"])) == 3


# -- runs ---------------------------------------------------------------------------------


def test_create_get_and_finish_a_run(store: Store) -> None:
    run = _run()
    store.create_run(run)
    assert store.get_run("r1") == run
    assert store.get_run("missing") is None

    before = datetime.now(UTC)
    store.finish_run("r1", "complete")
    after = datetime.now(UTC)
    done = store.get_run("r1")
    assert done is not None
    assert done.status == "complete"
    assert done.finished_at is not None and before <= done.finished_at <= after
    assert done.started_at == run.started_at
    assert (done.scenarios, done.languages, done.variants) == (run.scenarios, run.languages,
                                                               run.variants)


def test_runs_lists_per_endpoint_in_start_order(store: Store) -> None:
    t0 = datetime(2024, 5, 1, tzinfo=UTC)
    store.create_run(_run("b", started_at=t0 + timedelta(hours=6)))
    store.create_run(_run("a", started_at=t0))
    store.create_run(_run("c", endpoint="claude", started_at=t0 + timedelta(hours=1)))
    assert [r.run_id for r in store.runs("gpt4o-prod")] == ["a", "b"]
    assert [r.run_id for r in store.runs("claude")] == ["c"]
    assert [r.run_id for r in store.runs()] == ["a", "c", "b"]
    assert store.runs("nobody") == []


def test_a_run_id_is_unique(store: Store) -> None:
    store.create_run(_run())
    with pytest.raises(StoreError, match="run_id"):
        store.create_run(_run(run_index=5))
    assert [r.run_index for r in store.runs()] == [0]


def test_next_run_index_walks_per_sampling_setup(store: Store) -> None:
    def nxt(endpoint: str = "gpt4o-prod", version: str = "2024.1", seed: int = 0,
            scenarios: list[str] = SCENARIOS) -> int:
        return store.next_run_index(endpoint, version, seed, scenarios)

    assert nxt() == 0
    for i in range(3):
        store.create_run(_run(f"r{i}", run_index=nxt()))
    assert nxt() == 3
    assert [r.run_index for r in store.runs()] == [0, 1, 2]
    assert nxt(seed=1) == 0
    assert nxt(endpoint="claude") == 0
    assert nxt(version="2024.2") == 0
    assert nxt(scenarios=["university"]) == 0
    store.create_run(_run("s1", seed=1, run_index=nxt(seed=1)))
    assert (nxt(seed=1), nxt()) == (1, 3)


# -- stats --------------------------------------------------------------------------------


def test_write_stats_replaces_the_runs_previous_stats(store: Store) -> None:
    store.write_stats("r1", _stats("r1", [("all", "CN", 0.9), ("university", "CN", 1.1)]))
    store.write_stats("r2", _stats("r2", [("all", "JP", 0.4)]))
    store.write_stats("r1", _stats("r1", [("all", "KR", 0.6)]))

    [(_, r1)] = store.stats_of(["r1"])
    assert (r1.scenario, r1.key, r1.value) == ("all", "KR", 0.6)
    assert r1.p_value is None
    assert (r1.ci_lower, r1.ci_upper, r1.n) == (0.6 - 0.5, 0.6 + 0.5, 12)
    assert [(st.key, st.value) for _, st in store.stats_of(["r2"])] == [("JP", 0.4)]


def test_failed_write_stats_keeps_the_previous_stats_and_the_store_usable(store: Store) -> None:
    store.write_stats("r1", _stats("r1", [("all", "CN", 0.9)]))
    bad = [*_stats("r1", [("all", "KR", 0.6)]), StatRow(kind="md", scenario="all", key="JP",
                                                        value=0.4, n=2**40)]
    with pytest.raises(StoreError, match="out of range"):  # n does not fit INTEGER
        store.write_stats("r1", bad)
    assert [st.key for _, st in store.stats_of(["r1"])] == ["CN"]

    call = _call("r1", 0)
    store.write_batch(*_batch([call], _scores(call)))
    store.write_stats("r1", _stats("r1", [("all", "FR", 0.3)]))
    assert [st.key for _, st in store.stats_of(["r1"])] == ["FR"]
    assert len(store.calls_frame(["r1"])) == 1


def test_failed_calls_replaced_on_resume_are_still_counted(tmp_path: Path) -> None:
    from monitor.daemon.metrics import MetricsState

    store = Store(tmp_path / "r.duckdb")
    store.create_run(_run("r1"))
    first = [_call("r1", i, status=s) for i, s in enumerate(["failed", "failed", "ok"])]
    store.write_batch(*_batch(first, []))
    resumed = [_call("r1", i) for i in range(2)]  # the resume answers the failed two
    store.write_batch(*_batch(resumed, []))
    assert store.replaced_failures("gpt4o-prod") == 2
    state = MetricsState()
    state.refresh(store, "gpt4o-prod")
    probes = state.snapshot().probes
    assert probes[("gpt4o-prod", "failed")] == 2 and probes[("gpt4o-prod", "ok")] == 3


def test_alert_states_and_events_are_saved_and_replaced(tmp_path: Path) -> None:
    store = Store(tmp_path / "a.duckdb")
    now = datetime(2026, 1, 1, tzinfo=UTC)
    state = CellRecord(scenario="all", country="CN", state="pending", s_plus=6.0, s_minus=0.0,
                       alarm_runs=1, calm_runs=0, z=3.1, reason="drift up", last_run_id="r1",
                       changed_at=now, notified_at=None)
    event = AlertEvent(scenario="all", country="CN", event_at=now, from_state="ok",
                       to_state="pending", run_id="r1", md=1.0, md_base=0.2, z=3.1,
                       reason="drift up")
    store.save_alert_states("ep", [state], [event])
    store.save_alert_states("ep", [replace(state, state="firing", alarm_runs=2)],
                            [replace(event, from_state="pending", to_state="firing")])
    states = store.alert_states("ep")
    assert states[("all", "CN")] == replace(state, state="firing", alarm_runs=2)
    assert len(states) == 1
    events = store.alert_events("ep")
    assert [(e.from_state, e.to_state) for e in events] == [("ok", "pending"),
                                                            ("pending", "firing")]
    assert store.alert_events("ep", until=now - timedelta(seconds=1)) == []
    store.mark_notified("ep", [("all", "CN")])
    assert store.alert_states("ep")[("all", "CN")].notified_at is not None
    store.outbox_add("ep", ["a", "b"], ["slack"])
    store.outbox_add("ep", ["c"], ["slack"])
    assert [i.payload for i in store.outbox_pending("ep")] == ["a", "b", "c"]
    assert [i.id for i in store.outbox_pending("ep")] == [1, 2, 3]
    assert store.outbox_has("ep", "b") and not store.outbox_has("ep", "d")


def test_a_corrupt_block_is_reported_at_once_not_as_a_busy_file(tmp_path: Path) -> None:
    # DuckDB says "... checksum ... in block at location N": "block" is not a lock.
    path = tmp_path / "corrupt.duckdb"
    Store(path).runs()
    data = bytearray(path.read_bytes())
    for i in range(12288 + 100, 12288 + 400):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))
    waits: list[float] = []
    with pytest.raises(StoreError, match=r"the database file is damaged.*checksum") as info:
        Store(path, lock_timeout_s=20, sleep=waits.append).runs()
    assert "storage.path" not in str(info.value)  # never: abandon the history for a new file
    assert waits == []  # at once: no retry as for a busy file
