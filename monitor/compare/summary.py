"""What a comparison says: one JSON document (docs/contract.md), a text summary, and the
Markdown for a pull-request comment. Every difference with its 95% CI and n; a
regression with its DiD (bias: the candidate moves the country's options against the
others in its language; leniency: the language scores every option alike)."""

from __future__ import annotations

import math
from typing import Any

from monitor.compare.outcome import CountryResult, Result
from monitor.stats import nullable
from monitor.vocab import Arm, Change, Outcome
from monitor.watch.transition import did_reading

__all__ = ["json_document", "markdown", "text"]

_WORD = {Change.REGRESSION: "REGRESSION", Change.IMPROVEMENT: "improvement",
         Change.NO_CHANGE: "no change", Change.INCONCLUSIVE: "inconclusive"}
_OUTCOME = {Outcome.REGRESSION: "regression", Outcome.INCONCLUSIVE: "inconclusive",
            Outcome.NO_REGRESSION: "no regression"}


def _ci(lo: float, hi: float) -> str:
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return "[   n/a   ]"
    return f"[{lo:+.2f}, {hi:+.2f}]"


def _v(x: float) -> str:
    return f"{x:+.2f}" if math.isfinite(x) else "n/a"


def _did(r: CountryResult) -> str:
    return did_reading(r.diff, r.did, (r.did_ci_lower, r.did_ci_upper), r.n)


def json_document(res: Result, storage: str, catalog_version: str, exit_code: int
                  ) -> dict[str, Any]:
    c = res.comparison

    def side(arm: Arm) -> dict[str, Any] | None:
        run = res.baseline_run if arm == Arm.BASELINE else res.candidate_run
        if run is None:
            return None
        return {"endpoint": run.endpoint, "model": run.model, "model_id": run.model_id,
                "setup": run.setup, "simulated": run.simulated, "run_id": run.run_id,
                "calls": sum(res.status_counts[arm].values()),
                "status_counts": res.status_counts[arm],
                "coverage": [{"language": x.language, "ratio": nullable(x.ratio),
                              "asked": x.asked, "scored": x.scored} for x in res.coverage[arm]]}

    return {
        "compare_id": c.compare_id, "storage": storage, "catalog_version": catalog_version,
        "mode": c.mode, "status": c.status, "reason": c.reason,
        "baseline_endpoint": c.baseline_endpoint, "baseline": side(Arm.BASELINE),
        "reference_run_ids": c.reference_run_ids, "candidate": side(Arm.CANDIDATE),
        "languages": res.candidate_run.languages, "scenarios": res.candidate_run.scenarios,
        "margin": c.margin, "alpha": c.alpha, "beta": c.beta, "max_calls": c.max_calls,
        "batch_triplets": c.batch_triplets, "triplets": res.triplets, "pairs": res.pairs,
        "calls": res.calls, "outcome": res.outcome, "exit_code": exit_code,
        "countries": [{
            "country": r.country, "language": r.language, "verdict": r.test.change,
            "diff": nullable(r.diff), "ci_lower": nullable(r.ci_lower),
            "ci_upper": nullable(r.ci_upper), "n": r.n, "calls": r.test.calls,
            "baseline_md": nullable(r.baseline_md), "candidate_md": nullable(r.candidate_md),
            "did": nullable(r.did), "did_ci_lower": nullable(r.did_ci_lower),
            "did_ci_upper": nullable(r.did_ci_upper), "did_verdict": _did(r),
            "llr_up": round(r.test.llr_up, 4), "llr_down": round(r.test.llr_down, 4)}
            for r in res.countries],
        "jsd": [{"language": j.language, "baseline_bits": nullable(j.baseline_bits),
                 "candidate_bits": nullable(j.candidate_bits), "diff_bits": nullable(j.diff_bits),
                 "ci_lower": nullable(j.ci_lower), "ci_upper": nullable(j.ci_upper), "n": j.n,
                 "changed": j.changed} for j in res.jsd]}


def _against(res: Result) -> str:
    c = res.comparison
    if res.baseline_run is not None:
        return f"baseline {c.baseline_endpoint} (asked now, run {res.baseline_run.run_id})"
    return (f"the stored baseline of {c.baseline_endpoint} (runs "
            f"{', '.join(c.reference_run_ids)}; not called)")


def _head(res: Result) -> str:
    c = res.comparison
    sides = 2 if res.baseline_run is not None else 1
    return (f"{res.triplets} triplets x {len(res.candidate_run.languages)} languages x "
            f"{sides} side(s): {res.calls} calls (cap {c.max_calls}); {res.pairs} pairs; "
            f"margin {c.margin:g} points; stopped: {c.reason}")


def text(res: Result) -> str:
    c = res.comparison
    lines = [f"comparison {c.compare_id}: candidate {c.candidate_endpoint} against "
             f"{_against(res)}", f"  {_head(res)}", "",
             "MD(candidate) - MD(baseline) on the same triplets, points (95% CI, n pairs); "
             f"regression / improvement: a shift of {c.margin:g} shown (error rates: "
             f"{c.alpha:g} false regressions over all countries, {c.beta:g} per country)"]
    for r in res.countries:
        extra = (f"  DiD {_v(r.did)} {_ci(r.did_ci_lower, r.did_ci_upper)}: {_did(r)}"
                 if r.test.change == Change.REGRESSION else "")
        lines.append(f"  {r.country} ({r.language})  {_WORD[r.test.change]:<12} "
                     f"{_v(r.diff)} {_ci(r.ci_lower, r.ci_upper)} n={r.n:<4} baseline "
                     f"{_v(r.baseline_md)} -> {_v(r.candidate_md)}; decided at "
                     f"{r.test.calls} calls{extra}")
    if res.jsd:
        lines += ["", "excess JSD, candidate - baseline, bits (95% CI; informative, "
                  "flagged beyond +-thresholds.jsd_excess_bits)"]
        lines += [f"  {j.language:<8} {j.diff_bits:+.4f} [{j.ci_lower:+.4f}, {j.ci_upper:+.4f}]"
                  f" n={j.n}{'  changed' if j.changed else ''}" for j in res.jsd]
    lines.append("")
    for arm, cov in res.coverage.items():
        lines.append(f"coverage {arm}: " + "  ".join(
            f"{x.language} {100 * x.ratio:.0f}%" if math.isfinite(x.ratio) else
            f"{x.language} n/a" for x in cov))
    lines.append(f"outcome: {_OUTCOME[res.outcome]}")
    return "\n".join(lines)


def markdown(res: Result, command: str) -> str:
    """A pull-request comment: the outcome first, a table per country, how to look closer."""
    c = res.comparison
    regs = [r.country for r in res.countries if r.test.change == Change.REGRESSION]
    open_ = [r.country for r in res.countries if r.test.change == Change.INCONCLUSIVE]
    head = {Outcome.REGRESSION: f"**Local-language bias regression** in {', '.join(regs)}",
            Outcome.INCONCLUSIVE: f"**Inconclusive**: {', '.join(open_)} not decided",
            Outcome.NO_REGRESSION: "**No regression** of local-language bias"}[res.outcome]
    out = [f"### bias-monitor: {c.candidate_endpoint} against {c.baseline_endpoint}", "",
           f"{head} (margin {c.margin:g} MD points). {_head(res)}.", "",
           "| country | verdict | MD change [95% CI] | n | baseline MD | candidate MD | "
           "DiD change [95% CI] |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in res.countries:
        did = (f"{_v(r.did)} {_ci(r.did_ci_lower, r.did_ci_upper)} ({_did(r)})"
               if r.test.change == Change.REGRESSION else
               f"{_v(r.did)} {_ci(r.did_ci_lower, r.did_ci_upper)}")
        word = _WORD[r.test.change]
        word = f"**{word}**" if r.country in regs else word
        out.append(f"| {r.country} ({r.language}) | {word} | "
                   f"{_v(r.diff)} {_ci(r.ci_lower, r.ci_upper)} | {r.n} | "
                   f"{_v(r.baseline_md)} | {_v(r.candidate_md)} | {did} |")
    changed = [j for j in res.jsd if j.changed]
    if changed:
        out += ["", "Excess JSD changed (informative): " + ", ".join(
            f"{j.language} {j.diff_bits:+.3f} [{j.ci_lower:+.3f}, {j.ci_upper:+.3f}] bits"
            for j in changed)]
    out += ["", f"A regression is a rise of the candidate's MD shown against a rise of "
            f"{c.margin:g} (sequential test, {c.alpha:g} false regressions over all countries); "
            "no change: neither a rise nor a fall of the margin (equivalence); DiD tells bias "
            "from leniency. The comparison: `" + command + "`."]
    return "\n".join(out) + "\n"
