"""After each run: compare with the accepted baseline and update the alert states.

- The baseline is a set of runs chosen by the user (`monitor baseline set`),
  or, while there is none, made automatically from the first runs once they
  hold enough triplets (baseline.auto_min_triplets, default 20 x
  triplets_per_run: with 10 runs the baseline's own error made the CUSUM page
  on noise about once per 100 runs, bench/stat_validation.py); until then
  nothing is compared and nothing pages.
- Runs are compared only with a baseline of the same catalog version and
  model id. When the provider reports another model id (or a new
  fingerprint), the evaluation says so instead of comparing silently.
- Slack is told about PENDING -> FIRING and FIRING -> OK of the pooled cells
  (scenario "all": the primary cells of statistics.md); per-scenario cells
  keep their state for the dashboard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from monitor.catalog import Catalog
from monitor.config import AUTO_BASELINE_RUNS, Settings
from monitor.measure.run import RunResult
from monitor.stats import MIN_CELL_N, md_table
from monitor.store import Store
from monitor.watch.drift import FIRING, OK, PENDING, CellState, Observation, step

__all__ = ["MIN_CELL_N", "Evaluation", "Mover", "Transition", "evaluate", "movers"]


@dataclass(frozen=True)
class Mover:
    """A probe whose score moved against the baseline."""

    option: str  # the option's English name
    local_name: str
    language: str
    old: float
    new: float


@dataclass(frozen=True)
class Transition:
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


@dataclass
class Evaluation:
    endpoint: str
    run_id: str
    baseline: dict[str, Any] | None
    comparable: bool
    note: str
    states: dict[tuple[str, str], CellState] = field(default_factory=dict)
    drift: dict[tuple[str, str], float] = field(default_factory=dict)
    transitions: list[Transition] = field(default_factory=list)
    to_notify: list[Transition] = field(default_factory=list)
    fingerprint_note: str | None = None


def _fingerprint_change(store: Store, endpoint: str, run_id: str) -> str | None:
    """The provider's system_fingerprint changed since the previous run: the
    same model id is still compared, but the change is said out loud."""
    rows = store.query(
        "SELECT c.run_id, string_agg(DISTINCT c.fingerprint, ',' ORDER BY c.fingerprint) "
        "FROM probe_calls c JOIN runs r USING (run_id) WHERE c.endpoint = ? AND "
        "c.status = 'ok' AND c.fingerprint IS NOT NULL AND r.status IN ('complete', 'partial') "
        "GROUP BY c.run_id, r.started_at ORDER BY r.started_at DESC LIMIT 2", [endpoint])
    if len(rows) < 2 or rows[0][0] != run_id or rows[0][1] == rows[1][1]:
        return None
    return f"provider fingerprint changed ({rows[1][1]} -> {rows[0][1]}); still compared"


def _records(df: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = df.to_dict("records")
    return rows


def _f(x: Any) -> float:
    return float("nan") if x is None else float(x)


def _auto_baseline(settings: Settings, store: Store, result: RunResult) -> dict[str, Any] | None:
    run = result.run
    model = result.model_ids[0] if result.model_ids else run.model
    need = (settings.baseline.auto_min_triplets
            or AUTO_BASELINE_RUNS * settings.sampling.triplets_per_run)
    runs = [r for r in store.runs(run.endpoint)
            if r.status == "complete" and r.catalog_version == run.catalog_version]
    if not runs:
        return None
    models = store.run_models([r.run_id for r in runs])
    same = [r for r in runs if models.get(r.run_id) == model]
    if sum(r.triplets for r in same) < need:
        return None
    store.set_baseline(run.endpoint, [r.run_id for r in same], run.catalog_version, model,
                       auto=True)
    return store.baseline(run.endpoint)


def movers(store: Store, catalog: Catalog, run_id: str, base_runs: list[str], scenario: str,
           country: str, top: int = 3) -> list[Mover]:
    """The probes of `country` asked in its local language that moved most."""
    lang = catalog.local_language(country)
    if lang is None:
        return []
    def cell(means: dict[tuple[str, str, str, str], tuple[float, int]]) -> dict[
            tuple[str, str], float]:
        return {(scen, oid): mean for (scen, oid, c, lg), (mean, _) in means.items()
                if c == country and lg == lang and scenario in ("all", scen)}

    now, base = cell(store.option_means([run_id])), cell(store.option_means(base_runs))
    moved = sorted(((abs(v - base[k]), k, base[k], v) for k, v in now.items() if k in base),
                   reverse=True)[:top]
    out = []
    for _, (scen, oid), old, new in moved:
        opt = catalog.option(scen, oid)
        out.append(Mover(opt.names.get("en", oid), opt.names.get(lang, oid), lang, old, new))
    return out


def evaluate(settings: Settings, catalog: Catalog, store: Store, result: RunResult,
             *, now: datetime | None = None,
             cache: dict[tuple[str, str], Any] | None = None) -> Evaluation:
    """`cache` (owned by the caller) keeps the baseline's MD table between runs."""
    run = result.run
    now = now or datetime.now(UTC)
    model = result.model_ids[0] if result.model_ids else run.model
    baseline = store.baseline(run.endpoint)
    if baseline is None:
        baseline = _auto_baseline(settings, store, result)
        note = ("baseline set automatically from the first runs" if baseline else
                "no baseline yet: collecting runs for the automatic baseline; alerts muted")
        return Evaluation(run.endpoint, run.run_id, baseline, False, note)
    if baseline["catalog_version"] != run.catalog_version:
        return Evaluation(run.endpoint, run.run_id, baseline, False,
                          f"catalog changed ({baseline['catalog_version']} -> "
                          f"{run.catalog_version}); not compared - set a new baseline")
    if baseline["model_id"] != model:
        return Evaluation(run.endpoint, run.run_id, baseline, False,
                          f"model id changed ({baseline['model_id']} -> {model}); not compared "
                          "- check the deployment, then `monitor baseline set --latest`")
    if run.run_id in baseline["run_ids"]:
        return Evaluation(run.endpoint, run.run_id, baseline, False, "run is in the baseline")
    local = {lang: list(c) for lang, c in catalog.languages.items()}
    key = (run.endpoint, str(baseline["set_at"]))
    if cache is not None and key in cache:
        base_md = cache[key]
    else:
        base_md = md_table(store.scores_frame(baseline["run_ids"]), run.languages, local)
        if cache is not None:
            cache.clear()
            cache[key] = base_md
    base = {(r["scenario"], r["country"]): r for r in _records(base_md)}
    saved = store.alert_states(run.endpoint)
    ev = Evaluation(run.endpoint, run.run_id, baseline, True, "compared with the baseline")
    ev.fingerprint_note = _fingerprint_change(store, run.endpoint, run.run_id)
    t = settings.thresholds
    rows, events = [], []
    cooldown = timedelta(minutes=settings.alerts.cooldown_minutes)
    for r in _records(result.md):
        key = (r["scenario"], r["country"])
        b = base.get(key)
        old = saved.get(key, {})
        prev = CellState(old.get("state", OK), _f(old.get("s_plus", 0.0)),
                         _f(old.get("s_minus", 0.0)), int(old.get("alarm_runs") or 0),
                         int(old.get("calm_runs") or 0))
        obs = None
        if (b is not None and r["n"] >= MIN_CELL_N and b["n"] >= MIN_CELL_N
                and math.isfinite(_f(r["se"])) and math.isfinite(_f(b["se"]))):
            # A run's own sd from a handful of triplets can be near 0 (discrete
            # scores) and make z explode; the baseline's sd, from many more
            # triplets, bounds the run's SE from below.
            se_now = max(_f(r["se"]), _f(b["se"]) * math.sqrt(b["n"] / r["n"]))
            obs = Observation(r["md"], se_now, _f(r["ci_lower"]), _f(r["ci_upper"]),
                              int(r["n"]), b["md"], _f(b["se"]))
            ev.drift[key] = float(r["md"] - b["md"])
        new = step(prev, obs, drift_points=t.drift_md_points, h=t.cusum_h,
                   md_threshold=t.md_points, min_runs_firing=settings.alerts.min_runs_firing)
        ev.states[key] = new
        notified_at = old.get("notified_at")
        changed = new.state != prev.state
        rows.append({"scenario": r["scenario"], "country": r["country"], "state": new.state,
                     "s_plus": new.s_plus, "s_minus": new.s_minus, "alarm_runs": new.alarm_runs,
                     "calm_runs": new.calm_runs, "z": new.z, "reason": new.reason,
                     "last_run_id": run.run_id,
                     "changed_at": now if changed else old.get("changed_at", now),
                     "notified_at": notified_at})
        if not changed or b is None:
            continue
        tr = Transition(run.endpoint, r["scenario"], r["country"], prev.state, new.state,
                        run.run_id, float(r["md"]), (_f(r["ci_lower"]), _f(r["ci_upper"])),
                        int(r["n"]), float(b["md"]), (_f(b["ci_lower"]), _f(b["ci_upper"])),
                        int(b["n"]), new.z, new.reason or prev.reason)
        events.append({"scenario": r["scenario"], "country": r["country"], "event_at": now,
                       "from_state": prev.state, "to_state": new.state, "run_id": run.run_id,
                       "md": float(r["md"]), "md_base": float(b["md"]), "z": new.z,
                       "reason": tr.reason})
        ev.transitions.append(tr)
        pages = (prev.state == PENDING and new.state == FIRING) or (
            prev.state == OK and new.state == FIRING) or (prev.state == FIRING and new.state == OK)
        recent = notified_at is not None and now - notified_at < cooldown
        if r["scenario"] == "all" and pages and not (new.state == FIRING and recent):
            ev.to_notify.append(Transition(**{**tr.__dict__, "movers": movers(
                store, catalog, run.run_id, baseline["run_ids"], r["scenario"], r["country"])}))
    store.save_alert_states(run.endpoint, rows, events)
    return ev
