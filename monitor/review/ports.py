"""What a run's review reads and writes in the store (a Protocol: the stage's reach)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from monitor.alerts import OutboxStore
from monitor.measure.ports import MeasureStore
from monitor.store import AlertEvent, CellRecord, RunRow, StatRow
from monitor.vocab import StatKind
from monitor.watch import WatchStore

__all__ = ["ReviewStore"]


class ReviewStore(MeasureStore, WatchStore, OutboxStore, Protocol):
    def stats_of(self, run_ids: Sequence[str], kind: StatKind | None = None,
                 scenario: str | None = None) -> list[tuple[str, StatRow]]: ...

    def save_alert_states(self, endpoint: str, states: Sequence[CellRecord],
                          events: Sequence[AlertEvent]) -> None: ...

    def set_baseline(self, endpoint: str, runs: Sequence[RunRow], *, auto: bool) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def topup_calls_before(self, endpoint: str, before: datetime, runs: int) -> int: ...
