"""After each run: compare every cell with the baseline and step its alert state.

Per cell (scenario, country) the run's MD feeds the cell's drift detector
(monitor.watch.drift) when the cell is tested (monitor.stats.rules). Nothing
is written here: `evaluate` returns the cells' new states, their transitions
and, while there is no baseline, the runs that become the automatic one, and
the run's review (monitor.review) writes them with the run's statistics, its
messages and its status in one transaction, so that an interrupted review is
redone whole and a run is evaluated exactly once.

Messages: the alert sinks hear of every change of a pooled cell (scenario
"all") to FIRING and back to OK, in order and never held back, so their last
word is the state; per-scenario cells keep their state for the dashboard. The
absolute level (beyond thresholds.md_points, with hysteresis) changes are
stored and shown, and sent only with alerts.page_on_level. A provider
fingerprint that changed is said out loud, and still compared; a changed
catalogue, model or setup is announced once, and not compared.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime

from monitor.config import Settings
from monitor.context import Context
from monitor.stats import Adjusted, MDRow, Persistence, Summary
from monitor.store import AlertEvent, Baseline, CellRecord, RunRow
from monitor.vocab import POOLED, AlertState, Condition, LevelState, Side
from monitor.watch import topup
from monitor.watch.baseline import auto_baseline_runs, why_not_compared
from monitor.watch.drift import (
    CODES,
    LEVEL_RUNS,
    STATES,
    CellState,
    Observation,
    observe,
    step,
    watched,
)
from monitor.watch.movers import rank_movers
from monitor.watch.ports import WatchStore
from monitor.watch.reference import DerivedH, Reference, covariate, detector_h
from monitor.watch.transition import Transition

__all__ = ["Evaluation", "Suspect", "evaluate", "observed", "suspects"]

TOP_MOVERS_SLACK = 3

log = logging.getLogger(__name__)


@dataclass(kw_only=True)
class Evaluation:
    """What a run's comparison with the baseline found, and what it changes."""

    endpoint: str
    run_id: str
    baseline: Baseline | None
    comparable: bool  # the run was compared with the baseline
    note: str  # what happened, for the log, the JSON and the review's stored row
    announce: str | None = None  # a notice owed to the sinks (deployment changed)
    states: dict[tuple[str, str], CellState] = field(default_factory=dict)
    drift: dict[tuple[str, str], float] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    to_notify: list[Transition] = field(default_factory=list)
    fingerprint_note: str | None = None
    persistence: Persistence | None = None  # the baseline as covariate (CUPED), if tried
    h: DerivedH | None = None  # thresholds.cusum_h: auto, as sized against the baseline
    cells: list[CellRecord] = field(default_factory=list)  # the states to store
    events: list[AlertEvent] = field(default_factory=list)  # their changes, to store
    new_baseline: list[RunRow] = field(default_factory=list)  # the automatic baseline to set


@dataclass(frozen=True)
class Suspect:
    """A pooled country cell whose CUSUM this run would take past topup.suspect_h."""

    country: str
    side: int  # +1 up, -1 down
    cusum: float
    base: MDRow  # the baseline's cell


def _fingerprint_change(store: WatchStore, endpoint: str, run_id: str) -> str | None:
    rows = store.recent_fingerprints(endpoint, 2, run_id=run_id)
    if len(rows) < 2 or rows[0][0] != run_id or rows[0][1] == rows[1][1]:
        return None
    return f"provider fingerprint changed ({rows[1][1]} -> {rows[0][1]}); still compared"


def _pages(prev: str, new: str) -> bool:
    """The sinks hear of FIRING and of its end; a PENDING that ends unconfirmed was
    never paged, so its end is not news."""
    return (new == AlertState.FIRING and prev != AlertState.FIRING) or (
        prev == AlertState.FIRING and new == AlertState.OK)


def observed(r: MDRow, b: MDRow | None, adj: Mapping[str, Adjusted]) -> Observation | None:
    """drift.observe, with the covariate where it is used (pooled cells only)."""
    a = adj.get(r.country) if r.scenario == POOLED else None
    if a is None:
        return observe(r, b)
    return observe(r, b, md=a.md, factor=a.factor)


def _prev(old: CellRecord | None) -> CellState:
    return CellState() if old is None else CellState(
        state=old.state, s_plus=old.s_plus, s_minus=old.s_minus, alarm_runs=old.alarm_runs,
        calm_runs=old.calm_runs, level=old.level, level_runs=old.level_runs)


def _step(ctx: Context[WatchStore], prev: CellState, obs: Observation | None,
          h: float) -> CellState:
    t = ctx.settings.thresholds
    return step(prev, obs, drift_points=t.drift_md_points, h=h, md_threshold=t.md_points,
                min_runs_firing=ctx.settings.alerts.min_runs_firing)


def suspects(ctx: Context[WatchStore], run: RunRow, summary: Summary,
             ref: Reference | None) -> list[Suspect]:
    """The pooled cells a top-up should confirm before this run is evaluated (nothing
    is stored): compared cells, not FIRING, whose CUSUM would pass topup.suspect_h."""
    if (not ctx.settings.topup.enabled or ref is None
            or why_not_compared(ref.baseline, ref.scope, run) is not None):
        return []
    base = ref.cells()
    saved = ctx.store.alert_states(run.endpoint)
    adj, _ = covariate(ctx, [run.run_id], run, ref)
    h, _ = detector_h(ctx, run, ref)
    holds = _holds(ctx, run, ref)
    out = []
    for r in summary.md:
        b = base.get((r.scenario, r.country))
        if r.scenario != POOLED or b is None or (obs := observed(r, b, adj)) is None:
            continue
        new = _step(ctx, _prev(saved.get((r.scenario, r.country))), obs, h)
        hot, side = topup.suspect(CODES[AlertState(new.state)], new.s_plus, new.s_minus,
                                  ctx.settings.topup.suspect_h)
        if not bool(hot):
            continue
        last_side, last_sum = holds.get(r.country, (0, math.inf))
        if bool(topup.held(new.s_plus, new.s_minus, side, last_side, last_sum)):
            log.info("endpoint %s: run %s: %s suspected %s (CUSUM %.1f) but not topped up: "
                     "its last top-up was inconclusive at CUSUM %.1f, and a new one waits "
                     "until the sum passes it", run.endpoint, run.run_id, r.country,
                     Side.of(int(side)), max(new.s_plus, new.s_minus), last_sum)
            continue
        out.append(Suspect(r.country, int(side), max(new.s_plus, new.s_minus), b))
    return out


def _holds(ctx: Context[WatchStore], run: RunRow, ref: Reference) -> dict[str, tuple[int, float]]:
    """Per country whose last top-up under this baseline (before this run) ended
    inconclusive: (its side, the sum that raised it) - monitor.watch.topup.held."""
    out: dict[str, tuple[int, float]] = {}
    for run_id, st in ctx.store.topups_since(run.endpoint, ref.baseline.set_at):
        if run_id == run.run_id:
            continue  # this run's own (a resumed review) are kept by the top-up itself
        v = topup.Verdict.of_row(st)
        out.pop(v.country, None)
        if v.decision == topup.UNDECIDED and math.isfinite(v.cusum):
            out[v.country] = (v.side, v.cusum)
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
        held_at = float(up if v.side > 0 else down)
        reason = (f"drift {side} suspected, top-up inconclusive after {fresh}; a new "
                  f"top-up waits until this side's CUSUM passes {held_at:.1f}"
                  if state != AlertState.OK else new.reason)
    return CellState(state=state, s_plus=float(up), s_minus=float(down), alarm_runs=int(runs),
                     calm_runs=new.calm_runs, z=new.z, reason=reason,
                     level=new.level, level_runs=new.level_runs)


def _unbased(ctx: Context[WatchStore], run: RunRow) -> Evaluation:
    """No baseline yet: the finished runs in the run's scope become the automatic one
    once they hold enough triplets (`run` is the finished run, as its review ends it)."""
    runs = [run if r.run_id == run.run_id else r for r in ctx.store.runs(run.endpoint)]
    new = auto_baseline_runs(ctx.settings, run, runs)
    note = ("baseline set automatically from the first runs; this run is in it, not "
            "compared" if new else
            "no baseline yet: collecting runs for the automatic baseline; alerts muted")
    return Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=None,
                      comparable=False, note=note, new_baseline=new)


def evaluate(ctx: Context[WatchStore], run: RunRow, summary: Summary, *,
             ref: Reference | None, verdicts: Mapping[str, topup.Verdict] | None = None,
             now: datetime | None = None) -> Evaluation:
    """`run` (finished: its status as its review ends it) against `ref`, the endpoint's
    baseline (None: there is none yet); `verdicts`: this run's top-ups, by country."""
    now = now or datetime.now(UTC)
    if ref is None:
        return _unbased(ctx, run)
    baseline = ref.baseline
    if (why := why_not_compared(baseline, ref.scope, run)) is not None:
        return Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=baseline,
                          comparable=False, note=why.text,
                          announce=why.text if why.changed else None)
    store, settings = ctx.store, ctx.settings
    base = ref.cells()
    saved = store.alert_states(run.endpoint)
    verdicts = verdicts or {}
    ev = Evaluation(endpoint=run.endpoint, run_id=run.run_id, baseline=baseline,
                    comparable=True, note="compared with the baseline")
    ev.fingerprint_note = _fingerprint_change(store, run.endpoint, run.run_id)
    adj, ev.persistence = covariate(ctx, [run.run_id], run, ref)
    h, ev.h = detector_h(ctx, run, ref)
    t = settings.thresholds
    for r in summary.md:
        cell = (r.scenario, r.country)
        b = base.get(cell)
        old = saved.get(cell)
        prev = _prev(old)
        obs = observed(r, b, adj)
        if obs is not None:
            ev.drift[cell] = r.md - obs.md_base  # as shown: the raw MD (CUPED feeds the sums)
        new = _step(ctx, prev, obs, h)
        if r.scenario == POOLED and obs is not None and (v := verdicts.get(r.country)):
            new = _after_topup(new, v, settings, h)
        new = watched(r.scenario, new)
        ev.states[cell] = new
        changed = new.state != prev.state
        ev.cells.append(CellRecord(
            scenario=r.scenario, country=r.country, state=new.state, s_plus=new.s_plus,
            s_minus=new.s_minus, alarm_runs=new.alarm_runs, calm_runs=new.calm_runs, z=new.z,
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
            why_level = (f"level: the whole MD CI {where} +-{t.md_points:g} points in "
                         f"{LEVEL_RUNS} runs running")
            changes.append((Condition.LEVEL, prev.level, new.level, why_level))
        # The DiD of the data that decided: the run and its top-up's triplets pooled
        tv = verdicts.get(r.country) if r.scenario == POOLED else None
        did, did_ci, did_n, did_md = ((tv.did, tv.did_ci, tv.did_n, tv.did_md)
                                      if tv is not None and math.isfinite(tv.did)
                                      else (r.did, (r.did_ci_lower, r.did_ci_upper), r.n,
                                            r.md))
        for kind, was, now_state, reason in changes:
            tr = Transition(endpoint=run.endpoint, scenario=r.scenario, country=r.country,
                            from_state=was, to_state=now_state, run_id=run.run_id,
                            md=r.md, ci=(r.ci_lower, r.ci_upper), n=r.n, md_base=b.md,
                            ci_base=(b.ci_lower, b.ci_upper), n_base=b.n, z=new.z,
                            reason=reason, condition=kind, did=did, did_ci=did_ci,
                            did_n=did_n, did_md=did_md)
            ev.events.append(AlertEvent(scenario=r.scenario, country=r.country, event_at=now,
                                        from_state=was, to_state=now_state, run_id=run.run_id,
                                        md=r.md, md_base=b.md, z=new.z, reason=reason))
            ev.transitions.append(tr)
            pages = (_pages(was, now_state) if kind == Condition.DRIFT
                     else settings.alerts.page_on_level)
            if r.scenario == POOLED and pages:
                moved = rank_movers(store.option_means([run.run_id]),
                                    store.option_means(baseline.run_ids), ctx.catalog,
                                    country=r.country, scenario=r.scenario,
                                    top=TOP_MOVERS_SLACK)
                ev.to_notify.append(Transition(**{**tr.__dict__, "movers": moved}))
    return ev
