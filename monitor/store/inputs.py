"""The statistics' inputs, aggregated inside DuckDB for one run or a year of them.

Every statistic has one engine (monitor.stats): the queries here reduce the
stored scores to what its kernel needs, the same query for one run and for
40,000 (docs/statistics.md):

- complete units: a unit is one triplet of one run answered in every asked
  language with all three scores (a score row exists only for an `ok` call);
- MD / DiD: per (group, scenario | pooled, country) the count and the EXACT
  integer sums of the per-unit differences. Scores are counted in hundredths
  and each difference is scaled by 6 L 100 (k, the unit's options of the
  country, and 3 - k divide 6), so every sum is an integer: the result does
  not depend on DuckDB's (parallel, unordered) summation;
- JSD: the complete units' scores as (unit, language, score) columns;
- weakness share: per unit and country the weaknesses and points listed in the
  country's language and in the others;
- coverage and the call summary of runs.

A group is a run (`by_run`) or all selected runs pooled ("pooled").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from monitor.store.db import Database
from monitor.vocab import CallStatus

__all__ = ["CallSummary", "InputStore", "JSDScores", "MDSums", "WeaknessSums"]

#: The scale of an integer difference: d = sum / (SCALE * languages).
SCALE = 600

_BASE = """sel AS (SELECT unnest($runs::VARCHAR[]) AS run_id),
s AS (SELECT s.run_id, s.triplet_id, s.label, s.country, s.language, s.score,
             CAST(round(s.score * 100) AS BIGINT) AS v
      FROM scores s SEMI JOIN sel USING (run_id) {variant}
      WHERE list_contains($langs, s.language)),
lab AS (SELECT run_id, triplet_id, label, any_value(country) AS country, count(*) AS k,
               sum(v) AS total FROM s GROUP BY run_id, triplet_id, label),
unit AS (SELECT run_id, triplet_id FROM lab WHERE k = len($langs)
         GROUP BY run_id, triplet_id HAVING count(*) = 3)"""

_VARIANT = ("SEMI JOIN (SELECT run_id, triplet_id FROM probe_calls WHERE variant = $variant "
            "AND list_contains($runs, run_id)) USING (run_id, triplet_id)")

_MD = """WITH {base},
whole AS (SELECT lab.* FROM lab SEMI JOIN unit USING (run_id, triplet_id)),
loc AS (SELECT unnest($countries::VARCHAR[]) AS c, unnest($locals::VARCHAR[]) AS lang),
uc AS (SELECT DISTINCT f.run_id, f.triplet_id, loc.c, loc.lang FROM whole f
       JOIN loc ON f.country = loc.c),
dev AS (SELECT uc.run_id, uc.triplet_id, uc.c, f.country = uc.c AS mine,
               len($langs) * s.v - f.total AS nv
        FROM uc JOIN whole f USING (run_id, triplet_id)
        JOIN s ON s.run_id = f.run_id AND s.triplet_id = f.triplet_id AND s.label = f.label
             AND s.language = uc.lang),
per AS (SELECT run_id, triplet_id, c,
               sum(nv) FILTER (WHERE mine) AS a, count(*) FILTER (WHERE mine) AS k,
               sum(nv) FILTER (WHERE NOT mine) AS b, count(*) FILTER (WHERE NOT mine) AS m
        FROM dev GROUP BY run_id, triplet_id, c),
x AS (SELECT {grp} AS grp, split_part(triplet_id, '/', 1) AS scenario, c,
             a * (6 // k) AS d, CASE WHEN m > 0 THEN a * (6 // k) - b * (6 // m) END AS e
      FROM per)
SELECT grp, grouping(scenario) = 1 AS pooled, coalesce(scenario, '') AS scenario, c AS country,
       count(*) AS n, CAST(sum(d) AS DOUBLE) AS sum_d,
       CAST(count(*) * sum(d * d) - sum(d) * sum(d) AS DOUBLE) AS var_d,
       count(e) AS n_e, CAST(sum(e) AS DOUBLE) AS sum_e,
       CAST(count(e) * sum(e * e) - sum(e) * sum(e) AS DOUBLE) AS var_e
FROM x GROUP BY GROUPING SETS ((grp, scenario, c), (grp, c))"""

_JSD = """WITH {base}
SELECT {grp} AS grp, split_part(s.triplet_id, '/', 1) AS scenario,
       dense_rank() OVER (ORDER BY {grp}, s.run_id, s.triplet_id) - 1 AS u,
       list_position($langs, s.language) - 1 AS li, s.score
FROM s SEMI JOIN unit USING (run_id, triplet_id)
ORDER BY u, li, s.label"""

_WEAK = """WITH sel AS (SELECT unnest($runs::VARCHAR[]) AS run_id),
loc AS (SELECT unnest($countries::VARCHAR[]) AS c, unnest($locals::VARCHAR[]) AS lang)
SELECT {grp} AS grp, s.country, s.run_id, s.triplet_id,
  coalesce(sum(s.weaknesses) FILTER (WHERE s.language = loc.lang), 0) AS w_local,
  coalesce(sum(s.strengths + s.weaknesses) FILTER (WHERE s.language = loc.lang), 0) AS t_local,
  coalesce(sum(s.weaknesses) FILTER (WHERE s.language <> loc.lang), 0) AS w_foreign,
  coalesce(sum(s.strengths + s.weaknesses) FILTER (WHERE s.language <> loc.lang), 0)
    AS t_foreign
FROM scores s SEMI JOIN sel USING (run_id) JOIN loc ON s.country = loc.c
WHERE s.strengths IS NOT NULL AND s.weaknesses IS NOT NULL
GROUP BY ALL ORDER BY grp, s.country, s.run_id, s.triplet_id"""

@dataclass(frozen=True)
class MDSums:
    """Per (group, scenario, country): n units, the sum of their scaled differences d
    and n*sum(d^2) - sum(d)^2 (exact before the cast); the same for DiD's e."""

    group: np.ndarray
    pooled: np.ndarray  # True: every scenario together (the scenario is "")
    scenario: np.ndarray
    country: np.ndarray
    n: np.ndarray
    sum_d: np.ndarray
    var_d: np.ndarray
    n_e: np.ndarray
    sum_e: np.ndarray
    var_e: np.ndarray
    scale: float  # d = value / scale


@dataclass(frozen=True)
class JSDScores:
    """Complete units' scores: unit u's group and scenario; (u, language index, score)."""

    unit_group: np.ndarray
    unit_scenario: np.ndarray
    u: np.ndarray
    li: np.ndarray
    score: np.ndarray


@dataclass(frozen=True)
class WeaknessSums:
    """Per (group, country, unit): weaknesses and points in the country's language
    (local) and in the other languages (foreign)."""

    group: np.ndarray
    country: np.ndarray
    w_local: np.ndarray
    t_local: np.ndarray
    w_foreign: np.ndarray
    t_foreign: np.ndarray


@dataclass(frozen=True)
class CallSummary:
    by_status: dict[str, int]
    cost_usd: float | None  # None when no call has a known cost
    model_ids: list[str]
    coverage: list[tuple[str, int, int]]  # (language, asked, scored) for the languages asked


def _group(by_run: bool) -> str:
    return "s.run_id" if by_run else "'pooled'"


class InputStore(Database):
    def md_sums(self, run_ids: Sequence[str], languages: Sequence[str],
                local: Sequence[tuple[str, str]], *, by_run: bool = False,
                variant: str | None = None) -> MDSums:
        """`local`: (country, its local language) for the countries to estimate."""
        base = _BASE.format(variant=_VARIANT if variant else "")
        grp = "run_id" if by_run else "'pooled'"
        sql = _MD.format(base=base, grp=grp)
        params: dict[str, object] = {
            "runs": list(run_ids), "langs": list(languages),
            "countries": [c for c, _ in local], "locals": [lang for _, lang in local]}
        if variant:
            params["variant"] = variant
        cols = self._named(sql, params)
        return MDSums(cols["grp"], cols["pooled"].astype(bool), cols["scenario"],
                      cols["country"], cols["n"],
                      cols["sum_d"], cols["var_d"], cols["n_e"], cols["sum_e"], cols["var_e"],
                      float(SCALE * len(languages)))

    def jsd_scores(self, run_ids: Sequence[str], languages: Sequence[str], *,
                   by_run: bool = False, variant: str | None = None) -> JSDScores:
        base = _BASE.format(variant=_VARIANT if variant else "")
        sql = _JSD.format(base=base, grp=_group(by_run))
        params: dict[str, object] = {"runs": list(run_ids), "langs": list(languages)}
        if variant:
            params["variant"] = variant
        cols = self._named(sql, params)
        u = cols["u"].astype(np.int64)
        first = np.flatnonzero(np.r_[True, u[1:] != u[:-1]]) if u.size else u
        return JSDScores(cols["grp"][first], cols["scenario"][first], u,
                         cols["li"].astype(np.int64), cols["score"].astype(float))

    def weakness_sums(self, run_ids: Sequence[str], local: Sequence[tuple[str, str]], *,
                      by_run: bool = False) -> WeaknessSums:
        sql = _WEAK.format(grp=_group(by_run))
        cols = self._named(sql, {"runs": list(run_ids), "countries": [c for c, _ in local],
                                 "locals": [lang for _, lang in local]})
        return WeaknessSums(cols["grp"], cols["country"], cols["w_local"].astype(float),
                            cols["t_local"].astype(float), cols["w_foreign"].astype(float),
                            cols["t_foreign"].astype(float))

    def call_summary(self, run_ids: Sequence[str], languages: Sequence[str]) -> CallSummary:
        ids = list(run_ids)
        by_status = {str(s): int(n) for s, n in self._rows(
            "SELECT status, count(*) FROM probe_calls WHERE list_contains(?, run_id) "
            "GROUP BY status", [ids])}
        cost, models = self._rows(
            "SELECT sum(cost_usd), list(DISTINCT model_id ORDER BY model_id) FILTER (WHERE "
            "model_id IS NOT NULL) FROM probe_calls WHERE list_contains(?, run_id)", [ids])[0]
        asked = {str(lang): (int(a), int(s)) for lang, a, s in self._rows(
            "SELECT language, count(*), count(*) FILTER (WHERE status = ?) FROM probe_calls "
            "WHERE list_contains(?, run_id) GROUP BY language", [CallStatus.OK, ids])}
        coverage = [(lang, *asked.get(lang, (0, 0))) for lang in languages]
        return CallSummary(by_status, None if cost is None else float(cost),
                           [str(m) for m in models or []], coverage)

    def _named(self, sql: str, params: dict[str, object]) -> dict[str, np.ndarray]:
        with self._connect() as con:
            return {k: np.asarray(v) for k, v in con.execute(sql, params).fetchnumpy().items()}
