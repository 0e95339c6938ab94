"""The store's core: opening the DuckDB file, errors, transactions, migrations.

- A versioned schema (monitor.store.schema): `meta` holds the application
  tag and the schema version; the frozen migrations are applied in order,
  one transaction each.
- A file that is not DuckDB, or a DuckDB database of another application, is
  refused with a clear error and never written to. No code is loaded or
  installed at run time: DuckDB's extension auto-install and auto-load are
  off (a SQLite file would otherwise make it download `sqlite_scanner`), and
  a file whose header is not DuckDB's is refused before DuckDB reads it.
- DuckDB lets one process write a file at a time, and a writer excludes every
  other process. So the file is held only for the length of one operation:
  each method opens, works and closes, and an open that meets another
  process's lock is retried with backoff for up to `lock_timeout_s` before
  failing with a clear message (`session()` holds one connection for a
  thread's series of operations). The daemon and the CLI commands can
  therefore share one file.
- Every DuckDB error leaves as one StoreError: busy (locked too long),
  damaged (a checksum or an unreadable block: restore a copy, export what
  is readable), a failed write (no space, read-only, no permission:
  StoreWriteError, exit 4) or another storage error (monitor.store.diagnose
  words them). A ROLLBACK after a failed COMMIT (DuckDB has
  already ended the transaction) never hides the first error.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from monitor.errors import StoreBusyError, StoreError, StoreWriteError
from monitor.store.base import Base, Connection, batch_rows
from monitor.store.diagnose import classify, duckdb_shaped, refuse_foreign
from monitor.store.schema import APP, MIGRATIONS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Database", "DatabaseError", "Scratch", "insert"]

# The name the export uses, so that duckdb itself is imported here only.
DatabaseError = duckdb.Error

_LOCKED = re.compile(r"\b(?:could not set lock|conflicting lock)\b", re.IGNORECASE)
#: Every connection: no extension is installed or loaded behind the monitor's back
#: (it would fetch code from the internet at run time), and none unsigned.
_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False,
           "allow_community_extensions": False, "allow_unsigned_extensions": False}


class Database(Base):
    """A monitor database in one DuckDB file, opened per operation."""

    _ERRORS = (duckdb.Error,)

    def __init__(self, path: Path | str, *, lock_timeout_s: float = 30.0,
                 read_only: bool = False, upgrade: bool = True,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        """`read_only`: never write (a read-only file or mount, a backup, a snapshot);
        a file of an older schema is still upgraded first, through one writing
        connection, unless `upgrade` is False (an export reads the tables as they are)."""
        self.path = Path(path)
        self.where = str(self.path)
        self._init_threads()
        self.lock_timeout_s = lock_timeout_s
        self.read_only = read_only
        self._sleep = sleep  # the waits for another process's lock
        self._clock = clock
        self._threads: int | None = None
        if not self.path.parent.exists():
            raise StoreError(f"{self.path}: folder {self.path.parent} does not exist; create it "
                             "or set storage.path")
        if read_only and not self.path.is_file():
            raise StoreError(f"{self.path}: no such database; check storage.path")
        self._older: int | None = None  # a reader's file of an older schema
        with self._connect() as con:
            self._migrate(con)
        if self._older is not None and upgrade:
            self._upgrade_once(self._older)  # its own connection: DuckDB allows one mode

    def configure(self, *, threads: int | None = None) -> None:
        """DuckDB's worker threads for this store's connections (benchmarks pin them)."""
        self._threads = threads

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        deadline = self._clock() + self.lock_timeout_s
        delay = 0.02
        refuse_foreign(self.path)
        while True:
            try:
                con = duckdb.connect(str(self.path), read_only=self.read_only,
                                     config=dict(_CONFIG))
                break
            except duckdb.Error as exc:
                text = " ".join(str(exc).split())
                # DuckDB's "Could not set lock on file ... Conflicting lock is held";
                # a bare "lock" would also match "block" in a corrupt-file error.
                busy = _LOCKED.search(text) is not None
                if busy and self._clock() < deadline:
                    self._sleep(delay)  # another process is writing: wait for its turn
                    delay = min(delay * 2, 0.5)
                    continue
                if busy:
                    raise StoreBusyError(f"{self.path}: in use by another process for more "
                                         f"than {self.lock_timeout_s:g}s ({text[:160]}); try "
                                         "again later") from None
                if "not a valid duckdb" in text.lower() and not duckdb_shaped(self.path):
                    raise StoreError(f"{self.path}: cannot open as a DuckDB database "
                                     f"({text[:200]}); point storage.path at a new file or a "
                                     "bias-monitor database") from None
                raise self._classify(exc) from None
        try:
            # No progress bar: a long query must not draw on a report's or a run's stderr.
            con.execute("SET enable_progress_bar = false")
            if self._threads:
                con.execute(f"SET threads = {int(self._threads)}")
            yield con
        except duckdb.Error as exc:
            raise self._classify(exc) from None
        finally:
            with contextlib.suppress(duckdb.Error):  # closing after a failed write may fail
                con.close()

    def _classify(self, exc: BaseException) -> StoreError:
        """The one StoreError a DuckDB error means to the user (monitor.store.diagnose)."""
        return classify(self.path, " ".join(str(exc).split())[:240])

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
            self._older = version if version < len(MIGRATIONS) else None
            return
        for number, statements in enumerate(MIGRATIONS[version:], start=version + 1):  # frozen
            with self._transaction(con):
                for sql in statements:
                    con.execute(sql)
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            [str(number)])

    def _upgrade_once(self, version: int) -> None:
        """A read-only user of a file of an older schema: one writing connection upgrades
        it (the newer tables are what the reads expect), or one line says why it cannot."""
        self.read_only = False
        try:
            with self._connect() as con:
                self._migrate(con)
        except StoreWriteError as exc:
            raise StoreError(f"{self.path}: schema version {version} is older than this "
                             f"monitor's ({len(MIGRATIONS)}) and cannot be upgraded where it "
                             f"is ({exc.cause_text}); copy the file to a writable place and "
                             "point storage.path at the copy") from None
        finally:
            self.read_only = True

    def _frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        with self._connect() as con:
            frame: pd.DataFrame = con.execute(sql, list(params)).df()
            return frame

    def _columns(self, sql: str, params: Sequence[Any] = ()) -> dict[str, np.ndarray]:
        """The result as numpy columns (no pandas: the run path does not import it)."""
        with self._connect() as con:
            return {k: np.asarray(v) for k, v in con.execute(sql, list(params))
                    .fetchnumpy().items()}

    def _insert(self, con: Connection, table: str, cols: tuple[tuple[str, str], ...],
                data: dict[str, list[Any]], *, replace: bool = True) -> None:
        insert(con, table, cols, data, replace=replace)

    def _new_ids(self, con: Connection, table: str, n: int) -> list[int]:
        # One writer at a time holds the file: the largest id so far is safe to count on.
        row = con.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchone()
        start = int(row[0]) if row else 0
        return list(range(start + 1, start + 1 + n))


class Scratch(Database):
    """An in-memory DuckDB with the monitor's schema, for one series of reads: the rows
    another engine holds (monitor.store.pg) are loaded into it, so that the statistics'
    inputs and the report's frames are computed by the same SQL as on the file."""

    def __init__(self) -> None:
        self.path = Path(":memory:")
        self.where = "memory"
        self._init_threads()
        self._threads = None
        self._con = duckdb.connect(":memory:", config=dict(_CONFIG))
        self._con.execute("SET enable_progress_bar = false")
        self._older = None
        with self._connect() as con:
            self._migrate(con)

    @contextmanager
    def _open(self) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            yield self._con
        except duckdb.Error as exc:
            raise StoreError(f"scratch database: {' '.join(str(exc).split())[:240]}") from None

    def load_csv(self, table: str, cols: Sequence[tuple[str, str]], csv: Path) -> None:
        """Rows in PostgreSQL's CSV (NULL unquoted and empty, "" an empty string)."""
        spec = ", ".join(f"'{c}': '{t}'" for c, t in cols)
        names = ", ".join(c for c, _ in cols)
        with self._connect() as con:
            con.execute(f"INSERT INTO {table} ({names}) SELECT * FROM read_csv(?, header=false, "
                        f"columns={{{spec}}}, allow_quoted_nulls=false, nullstr='', quote='\"', "
                        "escape='\"', auto_detect=false)", [str(csv)])

    def close(self) -> None:
        self._con.close()


def insert(con: Connection, table: str, cols: tuple[tuple[str, str], ...],
            data: dict[str, list[Any]], *, replace: bool = True) -> None:
    if batch_rows(table, cols, data) == 0:
        return
    select = ", ".join(f"unnest(${i + 1}::{t}[]) AS {c}" for i, (c, t) in enumerate(cols))
    verb = "INSERT OR REPLACE" if replace else "INSERT"  # OR REPLACE needs a primary key
    con.execute(f"{verb} INTO {table} SELECT {select}", [data[c] for c, _ in cols])


