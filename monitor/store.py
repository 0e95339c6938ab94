"""Storage: the only module that imports duckdb.

- A versioned schema: `meta` holds the application tag and schema version;
  MIGRATIONS are applied in order inside one transaction each.
- A file that is not DuckDB, or a DuckDB database of another application, is
  refused with a clear error and never written to.
- Results are written in batches as they arrive, one columnar INSERT per
  table per batch (lists unnested inside DuckDB, never row-by-row
  executemany), calls and their scores in one transaction. The primary key
  (run_id, triplet_id, language) makes a resumed run idempotent: a re-asked
  call replaces its failed row, nothing is duplicated.
- Reads return pandas DataFrames (duckdb builds them; pandas is not imported
  here).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from monitor.errors import StoreError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CALL_COLUMNS", "SCORE_COLUMNS", "STAT_COLUMNS", "RunRow", "Store"]

APP = "bias-monitor"

# (name, DuckDB type) in table order; batches are dicts of column -> list.
CALL_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("triplet_id", "VARCHAR"), ("language", "VARCHAR"),
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("target_id", "VARCHAR"),
    ("pair_id", "VARCHAR"), ("variant", "VARCHAR"), ("option_order", "VARCHAR"),
    ("prompt_hash", "VARCHAR"), ("catalog_version", "VARCHAR"), ("status", "VARCHAR"),
    ("detail", "VARCHAR"), ("raw_text", "VARCHAR"), ("error", "VARCHAR"),
    ("latency_s", "DOUBLE"), ("input_tokens", "INTEGER"), ("output_tokens", "INTEGER"),
    ("cost_usd", "DOUBLE"), ("model_id", "VARCHAR"), ("fingerprint", "VARCHAR"),
    ("attempts", "INTEGER"), ("created_at", "TIMESTAMPTZ"),
)
SCORE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("triplet_id", "VARCHAR"), ("language", "VARCHAR"),
    ("label", "VARCHAR"), ("option_id", "VARCHAR"), ("country", "VARCHAR"),
    ("is_target", "BOOLEAN"), ("score", "DOUBLE"), ("strengths", "INTEGER"),
    ("weaknesses", "INTEGER"),
)
STAT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_id", "VARCHAR"), ("kind", "VARCHAR"), ("scenario", "VARCHAR"), ("key", "VARCHAR"),
    ("value", "DOUBLE"), ("ci_lower", "DOUBLE"), ("ci_upper", "DOUBLE"), ("n", "INTEGER"),
    ("p_value", "DOUBLE"), ("extra", "VARCHAR"),
)


def _table(name: str, cols: tuple[tuple[str, str], ...], key: str) -> str:
    body = ", ".join(f"{c} {t}" for c, t in cols)
    return f"CREATE TABLE {name} ({body}, PRIMARY KEY ({key}))"


MIGRATIONS: list[list[str]] = [
    [  # v1
        """CREATE TABLE runs (
            run_id VARCHAR PRIMARY KEY, endpoint VARCHAR NOT NULL, model VARCHAR NOT NULL,
            simulated BOOLEAN, run_index INTEGER, seed INTEGER, catalog_version VARCHAR,
            scenarios VARCHAR, languages VARCHAR, variants VARCHAR, triplets INTEGER,
            planned_calls INTEGER, started_at TIMESTAMPTZ, finished_at TIMESTAMPTZ,
            status VARCHAR)""",
        _table("probe_calls", CALL_COLUMNS, "run_id, triplet_id, language"),
        _table("scores", SCORE_COLUMNS, "run_id, triplet_id, language, label"),
        _table("run_stats", STAT_COLUMNS, "run_id, kind, scenario, key"),
    ],
]


@dataclass(frozen=True)
class RunRow:
    run_id: str
    endpoint: str
    model: str
    simulated: bool
    run_index: int
    seed: int
    catalog_version: str
    scenarios: list[str]
    languages: list[str]
    variants: list[str]
    triplets: int
    planned_calls: int
    started_at: datetime
    finished_at: datetime | None
    status: str


class Store:
    """A monitor database in one DuckDB file."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            raise StoreError(f"{self.path}: folder {self.path.parent} does not exist; create it "
                             "or set storage.path")
        try:
            self.con = duckdb.connect(str(self.path))
        except duckdb.Error as exc:
            first = " ".join(str(exc).split())[:200]
            raise StoreError(f"{self.path}: cannot open as a DuckDB database ({first}); point "
                             "storage.path at a new file or a bias-monitor database") from None
        self._migrate()

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        tables = {r[0] for r in self.con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "meta" not in tables:
            self.close()
            raise StoreError(f"{self.path}: a DuckDB database of another application (tables "
                             f"{sorted(tables)[:5]}); refusing to write to it - choose another "
                             "storage.path")
        if "meta" not in tables:
            self.con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            self.con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', '0')", [APP])
        meta = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("app") != APP:
            self.close()
            raise StoreError(f"{self.path}: not a bias-monitor database; choose another "
                             "storage.path")
        version = int(meta.get("schema_version", "0"))
        if version > len(MIGRATIONS):
            self.close()
            raise StoreError(f"{self.path}: schema version {version} is newer than this monitor "
                             f"({len(MIGRATIONS)}); upgrade bias-monitor")
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            self.con.execute("BEGIN")
            for sql in statements:
                self.con.execute(sql)
            self.con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                             [str(number)])
            self.con.execute("COMMIT")

    @property
    def schema_version(self) -> int:
        row = self.con.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        return int(row[0]) if row else 0

    # -- runs ---------------------------------------------------------------
    def create_run(self, run: RunRow) -> None:
        self.con.execute(
            "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [run.run_id, run.endpoint, run.model, run.simulated, run.run_index, run.seed,
             run.catalog_version, json.dumps(run.scenarios), json.dumps(run.languages),
             json.dumps(run.variants), run.triplets, run.planned_calls, run.started_at,
             run.finished_at, run.status])

    def finish_run(self, run_id: str, status: str) -> None:
        self.con.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?",
                         [status, datetime.now(UTC), run_id])

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._runs("WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self, endpoint: str | None = None) -> list[RunRow]:
        if endpoint is None:
            return self._runs("", [])
        return self._runs("WHERE endpoint = ?", [endpoint])

    def _runs(self, where: str, params: list[Any]) -> list[RunRow]:
        cur = self.con.execute(f"SELECT * FROM runs {where} ORDER BY started_at, run_id", params)
        out = []
        for r in cur.fetchall():
            values = list(r)
            for i in (7, 8, 9):
                values[i] = json.loads(values[i])
            out.append(RunRow(*values))
        return out

    def next_run_index(self, endpoint: str, catalog_version: str, seed: int,
                       scenarios: Sequence[str]) -> int:
        """Runs walk the sampling cycle: the next index for this sampling setup."""
        row = self.con.execute(
            "SELECT max(run_index) FROM runs WHERE endpoint = ? AND catalog_version = ? "
            "AND seed = ? AND scenarios = ?",
            [endpoint, catalog_version, seed, json.dumps(list(scenarios))]).fetchone()
        return 0 if row is None or row[0] is None else int(row[0]) + 1

    # -- results --------------------------------------------------------------
    def write_batch(self, calls: dict[str, list[Any]], scores: dict[str, list[Any]]) -> None:
        """One transaction: the calls (replacing earlier failed attempts) and scores."""
        self.con.execute("BEGIN")
        try:
            self._insert("probe_calls", CALL_COLUMNS, calls)
            self._insert("scores", SCORE_COLUMNS, scores)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise

    def write_stats(self, run_id: str, stats: dict[str, list[Any]]) -> None:
        self.con.execute("BEGIN")
        self.con.execute("DELETE FROM run_stats WHERE run_id = ?", [run_id])
        self._insert("run_stats", STAT_COLUMNS, stats)
        self.con.execute("COMMIT")

    def _insert(self, table: str, cols: tuple[tuple[str, str], ...],
                data: dict[str, list[Any]]) -> None:
        n = len(data[cols[0][0]])
        if n == 0:
            return
        if any(len(data[c]) != n for c, _ in cols):
            raise ValueError(f"{table}: columns of unequal length")
        select = ", ".join(f"unnest(${i + 1}::{t}[]) AS {c}" for i, (c, t) in enumerate(cols))
        self.con.execute(f"INSERT OR REPLACE INTO {table} SELECT {select}",
                         [data[c] for c, _ in cols])

    def done_calls(self, run_id: str) -> set[tuple[str, str]]:
        """(triplet_id, language) of calls that need no retry on resume."""
        rows = self.con.execute(
            "SELECT triplet_id, language FROM probe_calls WHERE run_id = ? AND status <> 'failed'",
            [run_id]).fetchall()
        return {(r[0], r[1]) for r in rows}

    def calls_frame(self, run_ids: Sequence[str], *, with_text: bool = False) -> pd.DataFrame:
        cols = ", ".join(c for c, _ in CALL_COLUMNS if with_text or c != "raw_text")
        return self.con.execute(f"SELECT {cols} FROM probe_calls WHERE list_contains($1, run_id)",
                                [list(run_ids)]).df()

    def scores_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        return self.con.execute(
            "SELECT s.*, c.scenario, c.variant FROM scores s JOIN probe_calls c "
            "USING (run_id, triplet_id, language) "
            "WHERE list_contains($1, s.run_id) AND c.status = 'ok'", [list(run_ids)]).df()

    def stats_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        return self.con.execute("SELECT * FROM run_stats WHERE list_contains($1, run_id)",
                                [list(run_ids)]).df()
