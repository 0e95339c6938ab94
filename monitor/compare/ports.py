"""What a comparison reads and writes in the store (a Protocol: the stage's reach)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from monitor.measure.ports import MeasureStore
from monitor.store import AskedSpec, Baseline, Comparison, StatRow
from monitor.vocab import RunStatus, StatKind

__all__ = ["CompareStore"]


class CompareStore(MeasureStore, Protocol):
    def create_comparison(self, c: Comparison) -> None: ...

    def get_comparison(self, compare_id: str) -> Comparison | None: ...

    def claim_comparison(self, compare_id: str, run_ids: Sequence[str], owner: str) -> None: ...

    def end_comparison(self, compare_id: str, status: RunStatus, reason: str,
                       outcome: str | None = None) -> None: ...

    def triplet_keys(self, triplet_ids: Sequence[str]) -> dict[str, int]: ...

    def asked_specs(self, run_ids: Sequence[str]) -> list[AskedSpec]: ...

    def baseline(self, endpoint: str) -> Baseline | None: ...

    def stats_of(self, run_ids: Sequence[str], kind: StatKind | None = None,
                 scenario: str | None = None) -> list[tuple[str, StatRow]]: ...

    def transaction(self) -> AbstractContextManager[None]: ...
