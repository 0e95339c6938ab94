"""After each run: compare every cell with the baseline and update its alert state.

Per cell (scenario, country) the run's MD feeds the cell's drift detector
(monitor.watch.drift) when the cell is tested (monitor.stats.rules); states
and their changes are stored in one transaction. Slack is told of every
change of a pooled cell (scenario "all") to FIRING and back to OK, in order
and never held back, so its last word is the state; per-scenario cells keep
their state for the dashboard. The absolute level (beyond
thresholds.md_points, with hysteresis) changes are stored and shown, and
sent only with alerts.page_on_level. Every message carries the cell's DiD
with its CI: bias (local options gain beyond the language's leniency) or
leniency. A provider fingerprint that changed is said out loud, and still
compared.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from monitor.catalog import Catalog
from monitor.config import Settings
from monitor.stats import Adjusted, MDRow, Persistence, Summary
from monitor.store import AlertEvent, Baseline, CellRecord, RunRow, Store
from monitor.vocab import POOLED, AlertState, Condition, LevelState, Side
from monitor.watch import topup
from monitor.watch.baseline import auto_baseline, comparable, run_model
from monitor.watch.drift import CODES, LEVEL_RUNS, STATES, CellState, Observation, observe, step
from monitor.watch.movers import Mover, rank_movers
from monitor.watch.reference import (
    BaselineCache,
    DerivedH,
    baseline_data,
    covariate,
    detector_h,
)

__all__ = ["Evaluation", "Suspect", "Transition", "bias_or_leniency", "did_verdict",
           "evaluate", "observed", "suspects"]

TOP_MOVERS_SLACK = 3


@dataclass(kw_only=True, frozen=True)
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
    condition: Condition = Condition.DRIFT  # or LEVEL: the absolute level vs thresholds.md_points
    did: float = float("nan")
    did_ci: tuple[float, float] = (float("nan"), float("nan"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transition:
        """From a queued payload (the outbox holds them as JSON)."""
        movers = [Mover.from_dict(m) for m in data.get("movers", [])]
        fields = {k: v for k, v in data.items() if k not in ("movers", "kind")}
        if "did_ci" in fields:
            fields["did_ci"] = tuple(fields["did_ci"])
        if "condition" in fields:
            fields["condition"] = Condition(fields["condition"])
        return cls(**{**fields, "ci": tuple(data["ci"]), "ci_base": tuple(data["ci_base"]),
                      "movers": movers})


@dataclass(kw_only=True)
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
    persistence: Persistence | None = None  # the baseline as covariate (CUPED), if tried
    h: DerivedH | None = None  # thresholds.cusum_h: auto, as sized against the baseline


def _fingerprint_change(store: Store, endpoint: str, run_id: str) -> str | None:
    rows = store.recent_fingerprints(endpoint, 2)
    if len(rows) < 2 or rows[0][0] != run_id or rows[0][1] == rows[1][1]:
        return None
    return f"provider fingerprint changed ({rows[1][1]} -> {rows[0][1]}); still compared"


def _pages(prev: str, new: str) -> bool:
    """Slack hears of FIRING and of its end; a PENDING that ends unconfirmed was
    never paged, so its end is not news."""
    return (new == AlertState.FIRING and prev != AlertState.FIRING) or (
        prev == AlertState.FIRING and new == AlertState.OK)


def did_verdict(did: float, lo: float, hi: float) -> str:
    """"bias" (the DiD's whole CI beyond 0), "leniency" (0 inside it) or "unknown" (no CI)."""
    if not all(math.isfinite(x) for x in (did, lo, hi)):
        return "unknown"
    return "bias" if lo > 0 or hi < 0 else "leniency"


def bias_or_leniency(did: float, lo: float, hi: float) -> str:
    """What a cell's DiD says, with its CI (docs/statistics.md, DiD)."""
    verdict = did_verdict(did, lo, hi)
    if verdict == "unknown":
        shown = f"{did:+.2f}" if math.isfinite(did) else "n/a"
        return f"DiD {shown} (no CI): bias or leniency cannot be told apart"
    ci = f"DiD {did:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    if verdict == "bias":
        return f"{ci}: bias - the local language moves local options against the others"
    return (f"{ci}: consistent with leniency - the language scores every option alike "
            "(no bias shown beyond it)")


@dataclass(frozen=True)
class Suspect:
    """A pooled country cell whose CUSUM this run would take past topup.suspect_h."""

    country: str
    side: int  # +1 up, -1 down
    cusum: float
    base: MDRow  # the baseline's cell


def observed(r: MDRow, b: MDRow | None, adj: dict[str, Adjusted]) -> Observation | None:
    """drift.observe, with the covariate where it is used (pooled cells only)."""
    a = adj.get(r.country) if r.scenario == POOLED else None
    if a is None:
        return observe(r, b)
    return observe(r, b, md=a.md, factor=a.factor)


def _prev(old: Any) -> CellState:
    return CellState() if old is None else CellState(
        state=old.state, s_plus=old.s_plus, s_minus=old.s_minus, alarm_runs=old.alarm_runs,
        calm_runs=old.calm_runs,
        level=old.level, level_runs=old.level_runs)


def suspects(settings: Settings, catalog: Catalog, store: Store, run: RunRow, summary: Summary,
             *, cache: BaselineCache | None = None) -> list[Suspect]:
    """The pooled cells a top-up should confirm before this run is evaluated (nothing
    is stored): compared cells, not FIRING, whose CUSUM would pass topup.suspect_h."""
    if not settings.topup.enabled:
        return []
    baseline = store.baseline(run.endpoint)
    if baseline is None or comparable(baseline, run, run_model(run, summary.model_ids)):
        return []
    cache = {} if cache is None else cache  # the MD and the covariate read it once
    base = baseline_data(catalog, store, run, baseline, cache).cells()
    saved = store.alert_states(run.endpoint)
    adj, _ = covariate(settings, catalog, store, [run.run_id], run, baseline, cache)
    h, _ = detector_h(settings, catalog, store, run, baseline, cache)
    t = settings.thresholds
    out = []
    for r in summary.md:
        b = base.get((r.scenario, r.country))
        if r.scenario != POOLED or b is None or (obs := observed(r, b, adj)) is None:
            continue
        new = step(_prev(saved.get((r.scenario, r.country))), obs,
                   drift_points=t.drift_md_points, h=h, md_threshold=t.md_points,
                   min_runs_firing=settings.alerts.min_runs_firing)
        hot, side = topup.suspect(CODES[AlertState(new.state)], new.s_plus, new.s_minus,
                                  settings.topup.suspect_h)
        if bool(hot):
            out.append(Suspect(r.country, int(side), max(new.s_plus, new.s_minus), b))
    return out


def _after_topup(new: CellState, v: topup.Verdict, settings: Settings, h: float) -> CellState:
    """The cell's state once its top-up has spoken (monitor.watch.topup.apply)."""
    code, up, down, runs = topup.apply(CODES[AlertState(new.state)], new.s_plus, new.s_minus,
                                       new.alarm_runs, True, v.side, v.decision, h)
    state = STATES[int(code)]
    a, b = topup.bounds(settings.topup.alpha, settings.topup.beta)
    side = Side.of(v.side)
    lo, hi = v.ci
    fresh = (f"{v.n} fresh triplets: MD {v.md:+.2f} [{lo:+.2f}, {hi:+.2f}], SPRT "
             f"{v.llr:.1f} nats")
    if v.decision == topup.CONFIRM:
        reason = (f"drift {side}: CUSUM past {settings.topup.suspect_h:g}, confirmed by a "
                  f"top-up of {fresh} >= {a:.1f}")
    elif v.decision == topup.DISMISS:
        reason = (f"suspected drift {side} dismissed by a top-up of {fresh} <= {b:.1f}; "
                  "that side's CUSUM restarts" if state == AlertState.OK else new.reason)
    else:
        reason = (f"drift {side} suspected, top-up inconclusive after {fresh}; asked "
                  "again next run" if state != AlertState.OK else new.reason)
    return CellState(state=state, s_plus=float(up), s_minus=float(down), alarm_runs=int(runs),
                     calm_runs=new.calm_runs, z=new.z, reason=reason,
                     level=new.level, level_runs=new.level_runs)


def evaluate(settings: Settings, catalog: Catalog, store: Store, run: RunRow, summary: Summary,
             *, now: datetime | None = None,
             cache: BaselineCache | None = None,
             verdicts: dict[str, topup.Verdict] | None = None) -> Evaluation:
    """`cache` (owned by the caller) keeps the baseline's MD between runs; `verdicts`
    are this run's top-ups, by country (monitor.measure.topup)."""
    now = now or datetime.now(UTC)
    model = run_model(run, summary.model_ids)
    baseline = store.baseline(run.endpoint)
    if baseline is None:
        baseline = auto_baseline(settings, store, run, model)
        note = ("baseline set automatically from the first runs" if baseline else
                "no baseline yet: collecting runs for the automatic baseline; alerts muted")
        return Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=baseline,
                          comparable=False, note=note)
    if (why := comparable(baseline, run, model)) is not None:
        return Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=baseline,
                          comparable=False, note=why)
    cache = {} if cache is None else cache  # the MD and the covariate read it once
    base = baseline_data(catalog, store, run, baseline, cache).cells()
    saved = store.alert_states(run.endpoint)
    verdicts = verdicts or {}
    ev = Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=baseline, comparable=True,
                    note="compared with the baseline")
    ev.fingerprint_note = _fingerprint_change(store, run.endpoint, run.run_id)
    adj, ev.persistence = covariate(settings, catalog, store, [run.run_id], run, baseline,
                                    cache)
    h, ev.h = detector_h(settings, catalog, store, run, baseline, cache)
    t = settings.thresholds
    rows: list[CellRecord] = []
    events: list[AlertEvent] = []
    for r in summary.md:
        cell = (r.scenario, r.country)
        b = base.get(cell)
        old = saved.get(cell)
        prev = _prev(old)
        obs = observed(r, b, adj)
        if obs is not None:
            ev.drift[cell] = r.md - obs.md_base  # as shown: the raw MD (CUPED feeds the sums)
        new = step(prev, obs, drift_points=t.drift_md_points, h=h,
                   md_threshold=t.md_points, min_runs_firing=settings.alerts.min_runs_firing)
        if r.scenario == POOLED and obs is not None and (v := verdicts.get(r.country)):
            new = _after_topup(new, v, settings, h)
        ev.states[cell] = new
        changed = new.state != prev.state
        rows.append(CellRecord(scenario=r.scenario, country=r.country, state=new.state,
                               s_plus=new.s_plus, s_minus=new.s_minus,
                               alarm_runs=new.alarm_runs, calm_runs=new.calm_runs, z=new.z,
                               reason=new.reason, last_run_id=run.run_id,
                               changed_at=now if changed or old is None else old.changed_at,
                               notified_at=old.notified_at if old else None, level=new.level,
                               level_runs=new.level_runs))
        if b is None:
            continue
        changes = []
        if changed:
            changes.append((Condition.DRIFT, prev.state, new.state, new.reason))
        if new.level != prev.level:
            where = "within" if new.level == LevelState.WITHIN else "beyond"
            why = (f"level: the whole MD CI {where} +-{t.md_points:g} points in {LEVEL_RUNS} "
                   "runs running")
            changes.append((Condition.LEVEL, prev.level, new.level, why))
        for kind, was, now_state, why in changes:
            tr = Transition(endpoint=run.endpoint, scenario=r.scenario, country=r.country,
                            from_state=was, to_state=now_state, run_id=run.run_id,
                            md=r.md, ci=(r.ci_lower, r.ci_upper), n=r.n, md_base=b.md,
                            ci_base=(b.ci_lower, b.ci_upper),
                            n_base=b.n, z=new.z, reason=why, condition=kind, did=r.did,
                            did_ci=(r.did_ci_lower, r.did_ci_upper))
            events.append(AlertEvent(scenario=r.scenario, country=r.country, event_at=now,
                                     from_state=was, to_state=now_state, run_id=run.run_id,
                                     md=r.md, md_base=b.md, z=new.z, reason=why))
            ev.transitions.append(tr)
            pages = (_pages(was, now_state) if kind == Condition.DRIFT
                     else settings.alerts.page_on_level)
            if r.scenario == POOLED and pages:
                moved = rank_movers(store.option_means([run.run_id]),
                                    store.option_means(baseline.run_ids), catalog,
                                    country=r.country, scenario=r.scenario,
                                    top=TOP_MOVERS_SLACK)
                ev.to_notify.append(Transition(**{**tr.__dict__, "movers": moved}))
    store.save_alert_states(run.endpoint, rows, events)
    return ev
