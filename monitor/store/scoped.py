"""A PostgreSQL store's reads of a few runs' answers, computed by DuckDB's SQL.

The statistics' inputs (monitor.store.inputs) and the report's frames and
evidence (results.py: calls_frame, scores_frame, option_means, answer_text) are
written once, in DuckDB's SQL. On a PostgreSQL store the rows of the runs asked
for (runs, probe_calls, scores) are copied out as CSV into an in-memory DuckDB
with the monitor's schema (db.Scratch) and the same methods run there: the
statistics of a history are the same numbers on either engine, and a change to
those queries needs no second spelling. Every public method of InputStore is
routed so, each taking the run ids first, and so are a comparison's lookups
(compare.py: asked_specs; triplet_keys, DuckDB's hash of an id, on no rows).
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from monitor.store.base import Base
from monitor.store.compare import CompareStore
from monitor.store.db import Scratch
from monitor.store.inputs import InputStore
from monitor.store.results import ResultsStore
from monitor.store.schema import CALL_COLUMNS, RUN_COLUMNS, SCORE_COLUMNS

__all__ = ["ROUTED", "RunScoped", "ScratchStore"]

#: results.py's reads of the given runs' answers; the answers' text only where it is read.
_RESULTS = ("calls_frame", "scores_frame", "option_means", "answer_text")
_WITH_TEXT = ("calls_frame", "answer_text")
ROUTED = tuple(n for n, f in vars(InputStore).items()
               if callable(f) and not n.startswith("_")) + _RESULTS + ("asked_specs",)


class ScratchStore(InputStore, ResultsStore, CompareStore, Scratch):
    """The reads above, on a few runs' rows in memory."""


class RunScoped(Base):
    @contextmanager
    def _scratch(self, run_ids: Sequence[str], *, text: bool) -> Iterator[ScratchStore]:
        mem = ScratchStore()
        ids = sorted(set(run_ids))
        calls = CALL_COLUMNS if text else tuple(c for c in CALL_COLUMNS if c[0] != "raw_text")
        try:
            with tempfile.TemporaryDirectory(prefix="bias-monitor-") as tmp:
                for table, cols in (("runs", RUN_COLUMNS), ("probe_calls", calls),
                                    ("scores", SCORE_COLUMNS)):
                    csv = Path(tmp) / f"{table}.csv"
                    with csv.open("wb") as fh:
                        self._copy_out(f"SELECT {', '.join(c for c, _ in cols)} FROM {table} "
                                       "WHERE list_contains(?, run_id)", [ids], fh)
                    mem.load_csv(table, cols, csv)
            yield mem
        finally:
            mem.close()

    def triplet_keys(self, triplet_ids: Sequence[str]) -> dict[str, int]:
        """The keys UnitScores.triplet holds: DuckDB's hash, as the routed inputs compute."""
        with self._scratch([], text=False) as mem:
            return mem.triplet_keys(triplet_ids)


def _routed(name: str) -> Callable[..., Any]:
    def method(self: RunScoped, run_ids: Sequence[str], *args: Any, **kwargs: Any) -> Any:
        with self._scratch(run_ids, text=name in _WITH_TEXT) as mem:
            return getattr(mem, name)(run_ids, *args, **kwargs)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"{name} of these runs, by DuckDB's SQL (monitor.store.scoped)."
    return method


for _name in ROUTED:
    setattr(RunScoped, _name, _routed(_name))
