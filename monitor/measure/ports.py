"""What measuring reads and writes in the store (a Protocol: the stage's reach)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from monitor.measure.budget import UsageStore
from monitor.stats import StatsStore
from monitor.store import RunRow, StatRow
from monitor.vocab import RunStatus

__all__ = ["BatchStore", "MeasureStore"]


class BatchStore(Protocol):
    """What the answers' writer needs: batches in, and the file's path for its spool."""

    path: Path

    def write_batch(self, calls: dict[str, list[Any]], scores: dict[str, list[Any]], *,
                    heartbeat: str | None = None, replaces: bool = True) -> None: ...

    def session(self) -> AbstractContextManager[None]: ...


class MeasureStore(BatchStore, StatsStore, UsageStore, Protocol):
    """A run's life: its row, its answers, its statistics."""

    def create_run(self, run: RunRow) -> None: ...

    def claim_run(self, run_id: str, owner: str) -> None: ...

    def get_run(self, run_id: str) -> RunRow | None: ...

    def runs(self, endpoint: str | None = None) -> list[RunRow]: ...

    def next_run_index(self, endpoint: str, catalog_version: str, seed: int,
                       scenarios: Sequence[str]) -> int: ...

    def done_calls(self, run_id: str) -> set[tuple[str, str]]: ...

    def write_stats(self, run_id: str, rows: Sequence[StatRow], *,
                    replace: bool = True) -> None: ...

    def finish_run(self, run_id: str, status: RunStatus, reason: str | None = None) -> None: ...

    def measured(self, run_id: str) -> RunRow: ...
