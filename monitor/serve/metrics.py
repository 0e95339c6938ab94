"""The values the exporter shows, read from DuckDB (so they survive restarts).

Counters (probes, tokens, cost, the latency histogram) are totals over every
stored call, so they never go backwards across a restart; the statistic
gauges (MD, drift, JSD, coverage, weakness share, baseline_comparable) come
from each endpoint's latest run WITH results, so that an outage (runs that
failed) does not make the series vanish: staleness shows in
last_run_timestamp_seconds / last_run_success, which follow the latest
finished run of any outcome. The cost counter is exposed only where a cost
is known; calls without a known price are counted apart. baseline_comparable
is what the latest measured run's review stored (run_stats kind "review"):
1 exactly when that run was compared with the baseline.
`MetricsState.refresh(store, endpoint)` is called by the scheduler at
start-up and once after every run (the run process keeps no metrics); the
exporter only reads a snapshot.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from monitor.store import Baseline, CallTotals, CellRecord, RunRow, StatRow
from monitor.vocab import (
    FINISHED,
    LEVEL_VALUE,
    STATE_VALUE,
    WEAKNESS_KIND,
    CallStatus,
    RunStatus,
    StatKind,
)

__all__ = ["LATENCY_BUCKETS", "MetricsState", "MetricsStore", "Snapshot"]

# The counters the daemon itself counts since start (set_flag), not read from the store.
_COUNTER_FLAGS = ("run_failures", "delivery_failures", "runs_skipped")
#: weakness_local -> local, weakness_foreign -> foreign (the gauge's locality label).
LOCALITY = {kind: loc for loc, kind in WEAKNESS_KIND.items()}
LATENCY_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
                                      120.0)


class MetricsStore(Protocol):
    """What the metrics read from the store."""

    def baseline(self, endpoint: str) -> Baseline | None: ...

    def latest_run(self, endpoint: str, statuses: Sequence[str]) -> RunRow | None: ...

    def stats_of(self, run_ids: Sequence[str], kind: StatKind | None = None,
                 scenario: str | None = None) -> list[tuple[str, StatRow]]: ...

    def latest_stats(self, endpoint: str, kind: StatKind) -> list[StatRow]: ...

    def alert_states(self, endpoint: str) -> dict[tuple[str, str], CellRecord]: ...

    def call_totals(self, endpoint: str, latency_buckets: Sequence[float]) -> CallTotals: ...

    def outbox_backlog(self, endpoint: str) -> dict[str, int]: ...


@dataclass(kw_only=True)
class Snapshot:
    md: dict[tuple[str, str, str], tuple[float, float | None, float | None]] = field(
        default_factory=dict)
    md_n: dict[tuple[str, str, str], int] = field(default_factory=dict)
    drift: dict[tuple[str, str, str], float] = field(default_factory=dict)
    jsd: dict[tuple[str, str, str], float] = field(default_factory=dict)
    jsd_shift: dict[tuple[str, str], tuple[float, float | None, float | None]] = field(
        default_factory=dict)
    jsd_changed: dict[tuple[str, str], int] = field(default_factory=dict)
    alert: dict[tuple[str, str, str], int] = field(default_factory=dict)
    level: dict[tuple[str, str, str], int] = field(default_factory=dict)
    last_run_ts: dict[str, float] = field(default_factory=dict)
    last_run_success: dict[str, int] = field(default_factory=dict)
    coverage: dict[tuple[str, str], float] = field(default_factory=dict)
    probes: dict[tuple[str, str], int] = field(default_factory=dict)
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    latency: dict[str, tuple[list[int], float, int]] = field(default_factory=dict)
    comparable: dict[str, int] = field(default_factory=dict)
    baseline_present: dict[str, int] = field(default_factory=dict)
    budget_exhausted: dict[str, int] = field(default_factory=dict)
    weakness_share: dict[tuple[str, str, str], float] = field(default_factory=dict)
    run_failures: dict[str, int] = field(default_factory=dict)
    delivery_failures: dict[str, int] = field(default_factory=dict)
    runs_skipped: dict[str, int] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)
    undelivered: dict[str, int] = field(default_factory=dict)  # outbox messages not sent yet
    alert_sinks: int | None = None  # sinks that can deliver (the daemon's configuration)


class MetricsState:
    """Thread-safe holder of the latest snapshot per endpoint.

    refresh and set_flag never change a published snapshot: they build a new one and swap
    it in, so a scrape in another thread iterates one consistent snapshot.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._snap = Snapshot()

    def snapshot(self) -> Snapshot:
        with self._lock:
            return self._snap

    def set_sinks(self, ready: int) -> None:
        """How many alert sinks can deliver (the scheduler's configuration)."""
        with self._lock:
            self._snap = replace(self._snap, alert_sinks=ready)

    def set_flag(self, name: str, endpoint: str, value: int) -> None:
        """comparable / budget_exhausted / run_failures, set by the daemon."""
        with self._lock:
            change: dict[str, Any] = {name: {**getattr(self._snap, name), endpoint: value}}
            self._snap = replace(self._snap, **change)

    def prime(self, store: MetricsStore, endpoint: str) -> None:
        """At start-up: what the store knows, and every counter the daemon keeps at 0, so
        each label set exists before its first event (rate() needs the 0 before the 1)."""
        self.refresh(store, endpoint)
        for flag in _COUNTER_FLAGS:
            self.set_flag(flag, endpoint, 0)

    def refresh(self, store: MetricsStore, endpoint: str) -> None:
        new = _load(store, endpoint)
        with self._lock:
            snap = self._snap
            changes: dict[str, Any] = {}
            for name in ("md", "md_n", "drift", "jsd", "jsd_shift", "jsd_changed", "alert", "level",
                         "coverage", "probes", "tokens", "weakness_share"):
                changes[name] = {k: v for k, v in getattr(snap, name).items()
                                 if k[0] != endpoint}
                changes[name].update(getattr(new, name))
            for name in ("last_run_ts", "last_run_success", "cost", "latency", "comparable",
                         "baseline_present", "unpriced", "undelivered"):
                changes[name] = {k: v for k, v in getattr(snap, name).items() if k != endpoint}
                changes[name].update(getattr(new, name))
            self._snap = replace(snap, **changes)


def _load(store: MetricsStore, ep: str) -> Snapshot:
    snap = Snapshot()
    # Nothing pages before a baseline exists: the metrics say so from the start.
    base = store.baseline(ep)
    snap.baseline_present[ep] = int(base is not None)
    finished = store.latest_run(ep, [RunStatus.COMPLETE, RunStatus.PARTIAL, RunStatus.FAILED])
    if finished is not None and finished.finished_at is not None:
        snap.last_run_ts[ep] = finished.finished_at.timestamp()
        snap.last_run_success[ep] = int(finished.status in FINISHED)
    measured = store.latest_run(ep, FINISHED)
    if measured is not None:
        for _, st in store.stats_of([measured.run_id]):
            if st.value is None:
                continue
            if st.kind == StatKind.MD:
                snap.md[(ep, st.scenario, st.key)] = (st.value, st.ci_lower, st.ci_upper)
                snap.md_n[(ep, st.scenario, st.key)] = int(st.n or 0)
            elif st.kind == StatKind.DRIFT:
                snap.drift[(ep, st.scenario, st.key)] = st.value
            elif st.kind == StatKind.JSD_WINDOW:
                snap.jsd[(ep, st.scenario, st.key)] = st.value
            elif st.kind == StatKind.COVERAGE:
                snap.coverage[(ep, st.key)] = st.value
            elif st.kind in LOCALITY:  # weakness_local / weakness_foreign
                snap.weakness_share[(ep, st.key, LOCALITY[st.kind])] = st.value
            elif st.kind == StatKind.REVIEW:  # as the run's review compared it, or not
                snap.comparable[ep] = int(st.value)
    # The latest shape comparison (once per rotation cycle), wherever it is stored.
    for st in store.latest_stats(ep, StatKind.JSD_SHIFT):
        if st.value is not None:
            snap.jsd_shift[(ep, st.key)] = (st.value, st.ci_lower, st.ci_upper)
            snap.jsd_changed[(ep, st.key)] = int(bool(json.loads(st.extra or "{}").get(
                "changed")))
    for (scen, country), cell in store.alert_states(ep).items():
        snap.alert[(ep, scen, country)] = STATE_VALUE.get(cell.state, 0)
        snap.level[(ep, scen, country)] = LEVEL_VALUE.get(cell.level, 0)
    totals = store.call_totals(ep, LATENCY_BUCKETS)
    for status in CallStatus:  # every series from the start, so rate() sees the first failure
        snap.probes[(ep, str(status))] = totals.by_status.get(status, 0)
    snap.tokens[(ep, "input")] = totals.input_tokens
    snap.tokens[(ep, "output")] = totals.output_tokens
    if totals.cost_usd is not None:  # no known price at all: no cost series, not a false 0
        snap.cost[ep] = totals.cost_usd
    snap.unpriced[ep] = totals.unpriced
    snap.undelivered[ep] = sum(store.outbox_backlog(ep).values())
    snap.latency[ep] = (totals.latency_buckets, totals.latency_sum_s, totals.latency_count)
    return snap
