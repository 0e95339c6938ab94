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
- DuckDB lets one process write a file at a time, and a writer excludes every
  other process. So the file is held only for the length of one operation:
  each method opens, works and closes (about 25 ms), and an open that meets
  another process's lock is retried with backoff for up to `lock_timeout_s`
  before failing with a clear message. The daemon and the CLI commands
  (baseline, report, export) can therefore share one file.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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
_LOCKED = re.compile(r"\b(?:could not set lock|conflicting lock)\b", re.IGNORECASE)

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


_STATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("country", "VARCHAR"),
    ("state", "VARCHAR"), ("s_plus", "DOUBLE"), ("s_minus", "DOUBLE"),
    ("alarm_runs", "INTEGER"), ("calm_runs", "INTEGER"), ("z", "DOUBLE"),
    ("reason", "VARCHAR"), ("last_run_id", "VARCHAR"), ("changed_at", "TIMESTAMPTZ"),
    ("notified_at", "TIMESTAMPTZ"),
)
_OUTBOX_COLUMNS: tuple[tuple[str, str], ...] = (
    ("id", "BIGINT"), ("endpoint", "VARCHAR"), ("created_at", "TIMESTAMPTZ"),
    ("payload", "VARCHAR"), ("delivered_at", "TIMESTAMPTZ"),
)
_EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("endpoint", "VARCHAR"), ("scenario", "VARCHAR"), ("country", "VARCHAR"),
    ("event_at", "TIMESTAMPTZ"), ("from_state", "VARCHAR"), ("to_state", "VARCHAR"),
    ("run_id", "VARCHAR"), ("md", "DOUBLE"), ("md_base", "DOUBLE"), ("z", "DOUBLE"),
    ("reason", "VARCHAR"),
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
    [  # v2: baselines and persisted alert state (the daemon)
        """CREATE TABLE baselines (
            endpoint VARCHAR NOT NULL, set_at TIMESTAMPTZ NOT NULL, run_ids VARCHAR NOT NULL,
            catalog_version VARCHAR, model_id VARCHAR, auto BOOLEAN, active BOOLEAN)""",
        """CREATE TABLE alert_state (
            endpoint VARCHAR, scenario VARCHAR, country VARCHAR, state VARCHAR,
            s_plus DOUBLE, s_minus DOUBLE, alarm_runs INTEGER, calm_runs INTEGER, z DOUBLE,
            reason VARCHAR, last_run_id VARCHAR, changed_at TIMESTAMPTZ,
            notified_at TIMESTAMPTZ, PRIMARY KEY (endpoint, scenario, country))""",
        """CREATE TABLE alert_events (
            endpoint VARCHAR, scenario VARCHAR, country VARCHAR, event_at TIMESTAMPTZ,
            from_state VARCHAR, to_state VARCHAR, run_id VARCHAR, md DOUBLE, md_base DOUBLE,
            z DOUBLE, reason VARCHAR)""",
    ],
    [  # v3: alerts owed to Slack survive a failed delivery and a restart
        """CREATE TABLE outbox (
            id BIGINT PRIMARY KEY, endpoint VARCHAR NOT NULL, created_at TIMESTAMPTZ,
            payload VARCHAR NOT NULL, delivered_at TIMESTAMPTZ)""",
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
    """A monitor database in one DuckDB file, opened per operation."""

    def __init__(self, path: Path | str, *, lock_timeout_s: float = 30.0) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self._held: dict[int, duckdb.DuckDBPyConnection] = {}
        if not self.path.parent.exists():
            raise StoreError(f"{self.path}: folder {self.path.parent} does not exist; create it "
                             "or set storage.path")
        with self._connect() as con:
            self._migrate(con)

    def close(self) -> None:
        """Nothing is held between operations; kept for `with Store(...)`."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one connection for several operations of ONE thread (the
        statistics after a run): opening costs ~15 ms, a run's aftermath
        makes dozens of reads."""
        if threading.get_ident() in self._held:  # nested: the outer one holds it
            yield
            return
        with self._open() as con:
            self._held[threading.get_ident()] = con
            try:
                yield
            finally:
                del self._held[threading.get_ident()]

    @contextmanager
    def _connect(self) -> Iterator[duckdb.DuckDBPyConnection]:
        held = self._held.get(threading.get_ident())
        if held is not None:
            yield held
            return
        with self._open() as con:
            yield con

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.02
        while True:
            try:
                con = duckdb.connect(str(self.path))
                break
            except duckdb.Error as exc:
                text = " ".join(str(exc).split())
                # DuckDB's "Could not set lock on file ... Conflicting lock is held";
                # a bare "lock" would also match "block" in a corrupt-file error.
                busy = _LOCKED.search(text) is not None
                if busy and time.monotonic() < deadline:
                    time.sleep(delay)  # another process is writing: wait for its turn
                    delay = min(delay * 2, 0.5)
                    continue
                if busy:
                    raise StoreError(f"{self.path}: in use by another process for more than "
                                     f"{self.lock_timeout_s:g}s ({text[:160]}); try again "
                                     "later") from None
                raise StoreError(f"{self.path}: cannot open as a DuckDB database "
                                 f"({text[:200]}); point storage.path at a new file or a "
                                 "bias-monitor database") from None
        try:
            yield con
        finally:
            con.close()

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "meta" not in tables:
            raise StoreError(f"{self.path}: a DuckDB database of another application (tables "
                             f"{sorted(tables)[:5]}); refusing to write to it - choose another "
                             "storage.path")
        if "meta" not in tables:
            con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
            con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', '0')", [APP])
        try:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except duckdb.Error:  # a `meta` table of another shape: another application's
            meta = {}
        if meta.get("app") != APP:
            raise StoreError(f"{self.path}: not a bias-monitor database; choose another "
                             "storage.path")
        version = int(meta.get("schema_version", "0"))
        if version > len(MIGRATIONS):
            raise StoreError(f"{self.path}: schema version {version} is newer than this monitor "
                             f"({len(MIGRATIONS)}); upgrade bias-monitor")
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            con.execute("BEGIN")
            for sql in statements:
                con.execute(sql)
            con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", [str(number)])
            con.execute("COMMIT")

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read-only statement (for callers that aggregate)."""
        with self._connect() as con:
            return con.execute(sql, list(params)).fetchall()

    def frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._connect() as con:
            return con.execute(sql, list(params)).df()

    @property
    def schema_version(self) -> int:
        rows = self.query("SELECT value FROM meta WHERE key='schema_version'")
        return int(rows[0][0]) if rows else 0

    # -- runs ---------------------------------------------------------------
    def create_run(self, run: RunRow) -> None:
        with self._connect() as con:
            con.execute(
                "INSERT INTO runs VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [run.run_id, run.endpoint, run.model, run.simulated, run.run_index, run.seed,
                 run.catalog_version, json.dumps(run.scenarios), json.dumps(run.languages),
                 json.dumps(run.variants), run.triplets, run.planned_calls, run.started_at,
                 run.finished_at, run.status])

    def finish_run(self, run_id: str, status: str) -> None:
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, finished_at = ? WHERE run_id = ?",
                        [status, datetime.now(UTC), run_id])

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._runs("WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self, endpoint: str | None = None) -> list[RunRow]:
        if endpoint is None:
            return self._runs("", [])
        return self._runs("WHERE endpoint = ?", [endpoint])

    def _runs(self, where: str, params: list[Any]) -> list[RunRow]:
        out = []
        for r in self.query(f"SELECT * FROM runs {where} ORDER BY started_at, run_id", params):
            values = list(r)
            for i in (7, 8, 9):
                values[i] = json.loads(values[i])
            out.append(RunRow(*values))
        return out

    def next_run_index(self, endpoint: str, catalog_version: str, seed: int,
                       scenarios: Sequence[str]) -> int:
        """Runs walk the sampling cycle: the next index for this sampling setup."""
        rows = self.query(
            "SELECT max(run_index) FROM runs WHERE endpoint = ? AND catalog_version = ? "
            "AND seed = ? AND scenarios = ?",
            [endpoint, catalog_version, seed, json.dumps(list(scenarios))])
        return 0 if not rows or rows[0][0] is None else int(rows[0][0]) + 1

    # -- results --------------------------------------------------------------
    def write_batch(self, calls: dict[str, list[Any]], scores: dict[str, list[Any]]) -> None:
        """One transaction: the calls (replacing earlier failed attempts) and scores."""
        with self._connect() as con:
            con.execute("BEGIN")
            try:
                _count_replaced_failures(con, calls)
                _insert(con, "probe_calls", CALL_COLUMNS, calls)
                _insert(con, "scores", SCORE_COLUMNS, scores)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise

    def write_stats(self, run_id: str, stats: dict[str, list[Any]]) -> None:
        with self._connect() as con:
            con.execute("BEGIN")
            con.execute("DELETE FROM run_stats WHERE run_id = ?", [run_id])
            _insert(con, "run_stats", STAT_COLUMNS, stats)
            con.execute("COMMIT")

    def done_calls(self, run_id: str) -> set[tuple[str, str]]:
        """(triplet_id, language) of calls that need no retry on resume."""
        rows = self.query(
            "SELECT triplet_id, language FROM probe_calls WHERE run_id = ? AND status <> 'failed'",
            [run_id])
        return {(r[0], r[1]) for r in rows}

    def add_stats(self, run_id: str, rows: list[dict[str, Any]]) -> None:
        """Add (or replace) statistics of a run; missing columns are null."""
        full = [{**{c: None for c, _ in STAT_COLUMNS}, **r, "run_id": run_id} for r in rows]
        with self._connect() as con:
            _insert(con, "run_stats", STAT_COLUMNS, {c: [r[c] for r in full]
                                                     for c, _ in STAT_COLUMNS})

    # -- baselines and alert state ---------------------------------------------
    def set_baseline(self, endpoint: str, run_ids: Sequence[str], catalog_version: str,
                     model_id: str | None, *, auto: bool) -> None:
        with self._connect() as con:
            con.execute("BEGIN")
            con.execute("UPDATE baselines SET active = false WHERE endpoint = ?", [endpoint])
            con.execute("INSERT INTO baselines VALUES (?, ?, ?, ?, ?, ?, true)",
                        [endpoint, datetime.now(UTC), json.dumps(list(run_ids)),
                         catalog_version, model_id, auto])
            # A new baseline starts every cell afresh.
            con.execute("DELETE FROM alert_state WHERE endpoint = ?", [endpoint])
            con.execute("COMMIT")

    def baseline(self, endpoint: str) -> dict[str, Any] | None:
        rows = self.query("SELECT set_at, run_ids, catalog_version, model_id, auto FROM baselines "
                          "WHERE endpoint = ? AND active", [endpoint])
        if not rows:
            return None
        set_at, run_ids, version, model_id, auto = rows[0]
        return {"endpoint": endpoint, "set_at": set_at, "run_ids": json.loads(run_ids),
                "catalog_version": version, "model_id": model_id, "auto": bool(auto)}

    def alert_states(self, endpoint: str) -> dict[tuple[str, str], dict[str, Any]]:
        cols = ["scenario", "country", "state", "s_plus", "s_minus", "alarm_runs", "calm_runs",
                "z", "reason", "last_run_id", "changed_at", "notified_at"]
        rows = self.query(f"SELECT {', '.join(cols)} FROM alert_state WHERE endpoint = ?",
                          [endpoint])
        return {(r[0], r[1]): dict(zip(cols, r, strict=True)) for r in rows}

    def run_models(self, run_ids: Sequence[str]) -> dict[str, str | None]:
        """The model id the provider returned in each run's answered calls."""
        rows = self.query("SELECT run_id, min(model_id) FROM probe_calls WHERE "
                          "list_contains($1, run_id) AND status = 'ok' GROUP BY run_id",
                          [list(run_ids)])
        found: dict[str, str | None] = dict.fromkeys(run_ids)
        found.update({r[0]: r[1] for r in rows})
        return found

    def save_alert_states(self, endpoint: str, states: list[dict[str, Any]],
                          events: list[dict[str, Any]]) -> None:
        """Cell states and their transitions, in one transaction."""
        with self._connect() as con:
            con.execute("BEGIN")
            _insert(con, "alert_state", _STATE_COLUMNS,
                    {c: [endpoint if c == "endpoint" else st[c] for st in states]
                     for c, _ in _STATE_COLUMNS})
            _insert(con, "alert_events", _EVENT_COLUMNS,
                    {c: [endpoint if c == "endpoint" else ev[c] for ev in events]
                     for c, _ in _EVENT_COLUMNS}, replace=False)
            con.execute("COMMIT")

    def mark_notified(self, endpoint: str, cells: Sequence[tuple[str, str]]) -> None:
        with self._connect() as con:
            con.execute("UPDATE alert_state SET notified_at = $1 WHERE endpoint = $2 AND "
                        "list_contains($3, [scenario, country])",
                        [datetime.now(UTC), endpoint, [list(c) for c in cells]])

    def outbox_add(self, endpoint: str, payloads: Sequence[str]) -> None:
        with self._connect() as con:
            con.execute("BEGIN")
            row = con.execute("SELECT coalesce(max(id), 0) FROM outbox").fetchone()
            start = int(row[0]) if row else 0
            n = len(payloads)
            _insert(con, "outbox", _OUTBOX_COLUMNS, {
                "id": list(range(start + 1, start + 1 + n)), "endpoint": [endpoint] * n,
                "created_at": [datetime.now(UTC)] * n, "payload": list(payloads),
                "delivered_at": [None] * n}, replace=False)
            con.execute("COMMIT")

    def outbox_pending(self, endpoint: str) -> list[tuple[int, str]]:
        rows = self.query("SELECT id, payload FROM outbox WHERE endpoint = ? AND delivered_at "
                          "IS NULL ORDER BY id", [endpoint])
        return [(int(r[0]), str(r[1])) for r in rows]

    def outbox_delivered(self, ids: Sequence[int]) -> None:
        with self._connect() as con:
            con.execute("UPDATE outbox SET delivered_at = ? WHERE list_contains($2, id)",
                        [datetime.now(UTC), list(ids)])

    def export_parquet(self, out: Path, since: datetime | None) -> dict[str, int]:
        """Every table as Parquet under out/<table>/, partitioned by date and endpoint."""
        since = since or datetime(1970, 1, 1, tzinfo=UTC)
        queries = {
            "runs": "SELECT *, CAST(started_at AS DATE) AS date FROM runs WHERE started_at >= $1",
            "probe_calls": "SELECT *, CAST(created_at AS DATE) AS date FROM probe_calls "
                           "WHERE created_at >= $1",
            "scores": "SELECT s.*, c.endpoint, CAST(c.created_at AS DATE) AS date FROM scores s "
                      "JOIN probe_calls c USING (run_id, triplet_id, language) "
                      "WHERE c.created_at >= $1",
            "run_stats": "SELECT s.*, r.endpoint, CAST(r.started_at AS DATE) AS date FROM "
                         "run_stats s JOIN runs r USING (run_id) WHERE r.started_at >= $1",
            "alert_events": "SELECT *, CAST(event_at AS DATE) AS date FROM alert_events "
                            "WHERE event_at >= $1",
        }
        counts: dict[str, int] = {}
        out.mkdir(parents=True, exist_ok=True)
        with self._connect() as con:
            for table, sql in queries.items():
                row = con.execute(f"SELECT count(*) FROM ({sql})", [since]).fetchone()
                counts[table] = int(row[0]) if row else 0
                if counts[table]:
                    target = str(out / table).replace("'", "''")
                    con.execute(f"COPY ({sql}) TO '{target}' (FORMAT PARQUET, "
                                "PARTITION_BY (date, endpoint), OVERWRITE_OR_IGNORE)", [since])
        return counts

    def replaced_failures(self, endpoint: str) -> int:
        """Failed calls later replaced by a resumed run's answer: still counted, so
        that bias_monitor_probes_total{status="failed"} never goes down."""
        rows = self.query("SELECT value FROM meta WHERE key = ?", [f"replaced_failed/{endpoint}"])
        return int(rows[0][0]) if rows else 0

    def calls_frame(self, run_ids: Sequence[str], *, with_text: bool = False) -> pd.DataFrame:
        cols = ", ".join(c for c, _ in CALL_COLUMNS if with_text or c != "raw_text")
        return self.frame(f"SELECT {cols} FROM probe_calls WHERE list_contains($1, run_id)",
                          [list(run_ids)])

    def option_means(self, run_ids: Sequence[str]) -> dict[tuple[str, str, str, str],
                                                          tuple[float, int]]:
        """(scenario, option_id, country, language) -> (mean score, n) over answered calls:
        what moved against a baseline (Slack's movers, the report's evidence)."""
        rows = self.query(
            "SELECT c.scenario, s.option_id, s.country, s.language, avg(s.score), count(*) "
            "FROM scores s JOIN probe_calls c USING (run_id, triplet_id, language) "
            "WHERE list_contains($1, s.run_id) AND c.status = 'ok' "
            "GROUP BY c.scenario, s.option_id, s.country, s.language", [list(run_ids)])
        return {(r[0], r[1], r[2], r[3]): (float(r[4]), int(r[5])) for r in rows}

    def scores_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        return self.frame(
            "SELECT s.*, c.scenario, c.variant FROM scores s JOIN probe_calls c "
            "USING (run_id, triplet_id, language) "
            "WHERE list_contains($1, s.run_id) AND c.status = 'ok'", [list(run_ids)])

    def stats_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        return self.frame("SELECT * FROM run_stats WHERE list_contains($1, run_id)",
                          [list(run_ids)])


def _insert(con: duckdb.DuckDBPyConnection, table: str, cols: tuple[tuple[str, str], ...],
            data: dict[str, list[Any]], *, replace: bool = True) -> None:
    n = len(data[cols[0][0]])
    if any(len(data[c]) != n for c, _ in cols):
        raise ValueError(f"{table}: columns of unequal length")
    if n == 0:
        return
    select = ", ".join(f"unnest(${i + 1}::{t}[]) AS {c}" for i, (c, t) in enumerate(cols))
    verb = "INSERT OR REPLACE" if replace else "INSERT"  # OR REPLACE needs a primary key
    con.execute(f"{verb} INTO {table} SELECT {select}", [data[c] for c, _ in cols])


def _count_replaced_failures(con: duckdb.DuckDBPyConnection, calls: dict[str, list[Any]]) -> None:
    if not calls["run_id"]:
        return
    rows = con.execute(
        "SELECT p.endpoint, count(*) FROM probe_calls p JOIN (SELECT unnest($1::VARCHAR[]) AS r, "
        "unnest($2::VARCHAR[]) AS t, unnest($3::VARCHAR[]) AS l) b ON p.run_id = b.r AND "
        "p.triplet_id = b.t AND p.language = b.l WHERE p.status = 'failed' GROUP BY p.endpoint",
        [calls["run_id"], calls["triplet_id"], calls["language"]]).fetchall()
    for endpoint, n in rows:
        key = f"replaced_failed/{endpoint}"
        old = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)",
                    [key, str((int(old[0]) if old else 0) + int(n))])
