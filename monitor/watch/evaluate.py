"""After each run: compare every cell with the baseline and update its alert state.

Per cell (scenario, country) the run's MD feeds the cell's drift detector
(monitor.watch.drift) when the cell is tested (monitor.stats.rules); states
and their changes are stored in one transaction. Slack is told about
PENDING -> FIRING and FIRING -> OK of the pooled cells (scenario "all");
per-scenario cells keep their state for the dashboard. A provider
fingerprint that changed is said out loud, and still compared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.catalog import Catalog
from monitor.config import Settings
from monitor.stats import MDRow, Summary, md_of, se_floor, tested
from monitor.store import AlertEvent, Baseline, CellRecord, RunRow, Store
from monitor.vocab import POOLED, AlertState
from monitor.watch.baseline import auto_baseline, comparable, run_model
from monitor.watch.drift import CellState, Observation, step
from monitor.watch.movers import Mover, rank_movers

__all__ = ["Evaluation", "Transition", "evaluate"]

TOP_MOVERS_SLACK = 3


@dataclass(frozen=True)
class Transition:
    """A cell's state change, as Slack is told of it."""

    endpoint: str
    scenario: str
    country: str
    from_state: str
    to_state: str
    run_id: str
    md: float
    ci: tuple[float, float]
    n: int
    md_base: float
    ci_base: tuple[float, float]
    n_base: int
    z: float | None
    reason: str
    movers: list[Mover] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transition:
        """From a queued payload (the outbox holds them as JSON)."""
        movers = [Mover.from_dict(m) for m in data.get("movers", [])]
        fields = {k: v for k, v in data.items() if k not in ("movers", "kind")}
        return cls(**{**fields, "ci": tuple(data["ci"]), "ci_base": tuple(data["ci_base"]),
                      "movers": movers})


@dataclass
class Evaluation:
    endpoint: str
    run_id: str
    baseline: Baseline | None
    comparable: bool
    note: str
    states: dict[tuple[str, str], CellState] = field(default_factory=dict)
    drift: dict[tuple[str, str], float] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    to_notify: list[Transition] = field(default_factory=list)
    fingerprint_note: str | None = None


def _fingerprint_change(store: Store, endpoint: str, run_id: str) -> str | None:
    rows = store.recent_fingerprints(endpoint, 2)
    if len(rows) < 2 or rows[0][0] != run_id or rows[0][1] == rows[1][1]:
        return None
    return f"provider fingerprint changed ({rows[1][1]} -> {rows[0][1]}); still compared"


def _pages(prev: str, new: str) -> bool:
    return (new == AlertState.FIRING and prev != AlertState.FIRING) or (
        prev == AlertState.FIRING and new == AlertState.OK)


def evaluate(settings: Settings, catalog: Catalog, store: Store, run: RunRow, summary: Summary,
             *, now: datetime | None = None,
             cache: dict[tuple[str, str], list[MDRow]] | None = None) -> Evaluation:
    """`cache` (owned by the caller) keeps the baseline's MD between runs."""
    now = now or datetime.now(UTC)
    model = run_model(run, summary.model_ids)
    baseline = store.baseline(run.endpoint)
    if baseline is None:
        baseline = auto_baseline(settings, store, run, model)
        note = ("baseline set automatically from the first runs" if baseline else
                "no baseline yet: collecting runs for the automatic baseline; alerts muted")
        return Evaluation(run.endpoint, run.run_id, baseline, False, note)
    if (why := comparable(baseline, run, model)) is not None:
        return Evaluation(run.endpoint, run.run_id, baseline, False, why)
    key = (run.endpoint, str(baseline.set_at))
    base_md = cache.get(key) if cache is not None else None
    if base_md is None:
        base_md = md_of(store, baseline.run_ids, run.languages, catalog.languages)
        if cache is not None:
            cache.clear()
            cache[key] = base_md
    base = {(r.scenario, r.country): r for r in base_md}
    saved = store.alert_states(run.endpoint)
    ev = Evaluation(run.endpoint, run.run_id, baseline, True, "compared with the baseline")
    ev.fingerprint_note = _fingerprint_change(store, run.endpoint, run.run_id)
    t = settings.thresholds
    rows: list[CellRecord] = []
    events: list[AlertEvent] = []
    cooldown = timedelta(minutes=settings.alerts.cooldown_minutes)
    for r in summary.md:
        cell = (r.scenario, r.country)
        b = base.get(cell)
        old = saved.get(cell)
        prev = CellState() if old is None else CellState(
            old.state, old.s_plus, old.s_minus, old.alarm_runs, old.calm_runs)
        obs = None
        if b is not None and tested(r.n, r.se, b.n, b.se):
            obs = Observation(r.md, se_floor(r.se, r.n, b.se, b.n), r.ci_lower, r.ci_upper,
                              r.n, b.md, b.se)
            ev.drift[cell] = r.md - b.md
        new = step(prev, obs, drift_points=t.drift_md_points, h=t.cusum_h,
                   md_threshold=t.md_points, min_runs_firing=settings.alerts.min_runs_firing)
        ev.states[cell] = new
        notified_at = old.notified_at if old else None
        changed = new.state != prev.state
        rows.append(CellRecord(r.scenario, r.country, new.state, new.s_plus, new.s_minus,
                               new.alarm_runs, new.calm_runs, new.z, new.reason, run.run_id,
                               now if changed or old is None else old.changed_at, notified_at))
        if not changed or b is None:
            continue
        tr = Transition(run.endpoint, r.scenario, r.country, prev.state, new.state, run.run_id,
                        r.md, (r.ci_lower, r.ci_upper), r.n, b.md, (b.ci_lower, b.ci_upper),
                        b.n, new.z, new.reason or prev.reason)
        events.append(AlertEvent(r.scenario, r.country, now, prev.state, new.state, run.run_id,
                                 r.md, b.md, new.z, tr.reason))
        ev.transitions.append(tr)
        recent = notified_at is not None and now - notified_at < cooldown
        if r.scenario == POOLED and _pages(prev.state, new.state) and not (
                new.state == AlertState.FIRING and recent):
            moved = rank_movers(store.option_means([run.run_id]),
                                store.option_means(baseline.run_ids), catalog,
                                country=r.country, scenario=r.scenario, top=TOP_MOVERS_SLACK)
            ev.to_notify.append(Transition(**{**tr.__dict__, "movers": moved}))
    store.save_alert_states(run.endpoint, rows, events)
    return ev
