"""What the report reads from the store (a Protocol: the stage's reach, written down)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import pandas as pd

from monitor.stats import StatsStore
from monitor.store import AlertEvent, Baseline, OptionMean, RunRow, RunSummary, StatRow
from monitor.vocab import StatKind

__all__ = ["ReportStore"]


class ReportStore(StatsStore, Protocol):
    def runs(self, endpoint: str | None = None) -> list[RunRow]: ...

    def baseline(self, endpoint: str) -> Baseline | None: ...

    def stats_of(self, run_ids: Sequence[str], kind: StatKind | None = None,
                 scenario: str | None = None) -> list[tuple[str, StatRow]]: ...

    def option_means(self, run_ids: Sequence[str]) -> list[OptionMean]: ...

    def answer_text(self, run_ids: Sequence[str], scenario: str, option_id: str, language: str,
                    near: float, *, farthest: bool) -> str | None: ...

    def calls_frame(self, run_ids: Sequence[str], *, with_text: bool = False
                    ) -> pd.DataFrame: ...

    def scores_frame(self, run_ids: Sequence[str]) -> pd.DataFrame: ...

    def run_summaries(self, endpoint: str | None = None,
                      run_ids: Sequence[str] | None = None) -> list[RunSummary]: ...

    def alert_events(self, endpoint: str, since: datetime | None = None,
                     until: datetime | None = None) -> list[AlertEvent]: ...
