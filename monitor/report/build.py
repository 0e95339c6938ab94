"""`monitor report`: the paper's tables and plots for stored runs, trends and evidence.

What a report covers, per endpoint:
- `--run ID`: that run; the trend shows every run of its endpoint up to it;
- `--since DATE`: the finished runs started at or after DATE, pooled (a unit
  is still one triplet of one run); the trend shows the same runs;
- neither: each endpoint's latest finished run; the trend shows all its runs.
Every number comes from monitor.stats / monitor.stats.weakness on the stored
scores (the same functions a run uses), so the report equals `probe --json`
for a single run. Rendering lives in monitor.report.render.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Any

import pandas as pd

from monitor.catalog import Catalog, load_catalog
from monitor.config import load_settings, parse_since
from monitor.errors import NoResultsError, UsageError
from monitor.stats import jsd_table, md_table, nullable
from monitor.stats.weakness import weakness_table
from monitor.store import RunRow, Store

__all__ = ["EndpointReport", "Mover", "build", "report_command"]

FINISHED = ("complete", "partial")
TOP_MOVERS = 8
TEXT_LIMIT = 6000  # characters of an answer shown; the full text stays in DuckDB


@dataclass(frozen=True)
class Mover:
    """A (scenario, option, language) whose mean score moved most against the baseline."""

    scenario: str
    option_id: str
    country: str
    name_en: str
    name_local: str
    language: str
    old: float
    new: float
    n_old: int
    n_new: int
    text_old: str
    text_new: str


@dataclass
class EndpointReport:
    endpoint: str
    model: str
    simulated: bool
    runs: list[RunRow]  # the runs the tables cover
    window: str  # human description of the runs covered
    languages: list[str]
    jsd: pd.DataFrame  # monitor.stats.jsd_table
    md: pd.DataFrame  # monitor.stats.md_table rows plus a "variant" column ("all" = pooled)
    weakness: pd.DataFrame  # monitor.stats.weakness.weakness_table
    scores: dict[str, list[float]]  # language -> every score given in it
    local_scores: dict[str, list[float]]  # language -> scores of options local to it
    history: pd.DataFrame  # run_id, started_at, country, md, ci_lower, ci_upper, n
    baseline: dict[str, Any] | None
    baseline_md: pd.DataFrame | None
    alerts: list[dict[str, Any]] = field(default_factory=list)
    movers: list[Mover] = field(default_factory=list)


def select_runs(store: Store, args: argparse.Namespace, storage: str) -> dict[str, list[RunRow]]:
    """endpoint -> the finished runs the report's tables cover (oldest first)."""
    wanted = set(args.endpoint or [])
    if args.run:
        run = store.get_run(args.run)
        if run is None:
            raise UsageError(f"--run {args.run}: no such run in {storage}; run ids are printed "
                             f"by `monitor probe --once` and in the Slack messages")
        if run.status not in FINISHED:
            raise UsageError(f"--run {args.run}: the run is {run.status}, not finished; "
                             f"finish it with `monitor probe --once --resume {args.run}`")
        return {run.endpoint: [run]}
    since = parse_since(args.since) if args.since else None
    out: dict[str, list[RunRow]] = {}
    for run in sorted(store.runs(), key=lambda r: r.started_at):
        if run.status not in FINISHED or (wanted and run.endpoint not in wanted):
            continue
        if since is not None and run.started_at < since:
            continue
        out.setdefault(run.endpoint, []).append(run)
    if since is None:
        out = {ep: runs[-1:] for ep, runs in out.items()}
    if not out:
        where = f" since {args.since}" if args.since else ""
        names = f" for {', '.join(sorted(wanted))}" if wanted else ""
        raise NoResultsError(f"no finished runs{names}{where} in {storage}; "
                             f"run `monitor probe --once` first")
    return out


def _history(store: Store, runs: list[RunRow]) -> pd.DataFrame:
    ids = [r.run_id for r in runs]
    frame = store.frame(
        "SELECT s.run_id, r.started_at, s.key AS country, s.value AS md, s.ci_lower, "
        "s.ci_upper, s.n FROM run_stats s JOIN runs r USING (run_id) WHERE "
        "list_contains($1, s.run_id) AND s.kind = 'md' AND s.scenario = 'all' "
        "ORDER BY r.started_at", [ids])
    return frame


def _movers(store: Store, catalog: Catalog, now: list[str], base: list[str]) -> list[Mover]:
    new, old = store.option_means(now), store.option_means(base)
    # Only an option asked in its own country's language: that is where the bias lives.
    keys = [k for k in new if k in old and catalog.local_language(k[2]) == k[3]]
    # Ranked by the move weighted by its evidence (|delta| * sqrt of the effective n), so
    # that one noisy answer does not outrank an option that moved on every asking.
    def weight(k: tuple[Any, ...]) -> float:
        (o, n_o), (v, n_v) = old[k], new[k]
        return abs(v - o) * math.sqrt(n_o * n_v / (n_o + n_v))
    keys.sort(key=lambda k: (-weight(k), k))
    text_sql = ("SELECT c.raw_text FROM scores s JOIN probe_calls c USING (run_id, triplet_id, "
                "language) WHERE list_contains($1, s.run_id) AND c.status = 'ok' AND "
                "c.scenario = $2 AND s.option_id = $3 AND s.language = $4 "
                "ORDER BY abs(s.score - $5) {order}, c.run_id, c.triplet_id LIMIT 1")
    out = []
    for key in keys[:TOP_MOVERS]:
        scen, oid, country, lang = key
        (o, n_o), (v, n_v) = old[key], new[key]
        # The new answer that moved furthest from the old mean, beside an old
        # answer typical of the old mean: the clearest pair to read.
        t_new = store.query(text_sql.format(order="DESC"), [now, scen, oid, lang, o])
        t_old = store.query(text_sql.format(order="ASC"), [base, scen, oid, lang, o])
        try:
            opt = catalog.option(scen, oid)
            names = (opt.names.get("en", oid), opt.names.get(lang, oid))
        except KeyError:  # an option since removed from the catalog
            names = (oid, oid)
        out.append(Mover(scen, oid, country, names[0], names[1], lang, o, v, n_o, n_v,
                         str(t_old[0][0] or "")[:TEXT_LIMIT] if t_old else "",
                         str(t_new[0][0] or "")[:TEXT_LIMIT] if t_new else ""))
    return out


def build(store: Store, catalog: Catalog, runs: list[RunRow],
          trend: list[RunRow]) -> EndpointReport:
    """The report of one endpoint: `runs` for the tables, `trend` for the history."""
    ids = [r.run_id for r in runs]
    ep, last = runs[-1].endpoint, runs[-1]
    languages = list(last.languages)
    local = {lang: list(c) for lang, c in catalog.languages.items()}
    scores = store.scores_frame(ids)
    md_parts = [md_table(scores, languages, local).assign(variant="all")]
    for variant in last.variants:
        part = scores[scores["variant"] == variant] if not scores.empty else scores
        md_parts.append(md_table(part, languages, local).assign(variant=variant))
    md = pd.concat(md_parts, ignore_index=True)
    # A single run's JSD uses the run's seed, as the run did, so the numbers match.
    jsd = jsd_table(scores, languages, seed=last.seed if len(runs) == 1 else 0)
    by_lang: dict[str, list[float]] = {lang: [] for lang in languages}
    local_marks: dict[str, list[float]] = {lang: [] for lang in languages}
    for lang, country, score in scores[["language", "country", "score"]].itertuples(index=False):
        if lang in by_lang:
            by_lang[lang].append(float(score))
            if catalog.local_language(country) == lang:
                local_marks[lang].append(float(score))
    base = store.baseline(ep)
    base_md = None
    movers: list[Mover] = []
    if base is not None:
        base_md = md_table(store.scores_frame(base["run_ids"]), languages, local)
        if not set(ids) <= set(base["run_ids"]):
            movers = _movers(store, catalog, ids, base["run_ids"])
    since = trend[0].started_at if trend else runs[0].started_at
    alerts = _records(store.frame(
        "SELECT event_at, scenario, country, from_state, to_state, run_id, md, md_base, z, "
        "reason FROM alert_events WHERE endpoint = ? AND event_at >= ? ORDER BY event_at",
        [ep, since]))
    if len(runs) == 1:
        window = f"run {last.run_id} ({_when(last)})"
    else:
        window = f"{len(runs)} runs, {_when(runs[0])} to {_when(last)}"
    return EndpointReport(ep, last.model, bool(last.simulated), runs, window, languages, jsd, md,
                          weakness_table(scores, local), by_lang, local_marks,
                          _history(store, trend), base, base_md, alerts, movers)


def _when(run: RunRow) -> str:
    return run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def report_command(args: argparse.Namespace) -> int:
    from monitor.report.render import render_html, render_markdown

    settings, _ = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path)
    store = Store(settings.storage.path, lock_timeout_s=60)
    chosen = select_runs(store, args, str(settings.storage.path))
    reports = []
    with store.session():
        for ep, runs in chosen.items():
            every = sorted((r for r in store.runs(ep) if r.status in FINISHED),
                           key=lambda r: r.started_at)
            if args.run:
                trend = [r for r in every if r.started_at <= runs[0].started_at]
            else:
                trend = runs if args.since else every
            reports.append(build(store, catalog, runs, trend))
    if args.format == "md":
        text = render_markdown(reports)
        if args.out == "-":
            sys.stdout.write(text)
            return 0
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(text, encoding="utf-8")
        print(out / "report.md")
        return 0
    if args.out == "-":
        raise UsageError("--out -: only --format md can be written to stdout; give a folder")
    path = render_html(reports, Path(args.out))
    print(path)
    return 0


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, NaN as None (JSON null)."""
    return [{str(k): (nullable(v) if isinstance(v, float) else v) for k, v in row.items()}
            for row in df.to_dict("records")]


def to_json(rep: EndpointReport) -> str:
    """The report's tables as JSON (written beside the HTML for scripts)."""
    return json.dumps({"endpoint": rep.endpoint, "model": rep.model, "simulated": rep.simulated,
                       "runs": [r.run_id for r in rep.runs], "window": rep.window,
                       "jsd": _records(rep.jsd), "md": _records(rep.md),
                       "weakness": _records(rep.weakness)}, ensure_ascii=False, indent=1,
                      default=str)
