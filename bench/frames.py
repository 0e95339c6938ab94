"""The product's statistics engine on a table of scores a benchmark generated.

The table (Store.scores_frame's columns: run_id, triplet_id, language, label,
country, score, scenario) goes into a temporary DuckDB store, as a run would
write it, and monitor.stats computes MD or JSD from there: the benchmarks
measure the engine the monitor runs, not a copy of it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pandas as pd

from monitor.stats import jsd_of, md_of
from monitor.store import CALL_COLUMNS, SCORE_COLUMNS, Store

__all__ = ["jsd_table", "md_table"]


def _store(frame: pd.DataFrame, folder: str) -> tuple[Store, list[str]]:
    """The frame stored as answered calls; a frame's scenario becomes its triplet ids'."""
    df = frame.assign(triplet_id=frame["scenario"].astype(str) + "/" +
                      frame["triplet_id"].astype(str), run_id=frame["run_id"].astype(str))
    store = Store(Path(folder) / "bench.duckdb")
    calls = df.drop_duplicates(["run_id", "triplet_id", "language"])
    n = len(calls)
    store.write_batch(
        {c: (calls[c].tolist() if c in calls else
             ["ok"] * n if c == "status" else [datetime.now(UTC)] * n if c == "created_at"
             else [None] * n) for c, _ in CALL_COLUMNS},
        {c: (df[c].tolist() if c in df else
             [f"o{i}" for i in range(len(df))] if c == "option_id" else
             [False] * len(df) if c == "is_target" else [None] * len(df))
         for c, _ in SCORE_COLUMNS})
    return store, sorted(set(df["run_id"]))


def md_table(frame: pd.DataFrame, languages: Sequence[str],
             local: Mapping[str, Sequence[str]], *, by_run: bool = False) -> pd.DataFrame:
    """The runs' cells pooled, or each run's (`by_run`: the `group` column)."""
    with tempfile.TemporaryDirectory() as tmp:
        store, runs = _store(frame, tmp)
        rows = md_of(store, runs, languages, local, by_run=by_run)
    return pd.DataFrame([asdict(r) for r in rows])


def jsd_table(frame: pd.DataFrame, languages: Sequence[str], *, seed: int = 0,
              n_boot: int = 1000) -> pd.DataFrame:
    with tempfile.TemporaryDirectory() as tmp:
        store, runs = _store(frame, tmp)
        rows = jsd_of(store, runs, languages, seed=seed, n_boot=n_boot)
    return pd.DataFrame([asdict(r) for r in rows])
