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

import json
from dataclasses import asdict, dataclass, field
from datetime import UTC
from typing import Any

import pandas as pd

from monitor.catalog import Catalog
from monitor.stats import jsd_of, md_of, nullable, weakness_of
from monitor.store import AlertEvent, Baseline, RunRow, Store
from monitor.vocab import POOLED
from monitor.watch import rank_movers

__all__ = ["EndpointReport", "Evidence", "build", "to_json"]

TOP_MOVERS = 8
TEXT_LIMIT = 6000  # characters of an answer shown; the full text stays in DuckDB


@dataclass(frozen=True)
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


@dataclass
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


def _history(store: Store, runs: list[RunRow]) -> pd.DataFrame:
    started = {r.run_id: r.started_at for r in runs}
    rows = [{"run_id": run_id, "started_at": started[run_id], "country": st.key, "md": st.value,
             "ci_lower": st.ci_lower, "ci_upper": st.ci_upper, "n": st.n}
            for run_id, st in store.stats_of(list(started), kind="md", scenario=POOLED)]
    cols = ["run_id", "started_at", "country", "md", "ci_lower", "ci_upper", "n"]
    return pd.DataFrame(rows, columns=cols).sort_values(["started_at", "run_id"],
                                                         ignore_index=True)


def _movers(store: Store, catalog: Catalog, now: list[str], base: list[str]) -> list[Evidence]:
    out = []
    for m in rank_movers(store.option_means(now), store.option_means(base), catalog,
                         top=TOP_MOVERS):
        # The new answer that moved furthest from the old mean, beside an old
        # answer typical of the old mean: the clearest pair to read.
        t_new = store.answer_text(now, m.scenario, m.option_id, m.language, m.old,
                                  farthest=True)
        t_old = store.answer_text(base, m.scenario, m.option_id, m.language, m.old,
                                  farthest=False)
        out.append(Evidence(m.scenario, m.option_id, m.country, m.name_en, m.name_local,
                            m.language, m.old, m.new, m.n_old, m.n_new,
                            (t_old or "")[:TEXT_LIMIT], (t_new or "")[:TEXT_LIMIT]))
    return out


def _frame(rows: list[Any], **extra: Any) -> pd.DataFrame:
    return pd.DataFrame([{**asdict(r), **extra} for r in rows])


def build(store: Store, catalog: Catalog, runs: list[RunRow],
          trend: list[RunRow]) -> EndpointReport:
    """The report of one endpoint: `runs` for the tables, `trend` for the history."""
    ids = [r.run_id for r in runs]
    ep, last = runs[-1].endpoint, runs[-1]
    languages = list(last.languages)
    local = catalog.languages
    md_parts = [_frame(md_of(store, ids, languages, local), variant=POOLED)]
    for variant in last.variants:
        md_parts.append(_frame(md_of(store, ids, languages, local, variant=variant),
                               variant=variant))
    md = pd.concat([p for p in md_parts if not p.empty], ignore_index=True) if any(
        not p.empty for p in md_parts) else pd.DataFrame(columns=["scenario", "country",
                                                                  "variant"])
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
    since = trend[0].started_at if trend else runs[0].started_at
    alerts = store.alert_events(ep, since, until=last.finished_at)
    if len(runs) == 1:
        window = f"run {last.run_id} ({_when(last)})"
    else:
        window = f"{len(runs)} runs, {_when(runs[0])} to {_when(last)}"
    weakness = _frame(weakness_of(store, ids, local))
    names = {lang: catalog.prompts[lang].language_name for lang in languages
             if lang in catalog.prompts}
    return EndpointReport(ep, last.model, bool(last.simulated), runs, window, languages, jsd, md,
                          weakness, by_lang, local_marks, _history(store, trend), base, base_md,
                          alerts, movers, names)


def _when(run: RunRow) -> str:
    return run.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


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
