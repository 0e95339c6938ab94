"""What the store hands out and takes in: frozen records with named fields.

No method of the store returns a positional row or a dict standing for a
record; the statistics inputs (monitor.store.inputs) are numpy columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from monitor.vocab import StatKind

__all__ = ["AlertEvent", "Baseline", "CallTotals", "CellRecord", "ExportResult", "FileSystem",
           "OptionMean", "OutboxItem", "RunRow", "RunSummary", "StatRow", "Usage"]


@dataclass(kw_only=True, frozen=True)
class RunRow:
    """One run: what was asked of which endpoint, and where it stands."""

    run_id: str
    endpoint: str
    model: str
    simulated: bool
    run_index: int  # position in the sampling cycle of its (catalog, seed, scenarios)
    seed: int
    catalog_version: str
    scenarios: list[str]
    languages: list[str]
    variants: list[str]
    triplets: int
    planned_calls: int
    started_at: datetime
    finished_at: datetime | None
    status: str  # monitor.vocab.RunStatus
    owner: str | None = None  # monitor.store.owner token of the process running it
    heartbeat_at: datetime | None = None
    reason: str | None = None  # why it ended as it did (interrupted, failed)
    attempts: int = 0  # times a process started or resumed it
    setup: str = "default"  # monitor.measure.assistant.Setup.key: runs compare within one


@dataclass(kw_only=True, frozen=True)
class RunSummary:
    """One line of `monitor runs`."""

    run: RunRow
    calls: int
    counts: dict[str, int]  # status -> calls
    top_error: str | None  # the most common error of its failed calls
    top_error_n: int
    top_unparseable: str | None  # the most common reason an answer was unreadable
    top_unparseable_n: int


@dataclass(kw_only=True, frozen=True)
class StatRow:
    """One statistic of a run (run_stats): kind md / jsd / coverage / weakness_* / drift /
    jsd_window, for a scenario (or "all") and a key (country or language)."""

    kind: StatKind
    scenario: str
    key: str
    value: float | None
    ci_lower: float | None = None
    ci_upper: float | None = None
    n: int | None = None
    p_value: float | None = None
    extra: str | None = None  # JSON of the kind's further fields


@dataclass(kw_only=True, frozen=True)
class Baseline:
    """The runs an endpoint's new runs are compared with."""

    endpoint: str
    set_at: datetime
    run_ids: list[str]
    catalog_version: str
    model_id: str | None
    auto: bool  # set by the daemon (the first runs), not by a user
    setup: str = "default"  # the assistant setup of its runs


@dataclass(kw_only=True, frozen=True)
class CellRecord:
    """The persisted drift state of one (endpoint, scenario, country) cell."""

    scenario: str
    country: str
    state: str  # monitor.vocab.AlertState
    s_plus: float
    s_minus: float
    alarm_runs: int
    calm_runs: int
    z: float | None
    reason: str | None
    last_run_id: str | None
    changed_at: datetime | None
    notified_at: datetime | None
    level: str = "within"  # monitor.vocab.LevelState
    level_runs: int = 0


@dataclass(kw_only=True, frozen=True)
class AlertEvent:
    """A state change of a cell, kept for the report's history."""

    scenario: str
    country: str
    event_at: datetime
    from_state: str
    to_state: str
    run_id: str
    md: float | None
    md_base: float | None
    z: float | None
    reason: str | None


@dataclass(frozen=True)
class OutboxItem:
    id: int
    payload: str  # JSON: {"kind": "transition" | "note", ...}
    queued_at: datetime | None = None  # one per outbox_add: the items of one message share it


@dataclass(kw_only=True, frozen=True)
class OptionMean:
    """Mean score of one option asked in one language, over answered calls."""

    scenario: str
    option_id: str
    country: str
    language: str
    mean: float
    n: int


@dataclass(kw_only=True, frozen=True)
class CallTotals:
    """Totals over every stored call of an endpoint (the exporter's counters)."""

    by_status: dict[str, int]
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None: no call has a known price
    unpriced: int  # answered calls whose cost is unknown
    latency_sum_s: float
    latency_count: int
    latency_buckets: list[int] = field(default_factory=list)  # cumulative, per bucket bound


@dataclass(frozen=True)
class Usage:
    calls: int
    cost_usd: float
    mean_input_tokens: float | None = None
    mean_output_tokens: float | None = None
    mean_cost_usd: float | None = None


@dataclass(frozen=True)
class FileSystem:
    """Where a file lives: the mount point, its type and the free bytes."""

    mount: str
    fstype: str
    free: int
    total: int


@dataclass(frozen=True)
class ExportResult:
    counts: dict[str, int]  # table -> rows written
    damaged: dict[str, str]  # table -> why it could not be read
