"""Every earlier schema migrates to the current one, keeping its rows.

The fixtures (tests/golden/schemas/v<k>.duckdb.gz) hold what a release of
schema version k wrote; they are made once by make_fixtures.py and never
regenerated for an old version, so an edit of a frozen migration shows here.
"""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import pytest

from monitor.store import Store
from monitor.store.schema import MIGRATIONS

SCHEMAS = Path(__file__).parent / "golden" / "schemas"
VERSIONS = list(range(1, len(MIGRATIONS) + 1))


def _unpack(version: int, tmp_path: Path) -> Path:
    db = tmp_path / f"v{version}.duckdb"
    with gzip.open(SCHEMAS / f"v{version}.duckdb.gz", "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return db


def _layout(db: Path) -> dict[str, list[tuple[str, str]]]:
    """table -> [(column, type)] in table order."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        rows = con.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns "
            "ORDER BY table_name, ordinal_position").fetchall()
    finally:
        con.close()
    out: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in rows:
        out.setdefault(table, []).append((column, kind))
    return out


def _all(db: Path, sql: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _scalar(db: Path, sql: str) -> object:
    con = duckdb.connect(str(db), read_only=True)
    try:
        row = con.execute(sql).fetchone()
    finally:
        con.close()
    assert row is not None
    return row[0]


def test_fixtures_cover_every_version() -> None:
    assert sorted(p.name for p in SCHEMAS.glob("v*.duckdb.gz")) == sorted(
        f"v{v}.duckdb.gz" for v in VERSIONS)


@pytest.mark.parametrize("version", VERSIONS)
def test_fixture_is_the_version_it_claims(version: int, tmp_path: Path) -> None:
    db = _unpack(version, tmp_path)
    assert _scalar(db, "SELECT value FROM meta WHERE key = 'schema_version'") == str(version)


@pytest.mark.parametrize("version", VERSIONS)
def test_old_database_migrates_to_the_current_schema(version: int, tmp_path: Path) -> None:
    db = _unpack(version, tmp_path)
    store = Store(db)
    fresh = tmp_path / "fresh.duckdb"
    Store(fresh)
    assert _scalar(db, "SELECT value FROM meta WHERE key = 'schema_version'") == str(
        len(MIGRATIONS))
    assert _layout(db) == _layout(fresh)

    # The rows the old release wrote are all there and read through the store.
    run = store.get_run("ep-r1")
    assert run is not None
    assert (run.endpoint, run.status, run.planned_calls) == ("ep", "complete", 2)
    assert run.languages == ["en", "zh"]
    # v8: the run's model, spelled once: older runs take the id their answers reported
    assert run.model_id == "gpt-4o-2024"
    assert _scalar(db, "SELECT count(*) FROM probe_calls") == 2
    assert _scalar(db, "SELECT count(*) FROM scores") == 6
    assert _scalar(db, "SELECT count(*) FROM run_stats") == 1
    assert _scalar(db, "SELECT score FROM scores WHERE language = 'zh' AND is_target") == 9
    if version < 4:
        # Columns a migration adds take their default on old rows.
        assert run.attempts == 0
        assert run.owner is None and run.heartbeat_at is None
    else:
        assert (run.attempts, run.owner) == (1, "host|boot|1|2")
    # v6: runs before it asked the paper's way (the default setup, in text)
    want_setup = "setup-0123456789ab" if version >= 6 else "default"
    assert run.setup == want_setup
    assert {r[0] for r in _all(db, "SELECT answer_format FROM probe_calls")} == {
        "json_schema" if version >= 6 else "text"}
    if version >= 2:
        base = store.baseline("ep")
        assert base is not None and list(base.run_ids) == ["ep-r1"]
        assert base.setup == want_setup
        assert _scalar(db, "SELECT count(*) FROM alert_events") == 1
        cell = store.alert_states("ep")[("all", "CN")]
        assert (cell.state, cell.reason) == ("pending", "drift up")
        if version < 5:
            # v5: the level is new (within) and the old z-unit sums restart at 0
            assert (cell.level, cell.level_runs, cell.s_plus, cell.alarm_runs) == (
                "within", 0, 0.0, 0)
        else:
            assert (cell.level, cell.s_plus, cell.alarm_runs) == ("above", 1.5, 1)
    else:
        assert store.baseline("ep") is None
    if version >= 3:
        # v7: what was owed to Slack (the only sink before) is still owed to it
        assert [item.id for item in store.outbox_pending("ep")] == [1]
        assert [item.id for item in store.outbox_pending("ep", "slack")] == [1]
        assert store.outbox_pending("ep", "pagerduty") == []
    else:
        assert store.outbox_pending("ep") == []
    # v9: comparisons link a candidate's run to what it was compared with
    cmp = store.get_comparison("cmp-1")
    if version >= 9:
        assert cmp is not None
        assert (cmp.baseline_run_id, cmp.candidate_run_id, cmp.outcome) == (
            "cmp-1-baseline", "cmp-1-candidate", "regression")
    else:
        assert cmp is None


@pytest.mark.parametrize("version", [v for v in VERSIONS if 3 <= v < 7])
def test_a_message_slack_took_before_sinks_stays_delivered(version: int,
                                                           tmp_path: Path) -> None:
    db = _unpack(version, tmp_path)
    con = duckdb.connect(str(db))
    con.execute("INSERT INTO outbox VALUES (2, 'ep', now(), '{\"kind\": \"note\", "
                "\"text\": \"sent\"}', now())")
    con.close()
    store = Store(db)
    assert [item.id for item in store.outbox_pending("ep")] == [1]
    assert _all(db, "SELECT id, sink, outcome FROM outbox_delivery ORDER BY id") == [
        (1, "slack", None), (2, "slack", "delivered")]


@pytest.mark.parametrize("version", VERSIONS)
def test_migrated_database_takes_new_rows(version: int, tmp_path: Path) -> None:
    db = _unpack(version, tmp_path)
    store = Store(db)
    store.outbox_add("ep", ['{"kind": "note", "text": "after migration"}'], ["slack"])
    pending = store.outbox_pending("ep")
    assert pending[-1].payload == '{"kind": "note", "text": "after migration"}'
    # Reopening a current database migrates nothing and loses nothing.
    again = Store(db)
    assert [item.payload for item in again.outbox_pending("ep")] == [
        item.payload for item in pending]


def test_a_baseline_without_a_model_id_takes_its_first_runs(tmp_path: Path) -> None:
    """v8: calibrate stored no model id for a provider that reports none, and such a
    baseline was then never comparable; it takes its run's model now."""
    db = _unpack(7, tmp_path)
    con = duckdb.connect(str(db))
    con.execute("UPDATE baselines SET model_id = NULL")
    con.execute("UPDATE probe_calls SET model_id = NULL")  # a provider without model ids
    con.close()
    store = Store(db)
    run = store.get_run("ep-r1")
    base = store.baseline("ep")
    assert run is not None and base is not None
    assert run.model_id == "openai/gpt-4o" == base.model_id  # the configured model string
