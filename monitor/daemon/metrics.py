"""The values the exporter shows, read from DuckDB (so they survive restarts).

Counters (probes, tokens, cost, the latency histogram) are totals over every
stored call, so they never go backwards across a restart; the statistic
gauges (MD, drift, JSD, coverage, weakness share, baseline_comparable) come
from each endpoint's latest run WITH results, so that an outage (runs that
failed) does not make the series vanish: staleness shows in
last_run_timestamp_seconds / last_run_success, which follow the latest
finished run of any outcome. The cost counter is exposed only where a cost
is known; calls without a known price are counted apart.
`MetricsState.refresh(store, endpoint)` is called at start-up and after every
run; the exporter only reads a snapshot.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, replace
from typing import Any

from monitor.store import Store
from monitor.watch.drift import STATE_VALUE

__all__ = ["LATENCY_BUCKETS", "MetricsState", "Snapshot"]

STATUSES = ("ok", "failed", "unparseable", "refused")
LATENCY_BUCKETS: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0,
                                      120.0)


@dataclass
class Snapshot:
    md: dict[tuple[str, str, str], tuple[float, float | None, float | None]] = field(
        default_factory=dict)
    drift: dict[tuple[str, str, str], float] = field(default_factory=dict)
    jsd: dict[tuple[str, str, str], float] = field(default_factory=dict)
    alert: dict[tuple[str, str, str], int] = field(default_factory=dict)
    last_run_ts: dict[str, float] = field(default_factory=dict)
    last_run_success: dict[str, int] = field(default_factory=dict)
    coverage: dict[tuple[str, str], float] = field(default_factory=dict)
    probes: dict[tuple[str, str], int] = field(default_factory=dict)
    tokens: dict[tuple[str, str], int] = field(default_factory=dict)
    cost: dict[str, float] = field(default_factory=dict)
    latency: dict[str, tuple[list[int], float, int]] = field(default_factory=dict)
    comparable: dict[str, int] = field(default_factory=dict)
    budget_exhausted: dict[str, int] = field(default_factory=dict)
    weakness_share: dict[tuple[str, str, str], float] = field(default_factory=dict)
    run_failures: dict[str, int] = field(default_factory=dict)
    delivery_failures: dict[str, int] = field(default_factory=dict)
    runs_skipped: dict[str, int] = field(default_factory=dict)
    unpriced: dict[str, int] = field(default_factory=dict)


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

    def set_flag(self, name: str, endpoint: str, value: int) -> None:
        """comparable / budget_exhausted / run_failures, set by the daemon."""
        with self._lock:
            self._snap = replace(self._snap, **{name: {**getattr(self._snap, name),
                                                       endpoint: value}})

    def refresh(self, store: Store, endpoint: str) -> None:
        new = _load(store, endpoint)
        with self._lock:
            snap = self._snap
            changes: dict[str, dict[Any, Any]] = {}
            for name in ("md", "drift", "jsd", "alert", "coverage", "probes", "tokens",
                         "weakness_share"):
                changes[name] = {k: v for k, v in getattr(snap, name).items()
                                 if k[0] != endpoint}
                changes[name].update(getattr(new, name))
            for name in ("last_run_ts", "last_run_success", "cost", "latency", "comparable",
                         "unpriced"):
                changes[name] = {k: v for k, v in getattr(snap, name).items() if k != endpoint}
                changes[name].update(getattr(new, name))
            self._snap = replace(snap, **changes)


def _load(store: Store, ep: str) -> Snapshot:
    snap = Snapshot()
    finished = store.query(
        "SELECT status, epoch(finished_at) FROM runs WHERE endpoint = ? AND finished_at IS NOT "
        "NULL AND status IN ('complete', 'partial', 'failed') ORDER BY finished_at DESC LIMIT 1",
        [ep])
    if finished:
        status, when = finished[0]
        snap.last_run_ts[ep] = float(when)
        snap.last_run_success[ep] = int(status in ("complete", "partial"))
    measured = store.query(
        "SELECT run_id FROM runs WHERE endpoint = ? AND finished_at IS NOT NULL AND status IN "
        "('complete', 'partial') ORDER BY finished_at DESC LIMIT 1", [ep])
    if measured:
        run_id = measured[0][0]
        for kind, scen, key, value, lo, hi in store.query(
                "SELECT kind, scenario, key, value, ci_lower, ci_upper FROM run_stats "
                "WHERE run_id = ?", [run_id]):
            if value is None:
                continue
            if kind == "md":
                snap.md[(ep, scen, key)] = (value, lo, hi)
            elif kind == "drift":
                snap.drift[(ep, scen, key)] = value
            elif kind == "jsd_window":
                snap.jsd[(ep, scen, key)] = value
            elif kind == "coverage":
                snap.coverage[(ep, key)] = value
            elif kind.startswith("weakness_"):  # weakness_local / weakness_foreign
                snap.weakness_share[(ep, key, kind.removeprefix("weakness_"))] = value
        base = store.baseline(ep)
        if base is not None:  # read back, so the gauge survives a restart
            run = store.get_run(run_id)
            snap.comparable[ep] = int(store.run_models([run_id])[run_id] == base["model_id"]
                                      and run is not None
                                      and run.catalog_version == base["catalog_version"])
    for (scen, country), cell in store.alert_states(ep).items():
        snap.alert[(ep, scen, country)] = STATE_VALUE.get(cell["state"], 0)
    for status in STATUSES:  # every series from the start, so rate() sees the first failure
        snap.probes[(ep, status)] = 0
    for status, n in store.query("SELECT status, count(*) FROM probe_calls WHERE endpoint = ? "
                                 "GROUP BY status", [ep]):
        snap.probes[(ep, status)] = int(n)
    if replaced := store.replaced_failures(ep):
        snap.probes[(ep, "failed")] = snap.probes.get((ep, "failed"), 0) + replaced
    buckets = ", ".join(f"count(*) FILTER (WHERE latency_s <= {b})" for b in LATENCY_BUCKETS)
    row = store.query(
        f"SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
        f"sum(cost_usd), count(*) FILTER (WHERE cost_usd IS NULL), coalesce(sum(latency_s), 0), "
        f"count(*), {buckets} FROM probe_calls WHERE endpoint = ? AND status <> 'failed'",
        [ep])[0]
    snap.tokens[(ep, "input")] = int(row[0])
    snap.tokens[(ep, "output")] = int(row[1])
    if row[2] is not None:  # no known price at all: no cost series, rather than a false 0
        snap.cost[ep] = float(row[2])
    snap.unpriced[ep] = int(row[3])
    snap.latency[ep] = ([int(x) for x in row[6:]], float(row[4]), int(row[5]))
    return snap
