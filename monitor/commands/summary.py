"""What `monitor probe --once` prints: a readable summary or one JSON document.

Every MD and JSD is shown with its 95% CI and its sample size. An MD is
flagged `*` when it is significant and BREACH when it breaches
thresholds.md_points, by the rules of monitor.stats.rules (a CI, never the
point estimate; at least MIN_CELL_N triplets). Per-run JSD is informative
only (docs/statistics.md: JSD is compared per rotation cycle, not per run),
so it never breaches here.
"""

from __future__ import annotations

from typing import Any

from monitor.config import Settings
from monitor.measure import RunResult
from monitor.review import Review
from monitor.stats import MIN_CELL_N, beyond, jsd_significant, significant
from monitor.stats import nullable as _f  # NaN -> null
from monitor.vocab import POOLED

__all__ = ["breaches", "json_document", "text_summary"]


def _i(x: Any) -> int:
    return int(x)


def breaches(result: RunResult, settings: Settings) -> list[str]:
    """MD cells whose CI lies entirely beyond +-thresholds.md_points."""
    limit = settings.thresholds.md_points
    out = []
    for r in result.md:
        lo, hi = _f(r.ci_lower), _f(r.ci_upper)
        if beyond(lo, hi, r.n, limit):
            out.append(f"{result.run.endpoint} {r.scenario} {r.country}: MD {r.md:+.2f} "
                       f"[{lo:+.2f}, {hi:+.2f}] beyond +-{limit:g}")
    return out


def evaluation_record(review: Review) -> dict[str, Any]:
    """What the run's review found (the same the daemon stores for the run): whether it
    was compared, each cell's drift state, the transitions, the top-ups, the messages
    queued for the sinks (the daemon delivers them)."""
    ev = review.evaluation
    base = ev.baseline if ev else None
    drift = ev.drift if ev else {}
    return {
        "compared": bool(ev and ev.comparable),
        "note": ev.note if ev else "no answer: not compared",
        "baseline": None if base is None else {
            "set_at": base.set_at.isoformat(), "runs": len(base.run_ids), "auto": base.auto},
        "h": ev.h.h if ev and ev.h else None,
        "cells": [{"scenario": s, "country": c, "state": str(st.state),
                   "drift_points": _f(drift.get((s, c))), "cusum_up": st.s_plus,
                   "cusum_down": st.s_minus, "level": str(st.level), "reason": st.reason}
                  for (s, c), st in (ev.states.items() if ev else [])],
        "transitions": [{"scenario": t.scenario, "country": t.country,
                         "condition": str(t.condition), "from_state": t.from_state,
                         "to_state": t.to_state, "reason": t.reason}
                        for t in (ev.transitions if ev else [])],
        "topups": [{"country": v.country, "decision": v.word, "side": v.side, "n": v.n,
                    "triplets_asked": v.asked, "md": _f(v.md), "ci_lower": _f(v.ci[0]),
                    "ci_upper": _f(v.ci[1]), "llr": round(v.llr, 3), "why": v.why,
                    "did": _f(v.did), "did_ci_lower": _f(v.did_ci[0]),
                    "did_ci_upper": _f(v.did_ci[1])}
                   for v in review.topups.values()],
        "messages_queued": len(review.messages),
    }


def json_document(reviews: list[Review], storage: str, catalog_version: str) -> dict[str, Any]:
    eps = []
    for review in reviews:
        res = review.result
        calls = sum(res.status_counts.values())
        eps.append({
            "endpoint": review.run.endpoint, "model": review.run.model,
            "simulated": review.run.simulated, "run_id": review.run.run_id,
            "run_status": review.run.status, "calls": calls,
            "status_counts": res.status_counts, "cost_usd": res.cost_usd,
            "model_ids": res.model_ids,
            "md": [{"scenario": r.scenario, "country": r.country, "md": _f(r.md),
                    "ci_lower": _f(r.ci_lower), "ci_upper": _f(r.ci_upper), "n": _i(r.n),
                    "did": _f(r.did), "did_ci_lower": _f(r.did_ci_lower),
                    "did_ci_upper": _f(r.did_ci_upper)} for r in res.md],
            "jsd": [{"scenario": r.scenario, "language": r.language, "jsd_bits": _f(r.jsd_bits),
                     "ci_lower": _f(r.ci_lower), "ci_upper": _f(r.ci_upper),
                     "p_value": _f(r.p_value), "n": _i(r.n), "plugin_bits": _f(r.plugin_bits),
                     "js_distance_bits": _f(r.js_distance_bits),
                     "js_distance_nat": _f(r.js_distance_nat)} for r in res.jsd],
            "coverage": [{"language": r.language, "ratio": _f(r.ratio), "asked": _i(r.asked),
                          "scored": _i(r.scored)} for r in res.coverage],
            "usable": {"triplets": res.summary.usable.triplets, "read": res.summary.usable.read,
                       "complete": res.summary.usable.complete,
                       "answers_asked": res.summary.usable.answers_asked,
                       "answers_used": res.summary.usable.answers_used},
            "evaluation": evaluation_record(review),
        })
    run_id = reviews[0].run.run_id if len(reviews) == 1 else ",".join(
        r.run.run_id for r in reviews)
    return {"run_id": run_id, "storage": storage, "catalog_version": catalog_version,
            "endpoints": eps}


def _ci(lo: Any, hi: Any, fmt: str = "+.2f") -> str:
    a, b = _f(lo), _f(hi)
    return "[   n/a   ]" if a is None or b is None else f"[{a:{fmt}}, {b:{fmt}}]"


def text_summary(review: Review, settings: Settings, storage: str) -> str:
    res, run, limit = review.result, review.run, settings.thresholds.md_points
    tag = "  [SIMULATED endpoint]" if run.simulated else ""
    counts = ", ".join(f"{k} {v}" for k, v in res.status_counts.items())
    cost = "unknown (price not known to LiteLLM)" if res.cost_usd is None else (
        f"${res.cost_usd:.4f}")
    lines = [f"run {run.run_id}  endpoint {run.endpoint}  model {run.model}{tag}",
             f"  {run.triplets} triplets x {len(run.languages)} languages; calls: {counts}; "
             f"cost {cost}; catalog {run.catalog_version}; run index {run.run_index}"]
    if res.model_ids:
        lines.append(f"  model id(s) returned: {', '.join(res.model_ids)}")
    lines.append("")
    lines.append(f"MD: local-language bias in score points (95% CI, n triplets); threshold "
                 f"+-{limit:g}; * CI excludes 0 (n >= {MIN_CELL_N}); a scenario under "
                 f"{MIN_CELL_N} triplets takes its country's pooled spread for its CI")
    pooled = [r for r in res.md if r.scenario == POOLED]
    if not pooled:
        lines.append("  no triplet read in a country's language and another: nothing to "
                     "estimate (see coverage)")
    for r in pooled:
        lo, hi = _f(r.ci_lower), _f(r.ci_upper)
        flag = ("  BREACH: CI beyond threshold" if beyond(lo, hi, r.n, limit)
                else "  *" if significant(lo, hi, r.n) else "")
        per = "; ".join(f"{x.scenario} {x.md:+.2f} {_ci(x.ci_lower, x.ci_upper)} n={x.n}"
                        for x in res.md if x.country == r.country and x.scenario != POOLED)
        lines.append(f"  {r.country} ({r.language})  {r.md:+.2f} {_ci(lo, hi)} n={r.n:<4}"
                     f" DiD {_f(r.did) or 0:+.2f} {_ci(r.did_ci_lower, r.did_ci_upper)}{flag}")
        lines.append(f"      {per}")
    lines.append("")
    lines.append("JSD: excess over the permutation null, bits (95% bootstrap CI, p, n; "
                 "* permutation p < 0.05)")
    for j in (x for x in res.jsd if x.scenario == POOLED):
        star = "  *" if jsd_significant(j.p_value, j.n) else ""
        lines.append(f"  {j.language:<8} {j.jsd_bits:.4f} {_ci(j.ci_lower, j.ci_upper, '.4f')} "
                     f"p={j.p_value:.3f} n={j.n}  (plug-in {j.plugin_bits:.4f}, JS distance "
                     f"nat {j.js_distance_nat:.3f}){star}")
    lines.append("")
    cov = "  ".join(f"{c.language} {_pct(c.ratio)}" for c in res.coverage)
    lines.append(f"coverage (scored / asked): {cov}")
    lines.append(f"usable: {res.summary.usable.describe()}")
    lines += _evaluation_lines(review)
    lines.append(f"stored in {storage}")
    return "\n".join(lines)


def _pct(x: Any) -> str:
    v = _f(x)
    return "n/a" if v is None else f"{100 * v:.0f}%"


def _evaluation_lines(review: Review) -> list[str]:
    """The review, in a few lines: compared or why not, what changed, the top-ups."""
    ev = review.evaluation
    if ev is None:
        return ["baseline: not compared (no answer)"]
    out = [f"baseline: {ev.note}" + (f" (h {ev.h.h:g})" if ev.h else "")]
    out += [f"  {t.scenario}/{t.country} {t.condition}: {t.from_state} -> {t.to_state} "
            f"({t.reason})" for t in ev.transitions]
    out += [f"  top-up of {v.country}: {v.word} after {v.asked} fresh triplets"
            for v in review.topups.values()]
    if review.messages:
        out.append(f"  {len(review.messages)} message item(s) queued for the alert sinks; "
                   "the daemon (`monitor run`) delivers them")
    return out
