"""The PostgreSQL engine (storage.url_env): the only psycopg user.

Replicas on several machines share one PostgreSQL database: the data of the
DuckDB file (the same tables and schema versions, monitor.store.schema_pg), and
the leases and claimed slots that let them take turns (monitor.store.coordination).

- The URL comes from the environment variable that `storage.url_env` names. It is
  kept private: messages name the database as `PostgreSQL database NAME on
  HOST:PORT ($VAR)`, and a driver's text is masked before it is shown.
- One connection per thread, kept open (a connection costs a TLS and password
  handshake, unlike a DuckDB file), in autocommit with explicit transactions
  (monitor.store.base); the session time zone is UTC.
- The store's SQL uses DuckDB's `?` placeholders; they become psycopg's here
  (client-side binding, so `? IS NULL` needs no declared type).
- Migrations run under an advisory lock: replicas starting together migrate once.
- Reads of a few runs' answers (the statistics' inputs, the report's frames) are
  computed by DuckDB's SQL over those runs' rows, copied out as CSV
  (monitor.store.scoped): one text of that SQL for both engines.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

import psycopg
from psycopg import ClientCursor
from psycopg.types.numeric import FloatLoader

from monitor.errors import StoreError, StoreWriteError, WriteCause
from monitor.store.base import Base, Connection, batch_rows
from monitor.store.schema import APP
from monitor.store.schema_pg import PG_MIGRATIONS

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PgDatabase", "describe"]

_PLACE = re.compile(r"'(?:[^']|'')*'|\?|%")
_TYPES = {"VARCHAR": "text", "DOUBLE": "float8", "INTEGER": "int4", "BIGINT": "int8",
          "BOOLEAN": "bool", "TIMESTAMPTZ": "timestamptz"}
#: The advisory lock migrations take (any constant; "bm" + schema).
_MIGRATE_LOCK = 0x626D_0001


@lru_cache(maxsize=512)
def _pg(sql: str) -> str:
    """DuckDB's `?` -> psycopg's `%s`; a literal `%` doubled; string literals kept."""
    return _PLACE.sub(lambda m: {"?": "%s", "%": "%%"}.get(m.group(), m.group()), sql)


def describe(url: str, env: str) -> str:
    """The database for messages, without user or password."""
    parts = urlsplit(url)
    name = parts.path.lstrip("/") or "(default)"
    return f"PostgreSQL database {name} on {parts.hostname or 'localhost'}:{parts.port or 5432} " \
           f"(${env})"


class _Con:
    """A psycopg connection that takes the store's SQL as DuckDB's connection does."""

    def __init__(self, raw: psycopg.Connection[Any]) -> None:
        self.raw = raw

    def execute(self, query: Any, parameters: Any = ()) -> Any:
        cur = self.raw.cursor()
        cur.execute(_pg(str(query)), list(parameters or []))
        return cur

    def copy_out(self, query: str, parameters: Sequence[Any], out: IO[bytes]) -> None:
        """`query`'s rows as PostgreSQL's CSV into `out`."""
        cur = self.raw.cursor()
        assert isinstance(cur, ClientCursor)
        select = cur.mogrify(_pg(query), list(parameters))
        with cur.copy(f"COPY ({select}) TO STDOUT (FORMAT csv)") as copy:
            for chunk in copy:
                out.write(chunk)


class PgDatabase(Base):
    """A monitor database in PostgreSQL; one connection per thread, kept open."""

    shared = True
    _ERRORS = (psycopg.Error,)

    def __init__(self, url: str, *, env: str, path: Path, read_only: bool = False,
                 lock_timeout_s: float = 30.0, upgrade: bool = True,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        """`path`: where a run's spool and the reports go (beside storage.path)."""
        self._url = url  # never in a message, a log or a row
        self._secrets = [s for s in (url, urlsplit(url).password) if s]
        self.env = env
        self.where = describe(url, env)
        self.path = path
        self.read_only = False  # until migrated: a reader still upgrades an older schema
        self.lock_timeout_s = lock_timeout_s
        self._sleep = sleep
        self._init_threads()
        self._conns: dict[int, psycopg.Connection[Any]] = {}
        self._guard = threading.Lock()
        with self._connect() as con:
            self._migrate(con, upgrade=upgrade, create=not read_only)
        if read_only:  # from now on every connection refuses to write
            self.close()
            self.read_only = True

    def _mask(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return " ".join(text.split())[:240]

    def _new_connection(self) -> psycopg.Connection[Any]:
        deadline = time.monotonic() + self.lock_timeout_s
        delay = 0.1
        while True:
            try:
                raw = psycopg.connect(self._url, autocommit=True, cursor_factory=ClientCursor,
                                      connect_timeout=10, application_name="bias-monitor")
                break
            except psycopg.OperationalError as exc:
                # A server restarting (a failover, a rolling update) answers again soon.
                if time.monotonic() < deadline:
                    self._sleep(delay)
                    delay = min(delay * 2, 2.0)
                    continue
                raise StoreError(f"{self.where}: cannot connect ({self._mask(str(exc))}); check "
                                 f"the URL in ${self.env} (storage.url_env) and that the server "
                                 "is up") from None
        raw.adapters.register_loader("numeric", FloatLoader)  # sums and means: floats
        raw.execute("SET TimeZone = 'UTC'")
        if self.read_only:
            raw.execute("SET default_transaction_read_only = on")
        return raw

    @contextmanager
    def _open(self) -> Iterator[_Con]:
        me = threading.get_ident()
        with self._guard:
            raw = self._conns.get(me)
        if raw is None or raw.closed or raw.broken:
            raw = self._new_connection()
            with self._guard:
                self._conns[me] = raw
        try:
            yield _Con(raw)
        except psycopg.Error as exc:
            raise self._classify(exc) from None

    def close(self) -> None:
        with self._guard:
            conns, self._conns = list(self._conns.values()), {}
        for raw in conns:
            with contextlib.suppress(psycopg.Error):
                raw.close()

    def _classify(self, exc: BaseException) -> StoreError:
        text = self._mask(str(exc))
        if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
            return StoreWriteError(f"{self.where}: cannot write ({text}); the database or this "
                                   "role is read-only", mount=self.where,
                                   cause=WriteCause.READ_ONLY)
        if isinstance(exc, psycopg.errors.DiskFull):
            return StoreWriteError(f"{self.where}: cannot write ({text}); the database server's "
                                   "disk is full: free space on it", mount=self.where,
                                   cause=WriteCause.NO_SPACE)
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return StoreWriteError(f"{self.where}: not allowed ({text}); grant the role of "
                                   f"${self.env} the rights on its tables", mount=self.where,
                                   cause=WriteCause.PERMISSION)
        if isinstance(exc, psycopg.OperationalError):
            return StoreError(f"{self.where}: connection lost ({text}); check the server and "
                              "try again")
        return StoreError(f"{self.where}: storage error ({text})")

    def _migrate(self, con: _Con, *, upgrade: bool, create: bool) -> None:
        with self._transaction(con):
            con.execute("SELECT pg_advisory_xact_lock(?)", [_MIGRATE_LOCK])
            tables = {r[0] for r in con.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = "
                "current_schema()").fetchall()}
            if tables and "meta" not in tables:
                raise StoreError(f"{self.where}: holds tables of another application "
                                 f"({sorted(tables)[:5]}); refusing to write to it - point "
                                 f"${self.env} at a database of its own")
            if "meta" not in tables:
                if not create:
                    raise StoreError(f"{self.where}: no bias-monitor data yet; run `monitor "
                                     "probe --once` or `monitor run` first")
                con.execute("CREATE TABLE meta (key TEXT COLLATE \"C\" PRIMARY KEY, value TEXT)")
                con.execute("INSERT INTO meta VALUES ('app', ?), ('schema_version', '0')",
                            [APP])
            meta = dict(con.execute("SELECT key, value FROM meta WHERE key IN ('app', "
                                    "'schema_version')").fetchall())
            if meta.get("app") != APP:
                raise StoreError(f"{self.where}: not a bias-monitor database; point "
                                 f"${self.env} at another database")
            version = int(meta.get("schema_version", "0"))
            if version > len(PG_MIGRATIONS):
                raise StoreError(f"{self.where}: schema version {version} is newer than this "
                                 f"monitor ({len(PG_MIGRATIONS)}); upgrade bias-monitor")
            if not upgrade:
                return
            for number, statements in enumerate(PG_MIGRATIONS[version:], start=version + 1):
                for sql in statements:
                    con.execute(sql)
                con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                            [str(number)])

    def _frame(self, sql: str, params: Sequence[Any] = ()) -> pd.DataFrame:
        import pandas as pd

        with self._connect() as con:
            cur = con.execute(sql, params)
            return pd.DataFrame(cur.fetchall(), columns=[d.name for d in cur.description])

    def _insert(self, con: Connection, table: str, cols: tuple[tuple[str, str], ...],
                data: dict[str, list[Any]], *, replace: bool = True) -> None:
        if batch_rows(table, cols, data) == 0:
            return
        names = ", ".join(c for c, _ in cols)
        arrays = ", ".join(f"?::{_TYPES[t]}[]" for _, t in cols)
        sql = f"INSERT INTO {table} ({names}) SELECT * FROM unnest({arrays})"
        if replace:  # every table written with replace has its primary key as <table>_pkey
            sql += (f" ON CONFLICT ON CONSTRAINT {table}_pkey DO UPDATE SET "
                    + ", ".join(f"{c} = EXCLUDED.{c}" for c, _ in cols))
        con.execute(sql, [data[c] for c, _ in cols])

    def _new_ids(self, con: Connection, table: str, n: int) -> list[int]:
        if table != "outbox":
            raise ValueError(f"{table}: no id sequence")
        return [int(r[0]) for r in con.execute(
            "SELECT nextval('outbox_ids') FROM generate_series(1, ?)", [n]).fetchall()]

    def _serialize(self, con: Connection, key: str) -> None:
        con.execute("SELECT pg_advisory_xact_lock(hashtext(?))", [key])

    def _sync_ids(self) -> None:
        """After rows were copied in with their ids (`monitor migrate`): new ids follow."""
        with self._connect() as con:
            con.execute("SELECT setval('outbox_ids', (SELECT coalesce(max(id), 0) + 1 FROM "
                        "outbox), false)")

    def _copy_out(self, sql: str, params: Sequence[Any], out: IO[bytes]) -> None:
        with self._connect() as con:
            con.copy_out(sql, params, out)

    @contextmanager
    def outbox_claim(self, endpoint: str, sink: str) -> Iterator[bool]:
        """One replica at a time sends an endpoint's messages to a sink: the lock of this
        session (released by the server if the process dies), each mark committed as
        it is made, so a message taken by a sink is never sent again."""
        key = f"outbox/{endpoint}/{sink}"
        with self.session(), self._connect() as con:
            got = bool(con.execute("SELECT pg_try_advisory_lock(hashtext(?))", [key])
                       .fetchone()[0])
            try:
                yield got
            finally:
                if got:
                    con.execute("SELECT pg_advisory_unlock(hashtext(?))", [key])

    def _stream(self, sql: str, size: int) -> Iterator[list[tuple[Any, ...]]]:
        """A large result in chunks (a server-side cursor: memory stays flat)."""
        with self._connect() as con, con.raw.transaction(), \
                con.raw.cursor(name="bm_stream") as cur:
            cur.execute(sql)
            while rows := cur.fetchmany(size):
                yield rows
