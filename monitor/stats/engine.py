"""The statistics of stored runs: each statistic's inputs from the store, its one kernel.

The same functions serve one run (`monitor probe`, the daemon after a run),
a baseline (several runs pooled) and a year of history (`by_run`: one group
per run, in one query and one batched kernel call).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from monitor.stats.covariate import Adjusted, BaseTable, Persistence, adjust, base_table
from monitor.stats.deviation import DeviationRow, deviation_rows
from monitor.stats.jsd import N_BOOT, N_PERM, JSDRow, jsd_rows
from monitor.stats.md import MDRow, local_pairs, md_rows
from monitor.stats.weakness import WeaknessRow, weakness_rows
from monitor.store import Store
from monitor.vocab import CallStatus

__all__ = ["CoverageRow", "Summary", "base_table_of", "covariate_of", "deviation_of",
           "jsd_of", "md_covariate_of", "md_jsd_of", "md_of", "summarise", "weakness_of"]

LocalCountries = Mapping[str, Sequence[str]]  # language -> its local countries (languages.yaml)


@dataclass(frozen=True)
class CoverageRow:
    language: str
    asked: int
    scored: int
    ratio: float  # scored / asked; NaN when nothing was asked


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


#: Runs per query of a by-run computation: memory stays flat over a long history.
CHUNK_RUNS = 2000


def _chunks(run_ids: Sequence[str], by_run: bool) -> list[list[str]]:
    ids = sorted(run_ids)
    if not by_run:
        return [ids]
    return [ids[i:i + CHUNK_RUNS] for i in range(0, len(ids), CHUNK_RUNS)] or [[]]


def md_of(store: Store, run_ids: Sequence[str], languages: Sequence[str],
          local_countries: LocalCountries, *, by_run: bool = False,
          variant: str | None = None) -> list[MDRow]:
    local = local_pairs(languages, local_countries)
    countries = [c for c, _ in local]
    return [r for part in _chunks(run_ids, by_run) for r in md_rows(
        store.unit_scores(part, languages, countries, by_run=by_run, variant=variant), local)]


def base_table_of(store: Store, base_run_ids: Sequence[str], languages: Sequence[str],
                  local_countries: LocalCountries) -> BaseTable:
    """The baseline's runs as a covariate table (monitor.stats.covariate.base_table)."""
    local = local_pairs(languages, local_countries)
    return base_table(store.unit_scores(sorted(base_run_ids), languages,
                                        [c for c, _ in local]), local)


def covariate_of(store: Store, run_ids: Sequence[str], table: BaseTable,
                 languages: Sequence[str], local_countries: LocalCountries
                 ) -> tuple[dict[str, Adjusted], Persistence]:
    """The pooled cells of `run_ids` (pooled) with the baseline's table as covariate."""
    local = local_pairs(languages, local_countries)
    run = store.unit_scores(sorted(run_ids), languages, [c for c, _ in local])
    return adjust(run, table, local)


def md_covariate_of(store: Store, run_ids: Sequence[str], table: BaseTable | None,
                    languages: Sequence[str], local_countries: LocalCountries
                    ) -> tuple[list[MDRow], tuple[dict[str, Adjusted], Persistence] | None]:
    """md_of and covariate_of (None without a table) of `run_ids` pooled, from one read
    of their units: a top-up reads its fresh data after every batch."""
    local = local_pairs(languages, local_countries)
    units = store.unit_scores(sorted(run_ids), languages, [c for c, _ in local])
    return md_rows(units, local), None if table is None else adjust(units, table, local)


def jsd_of(store: Store, run_ids: Sequence[str], languages: Sequence[str], *,
           seed: int | Mapping[str, int], by_run: bool = False, variant: str | None = None,
           n_perm: int = N_PERM, n_boot: int = N_BOOT) -> list[JSDRow]:
    """`seed`: one for all (pooled), or the seed of each run (by_run)."""
    seeds = seed if isinstance(seed, Mapping) else {"pooled": seed}
    return [r for part in _chunks(run_ids, by_run) for r in jsd_rows(
        store.unit_scores(part, languages, [], by_run=by_run, variant=variant), seeds,
        n_perm=n_perm, n_boot=n_boot)]


def md_jsd_of(store: Store, run_ids: Sequence[str], languages: Sequence[str],
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
            md += md_rows(units, local)
            jsd += jsd_rows(units, seeds, n_perm=n_perm, n_boot=n_boot)
    return md, jsd


def deviation_of(store: Store, run_ids: Sequence[str], languages: Sequence[str],
                 local_countries: LocalCountries) -> list[DeviationRow]:
    """Each country's score deviation per asked language, runs and scenarios pooled."""
    local = local_pairs(languages, local_countries)
    return deviation_rows(store.unit_scores(run_ids, languages, [c for c, _ in local]), local)


def weakness_of(store: Store, run_ids: Sequence[str],
                local_countries: LocalCountries) -> list[WeaknessRow]:
    """Every catalog language's countries (a share needs no complete unit)."""
    local = local_pairs(list(local_countries), local_countries)
    return weakness_rows(store.weakness_sums(run_ids, local), local)


def summarise(store: Store, run_id: str, languages: Sequence[str],
              local_countries: LocalCountries, *, seed: int) -> Summary:
    calls = store.call_summary([run_id], languages)
    coverage = [CoverageRow(lang, asked, scored, scored / asked if asked else math.nan)
                for lang, asked, scored in calls.coverage]
    counts = {str(s): calls.by_status.get(s, 0) for s in CallStatus}
    with store.session():
        return Summary(md=md_of(store, [run_id], languages, local_countries),
                       jsd=jsd_of(store, [run_id], languages, seed=seed), coverage=coverage,
                       weakness=weakness_of(store, [run_id], local_countries),
                       status_counts=counts, cost_usd=calls.cost_usd,
                       model_ids=calls.model_ids)
