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
- Every DuckDB error leaves as one StoreError: busy (locked too long),
  damaged (a checksum or an unreadable block: restore a copy, export what
  is readable), a failed write (no space, read-only: StoreWriteError, exit
  4) or another storage error. A ROLLBACK after a failed COMMIT (DuckDB has
  already ended the transaction) never hides the first error.
- A run row names its owner process (monitor.store.owner) and carries a heartbeat
  refreshed by every batch the run writes, so that a run whose process died
  (SIGKILL, OOM) is found and closed as interrupted instead of staying
  `running` for ever.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from monitor.errors import StoreBusyError, StoreDamagedError, StoreError, StoreWriteError
from monitor.store import owner as owners

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CALL_COLUMNS", "SCORE_COLUMNS", "STAT_COLUMNS", "ExportResult", "FileSystem",
           "RunRow", "RunSummary", "Store", "file_system", "size_text"]

APP = "bias-monitor"
_LOCKED = re.compile(r"\b(?:could not set lock|conflicting lock)\b", re.IGNORECASE)
_NO_ROOM = re.compile(r"no space left on device|disk quota exceeded|file too large|"
                      r"read-only file system", re.IGNORECASE)
_IO = re.compile(r"could not (?:write|fsync|truncate|create)|input/output error|i/o error|"
                 r"permission denied", re.IGNORECASE)
_DAMAGED = re.compile(r"corrupt|checksum|metadatareader|replaying wal|not a valid duckdb",
                      re.IGNORECASE)
# A DuckDB file: 3 header blocks of 4 KiB, then blocks of 256 KiB.
_HEADER, _BLOCK = 12288, 262144

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
    [  # v4: who runs a run (orphans are found), why it ended, how often it was started
        "ALTER TABLE runs ADD COLUMN owner VARCHAR",
        "ALTER TABLE runs ADD COLUMN heartbeat_at TIMESTAMPTZ",
        "ALTER TABLE runs ADD COLUMN reason VARCHAR",
        "ALTER TABLE runs ADD COLUMN attempts INTEGER DEFAULT 0",
    ],
]
_RUN_FIELDS = ("run_id", "endpoint", "model", "simulated", "run_index", "seed",
               "catalog_version", "scenarios", "languages", "variants", "triplets",
               "planned_calls", "started_at", "finished_at", "status", "owner", "heartbeat_at",
               "reason", "attempts")


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
    owner: str | None = None  # monitor.store.owner token of the process running it
    heartbeat_at: datetime | None = None
    reason: str | None = None  # why it ended as it did (interrupted, failed)
    attempts: int = 0  # times a process started or resumed it


@dataclass(frozen=True)
class RunSummary:
    """One line of `monitor runs`."""

    run: RunRow
    calls: int
    counts: dict[str, int]  # status -> calls
    top_error: str | None  # the most common error of its failed calls
    top_error_n: int
    top_unparseable: str | None  # the most common reason an answer was unreadable
    top_unparseable_n: int


@dataclass(frozen=True)
class FileSystem:
    """Where a file lives: the mount point, its type and the free bytes."""

    mount: str
    fstype: str
    free: int
    total: int


@dataclass(frozen=True)
class ExportResult:
    counts: dict[str, int]  # table -> rows written
    damaged: dict[str, str]  # table -> why it could not be read


def file_system(path: Path) -> FileSystem:
    p = path.resolve().parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    fstype = "?"
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[1] == str(p):
                fstype = parts[2]  # the last entry for a mount point is the visible one
    try:
        usage = shutil.disk_usage(p)
        return FileSystem(str(p), fstype, usage.free, usage.total)
    except OSError:
        return FileSystem(str(p), fstype, 0, 0)


class Store:
    """A monitor database in one DuckDB file, opened per operation."""

    def __init__(self, path: Path | str, *, lock_timeout_s: float = 30.0,
                 read_only: bool = False) -> None:
        self.path = Path(path)
        self.lock_timeout_s = lock_timeout_s
        self.read_only = read_only
        self._held: dict[int, duckdb.DuckDBPyConnection] = {}
        if not self.path.parent.exists():
            raise StoreError(f"{self.path}: folder {self.path.parent} does not exist; create it "
                             "or set storage.path")
        if read_only and not self.path.is_file():
            raise StoreError(f"{self.path}: no such database; check storage.path")
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
            try:
                yield held
            except duckdb.Error as exc:
                raise self._classify(exc) from None
            return
        with self._open() as con:
            yield con

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.02
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=self.read_only)
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
                    raise StoreBusyError(f"{self.path}: in use by another process for more "
                                         f"than {self.lock_timeout_s:g}s ({text[:160]}); try "
                                         "again later") from None
                if "not a valid duckdb" in text.lower() and not self._duckdb_shaped():
                    raise StoreError(f"{self.path}: cannot open as a DuckDB database "
                                     f"({text[:200]}); point storage.path at a new file or a "
                                     "bias-monitor database") from None
                raise self._classify(exc) from None
        try:
            yield con
        except duckdb.Error as exc:
            raise self._classify(exc) from None
        finally:
            with contextlib.suppress(duckdb.Error):  # closing after a failed write may fail
                con.close()

    def _duckdb_shaped(self) -> bool:
        """The file has DuckDB's layout (header blocks + whole 256 KiB blocks): a
        DuckDB database whose header is damaged, not someone else's file."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return False
        return size > _HEADER and (size - _HEADER) % _BLOCK == 0

    def _classify(self, exc: BaseException) -> StoreError:
        """The one StoreError a DuckDB error means to the user."""
        text = " ".join(str(exc).split())[:240]
        if _NO_ROOM.search(text) or _IO.search(text):
            fs = file_system(self.path)
            return StoreWriteError(f"{self.path}: cannot write ({text}); file system "
                                   f"{fs.mount} ({fs.fstype}) has {size_text(fs.free)} free "
                                   f"of {size_text(fs.total)}", mount=fs.mount,
                                   free_bytes=fs.free)
        if _DAMAGED.search(text):
            return StoreDamagedError(
                f"{self.path}: the database file is damaged ({text}); restore it from a "
                "backup copy, or save what is still readable with `monitor export --parquet "
                "DIR` first; keep the damaged file for inspection")
        return StoreError(f"{self.path}: storage error ({text})")

    @contextmanager
    def _transaction(self, con: duckdb.DuckDBPyConnection) -> Iterator[None]:
        con.execute("BEGIN")
        try:
            yield
            con.execute("COMMIT")
        except BaseException:
            # A failed COMMIT has ended the transaction already: DuckDB's
            # "cannot rollback - no transaction is active" must not hide why.
            with contextlib.suppress(duckdb.Error):
                con.execute("ROLLBACK")
            raise

    def _migrate(self, con: duckdb.DuckDBPyConnection) -> None:
        tables = {r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables").fetchall()}
        if tables and "meta" not in tables:
            raise StoreError(f"{self.path}: a DuckDB database of another application (tables "
                             f"{sorted(tables)[:5]}); refusing to write to it - choose another "
                             "storage.path")
        if "meta" not in tables:
            if self.read_only:
                raise StoreError(f"{self.path}: an empty DuckDB database, not a bias-monitor "
                                 "one; check storage.path")
            with self._transaction(con):
                con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
                con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', '0')",
                            [APP])
        try:
            meta = dict(con.execute("SELECT key, value FROM meta").fetchall())
        except (duckdb.BinderException, duckdb.CatalogException, ValueError):
            meta = {}  # a `meta` table of another shape: another application's
        if meta.get("app") != APP:
            raise StoreError(f"{self.path}: not a bias-monitor database; choose another "
                             "storage.path")
        version = int(meta.get("schema_version", "0"))
        if version > len(MIGRATIONS):
            raise StoreError(f"{self.path}: schema version {version} is newer than this monitor "
                             f"({len(MIGRATIONS)}); upgrade bias-monitor")
        if self.read_only:
            return  # an export reads the tables as they are
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):
            with self._transaction(con):
                for sql in statements:
                    con.execute(sql)
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            [str(number)])

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
        values = [getattr(run, f) for f in _RUN_FIELDS]
        for i in (7, 8, 9):
            values[i] = json.dumps(values[i])
        with self._connect() as con:
            con.execute(f"INSERT INTO runs ({', '.join(_RUN_FIELDS)}) VALUES "
                        f"({', '.join('?' for _ in _RUN_FIELDS)})", values)

    def claim_run(self, run_id: str, owner: str) -> None:
        """This process runs (or resumes) `run_id` from now on."""
        with self._connect() as con:
            con.execute("UPDATE runs SET status = 'running', owner = ?, heartbeat_at = ?, "
                        "finished_at = NULL, reason = NULL, attempts = coalesce(attempts, 0) "
                        "+ 1 WHERE run_id = ?", [owner, datetime.now(UTC), run_id])

    def finish_run(self, run_id: str, status: str, reason: str | None = None) -> None:
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, finished_at = ?, reason = ? "
                        "WHERE run_id = ?", [status, datetime.now(UTC), reason, run_id])

    def close_run(self, run_id: str, status: str, reason: str) -> None:
        """A run that will not be resumed: its status and why, its end time kept
        (a run closed today must not look like today's run)."""
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, reason = ?, finished_at = coalesce("
                        "finished_at, heartbeat_at, started_at) WHERE run_id = ?",
                        [status, reason, run_id])

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._runs("WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self, endpoint: str | None = None) -> list[RunRow]:
        if endpoint is None:
            return self._runs("", [])
        return self._runs("WHERE endpoint = ?", [endpoint])

    def _runs(self, where: str, params: list[Any]) -> list[RunRow]:
        out = []
        for r in self.query(f"SELECT {', '.join(_RUN_FIELDS)} FROM runs {where} "
                            "ORDER BY started_at, run_id", params):
            values = list(r)
            for i in (7, 8, 9):
                values[i] = json.loads(values[i])
            values[-1] = int(values[-1] or 0)
            out.append(RunRow(*values))
        return out

    def close_orphans(self, endpoint: str | None = None) -> list[RunRow]:
        """Runs left `running` by a process that is gone (SIGKILL, OOM, a full disk
        that kept even the last status update out) become `interrupted`, with why."""
        now = datetime.now(UTC)
        closed = []
        for run in self.runs(endpoint):
            if run.status != "running" or owners.alive(run.owner, run.heartbeat_at, now=now):
                continue
            reason = (f"its process ({owners.describe(run.owner)}) ended without closing it "
                      "(killed, out of memory or out of disk)")
            with self._connect() as con:
                con.execute("UPDATE runs SET status = 'interrupted', finished_at = ?, "
                            "reason = ? WHERE run_id = ? AND status = 'running'",
                            [now, reason, run.run_id])
            closed.append(RunRow(**{**run.__dict__, "status": "interrupted",
                                    "finished_at": now, "reason": reason}))
        return closed

    def next_run_index(self, endpoint: str, catalog_version: str, seed: int,
                       scenarios: Sequence[str]) -> int:
        """Runs walk the sampling cycle: the next index for this sampling setup."""
        rows = self.query(
            "SELECT max(run_index) FROM runs WHERE endpoint = ? AND catalog_version = ? "
            "AND seed = ? AND scenarios = ?",
            [endpoint, catalog_version, seed, json.dumps(list(scenarios))])
        return 0 if not rows or rows[0][0] is None else int(rows[0][0]) + 1

    def run_summaries(self, endpoint: str | None = None,
                      run_ids: Sequence[str] | None = None) -> list[RunSummary]:
        """Runs with their call counts and most common error (`monitor runs`)."""
        runs = [r for r in self.runs(endpoint) if run_ids is None or r.run_id in run_ids]
        ids = [r.run_id for r in runs]
        counts: dict[str, dict[str, int]] = {i: {} for i in ids}
        for run_id, status, n in self.query(
                "SELECT run_id, status, count(*) FROM probe_calls WHERE list_contains($1, "
                "run_id) GROUP BY run_id, status", [ids]):
            counts[run_id][status] = int(n)
        top: dict[tuple[str, str], tuple[str, int]] = {}
        for run_id, status, text, n in self.query(
                "SELECT run_id, status, coalesce(error, detail, '?') AS t, count(*) AS n FROM "
                "probe_calls WHERE list_contains($1, run_id) AND status IN ('failed', "
                "'unparseable') GROUP BY run_id, status, t QUALIFY row_number() OVER "
                "(PARTITION BY run_id, status ORDER BY n DESC, t) = 1", [ids]):
            top[(run_id, status)] = (str(text), int(n))
        out = []
        for r in runs:
            err = top.get((r.run_id, "failed"), (None, 0))
            unp = top.get((r.run_id, "unparseable"), (None, 0))
            out.append(RunSummary(r, sum(counts[r.run_id].values()), counts[r.run_id],
                                  err[0], err[1], unp[0], unp[1]))
        return out

    # -- results --------------------------------------------------------------
    def write_batch(self, calls: dict[str, list[Any]], scores: dict[str, list[Any]], *,
                    heartbeat: str | None = None) -> None:
        """One transaction: the calls (replacing earlier failed attempts) and scores,
        and the heartbeat of run `heartbeat`."""
        with self._connect() as con, self._transaction(con):
            _count_replaced_failures(con, calls)
            _insert(con, "probe_calls", CALL_COLUMNS, calls)
            _insert(con, "scores", SCORE_COLUMNS, scores)
            if heartbeat is not None:
                con.execute("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?",
                            [datetime.now(UTC), heartbeat])

    def write_stats(self, run_id: str, stats: dict[str, list[Any]]) -> None:
        with self._connect() as con, self._transaction(con):
            con.execute("DELETE FROM run_stats WHERE run_id = ?", [run_id])
            _insert(con, "run_stats", STAT_COLUMNS, stats)

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
        with self._connect() as con, self._transaction(con):
            con.execute("UPDATE baselines SET active = false WHERE endpoint = ?", [endpoint])
            con.execute("INSERT INTO baselines VALUES (?, ?, ?, ?, ?, ?, true)",
                        [endpoint, datetime.now(UTC), json.dumps(list(run_ids)),
                         catalog_version, model_id, auto])
            # A new baseline starts every cell afresh.
            con.execute("DELETE FROM alert_state WHERE endpoint = ?", [endpoint])

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
        with self._connect() as con, self._transaction(con):
            _insert(con, "alert_state", _STATE_COLUMNS,
                    {c: [endpoint if c == "endpoint" else st[c] for st in states]
                     for c, _ in _STATE_COLUMNS})
            _insert(con, "alert_events", _EVENT_COLUMNS,
                    {c: [endpoint if c == "endpoint" else ev[c] for ev in events]
                     for c, _ in _EVENT_COLUMNS}, replace=False)

    def mark_notified(self, endpoint: str, cells: Sequence[tuple[str, str]]) -> None:
        with self._connect() as con:
            con.execute("UPDATE alert_state SET notified_at = $1 WHERE endpoint = $2 AND "
                        "list_contains($3, [scenario, country])",
                        [datetime.now(UTC), endpoint, [list(c) for c in cells]])

    def outbox_add(self, endpoint: str, payloads: Sequence[str]) -> None:
        with self._connect() as con, self._transaction(con):
            row = con.execute("SELECT coalesce(max(id), 0) FROM outbox").fetchone()
            start = int(row[0]) if row else 0
            n = len(payloads)
            _insert(con, "outbox", _OUTBOX_COLUMNS, {
                "id": list(range(start + 1, start + 1 + n)), "endpoint": [endpoint] * n,
                "created_at": [datetime.now(UTC)] * n, "payload": list(payloads),
                "delivered_at": [None] * n}, replace=False)

    def outbox_pending(self, endpoint: str) -> list[tuple[int, str]]:
        rows = self.query("SELECT id, payload FROM outbox WHERE endpoint = ? AND delivered_at "
                          "IS NULL ORDER BY id", [endpoint])
        return [(int(r[0]), str(r[1])) for r in rows]

    def outbox_delivered(self, ids: Sequence[int]) -> None:
        with self._connect() as con:
            con.execute("UPDATE outbox SET delivered_at = ? WHERE list_contains($2, id)",
                        [datetime.now(UTC), list(ids)])

    def export_parquet(self, out: Path, since: datetime | None) -> ExportResult:
        """Every table as Parquet under out/<table>/, partitioned by date and endpoint.
        A table that cannot be read (a damaged block) is reported, the others written."""
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
            "baselines": "SELECT *, CAST(set_at AS DATE) AS date FROM baselines "
                         "WHERE set_at >= $1",
            "alert_state": "SELECT *, CAST(changed_at AS DATE) AS date FROM alert_state "
                           "WHERE changed_at >= $1",
            "alert_events": "SELECT *, CAST(event_at AS DATE) AS date FROM alert_events "
                            "WHERE event_at >= $1",
            "outbox": "SELECT *, CAST(created_at AS DATE) AS date FROM outbox "
                      "WHERE created_at >= $1",
        }
        counts: dict[str, int] = {}
        damaged: dict[str, str] = {}
        out.mkdir(parents=True, exist_ok=True)
        with self._open() as con:
            for table, sql in queries.items():
                try:
                    row = con.execute(f"SELECT count(*) FROM ({sql})", [since]).fetchone()
                    counts[table] = int(row[0]) if row else 0
                    if counts[table]:
                        target = str(out / table).replace("'", "''")
                        con.execute(f"COPY ({sql}) TO '{target}' (FORMAT PARQUET, "
                                    "PARTITION_BY (date, endpoint), OVERWRITE_OR_IGNORE)",
                                    [since])
                except duckdb.Error as exc:
                    counts.pop(table, None)
                    damaged[table] = " ".join(str(exc).split())[:160]
        return ExportResult(counts, damaged)

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


def size_text(n: float) -> str:
    """1536 -> '1.5 KB' (binary units, as df -h)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


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
