"""The statistics of stored runs: each statistic's inputs from the store, its one kernel.

MD, DiD and the deviations use every answered cell (missing ones filled:
monitor.stats.missing); JSD, a permutation test within units, the units answered
in every language.

The same functions serve one run (`monitor probe`, the daemon after a run),
a baseline (several runs pooled) and a year of history (`by_run`: one group
per run, in one query and one batched kernel call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from monitor.stats.covariate import Adjusted, BaseTable, Persistence, adjust, base_table
from monitor.stats.deviation import DeviationRow, deviation_rows
from monitor.stats.jsd import N_BOOT, N_PERM, JSDRow, jsd_rows
from monitor.stats.md import MDRow, local_pairs, md_rows
from monitor.stats.missing import fill
from monitor.stats.weakness import WeaknessRow, weakness_rows
from monitor.store import CallSummary, UnitScores, WeaknessSums
from monitor.vocab import CallStatus

__all__ = ["CoverageRow", "StatsStore", "Summary", "Usable", "base_table_of", "covariate_of",
           "deviation_of", "jsd_of", "md_covariate_of", "md_jsd_of", "md_of", "summarise",
           "usable_by_run", "usable_of", "weakness_of"]

LocalCountries = Mapping[str, Sequence[str]]  # language -> its local countries (languages.yaml)


class StatsStore(Protocol):
    """What the statistics read from the store: their inputs, aggregated in the database
    (monitor.store.inputs), and one connection for several reads."""

    def unit_scores(self, run_ids: Sequence[str], languages: Sequence[str],
                    countries: Sequence[str], *, by_run: bool = False,
                    variant: str | None = None) -> UnitScores: ...

    def weakness_sums(self, run_ids: Sequence[str], local: Sequence[tuple[str, str]], *,
                      by_run: bool = False) -> WeaknessSums: ...

    def call_summary(self, run_ids: Sequence[str], languages: Sequence[str]) -> CallSummary: ...

    def session(self) -> AbstractContextManager[None]: ...


@dataclass(frozen=True)
class CoverageRow:
    language: str
    asked: int
    scored: int
    ratio: float  # scored / asked; NaN when nothing was asked


@dataclass(kw_only=True, frozen=True)
class Usable:
    """How much of what a run asked its statistics used: triplets asked, read (each
    option read in some language), complete (every language: JSD's units); answers
    (calls) asked and used by MD (read, in a triplet read in two languages or more)."""

    triplets: int
    read: int
    complete: int
    answers_asked: int
    answers_used: int

    @property
    def share(self) -> float:
        return self.answers_used / self.answers_asked if self.answers_asked else math.nan

    @classmethod
    def of(cls, units: UnitScores, calls: CallSummary) -> Usable:
        read = np.asarray(units.answered.any(axis=2))  # (unit, language): the call was read
        used = read[read.sum(axis=1) >= 2]
        return cls(triplets=calls.triplets, read=int(read.shape[0]),
                   complete=int(units.whole.sum()),
                   answers_asked=sum(a for _, a, _ in calls.coverage),
                   answers_used=int(used.sum()))

    def describe(self) -> str:
        return (f"{self.complete} of {self.triplets} triplets complete (JSD uses those); "
                f"{self.answers_used} of {self.answers_asked} answers used by MD "
                f"({100 * self.share:.0f}%)" if self.answers_asked else "nothing asked")


@dataclass(kw_only=True, frozen=True)
class Summary:
    """Everything a run reports: statistics with CIs and n, counts, cost."""

    md: list[MDRow]
    jsd: list[JSDRow]
    coverage: list[CoverageRow]
    weakness: list[WeaknessRow]
    status_counts: dict[str, int]
    cost_usd: float | None
    model_ids: list[str]
    usable: Usable


#: Runs per query of a by-run computation: memory stays flat over a long history.
CHUNK_RUNS = 2000


def _chunks(run_ids: Sequence[str], by_run: bool) -> list[list[str]]:
    ids = sorted(run_ids)
    if not by_run:
        return [ids]
    return [ids[i:i + CHUNK_RUNS] for i in range(0, len(ids), CHUNK_RUNS)] or [[]]


def _filled(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str],
            local: Sequence[tuple[str, str]], *, by_run: bool = False,
            variant: str | None = None) -> UnitScores:
    """The units MD, DiD and the deviations read: every answered cell, the missing ones
    filled (monitor.stats.missing)."""
    return fill(store.unit_scores(run_ids, languages, [c for c, _ in local], by_run=by_run,
                                  variant=variant))


def md_of(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str],
          local_countries: LocalCountries, *, by_run: bool = False,
          variant: str | None = None) -> list[MDRow]:
    local = local_pairs(languages, local_countries)
    return [r for part in _chunks(run_ids, by_run) for r in md_rows(
        _filled(store, part, languages, local, by_run=by_run, variant=variant), local)]


def base_table_of(store: StatsStore, base_run_ids: Sequence[str], languages: Sequence[str],
                  local_countries: LocalCountries) -> BaseTable:
    """The baseline's runs as a covariate table (monitor.stats.covariate.base_table)."""
    local = local_pairs(languages, local_countries)
    return base_table(_filled(store, sorted(base_run_ids), languages, local), local)


def covariate_of(store: StatsStore, run_ids: Sequence[str], table: BaseTable,
                 languages: Sequence[str], local_countries: LocalCountries
                 ) -> tuple[dict[str, Adjusted], Persistence]:
    """The pooled cells of `run_ids` (pooled) with the baseline's table as covariate."""
    local = local_pairs(languages, local_countries)
    return adjust(_filled(store, sorted(run_ids), languages, local), table, local)


def md_covariate_of(store: StatsStore, run_ids: Sequence[str], table: BaseTable | None,
                    languages: Sequence[str], local_countries: LocalCountries
                    ) -> tuple[list[MDRow], tuple[dict[str, Adjusted], Persistence] | None]:
    """md_of and covariate_of (None without a table) of `run_ids` pooled, from one read
    of their units: a top-up reads its fresh data after every batch."""
    local = local_pairs(languages, local_countries)
    units = _filled(store, sorted(run_ids), languages, local)
    return md_rows(units, local), None if table is None else adjust(units, table, local)


def jsd_of(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str], *,
           seed: int | Mapping[str, int], by_run: bool = False, variant: str | None = None,
           n_perm: int = N_PERM, n_boot: int = N_BOOT) -> list[JSDRow]:
    """`seed`: one for all (pooled), or the seed of each run (by_run)."""
    seeds = seed if isinstance(seed, Mapping) else {"pooled": seed}
    return [r for part in _chunks(run_ids, by_run) for r in jsd_rows(
        store.unit_scores(part, languages, [], by_run=by_run, variant=variant).complete(),
        seeds, n_perm=n_perm, n_boot=n_boot)]


def md_jsd_of(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str],
              local_countries: LocalCountries, *, seeds: Mapping[str, int],
              n_perm: int = N_PERM, n_boot: int = N_BOOT) -> tuple[list[MDRow], list[JSDRow]]:
    """MD and JSD of each run (by_run), from one read of the units per chunk of runs;
    the next chunk is read while the kernels work on this one."""
    local = local_pairs(languages, local_countries)
    countries = [c for c, _ in local]
    md: list[MDRow] = []
    jsd: list[JSDRow] = []
    chunks = _chunks(run_ids, True)
    with ThreadPoolExecutor(max_workers=1) as reader:
        ahead = reader.submit(store.unit_scores, chunks[0], languages, countries, by_run=True)
        for k in range(len(chunks)):
            units = ahead.result()
            if k + 1 < len(chunks):
                ahead = reader.submit(store.unit_scores, chunks[k + 1], languages, countries,
                                      by_run=True)
            md += md_rows(fill(units), local)
            jsd += jsd_rows(units.complete(), seeds, n_perm=n_perm, n_boot=n_boot)
    return md, jsd


def usable_of(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str],
              local_countries: LocalCountries) -> Usable:
    """How much of what `run_ids` asked their statistics used (Usable)."""
    local = local_pairs(languages, local_countries)
    with store.session():
        return Usable.of(store.unit_scores(sorted(run_ids), languages, [c for c, _ in local]),
                         store.call_summary(list(run_ids), languages))


def usable_by_run(store: StatsStore, runs: Mapping[str, Sequence[str]]) -> dict[str, Usable]:
    """Usable of each run (run id -> the languages it asked), as usable_of has it for that
    run alone: the runs that asked the same languages read in one query of their units
    (countries do not change what is usable), their calls one run at a time."""
    same: dict[tuple[str, ...], list[str]] = {}
    for run_id, languages in runs.items():
        same.setdefault(tuple(languages), []).append(run_id)
    out: dict[str, Usable] = {}
    with store.session():
        for languages, ids in same.items():
            for part in _chunks(ids, True):
                units = store.unit_scores(part, languages, [], by_run=True)
                for i, run_id in enumerate(units.groups):
                    out[run_id] = Usable.of(units.subset(units.group == i),
                                            store.call_summary([run_id], languages))
    return out


def deviation_of(store: StatsStore, run_ids: Sequence[str], languages: Sequence[str],
                 local_countries: LocalCountries) -> list[DeviationRow]:
    """Each country's score deviation per asked language, runs and scenarios pooled."""
    local = local_pairs(languages, local_countries)
    return deviation_rows(_filled(store, run_ids, languages, local), local)


def weakness_of(store: StatsStore, run_ids: Sequence[str],
                local_countries: LocalCountries) -> list[WeaknessRow]:
    """Every catalog language's countries (a share needs no complete unit)."""
    local = local_pairs(list(local_countries), local_countries)
    return weakness_rows(store.weakness_sums(run_ids, local), local)


def summarise(store: StatsStore, run_id: str, languages: Sequence[str],
              local_countries: LocalCountries, *, seed: int) -> Summary:
    calls = store.call_summary([run_id], languages)
    coverage = [CoverageRow(lang, asked, scored, scored / asked if asked else math.nan)
                for lang, asked, scored in calls.coverage]
    counts = {str(s): calls.by_status.get(s, 0) for s in CallStatus}
    local = local_pairs(languages, local_countries)
    with store.session():
        units = store.unit_scores([run_id], languages, [c for c, _ in local])
        return Summary(md=md_rows(fill(units), local),
                       jsd=jsd_rows(units.complete(), {"pooled": seed}), coverage=coverage,
                       weakness=weakness_of(store, [run_id], local_countries),
                       status_counts=counts, cost_usd=calls.cost_usd,
                       model_ids=calls.model_ids, usable=Usable.of(units, calls))
