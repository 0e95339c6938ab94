"""A test's own look into (or edit of) a DuckDB file, beside the store's named methods."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

__all__ = ["frame", "rows"]


def rows(path: Path | str, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]]:
    con = duckdb.connect(str(path))
    try:
        cur = con.execute(sql, params or [])
        return cur.fetchall() if cur.description else []
    finally:
        con.close()


def frame(path: Path | str, sql: str, params: list[Any] | None = None) -> pd.DataFrame:
    con = duckdb.connect(str(path))
    try:
        return con.execute(sql, params or []).df()
    finally:
        con.close()
