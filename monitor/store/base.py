"""What the store's operations stand on, whichever database holds the data.

The mixins (runs.py, results.py, state.py, inputs.py, export.py) write their SQL
once, against `Base`: a connection per thread's series of operations
(`session`), transactions that nest (`transaction`), rows, frames, batched
inserts and new ids. Two engines implement it:

    db.py  Database: the DuckDB file (one machine; the default)
    pg.py  PgDatabase: a PostgreSQL database shared by replicas (storage.url_env)

The SQL the mixins send is the subset both engines read alike (PostgreSQL gets a
`list_contains` function from its schema); what cannot be shared (a batched
insert, a new id, a frame) is a method here that each engine writes its own way.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, Self

from monitor.errors import StoreError

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Base", "Connection", "Result", "batch_rows"]


class Result(Protocol):
    def fetchall(self) -> list[Any]: ...

    def fetchone(self) -> Any: ...


class Connection(Protocol):
    """A DuckDB connection, or PostgreSQL's through pg.py (same placeholders: `?`, `$1`)."""

    def execute(self, query: Any, parameters: Any = ...) -> Any: ...


class Base:
    """One monitor database; the engine-specific parts are the methods that raise here."""

    #: Where the data is, for messages: the file, or the PostgreSQL database (no secret).
    where: str
    path: Path  # DuckDB: the file; PostgreSQL: the place its spool and reports go beside
    read_only: bool = False
    lock_timeout_s: float = 30.0
    #: Rows are shared with other monitor processes on other machines (coordination).
    shared: bool = False
    _ERRORS: tuple[type[BaseException], ...] = ()

    def _init_threads(self) -> None:
        self._held: dict[int, Any] = {}
        self._in_transaction: set[int] = set()

    def configure(self, *, threads: int | None = None) -> None:
        """Engine tuning for benchmarks (DuckDB's worker threads); others ignore it."""

    def close(self) -> None:
        """Release what is held between operations."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _classify(self, exc: BaseException) -> StoreError:
        raise NotImplementedError

    def _frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        raise NotImplementedError

    def _insert(self, con: Connection, table: str, cols: tuple[tuple[str, str], ...],
                data: dict[str, list[Any]], *, replace: bool = True) -> None:
        """Columns (name -> values) as rows of `table`; `replace`: a row whose primary key
        exists replaces it."""
        raise NotImplementedError

    def _new_ids(self, con: Connection, table: str, n: int) -> list[int]:
        """`n` ids for new rows of `table` (its `id` column), unique among writers."""
        raise NotImplementedError

    def _copy_out(self, sql: str, params: Sequence[Any], out: IO[bytes]) -> None:
        """`sql`'s rows as PostgreSQL's CSV into `out` (the engine a Scratch is loaded from)."""
        raise NotImplementedError

    def _stream(self, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """A large result in chunks of `size` rows (copying a history)."""
        with self._connect() as con:
            cur = con.execute(sql)
            while rows := cur.fetchmany(size):
                yield rows

    def _serialize(self, con: Connection, key: str) -> None:
        """Until this transaction ends, others doing the same for `key` wait (replicas on a
        shared database); one process writes a file at a time: nothing to do there."""

    def _sync_ids(self) -> None:
        """After rows were copied in with their ids: new ids follow them (an engine whose
        ids come from a sequence moves it)."""

    @contextmanager
    def session(self) -> Iterator[None]:
        """Hold one connection for several operations of ONE thread (the statistics
        after a run, a report): a run's aftermath makes dozens of reads."""
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
    def _connect(self) -> Iterator[Any]:
        held = self._held.get(threading.get_ident())
        if held is not None:
            try:
                yield held
            except self._ERRORS as exc:
                raise self._classify(exc) from None
            return
        with self._open() as con:
            yield con

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Several operations of this thread as one: all written or none (a run's review
        commits its statistics, alert states, baseline, messages and status so, and is
        redone whole if interrupted before)."""
        with self.session(), self._connect() as con, self._transaction(con):
            yield

    @contextmanager
    def _transaction(self, con: Connection) -> Iterator[None]:
        me = threading.get_ident()
        if me in self._in_transaction:  # inside transaction(): it commits, or rolls back
            yield
            return
        self._in_transaction.add(me)
        try:
            with self._begin(con):
                yield
        finally:
            self._in_transaction.discard(me)

    @contextmanager
    def _begin(self, con: Connection) -> Iterator[None]:
        con.execute("BEGIN")
        try:
            yield
            con.execute("COMMIT")
        except BaseException:
            # A failed COMMIT has ended the transaction already: the engine's "no
            # transaction is active" must not hide why.
            with contextlib.suppress(*self._ERRORS):
                con.execute("ROLLBACK")
            raise

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._connect() as con:
            return list(con.execute(sql, list(params)).fetchall())

    @property
    def schema_version(self) -> int:
        rows = self._rows("SELECT value FROM meta WHERE key='schema_version'")
        return int(rows[0][0]) if rows else 0


def batch_rows(table: str, cols: tuple[tuple[str, str], ...], data: dict[str, list[Any]]) -> int:
    """The rows of a columnar batch (name -> values) for `table`, its columns checked to be
    of one length: what either engine's insert writes."""
    n = len(data[cols[0][0]])
    if any(len(data[c]) != n for c, _ in cols):
        raise ValueError(f"{table}: columns of unequal length")
    return n
