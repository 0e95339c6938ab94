"""Bias statistics: one kernel per statistic, for one run or many (docs/statistics.md).

    units.py     t quantiles and intervals, NaN as null
    missing.py   missing answers filled from a two-way model: every answer used
    md.py        MD and DiD per country, from DuckDB's exact sums
    covariate.py the baseline as a covariate of a run's MD (CUPED), persistence
    jsd.py       excess JSD per language: permutation null, cluster bootstrap
    deviation.py a country's score deviation per asked language (the heatmap)
    weakness.py  weakness share local vs foreign, delta-method CIs
    rules.py     tested / significant / breach: the rules every output applies
    engine.py    a run's (or many runs') statistics from the store
"""

from monitor.stats.covariate import Adjusted, BaseTable, Persistence, adjust, base_table
from monitor.stats.deviation import DeviationRow, deviation_rows
from monitor.stats.engine import (
    CoverageRow,
    StatsStore,
    Summary,
    Usable,
    base_table_of,
    covariate_of,
    deviation_of,
    jsd_of,
    md_covariate_of,
    md_jsd_of,
    md_of,
    summarise,
    usable_by_run,
    usable_of,
    weakness_of,
)
from monitor.stats.jsd import BINS, N_BOOT, N_PERM, OVERALL, JSDRow, jsd_bits, jsd_rows
from monitor.stats.md import MDRow, local_pairs, md_rows
from monitor.stats.rules import MIN_CELL_N, beyond, jsd_significant, significant, tested
from monitor.stats.units import nullable, t975, t_interval, t_quantile
from monitor.stats.weakness import LOCALITIES, WeaknessRow, weakness_rows

__all__ = ["BINS", "LOCALITIES", "MIN_CELL_N", "N_BOOT", "N_PERM", "OVERALL", "Adjusted",
           "BaseTable", "CoverageRow", "DeviationRow", "JSDRow", "MDRow", "Persistence",
           "StatsStore", "Summary", "Usable", "WeaknessRow", "adjust", "base_table",
           "base_table_of", "beyond", "covariate_of", "deviation_of", "deviation_rows", "jsd_bits",
           "jsd_of", "jsd_rows", "jsd_significant", "local_pairs", "md_covariate_of", "md_jsd_of",
           "md_of", "md_rows", "nullable", "significant", "summarise", "t975", "t_interval",
           "t_quantile", "tested", "usable_by_run", "usable_of", "weakness_of", "weakness_rows"]
