"""What watching reads from the store (a Protocol: the stage's reach, written down).

Watching only reads: the statistics' inputs, the baseline, the runs, the saved
alert states, the top-up verdicts since the baseline, the answers' means for
the movers and the provider's fingerprints. What an evaluation changes is
returned, and written by the review in one transaction (monitor.review).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from monitor.stats import StatsStore
from monitor.store import Baseline, CellRecord, OptionMean, RunRow, StatRow

__all__ = ["WatchStore"]


class WatchStore(StatsStore, Protocol):
    def baseline(self, endpoint: str) -> Baseline | None: ...

    def runs(self, endpoint: str | None = None) -> list[RunRow]: ...

    def topups_since(self, endpoint: str,
                     since: datetime) -> list[tuple[str, StatRow]]: ...

    def alert_states(self, endpoint: str) -> dict[tuple[str, str], CellRecord]: ...

    def option_means(self, run_ids: Sequence[str]) -> list[OptionMean]: ...

    def recent_fingerprints(self, endpoint: str, last: int = 2, *,
                            run_id: str | None = None) -> list[tuple[str, str]]: ...
