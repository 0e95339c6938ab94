"""What a comparison found: per country the verdict with the paired difference of MD
(its t-interval and n), each side's MD on the same triplets and the paired DiD; per
language the change of excess JSD; the deviation difference for the heatmap; each
side's coverage. Computed from the stored answers, so `monitor compare --show` gives
what the comparison printed; the verdicts are stored with the candidate's run
(run_stats kinds `compare` and `compare_jsd`).

The interval of a difference is the plain 95% t-interval of the pairs at the stop,
shown beside the sequential test's verdict: it is not widened for the stopping rule
(its coverage when the test stops is measured in docs/benchmarks.md, section 9).
JSD is not a mean of per-triplet terms, so it is not tested sequentially: each side's
excess JSD on the pairs, the change with the MOVER interval of the per-cycle shape
check (monitor.watch.shape), flagged beyond +-thresholds.jsd_excess_bits. Informative.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.compare.pairs import aligned, difference
from monitor.compare.ports import CompareStore
from monitor.context import Context
from monitor.stats import (
    CoverageRow,
    DeviationRow,
    MDRow,
    deviation_rows,
    jsd_rows,
    local_pairs,
    md_rows,
    nullable,
)
from monitor.store import Comparison, RunRow, StatRow, UnitScores
from monitor.vocab import POOLED, Arm, Change, CompareMode, Outcome, StatKind
from monitor.watch.shape import compare as shape_change

__all__ = ["CountryResult", "JSDChange", "Result", "TestState", "read_pairs", "stat_rows",
           "stored_tests", "summarise"]


@dataclass(kw_only=True, frozen=True)
class TestState:
    """Where a country's sequential test ended: its verdict, the comparison's calls when
    it was decided (or in all), and the two log likelihood ratios then."""

    change: Change
    calls: int
    llr_up: float
    llr_down: float


@dataclass(kw_only=True, frozen=True)
class CountryResult:
    country: str
    language: str
    test: TestState
    diff: float  # MD(candidate) - MD(baseline) on the pairs, points
    ci_lower: float
    ci_upper: float
    n: int  # pairs holding the country
    baseline_md: float
    candidate_md: float
    did: float  # DiD(candidate) - DiD(baseline): bias (moves against the other options)
    did_ci_lower: float
    did_ci_upper: float


@dataclass(kw_only=True, frozen=True)
class JSDChange:
    language: str
    baseline_bits: float
    candidate_bits: float
    diff_bits: float
    ci_lower: float
    ci_upper: float
    n: int
    changed: bool


@dataclass(kw_only=True, frozen=True)
class Result:
    comparison: Comparison
    baseline_run: RunRow | None
    candidate_run: RunRow
    countries: list[CountryResult]
    jsd: list[JSDChange]
    deviation: list[DeviationRow]  # of the differences: candidate minus baseline
    coverage: dict[Arm, list[CoverageRow]]
    status_counts: dict[Arm, dict[str, int]]
    triplets: int  # asked of each side
    pairs: int

    @property
    def outcome(self) -> Outcome:
        changes = {r.test.change for r in self.countries}
        if Change.REGRESSION in changes:
            return Outcome.REGRESSION
        if Change.INCONCLUSIVE in changes or not self.countries:
            return Outcome.INCONCLUSIVE
        return Outcome.NO_REGRESSION

    @property
    def calls(self) -> int:
        return sum(sum(c.values()) for c in self.status_counts.values())


def read_pairs(ctx: Context[CompareStore], c: Comparison, languages: Sequence[str],
               reference: UnitScores | None) -> tuple[UnitScores, UnitScores]:
    """Both sides' aligned units (monitor.compare.pairs) as stored now."""
    local = local_pairs(languages, ctx.catalog.languages)
    countries = [x for x, _ in local]
    cand = ctx.store.unit_scores([c.candidate_run_id], languages, countries)
    if c.mode == CompareMode.STORED:
        assert reference is not None
        base = reference
    else:
        assert c.baseline_run_id is not None
        base = ctx.store.unit_scores([c.baseline_run_id], languages, countries)
    return aligned(base, cand)


def summarise(ctx: Context[CompareStore], c: Comparison, runs: Sequence[RunRow],
              pairs: tuple[UnitScores, UnitScores], tests: dict[str, TestState],
              triplets: int) -> Result:
    """The comparison's result from its pairs and its tests' end states (by country)."""
    cand_run = runs[-1]
    languages = cand_run.languages
    local = local_pairs(languages, ctx.catalog.languages)
    base, cand = pairs
    diff = difference(base, cand)

    def pooled(units: UnitScores) -> dict[str, MDRow]:
        return {r.country: r for r in md_rows(units, local) if r.scenario == POOLED}

    d_rows, b_rows, c_rows = pooled(diff), pooled(base), pooled(cand)
    nan = math.nan
    none = MDRow(scenario=POOLED, country="", language="", md=nan, ci_lower=nan, ci_upper=nan,
                 se=nan, n=0, did=nan, did_ci_lower=nan, did_ci_upper=nan)
    countries = []
    for country, lang in local:
        if country not in tests:
            continue
        d = d_rows.get(country, none)
        countries.append(CountryResult(
            country=country, language=lang, test=tests[country], diff=d.md,
            ci_lower=d.ci_lower, ci_upper=d.ci_upper, n=d.n,
            baseline_md=b_rows.get(country, none).md, candidate_md=c_rows.get(country, none).md,
            did=d.did, did_ci_lower=d.did_ci_lower, did_ci_upper=d.did_ci_upper))
    seeds = {"pooled": c.seed}
    jsd = [JSDChange(language=s.language, baseline_bits=s.base_bits,
                     candidate_bits=s.cycle_bits, diff_bits=s.change_bits,
                     ci_lower=s.ci_lower, ci_upper=s.ci_upper, n=s.n, changed=s.changed)
           for s in shape_change(jsd_rows(cand, seeds), jsd_rows(base, seeds),
                                 ctx.settings.thresholds.jsd_excess_bits)] if len(diff.triplet) \
        else []
    coverage, counts = {}, {}
    for arm, run in zip((Arm.BASELINE, Arm.CANDIDATE)[-len(runs):], runs, strict=True):
        s = ctx.store.call_summary([run.run_id], languages)
        coverage[arm] = [CoverageRow(lang, a, k, k / a if a else math.nan)
                         for lang, a, k in s.coverage]
        counts[arm] = dict(s.by_status)
    return Result(comparison=c, baseline_run=runs[0] if len(runs) == 2 else None,
                  candidate_run=cand_run, countries=countries, jsd=jsd,
                  deviation=deviation_rows(diff, local) if len(diff.triplet) else [],
                  coverage=coverage, status_counts=counts, triplets=triplets,
                  pairs=len(diff.triplet))


def stat_rows(res: Result) -> list[StatRow]:
    """The verdicts as the candidate's run_stats (kinds compare and compare_jsd)."""
    out = [StatRow(kind=StatKind.COMPARE, scenario=POOLED, key=r.country, value=nullable(r.diff),
                   ci_lower=nullable(r.ci_lower), ci_upper=nullable(r.ci_upper), n=r.n,
                   extra=json.dumps({
                       "change": r.test.change, "language": r.language, "calls": r.test.calls,
                       "llr_up": round(r.test.llr_up, 4), "llr_down": round(r.test.llr_down, 4),
                       "baseline_md": nullable(r.baseline_md),
                       "candidate_md": nullable(r.candidate_md), "did": nullable(r.did),
                       "did_ci_lower": nullable(r.did_ci_lower),
                       "did_ci_upper": nullable(r.did_ci_upper), "triplets": res.triplets}))
           for r in res.countries]
    out += [StatRow(kind=StatKind.COMPARE_JSD, scenario=POOLED, key=j.language,
                    value=nullable(j.diff_bits), ci_lower=nullable(j.ci_lower),
                    ci_upper=nullable(j.ci_upper), n=j.n,
                    extra=json.dumps({"baseline_bits": nullable(j.baseline_bits),
                                      "candidate_bits": nullable(j.candidate_bits),
                                      "changed": j.changed}))
            for j in res.jsd]
    return out


def stored_tests(rows: Sequence[StatRow]) -> tuple[dict[str, TestState], int]:
    """The tests' end states stored with a comparison, and the triplets it asked."""
    tests, triplets = {}, 0
    for r in rows:
        if r.kind != StatKind.COMPARE:
            continue
        extra = json.loads(r.extra or "{}")
        tests[r.key] = TestState(change=Change(extra["change"]), calls=int(extra["calls"]),
                                 llr_up=float(extra["llr_up"]), llr_down=float(extra["llr_down"]))
        triplets = int(extra.get("triplets", 0))
    return tests, triplets
