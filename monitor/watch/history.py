"""A whole history recomputed: every run's MD and JSD, and the drift states replayed.

The same engine as a single run (monitor.stats.engine with `by_run`): one
query and one batched kernel call for all the runs, then drift.step replayed
over them in order against the baseline, with the rules of evaluate().
bench/history_scale.py measures it on a year of a fleet (10M calls).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from monitor.config import AUTO_BASELINE_RUNS, Alerts, Thresholds
from monitor.stats import JSDRow, MDRow, md_jsd_of, md_of
from monitor.vocab import FINISHED
from monitor.watch.drift import CellState, observe, steps, watched
from monitor.watch.ports import WatchStore

__all__ = ["History", "history", "replay"]

Cell = tuple[str, str, str]  # run_id, scenario, country


@dataclass(frozen=True)
class History:
    """Per shown run (oldest first): its MD and JSD rows (group = run_id), and each MD
    cell's alert state and z after that run (z None: the cell was not tested)."""

    runs: list[str]
    md: list[MDRow]
    jsd: list[JSDRow]
    states: dict[Cell, tuple[str, float | None]] = field(default_factory=dict)


def replay(md: Sequence[MDRow], base: Sequence[MDRow], order: Sequence[str], *,
           thresholds: Thresholds, alerts: Alerts, h: float | None = None
           ) -> dict[Cell, tuple[str, float | None]]:
    """The state and z of every (run, scenario, country) after that run, walking `order`.
    `h`: the CUSUM's, else thresholds.cusum_h; an `auto` h is the caller's to size
    (monitor.watch.reference.detector_h: it needs the catalog's cells)."""
    if h is None:
        if thresholds.cusum_h == "auto":
            raise ValueError("replay: thresholds.cusum_h is auto; pass the h sized for "
                             "the baseline (monitor.watch.reference.detector_h)")
        h = float(thresholds.cusum_h)
    ref = {(b.scenario, b.country): b for b in base}
    by_run: dict[str, list[MDRow]] = {}
    for r in md:
        by_run.setdefault(r.group, []).append(r)
    cells: dict[tuple[str, str], CellState] = {}
    out: dict[Cell, tuple[str, float | None]] = {}
    t = thresholds
    for run_id in order:
        rows = by_run.get(run_id, [])
        while rows:  # a run's cells are stepped together; a cell met twice, in order
            batch: dict[tuple[str, str], MDRow] = {}
            later = []
            for r in rows:
                key = (r.scenario, r.country)
                if key in batch:
                    later.append(r)
                else:
                    batch[key] = r
            seen = [(key, observe(r, ref.get(key))) for key, r in batch.items()]
            news = steps([(cells.get(key, CellState()), obs) for key, obs in seen],
                         drift_points=t.drift_md_points, h=h, md_threshold=t.md_points,
                         min_runs_firing=alerts.min_runs_firing)
            for (key, obs), stepped in zip(seen, news, strict=True):
                new = watched(key[0], stepped)
                cells[key] = new
                out[(run_id, *key)] = (new.state, None if obs is None else new.z)
            rows = later
    return out


def history(store: WatchStore, endpoint: str, local_countries: Mapping[str, Sequence[str]], *,
            since: datetime | None = None, baseline_runs: Sequence[str] | None = None,
            jsd: bool = True, thresholds: Thresholds | None = None,
            alerts: Alerts | None = None, h: float | None = None) -> History:
    """Every finished run of `endpoint` started at or after `since`, recomputed. The
    baseline: `baseline_runs`, else the active one, else the first AUTO_BASELINE_RUNS
    runs (they get no state). Runs asked in other languages than the latest are left out.
    `h`: as `replay` has it (with thresholds.cusum_h auto, the default, it must be given)."""
    runs = [r for r in store.runs(endpoint) if r.finished_at is not None
            and r.status in FINISHED]
    if not runs:
        return History([], [], [])
    languages = runs[-1].languages
    runs = [r for r in runs if r.languages == languages]
    if baseline_runs is None:
        active = store.baseline(endpoint)
        baseline_runs = (active.run_ids if active
                         else [r.run_id for r in runs[:AUTO_BASELINE_RUNS]])
    in_base = set(baseline_runs)
    order = [r.run_id for r in runs if r.run_id not in in_base]
    shown = [r.run_id for r in runs if since is None or r.started_at >= since]
    seeds = {r.run_id: r.seed for r in runs}
    keep = set(shown)
    base = md_of(store, baseline_runs, languages, local_countries)
    # The CUSUM of a run depends on every run before it: the MD of all, replayed.
    earlier = [r.run_id for r in runs if r.run_id not in keep]
    md = md_of(store, earlier, languages, local_countries, by_run=True) if earlier else []
    if jsd:
        shown_md, j = md_jsd_of(store, shown, languages, local_countries, seeds=seeds)
    else:
        shown_md, j = md_of(store, shown, languages, local_countries, by_run=True), []
    md = sorted([*md, *shown_md], key=lambda r: r.group)  # stable: a run's cells keep order
    states = replay(md, base, order, thresholds=thresholds or Thresholds(),
                    alerts=alerts or Alerts(), h=h)
    return History(shown, [r for r in md if r.group in keep], j, states)
