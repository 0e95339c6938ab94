"""The Store: one DuckDB file, one class, its methods grouped by concern in mixins."""

from __future__ import annotations

from monitor.store.db import Database
from monitor.store.export import ExportStore
from monitor.store.inputs import InputStore
from monitor.store.results import ResultsStore
from monitor.store.runs import RunsStore
from monitor.store.state import StateStore

__all__ = ["Store"]


class Store(RunsStore, ResultsStore, StateStore, InputStore, ExportStore, Database):
    """A monitor database (monitor.store.db.Database) with every named operation:
    runs (runs.py), calls/scores/statistics (results.py), the daemon's state
    (state.py), the statistics' inputs (inputs.py) and the Parquet export."""
