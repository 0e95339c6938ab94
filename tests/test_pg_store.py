"""The PostgreSQL store against a real PostgreSQL (tests/support/postgres.py): the same
schema as the DuckDB file, the same numbers for the same history, a history moved
over whole, and a URL whose password shows nowhere."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.config import load_settings
from monitor.errors import ConfigError, StoreError, StoreWriteError
from monitor.report import build, to_json
from monitor.stats import jsd_of, md_of
from monitor.store import PgStore, Store, open_store
from monitor.store.schema import MIGRATIONS
from monitor.store.schema_pg import PG_MIGRATIONS
from monitor.store.transfer import copy_history
from monitor.vocab import StatKind
from tests.support.helpers import sim_daemon, write_config
from tests.support.postgres import PASSWORD, Cluster, cluster

_TYPES = {"character varying": "VARCHAR", "text": "VARCHAR", "double precision": "DOUBLE",
          "integer": "INTEGER", "bigint": "BIGINT", "boolean": "BOOLEAN",
          "timestamp with time zone": "TIMESTAMP WITH TIME ZONE"}


@pytest.fixture(scope="module")
def pg() -> Iterator[Cluster]:
    with cluster() as found:
        yield found


def _config(tmp_path: Path, url_env: str | None) -> Path:
    storage: dict[str, Any] = {"path": str(tmp_path / "monitor.duckdb")}
    if url_env:
        storage["url_env"] = url_env
    return write_config(
        tmp_path, [{"name": "sim", "model": "simulated/demo",
                    "params": {"bias_points": 1.0, "noise_sd": 1.0, "seed": 3}}],
        storage=storage, sampling={"triplets_per_run": 12, "languages": ["en", "zh", "ja"]},
        baseline={"auto_min_triplets": 24}, report={"enabled": False})


def _history(cfg: Path, catalog: Catalog, runs: int) -> Store:
    daemon, _, store = sim_daemon(cfg, catalog)
    for _ in range(runs):
        asyncio.run(daemon.run("sim"))
    return store  # type: ignore[no-any-return]


def _stats(store: Store) -> list[list[tuple[Any, ...]]]:
    """Each run's statistics, but the pooled JSD window: its permutations follow the order
    of the pooled runs' ids, which two separate histories draw differently (compared on
    one history moved over, below)."""
    out = []
    for run in store.runs("sim"):
        out.append(sorted((st.kind, st.scenario, st.key, st.value, st.ci_lower, st.ci_upper,
                           st.n, st.p_value) for _, st in store.stats_of([run.run_id])
                          if st.kind != StatKind.JSD_WINDOW))
    return out


def test_the_postgres_schema_is_the_files(pg: Cluster, tmp_path: Path) -> None:
    assert len(PG_MIGRATIONS) == len(MIGRATIONS)
    duck = Store(tmp_path / "m.duckdb")
    pgs = PgStore(pg.database(), env="X", path=tmp_path / "x.duckdb")
    query = ("SELECT table_name, column_name, data_type FROM information_schema.columns WHERE "
             "table_schema = current_schema() ORDER BY table_name, ordinal_position")
    on_file = [(t, c, ty) for t, c, ty in duck._rows(query)]
    on_pg = [(t, c, _TYPES[ty]) for t, c, ty in pgs._rows(query)]
    assert on_pg == [(t, c, ty.replace("VARCHAR", "VARCHAR")) for t, c, ty in on_file]
    assert pgs.schema_version == duck.schema_version == len(MIGRATIONS)


def test_a_history_gives_the_same_numbers_on_both_engines(
        pg: Cluster, tmp_path: Path, shipped_catalog: Catalog,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs, their review (baseline, drift, alerts) and the report: equal on both, and
    a DuckDB history moved into PostgreSQL recomputes to the same numbers."""
    monkeypatch.setenv("BM_PG_URL", pg.database())
    (tmp_path / "d").mkdir()
    (tmp_path / "p").mkdir()
    duck = _history(_config(tmp_path / "d", None), shipped_catalog, 4)
    pgs = _history(_config(tmp_path / "p", "BM_PG_URL"), shipped_catalog, 4)
    assert isinstance(pgs, PgStore) and not isinstance(duck, PgStore)
    assert [r.status for r in pgs.runs("sim")] == [r.status for r in duck.runs("sim")]
    assert _stats(pgs) == _stats(duck)
    states = {k: (c.state, c.s_plus, c.s_minus) for k, c in duck.alert_states("sim").items()}
    assert {k: (c.state, c.s_plus, c.s_minus) for k, c in pgs.alert_states("sim").items()} \
        == states
    assert (pgs.baseline("sim") is None) == (duck.baseline("sim") is None)
    since = datetime(2000, 1, 1, tzinfo=UTC)  # the top-up verdicts that hold a cell back
    held = [[(st.key, st.n, json.loads(st.extra or "{}")["cusum"])
             for _, st in store.topups_since("sim", since)] for store in (pgs, duck)]
    assert held[0] == held[1] and held[0]
    a, b = pgs.call_totals("sim", [1.0]), duck.call_totals("sim", [1.0])
    assert (a.by_status, a.input_tokens, a.latency_buckets) == (b.by_status, b.input_tokens,
                                                                b.latency_buckets)
    # Sums of floats: each engine adds in its own order (DuckDB compensates the rounding).
    assert a.cost_usd == pytest.approx(b.cost_usd) and a.latency_sum_s == pytest.approx(
        b.latency_sum_s)
    # The whole file moved into a fresh PostgreSQL database: the same statistics, by run.
    monkeypatch.setenv("BM_PG_COPY", pg.database())
    settings, _ = load_settings(_config(tmp_path / "d", "BM_PG_COPY"))
    moved = open_store(settings.storage)
    counts = copy_history(duck, moved)
    for table in ("runs", "probe_calls", "scores", "run_stats", "alert_events", "outbox"):
        assert counts[table] == duck._rows(f"SELECT count(*) FROM {table}")[0][0], table
    ids = [r.run_id for r in duck.runs("sim")]
    langs = ["en", "zh", "ja"]
    local = shipped_catalog.languages
    # Compared by repr: a one-triplet cell's CI is NaN, and NaN != NaN in ==.
    assert repr(md_of(moved, ids, langs, local, by_run=True)) == repr(
        md_of(duck, ids, langs, local, by_run=True))
    assert repr(jsd_of(moved, ids, langs, seed=0)) == repr(jsd_of(duck, ids, langs, seed=0))
    runs = duck.runs("sim")
    assert json.loads(to_json(build(moved, shipped_catalog, runs[-1:], runs))) == json.loads(
        to_json(build(duck, shipped_catalog, runs[-1:], runs)))
    assert moved.outbox_pending("sim") == duck.outbox_pending("sim")
    moved.outbox_add("sim", ['{"kind": "note", "text": "after"}'], ["slack"])
    last = max((i.id for i in duck.outbox_pending("sim")), default=0)
    assert moved.outbox_pending("sim")[-1].id == last + 1  # the sequence follows the copy
    # The export of a PostgreSQL store writes what the file's does (plus the note above).
    got = moved.export_parquet(tmp_path / "pq-pg", None).counts
    want = duck.export_parquet(tmp_path / "pq-duck", None).counts
    assert got == {**want, "outbox": want.get("outbox", 0) + 1,
                   "outbox_delivery": want.get("outbox_delivery", 0) + 1}


def test_the_url_and_its_password_show_nowhere(pg: Cluster, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = pg.database().replace(f":{pg.port}/", ":1/")
    with pytest.raises(StoreError) as err:
        PgStore(wrong, env="BM_URL", path=tmp_path / "x", lock_timeout_s=0.2)
    assert PASSWORD not in str(err.value) and "$BM_URL" in str(err.value)
    assert "cannot connect" in str(err.value)
    monkeypatch.delenv("BM_UNSET", raising=False)
    settings, _ = load_settings(_config(tmp_path, "BM_UNSET"))
    with pytest.raises(ConfigError, match=r"storage\.url_env: the environment variable BM_UNSET"):
        open_store(settings.storage)
    monkeypatch.setenv("BM_UNSET", "mysql://u:secretpw@h/db")
    with pytest.raises(ConfigError) as bad:
        open_store(settings.storage)
    assert "secretpw" not in str(bad.value)


def test_a_read_only_store_refuses_to_write(pg: Cluster, tmp_path: Path) -> None:
    url = pg.database()
    with pytest.raises(StoreError, match="no bias-monitor data yet"):
        PgStore(url, env="X", path=tmp_path / "x", read_only=True)
    PgStore(url, env="X", path=tmp_path / "x").outbox_add("e", ["{}"], ["slack"])
    reader = PgStore(url, env="X", path=tmp_path / "x", read_only=True)
    assert [i.id for i in reader.outbox_pending("e")] == [1]
    with pytest.raises(StoreWriteError, match="read-only"):
        reader.outbox_add("e", ["{}"], ["slack"])


def test_monitor_migrate_moves_a_file_history_whose_report_is_equal(
        pg: Cluster, tmp_path: Path, shipped_catalog: Catalog,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.cli import main

    duck = _history(_config(tmp_path, None), shipped_catalog, 3)
    before = duck.path.read_bytes()
    monkeypatch.setenv("BM_PG_MIGRATED", pg.database())
    cfg = _config(tmp_path, "BM_PG_MIGRATED")
    assert main(["migrate", "--from", str(duck.path), "--config", str(cfg)]) == 0
    rows = duck._rows("SELECT count(*) FROM runs")[0][0]
    assert f"runs: {rows} rows" in capsys.readouterr().out
    assert duck.path.read_bytes() == before  # a copy: the file is left as it was
    settings, _ = load_settings(cfg)
    moved = open_store(settings.storage, read_only=True)
    runs = duck.runs("sim")
    assert [r.run_id for r in moved.runs("sim")] == [r.run_id for r in runs]
    assert json.loads(to_json(build(moved, shipped_catalog, runs, runs))) == json.loads(
        to_json(build(duck, shipped_catalog, runs, runs)))
    # Twice: the target holds runs now; refused, nothing written.
    assert main(["migrate", "--from", str(duck.path), "--config", str(cfg)]) == 2
    assert "already holds runs" in capsys.readouterr().err
    assert moved._rows("SELECT count(*) FROM runs")[0][0] == rows
