"""The Store: one class, its methods grouped by concern in mixins, on either engine.

    Store    the DuckDB file (storage.path): one machine, the default
    PgStore  a PostgreSQL database (storage.url_env): replicas sharing it

PgStore is a Store whose engine methods are PostgreSQL's (monitor.store.pg) and
whose reads of a few runs' answers run DuckDB's SQL in memory
(monitor.store.scoped), so every stage's store Protocol holds for both and a
caller typed `Store` takes either. `open_store` picks one from the settings.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime
from pathlib import Path

from monitor.config import Storage
from monitor.errors import ConfigError
from monitor.store.compare import CompareStore
from monitor.store.coordination import CoordinationStore
from monitor.store.db import Database
from monitor.store.export import ExportStore
from monitor.store.inputs import InputStore
from monitor.store.pg import PgDatabase
from monitor.store.records import ExportResult
from monitor.store.results import ResultsStore
from monitor.store.runs import RunsStore
from monitor.store.scoped import RunScoped
from monitor.store.state import StateStore
from monitor.store.transfer import copy_history

__all__ = ["PgStore", "Store", "open_store", "postgres_url"]


class Store(RunsStore, ResultsStore, StateStore, InputStore, CompareStore, ExportStore,
            CoordinationStore, Database):
    """A monitor database (monitor.store.db.Database) with every named operation:
    runs (runs.py), calls/scores/statistics (results.py), the daemon's state
    (state.py), the statistics' inputs (inputs.py), comparisons (compare.py), the Parquet
    export and the replicas' turns (coordination.py)."""


class PgStore(RunScoped, PgDatabase, Store):  # type: ignore[misc]
    """The same operations on PostgreSQL (the engine's methods come first in the MRO)."""

    def export_parquet(self, out: Path, since: datetime | None) -> ExportResult:
        """As the file's export: the history is copied to a temporary DuckDB file first
        (beside `out`), whose tables are then written as they are for a file."""
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=".bias-monitor-export-", dir=out) as tmp:
            copy = Store(Path(tmp) / "export.duckdb")
            copy_history(self, copy)
            return copy.export_parquet(out, since)


def postgres_url(storage: Storage) -> tuple[str, str] | None:
    """(the URL, the variable's name) when storage.url_env is set; None for the file.
    A missing or malformed variable is one line naming it (never its value)."""
    env = storage.url_env
    if not env:
        return None
    url = os.environ.get(env, "").strip()
    if not url:
        raise ConfigError(f"storage.url_env: the environment variable {env} is not set or "
                          "empty; set it to postgresql://USER:PASSWORD@HOST:PORT/DB, or remove "
                          "storage.url_env to use the DuckDB file storage.path")
    if not url.startswith(("postgresql://", "postgres://")):
        raise ConfigError(f"storage.url_env: the value of {env} is not a postgresql:// URL; "
                          "set it to postgresql://USER:PASSWORD@HOST:PORT/DB")
    return url, env


def open_store(storage: Storage, *, read_only: bool = False, lock_timeout_s: float = 30.0,
               upgrade: bool = True) -> Store:
    """The configured store: PostgreSQL when storage.url_env is set, else the file."""
    found = postgres_url(storage)
    if found is None:
        return Store(storage.path, lock_timeout_s=lock_timeout_s, read_only=read_only,
                     upgrade=upgrade)
    url, env = found
    return PgStore(url, env=env, path=storage.path, read_only=read_only,
                   lock_timeout_s=lock_timeout_s, upgrade=upgrade)
