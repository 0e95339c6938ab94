"""The statistics' inputs, reduced inside DuckDB for one run or a year of them.

Every statistic has one engine (monitor.stats): the queries here reduce the
stored scores to what its kernel needs, the same query for one run and for
40,000 (docs/statistics.md):

- units (MD, DiD, JSD): a unit is one triplet of one run whose three options were
  each read in some language, with a mask of the cells answered (a score row
  exists only for an `ok` call; monitor.stats.missing fills the others, JSD
  keeps the complete units). DuckDB pivots the scores to one row per (unit, option) with a
  column per language, in hundredths of a point (integers: the kernels sum
  them exactly, whatever the order); ids travel as small integer codes, so a
  million units cost tens of MB;
- weakness share: per unit and country the weaknesses and points listed in the
  country's language and in the others;
- coverage and the call summary of runs.

A group is a run (`by_run`) or all selected runs pooled ("pooled").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from monitor.store.db import Database
from monitor.vocab import CallStatus

__all__ = ["CallSummary", "InputStore", "UnitScores", "WeaknessSums"]

_VARIANT = ("SEMI JOIN (SELECT run_id, triplet_id FROM probe_calls WHERE variant = $variant "
            "AND run_id >= $first AND run_id <= $last) USING (run_id, triplet_id)")

# One row per (run, triplet, label) of the selected runs: the run's position in
# the selection, the triplet's and the option's codes, and a score column per
# language (NULL where that language's answer is missing). The range predicate
# lets DuckDB skip the row groups of other runs (runs are written in order).
_UNITS = """WITH sel AS (SELECT unnest($runs::VARCHAR[]) AS run_id,
                        generate_subscripts($runs::VARCHAR[], 1) - 1 AS ri)
SELECT sel.ri, hash(s.triplet_id) AS t, split_part(s.triplet_id, '/', 1) AS sc,
       coalesce(list_position($countries, any_value(s.country)), 0) - 1 AS c,
       {cols}
FROM scores s JOIN sel USING (run_id) {variant}
WHERE s.run_id >= $first AND s.run_id <= $last AND list_contains($langs, s.language)
GROUP BY sel.ri, s.triplet_id, s.label
ORDER BY sel.ri, s.triplet_id, s.label"""

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

@dataclass(kw_only=True, frozen=True)
class UnitScores:
    """The units of the selected runs (a unit: one triplet of one run whose three options
    were each read in at least one language), in (run, triplet) order.

    scores[u, l, j]: hundredths of a point of option j (label A, B, C) of unit u
    asked in `languages[l]`, 0 where answered[u, l, j] is False (that answer failed,
    was refused or could not be read); country[u, j] indexes `countries` (-1: another
    country), scenario[u] `scenarios`, group[u] `groups`; triplet[u] a hash of the
    unit's triplet id (the same triplet in two selections has the same hash)."""

    languages: list[str]
    groups: list[str]
    group: np.ndarray
    scenarios: list[str]
    scenario: np.ndarray
    countries: list[str]
    country: np.ndarray
    scores: np.ndarray
    triplet: np.ndarray
    answered: np.ndarray

    def subset(self, keep: np.ndarray) -> UnitScores:
        """The units where `keep` (a boolean per unit) holds."""
        return replace(self, group=self.group[keep], scenario=self.scenario[keep],
                       country=self.country[keep], scores=self.scores[keep],
                       triplet=self.triplet[keep], answered=self.answered[keep])

    def complete(self) -> UnitScores:
        """The units answered in every language for every option."""
        return self.subset(np.asarray(self.answered.all(axis=(1, 2))))


@dataclass(kw_only=True, frozen=True)
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
    triplets: int = 0  # distinct triplets asked


def _group(by_run: bool) -> str:
    return "s.run_id" if by_run else "'pooled'"


class InputStore(Database):
    def unit_scores(self, run_ids: Sequence[str], languages: Sequence[str],
                    countries: Sequence[str], *, by_run: bool = False,
                    variant: str | None = None) -> UnitScores:
        """The units of `run_ids` (one query; callers chunk long selections)."""
        ids = sorted(run_ids)
        n_l = len(languages)
        if not ids:
            return UnitScores(languages=list(languages), groups=[], group=np.zeros(0, np.int32),
                              scenarios=[],
                              scenario=np.zeros(0, np.int32), countries=list(countries),
                              country=np.zeros((0, 3), np.int32), scores=np.zeros((0, n_l, 3),
                                                                                  np.int64),
                              triplet=np.zeros(0, np.uint64),
                              answered=np.zeros((0, n_l, 3), bool))
        cols = ", ".join(f"max(CAST(round(s.score * 100) AS INTEGER)) FILTER (WHERE "
                         f"s.language = $langs[{i + 1}]) AS s{i}" for i in range(n_l))
        params: dict[str, object] = {
            "runs": ids, "langs": list(languages), "countries": list(countries),
            "first": ids[0], "last": ids[-1]}
        if variant:
            params["variant"] = variant
        cols_ = self._named(_UNITS.format(cols=cols, variant=_VARIANT if variant else ""),
                            params)
        ri, t = cols_["ri"], cols_["t"]
        score = np.ma.stack([np.ma.asarray(cols_[f"s{i}"]) for i in range(n_l)], axis=1)
        unit = np.r_[0, np.cumsum((ri[1:] != ri[:-1]) | (t[1:] != t[:-1]))] if ri.size else ri
        n_units = int(unit[-1]) + 1 if unit.size else 0
        labels = np.bincount(unit, minlength=n_units)
        keep_unit = labels == 3  # each option read in some language (k >= 1 by the query)
        rows = keep_unit[unit]
        answered = ~np.ma.getmaskarray(score[rows]).reshape(-1, 3, n_l).transpose(0, 2, 1)
        values = np.asarray(np.ma.filled(score[rows], 0), dtype=np.int64).reshape(
            -1, 3, n_l).transpose(0, 2, 1)
        first = rows & np.r_[True, unit[1:] != unit[:-1]]
        group = (ri[first] if by_run else np.zeros(int(first.sum()))).astype(np.int32)
        scenarios, scenario = np.unique(cols_["sc"][first].astype(str), return_inverse=True)
        return UnitScores(languages=list(languages), groups=ids if by_run else ["pooled"],
                          group=group,
                          scenarios=[str(x) for x in scenarios], scenario=scenario.astype(np.int32),
                          countries=list(countries),
                          country=cols_["c"][rows].astype(np.int32).reshape(-1, 3),
                          scores=values, triplet=t[first].astype(np.uint64), answered=answered)

    def weakness_sums(self, run_ids: Sequence[str], local: Sequence[tuple[str, str]], *,
                      by_run: bool = False) -> WeaknessSums:
        sql = _WEAK.format(grp=_group(by_run))
        cols = self._named(sql, {"runs": list(run_ids), "countries": [c for c, _ in local],
                                 "locals": [lang for _, lang in local]})
        return WeaknessSums(group=cols["grp"], country=cols["country"],
                            w_local=cols["w_local"].astype(float),
                            t_local=cols["t_local"].astype(float),
                            w_foreign=cols["w_foreign"].astype(float),
                            t_foreign=cols["t_foreign"].astype(float))

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
        triplets = self._rows("SELECT count(DISTINCT (run_id, triplet_id)) FROM probe_calls "
                              "WHERE list_contains(?, run_id)", [ids])[0][0]
        return CallSummary(by_status, None if cost is None else float(cost),
                           [str(m) for m in models or []], coverage, int(triplets or 0))

    def _named(self, sql: str, params: dict[str, object]) -> dict[str, np.ndarray]:
        """The columns; a column holding NULLs is a masked array (the mask: NULL)."""
        with self._connect() as con:
            return {k: v if isinstance(v, np.ma.MaskedArray) else np.asarray(v)
                    for k, v in con.execute(sql, params).fetchnumpy().items()}
