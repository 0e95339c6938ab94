"""A test's own look into (or edit of) a DuckDB file, beside the store's named methods."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

__all__ = ["frame", "rows"]

LOCK_WAIT_S = 60.0


def _connect(path: Path | str) -> duckdb.DuckDBPyConnection:
    """A connection, waiting while a running daemon or CLI holds the file's lock (as the
    store does, monitor.store.db): a test that polls a live daemon's file must not fail
    on the moment it happens to look."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return duckdb.connect(str(path))
        except duckdb.IOException as exc:
            if "lock" not in str(exc).lower() or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def rows(path: Path | str, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = _connect(path)
    try:
        cur = con.execute(sql, params or [])
        return cur.fetchall() if cur.description else []
    finally:
        con.close()


def frame(path: Path | str, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
    con = _connect(path)
    try:
        return con.execute(sql, params or []).df()
    finally:
        con.close()
