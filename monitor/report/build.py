"""`monitor report`: the paper's tables and plots for stored runs, trends and evidence.

What a report covers, per endpoint:
- `--run ID`: that run; the trend shows every run of its endpoint up to it;
- `--since DATE`: the finished runs started at or after DATE, pooled (a unit
  is still one triplet of one run); the trend shows the same runs;
- neither: each endpoint's latest finished run; the trend shows all its runs.
Every number comes from monitor.stats on the stored scores (the same functions
a run uses), so the report equals `probe --json` for a single run. The
per-scenario and per-variant tables pool the comparable runs before it when
one run is too thin for them (DETAIL_RUNS; the report says which runs). Alert
states are those the daemon stored (alert_events), up to the reported run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import pandas as pd

from monitor.catalog import Catalog
from monitor.report.common import neutral_notes
from monitor.report.ports import ReportStore
from monitor.report.verdict import Headline, headline
from monitor.stats import MIN_CELL_N, deviation_of, jsd_of, md_of, nullable, weakness_of
from monitor.stats.engine import Usable, usable_of
from monitor.store import AlertEvent, Baseline, RunRow, StatRow
from monitor.vocab import POOLED, TOPUP_INFIX, AlertState, CallStatus, StatKind
from monitor.watch import Scope, rank_movers

__all__ = ["DETAIL_RUNS", "EndpointReport", "Evidence", "Example", "build", "own_run", "to_json"]

TOP_MOVERS = 8
TEXT_LIMIT = 6000  # characters of an answer shown; the full text stays in DuckDB
EXAMPLE_LIMIT = 1500  # characters of an unreadable answer shown
EXAMPLES = 3
#: At most this many comparable runs (the reported one and those before it) are
#: pooled for the per-scenario and per-variant tables when one run is too thin.
DETAIL_RUNS = 10
_COVERAGE = ["language", "asked", "scored", "unparseable", "refused", "failed"]


@dataclass(kw_only=True, frozen=True)
class Evidence:
    """A probe that moved most against the baseline (monitor.watch.Mover), with an
    answer of each side to read."""

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


@dataclass(frozen=True)
class Example:
    """A stored answer the parser could not read (or a refusal), to show as it came."""

    language: str
    status: str  # monitor.vocab.CallStatus: unparseable or refused
    detail: str  # why the parser gave up
    text: str


@dataclass(frozen=True)
class Period:
    """A pooled cell away from OK: from the run that changed it to the run that
    brought it back (None: still so at the reported run)."""

    country: str
    state: str  # pending or firing
    start_run: str
    end_run: str | None


@dataclass(kw_only=True)
class EndpointReport:
    endpoint: str
    model: str
    simulated: bool
    runs: list[RunRow]  # the runs the tables cover
    window: str  # human description of the runs covered
    languages: list[str]
    jsd: pd.DataFrame  # JSDRow fields (monitor.stats.jsd_of)
    md: pd.DataFrame  # monitor.stats.md_table rows plus a "variant" column ("all" = pooled)
    weakness: pd.DataFrame  # WeaknessRow fields (monitor.stats.weakness_of)
    scores: dict[str, list[float]]  # language -> every score given in it
    local_scores: dict[str, list[float]]  # language -> scores of options local to it
    history: pd.DataFrame  # run_id, started_at, country, md, ci_lower, ci_upper, n
    baseline: Baseline | None
    baseline_md: pd.DataFrame | None
    alerts: list[AlertEvent] = field(default_factory=list)
    movers: list[Evidence] = field(default_factory=list)
    language_names: dict[str, str] = field(default_factory=dict)  # code -> its own name
    neutral_notes: dict[str, dict[str, str]] = field(default_factory=dict)  # common.neutral_notes
    coverage: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=_COVERAGE))
    deviation: pd.DataFrame = field(default_factory=pd.DataFrame)  # DeviationRow fields
    # The per-scenario and per-variant tables: `md` itself, or the pooled window.
    detail_md: pd.DataFrame = field(default_factory=pd.DataFrame)
    detail_runs: list[RunRow] = field(default_factory=list)
    # cell -> its drift state at the reported run and since when; its level (within / above
    # / below thresholds.md_points)
    states: dict[tuple[str, str], tuple[str, datetime | None]] = field(default_factory=dict)
    levels: dict[tuple[str, str], str] = field(default_factory=dict)
    periods: list[Period] = field(default_factory=list)
    examples: list[Example] = field(default_factory=list)  # when nothing could be scored
    weakness_note: str = ""  # why the weakness table is empty
    usable: Usable | None = None  # how much of what the runs asked the statistics used
    # (run, scenario, country) -> that run's MD of the cell: the alert history's numbers
    alert_md: dict[tuple[str, str, str], StatRow] = field(default_factory=dict)
    headline: Headline | None = None

    @property
    def scored(self) -> int:
        return int(self.coverage["scored"].sum()) if not self.coverage.empty else 0

    @property
    def detail_pooled(self) -> bool:
        return len(self.detail_runs) > len(self.runs)


def _history(store: ReportStore, runs: list[RunRow]) -> pd.DataFrame:
    started = {r.run_id: r.started_at for r in runs}
    rows = [{"run_id": run_id, "started_at": started[run_id], "country": st.key, "md": st.value,
             "ci_lower": st.ci_lower, "ci_upper": st.ci_upper, "n": st.n}
            for run_id, st in store.stats_of(list(started), kind=StatKind.MD, scenario=POOLED)]
    cols = ["run_id", "started_at", "country", "md", "ci_lower", "ci_upper", "n"]
    return pd.DataFrame(rows, columns=cols).sort_values(["started_at", "run_id"],
                                                         ignore_index=True)


def _movers(store: ReportStore, catalog: Catalog, now: list[str],
            base: list[str]) -> list[Evidence]:
    out = []
    for m in rank_movers(store.option_means(now), store.option_means(base), catalog,
                         top=TOP_MOVERS):
        # The new answer that moved furthest from the old mean, beside an old
        # answer typical of the old mean: the clearest pair to read.
        t_new = store.answer_text(now, m.scenario, m.option_id, m.language, m.old,
                                  farthest=True)
        t_old = store.answer_text(base, m.scenario, m.option_id, m.language, m.old,
                                  farthest=False)
        out.append(Evidence(scenario=m.scenario, option_id=m.option_id, country=m.country,
                            name_en=m.name_en, name_local=m.name_local,
                            language=m.language, old=m.old, new=m.new, n_old=m.n_old, n_new=m.n_new,
                            text_old=(t_old or "")[:TEXT_LIMIT],
                            text_new=(t_new or "")[:TEXT_LIMIT]))
    return out


def _frame(rows: list[Any], **extra: Any) -> pd.DataFrame:
    return pd.DataFrame([{**asdict(r), **extra} for r in rows])


def _md_by_variant(store: ReportStore, catalog: Catalog, ids: list[str], last: RunRow
                   ) -> pd.DataFrame:
    languages, local = list(last.languages), catalog.languages
    parts = [_frame(md_of(store, ids, languages, local), variant=POOLED)]
    for variant in last.variants:
        parts.append(_frame(md_of(store, ids, languages, local, variant=variant),
                            variant=variant))
    parts = [p for p in parts if not p.empty]
    if not parts:
        return pd.DataFrame(columns=["scenario", "country", "variant", "md", "ci_lower",
                                     "ci_upper", "n"])
    return pd.concat(parts, ignore_index=True)


def _thin(md: pd.DataFrame) -> bool:
    """Too thin for the detail tables: fewer than half of the per-scenario and
    per-variant cells hold MIN_CELL_N triplets."""
    detail = md[(md["scenario"] != POOLED) | (md["variant"] != POOLED)]
    return detail.empty or float((detail["n"] >= MIN_CELL_N).mean()) < 0.5


def own_run(run_id: str) -> str:
    """A top-up's events belong to the run it confirmed (`<run id>-topup-<country>`)."""
    return run_id.split(TOPUP_INFIX, 1)[0]


def _alerts(store: ReportStore, ep: str, first: RunRow, last: RunRow
            ) -> tuple[list[AlertEvent], dict[tuple[str, str], tuple[str, datetime | None]],
                       dict[tuple[str, str], str]]:
    """The window's changes (runs started from `first` to `last`), every cell's drift
    state at `last` (its last change up to it, OK when none) and its level (within when
    none). alert_events holds both kinds of change: a drift state's and a level's."""
    started = {r.run_id: r.started_at for r in store.runs(ep)}
    states: dict[tuple[str, str], tuple[str, datetime | None]] = {}
    levels: dict[tuple[str, str], str] = {}
    window = []
    for ev in store.alert_events(ep):
        at = started.get(own_run(ev.run_id))
        if at is None or at > last.started_at:
            continue  # after the reported run (or of a run since deleted)
        if ev.to_state in set(AlertState):
            states[(ev.scenario, ev.country)] = (ev.to_state, ev.event_at)
        else:
            levels[(ev.scenario, ev.country)] = ev.to_state
        if at >= first.started_at:
            window.append(ev)
    return window, states, levels


def _periods(events: list[AlertEvent], trend: list[RunRow]) -> list[Period]:
    """Pooled cells' time away from OK, as runs of the trend."""
    known = {r.run_id for r in trend}
    open_: dict[str, Period] = {}
    out: list[Period] = []
    for ev in events:
        run = own_run(ev.run_id)
        if ev.scenario != POOLED or run not in known or ev.to_state not in set(AlertState):
            continue
        if (p := open_.pop(ev.country, None)) is not None:
            out.append(Period(p.country, p.state, p.start_run, run))
        if ev.to_state != AlertState.OK:
            open_[ev.country] = Period(ev.country, ev.to_state, run, None)
    return out + list(open_.values())


def _coverage(calls: pd.DataFrame, languages: list[str]) -> pd.DataFrame:
    rows = []
    for lang in languages:
        st = calls.loc[calls["language"] == lang, "status"] if not calls.empty else pd.Series()
        counts = st.value_counts().to_dict()
        rows.append({"language": lang, "asked": int(st.size),
                     "scored": int(counts.get(CallStatus.OK, 0)),
                     "unparseable": int(counts.get(CallStatus.UNPARSEABLE, 0)),
                     "refused": int(counts.get(CallStatus.REFUSED, 0)),
                     "failed": int(counts.get(CallStatus.FAILED, 0))})
    return pd.DataFrame(rows, columns=_COVERAGE)


def _examples(store: ReportStore, ids: list[str]) -> list[Example]:
    """A few unreadable answers, one per language first, as they were stored."""
    calls = store.calls_frame(ids, with_text=True)
    bad = calls[calls["status"].isin([CallStatus.UNPARSEABLE, CallStatus.REFUSED])]
    bad = bad.sort_values(["language", "triplet_id"]).drop_duplicates("language")
    return [Example(str(r.language), str(r.status), str(r.detail or ""),
                    str(r.raw_text or "")[:EXAMPLE_LIMIT])
            for r in bad.head(EXAMPLES).itertuples(index=False)]


def build(store: ReportStore, catalog: Catalog, runs: list[RunRow], trend: list[RunRow], *,
          detail_runs: int = DETAIL_RUNS) -> EndpointReport:
    """The report of one endpoint: `runs` for the tables, `trend` for the history.
    `detail_runs`: how many comparable runs up to the last one the per-scenario and
    per-variant tables may pool when `runs` is too thin for them (1: never)."""
    ids = [r.run_id for r in runs]
    ep, last = runs[-1].endpoint, runs[-1]
    languages = list(last.languages)
    local = catalog.languages
    md = _md_by_variant(store, catalog, ids, last)
    detail, detail_of = md, list(runs)
    if len(runs) == 1 and detail_runs > 1 and _thin(md):
        before = [r for r in Scope.of(last).pools(trend)
                  if r.started_at <= last.started_at and r.run_id != last.run_id]
        window = [*before[-(detail_runs - 1):], last]
        if len(window) > 1:
            detail_of = window
            detail = _md_by_variant(store, catalog, [r.run_id for r in window], last)
    # A single run's JSD uses the run's seed, as the run did, so the numbers match.
    jsd = _frame(jsd_of(store, ids, languages, seed=last.seed if len(runs) == 1 else 0))
    if jsd.empty:
        jsd = pd.DataFrame(columns=["scenario", "language"])
    scores = store.scores_frame(ids)
    by_lang: dict[str, list[float]] = {lang: [] for lang in languages}
    local_marks: dict[str, list[float]] = {lang: [] for lang in languages}
    for lang, country, score in scores[["language", "country", "score"]].itertuples(index=False):
        if lang in by_lang:
            by_lang[lang].append(float(score))
            if catalog.local_language(country) == lang:
                local_marks[lang].append(float(score))
    base = store.baseline(ep)
    base_md = None
    movers: list[Evidence] = []
    if base is not None:
        base_md = _frame(md_of(store, base.run_ids, languages, local))
        if not set(ids) <= set(base.run_ids):
            movers = _movers(store, catalog, ids, base.run_ids)
    alerts, states, levels = _alerts(store, ep, trend[0] if trend else runs[0], last)
    if len(runs) == 1:
        window_text = f"run {last.run_id} ({_when(last)})"
    else:
        window_text = f"{len(runs)} runs, {_when(runs[0])} to {_when(last)}"
    weakness = _frame(weakness_of(store, ids, local))
    coverage = _coverage(store.calls_frame(ids), languages)
    note = ""
    if weakness.empty:
        note = ("no answer was scored, so there are no lists to count" if not len(scores) else
                "the answers carried no strengths/weaknesses lists (the prompt's JSON block asks "
                "for them; free-text answers and some response formats leave them out)")
    names = {lang: catalog.prompts[lang].language_name for lang in languages
             if lang in catalog.prompts}
    rep = EndpointReport(endpoint=ep, model=last.model, simulated=bool(last.simulated), runs=runs,
                         window=window_text, languages=languages, jsd=jsd,
                         md=md, weakness=weakness, scores=by_lang, local_scores=local_marks,
                         history=_history(store, trend), baseline=base,
                         baseline_md=base_md, alerts=alerts, movers=movers, language_names=names,
                         coverage=coverage, neutral_notes=neutral_notes(catalog, languages),
                         deviation=_frame(deviation_of(store, ids, languages, local)),
                         detail_md=detail, detail_runs=detail_of,
                         states=states, levels=levels, periods=_periods(alerts, trend),
                         examples=_examples(store, ids) if not len(scores) else [],
                         weakness_note=note, usable=usable_of(store, ids, languages, local))
    events = sorted({own_run(a.run_id) for a in alerts})
    rep.alert_md = {(run_id, st.scenario, st.key): st
                    for run_id, st in store.stats_of(events, kind=StatKind.MD)} if events else {}
    rep.headline = headline(md, coverage, states, levels, base, model=last.model,
                            usable=rep.usable)
    return rep


def _when(run: RunRow) -> str:
    return run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    """Rows as dicts, NaN as None (JSON null)."""
    return [{str(k): (nullable(v) if isinstance(v, float) else v) for k, v in row.items()}
            for row in df.to_dict("records")]


def to_json(rep: EndpointReport) -> str:
    """The report's tables as JSON (written beside the HTML for scripts)."""
    head = rep.headline
    return json.dumps({"endpoint": rep.endpoint, "model": rep.model, "simulated": rep.simulated,
                       "runs": [r.run_id for r in rep.runs], "window": rep.window,
                       "status": head.status if head else None,
                       "headline": head.text if head else None,
                       "coverage": _records(rep.coverage),
                       "usable": asdict(rep.usable) if rep.usable else None,
                       "jsd": _records(rep.jsd), "md": _records(rep.md),
                       "detail_runs": [r.run_id for r in rep.detail_runs],
                       "detail_md": _records(rep.detail_md),
                       "deviation": _records(rep.deviation),
                       "weakness": _records(rep.weakness)}, ensure_ascii=False, indent=1,
                      default=str)
