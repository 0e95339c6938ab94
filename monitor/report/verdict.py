"""The headline of an endpoint's report: a status and a few sentences, first on the page.

Derived only from what the rest of the report shows: the pooled MD cells of
the reported runs under the one significance rule (monitor.stats.rules), the
alert states the daemon stored (alert_events, up to the reported run) and the
coverage counts. Every MD it names carries its CI and n.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pandas as pd

from monitor.config import reach_advice, schema_advice
from monitor.report.common import country_key
from monitor.stats import MIN_CELL_N, Usable, nullable, significant
from monitor.store import Baseline
from monitor.vocab import POOLED, AlertState, LevelState

__all__ = ["STATUSES", "Headline", "headline"]

#: The statuses, worst first: what the badge says.
STATUSES = {"unreadable": "answers unreadable", "drift": "drift alert",
            "bias": "bias detected", "thin": "too little data", "clear": "no bias detected"}


@dataclass(frozen=True)
class Headline:
    status: str  # a key of STATUSES
    sentences: list[str]
    biased: list[str]  # countries whose pooled MD is significantly positive
    firing: list[str]  # countries whose pooled cell is FIRING at the reported run

    @property
    def label(self) -> str:
        return STATUSES[self.status]

    @property
    def text(self) -> str:
        return " ".join(self.sentences)


def _md_text(r: Mapping[Any, Any]) -> str:
    md, lo, hi = (nullable(r[k]) for k in ("md", "ci_lower", "ci_upper"))
    return f"{r['country']} ({md:+.2f} points [{lo:+.2f}, {hi:+.2f}], {r['n']} triplets)"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _unreadable(coverage: pd.DataFrame, model: str) -> Headline:
    c = coverage[["asked", "unparseable", "refused", "failed"]].sum()
    answered = int(c["unparseable"] + c["refused"])
    text = [f"None of the model's answers could be read: {int(c['asked'])} calls, "
            f"{answered} answered ({int(c['unparseable'])} unparseable, {int(c['refused'])} "
            f"refused), {int(c['failed'])} failed, 0 scored."]
    if answered:
        text.append("The model does not write the scores in a form the parser reads (examples "
                    f"below); {schema_advice(model)}, and run again.")
    else:
        text.append(f"No call was answered: {reach_advice(model)} (`monitor runs` gives the "
                    "most common error).")
    return Headline("unreadable", text, [], [])


def headline(md: pd.DataFrame, coverage: pd.DataFrame,
             states: Mapping[tuple[str, str], tuple[str, datetime | None]],
             levels: Mapping[tuple[str, str], str], baseline: Baseline | None, *,
             model: str = "", usable: Usable | None = None) -> Headline:
    """`md`: the reported runs' MD cells by variant; `coverage`: calls per language and
    status; `states` / `levels`: each cell's drift state (since when) and level at the
    reported run; `baseline`: what the runs are compared with (None: nothing yet); `model`:
    the endpoint's, for the advice when nothing could be read."""
    if int(coverage["scored"].sum()) == 0:
        return _unreadable(coverage, model)
    md = md[(md["scenario"] == POOLED) & (md["variant"] == POOLED)]
    cells = sorted(md.to_dict("records"), key=lambda r: country_key(str(r["country"])))
    sig = [r for r in cells if significant(nullable(r["ci_lower"]), nullable(r["ci_upper"]),
                                           int(r["n"]))]
    up = [r for r in sig if float(r["md"]) > 0]
    down = [r for r in sig if float(r["md"]) < 0]
    thin = [r for r in cells if int(r["n"]) < MIN_CELL_N]
    text = []
    if up:
        text.append(f"Local-language bias detected for {_and([_md_text(r) for r in up])}.")
    if down:
        text.append(f"Options scored lower at home for {_and([_md_text(r) for r in down])}.")
    if not sig and len(thin) < len(cells):
        text.append(f"No country's MD differs from 0 (95% CI; {len(cells) - len(thin)} "
                    f"countries with at least {MIN_CELL_N} triplets).")
    pooled = {c: st for (s, c), st in states.items() if s == POOLED}
    firing = sorted((c for c, (st, _) in pooled.items() if st == AlertState.FIRING),
                    key=country_key)
    pending = sorted((c for c, (st, _) in pooled.items() if st == AlertState.PENDING),
                     key=country_key)
    if baseline is None:
        text.append("No baseline yet, so no drift is watched (`monitor baseline set "
                    "--latest`).")
    else:
        since = f"the baseline of {baseline.set_at:%Y-%m-%d}"
        if firing:
            when = {c: pooled[c][1] for c in firing}
            text.append(f"Drift against {since}: "
                        + _and([f"{c} firing since {when[c]:%Y-%m-%d %H:%M}" if when[c] else
                                f"{c} firing" for c in firing]) + ".")
        else:
            text.append(f"Stable against {since}; no drift alerts.")
        if pending:
            text.append(f"A shift is suspected, not confirmed, for {_and(pending)} (pending).")
    beyond = sorted((c for (sc, c), lv in levels.items()
                     if sc == POOLED and lv != LevelState.WITHIN), key=country_key)
    if beyond:
        text.append(f"MD beyond thresholds.md_points in 2 runs running for {_and(beyond)} (the "
                    "level: a stable bias the baseline may already hold).")
    if thin:
        shown = _and([f"{r['country']} (n={r['n']})" for r in thin[:4]])
        more = f" and {len(thin) - 4} more" if len(thin) > 4 else ""
        text.append(f"Too few triplets to say for {shown}{more}: a cell needs {MIN_CELL_N}; "
                    "pool runs with `--since`.")
    cov = coverage[["asked", "scored"]].sum()
    if int(cov["scored"]) < int(cov["asked"]):
        used = f"; {usable.describe()}" if usable is not None else ""
        text.append(f"{int(cov['scored'])} of {int(cov['asked'])} calls scored{used} (see "
                    "Calls per language).")
    status = ("drift" if firing else "bias" if sig else
              "thin" if len(thin) == len(cells) else "clear")
    return Headline(status, text, [str(r["country"]) for r in up], firing)
