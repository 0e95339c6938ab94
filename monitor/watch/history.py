"""Statistics of many runs at once, aggregated inside DuckDB (the history path).

stats.py computes one run from pandas frames (~50 ms of pivoting per run: an
hour for a long history); here the same numbers come from one pass:
- MD / DiD per (run, scenario, country) and pooled: DuckDB returns n, mean and
  sd of the per-unit paired differences; CI = mean +- t975(n-1) sd / sqrt(n).
- JSD: DuckDB returns the complete units' scores; the permutation null and the
  cluster bootstrap run in numpy with the SAME draws as stats.jsd_table,
  batched over runs whose draws coincide (same seed and cell sizes).
- Drift: drift.step replayed over the runs against a baseline, as watch does.
Equal to stats.md_table / jsd_table within float tolerance
(tests/test_analytics.py). SQL lives here; duckdb only in store.py.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import AUTO_BASELINE_RUNS, Alerts, Thresholds
from monitor.stats import MIN_CELL_N, jsd_bits, t975
from monitor.store import Store
from monitor.watch.drift import CellState, Observation, step

__all__ = ["HISTORY_COLUMNS", "drift_replay", "history", "jsd_frame", "md_frame"]


MD_COLUMNS = ["run_id", "scenario", "country", "language", "md", "ci_lower", "ci_upper", "se",
              "n", "did", "did_ci_lower", "did_ci_upper"]
JSD_COLUMNS = ["run_id", "scenario", "language", "jsd_bits", "ci_lower", "ci_upper", "p_value",
               "n", "plugin_bits", "js_distance_bits", "js_distance_nat"]
HISTORY_COLUMNS = ["kind", "run_id", "started_at", "scenario", "key", "value", "ci_lower",
                   "ci_upper", "n", "p_value", "did", "did_ci_lower", "did_ci_upper", "state", "z"]
_CHUNK = 64  # runs per numpy batch: ~0.5 MB per run and array, so memory stays flat

# Complete units as stats.complete_units (every language answered, three labels),
# numbered in its order (sorted run/triplet), in temp tables: {t}_u (units) and {t}
# (one row per unit and option: country, the scores s[1..L] in language order and
# their mean m). Scores exist only for answered calls (run._records).
_LABELS = """CREATE TEMP TABLE {t}_l AS SELECT run_id, triplet_id, label, country,
       count(score) AS k, [{cols}] AS s FROM scores
WHERE run_id IN (SELECT run_id FROM runs WHERE {where}) AND list_contains($1, language)
GROUP BY run_id, triplet_id, label, country"""
_UNITS = """CREATE TEMP TABLE {t}_u AS WITH unit AS (SELECT run_id, triplet_id FROM {t}_l
    WHERE k = len($1) GROUP BY run_id, triplet_id HAVING count(*) = 3)
SELECT unit.run_id, c.scenario, row_number() OVER (ORDER BY unit.run_id, unit.triplet_id) - 1
       AS u, unit.triplet_id
FROM unit JOIN probe_calls c ON c.run_id = unit.run_id AND c.triplet_id = unit.triplet_id
     AND c.language = $1[1] AND c.status = 'ok'"""
_SCORES = """CREATE TEMP TABLE {t} AS SELECT u.u, l.label, l.country, l.s, ({total}) / {n} AS m
FROM {t}_l l JOIN {t}_u u USING (run_id, triplet_id) WHERE l.k = {n}"""

# Per unit and country C with a local language (index j): d = mean over C's options
# of s[j] - m; o = the same for the other options (DiD e = d - o). Then n, mean and
# sd per (run or pool, scenario, country), and per (run or pool, country) = "all".
_MD = """WITH loc AS (SELECT unnest($1::VARCHAR[]) AS country, unnest($2::INT[]) AS j),
uc AS (SELECT DISTINCT u, country, j FROM {t} JOIN loc USING (country)),
per AS (SELECT uc.u, uc.country, avg(c.s[uc.j] - c.m) FILTER (WHERE c.country = uc.country) AS d,
               avg(c.s[uc.j] - c.m) FILTER (WHERE c.country <> uc.country) AS o
        FROM uc JOIN {t} c USING (u) GROUP BY uc.u, uc.country),
t AS (SELECT {grp} AS grp, scenario, country, d, d - o AS e FROM per JOIN {t}_u USING (u))
SELECT grp, CASE WHEN grouping(scenario) = 1 THEN 'all' ELSE scenario END AS scenario, country,
       count(*) AS n, avg(d) AS md, stddev_samp(d) AS sd, count(e) AS n_e, avg(e) AS did,
       stddev_samp(e) AS sd_e
FROM t GROUP BY GROUPING SETS ((grp, scenario, country), (grp, country))"""
_names = itertools.count()


def _where(endpoint: str | None, since: datetime | None,
           run_ids: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The run filter and its parameters ($2, $3...; $1 is the languages)."""
    parts, params = ["true"], []
    for cond, value in (("endpoint = ${}", endpoint), ("started_at >= ${}", since),
                        ("list_contains(${}, run_id)", None if run_ids is None else list(run_ids))):
        if value is not None:
            params.append(value)
            parts.append(cond.format(1 + len(params)))
    return " AND ".join(parts), params


@contextmanager
def _units(store: Store, languages: Sequence[str], endpoint: str | None = None,
           since: datetime | None = None, run_ids: Sequence[str] | None = None) -> Iterator[str]:
    """The selected runs' complete units as temp tables (one connection), named."""
    t = f"analytics_{next(_names)}"
    where, params = _where(endpoint, since, run_ids)
    n = len(languages)  # only integers are formatted into the SQL
    with store.session():
        try:
            store.query(_LABELS.format(t=t, where=where, cols=", ".join(
                f"max(score) FILTER (WHERE language = $1[{i}])" for i in range(1, n + 1))),
                [list(languages), *params])
            store.query(_UNITS.format(t=t), [list(languages)])
            store.query(_SCORES.format(t=t, n=n, total=" + ".join(
                f"l.s[{i}]" for i in range(1, n + 1))))
            yield t
        finally:
            for name in (t, f"{t}_u", f"{t}_l"):
                store.query(f"DROP TABLE IF EXISTS {name}")


def _md(store: Store, t: str, languages: Sequence[str], local: Mapping[str, Sequence[str]],
        pooled: bool) -> pd.DataFrame:
    pairs = [(c, lang) for lang in languages for c in local.get(lang, [])]
    agg = store.frame(_MD.format(t=t, grp="'pooled'" if pooled else "run_id"),
                      [[c for c, _ in pairs], [list(languages).index(x) + 1 for _, x in pairs]])
    n, n_e = agg["n"].to_numpy(float), agg["n_e"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(n > 1, agg["sd"].to_numpy(float) / np.sqrt(n), np.nan)
        half = t975(np.maximum(n - 1, 1)) * se
        half_e = np.where(n_e > 1, t975(np.maximum(n_e - 1, 1))
                          * agg["sd_e"].to_numpy(float) / np.sqrt(n_e), np.nan)
    md, did = agg["md"].to_numpy(float), agg["did"].to_numpy(float)
    out = pd.DataFrame({"run_id": agg["grp"], "scenario": agg["scenario"],
                        "country": agg["country"], "language": agg["country"].map(dict(pairs)),
                        "md": md, "ci_lower": md - half, "ci_upper": md + half, "se": se,
                        "n": agg["n"].astype(int), "did": did, "did_ci_lower": did - half_e,
                        "did_ci_upper": did + half_e})
    return out.sort_values(["run_id", "scenario", "country"], ignore_index=True)[MD_COLUMNS]


def md_frame(store: Store, languages: Sequence[str], local: Mapping[str, Sequence[str]], *,
             endpoint: str | None = None, since: datetime | None = None,
             run_ids: Sequence[str] | None = None, pooled: bool = False) -> pd.DataFrame:
    """stats.md_table per selected run (run_id column), or of all of them pooled
    (run_id "pooled": md_table of their scores together, e.g. a baseline)."""
    with _units(store, languages, endpoint, since, run_ids) as t:
        return _md(store, t, languages, local, pooled)


def _jsd_inputs(store: Store, t: str, n_l: int) -> tuple[np.ndarray, ...]:
    """Units (run, scenario) and their scores as (unit, language, score) arrays."""
    units = store.frame(f"SELECT run_id, scenario FROM {t}_u ORDER BY u")
    cols = ", ".join(f"s[{i}] AS s{i}" for i in range(1, n_l + 1))
    wide = store.frame(f"SELECT u, {cols} FROM {t}")  # one score per cell below
    return (units["run_id"].to_numpy(), units["scenario"].to_numpy(),
            np.repeat(wide["u"].to_numpy(np.int64), n_l), np.tile(np.arange(n_l), len(wide)),
            wide[[f"s{i}" for i in range(1, n_l + 1)]].to_numpy(float).ravel())


def jsd_frame(store: Store, languages: Sequence[str], seeds: Mapping[str, int], *,
              endpoint: str | None = None, since: datetime | None = None,
              run_ids: Sequence[str] | None = None, n_perm: int = 200,
              n_boot: int = 1000) -> pd.DataFrame:
    """stats.jsd_table of every selected run (run_id column), each with its seed.
    The file is held only for the queries, not for the numpy work after them."""
    with _units(store, languages, endpoint, since, run_ids) as t:
        data = _jsd_inputs(store, t, len(languages))
    return _jsd_runs(data, languages, seeds, n_perm=n_perm, n_boot=n_boot)


def drift_replay(md: pd.DataFrame, base: pd.DataFrame, order: Sequence[str], *,
                 thresholds: Thresholds | None = None,
                 alerts: Alerts | None = None) -> pd.DataFrame:
    """The alert state and z of every (run, scenario, country) after that run,
    replaying drift.step over `order` as monitor.watch.evaluate.evaluate would."""
    t, a = thresholds or Thresholds(), alerts or Alerts()
    cols = ["run_id", "scenario", "country", "n", "se", "md", "ci_lower", "ci_upper"]
    ref = {(r[0], r[1]): r for r in zip(*(base[c].tolist() for c in cols[1:]), strict=True)}
    by_run: dict[str, list[tuple[Any, ...]]] = {}
    for row in zip(*(md[c].tolist() for c in cols), strict=True):  # tuples: 10x to_dict
        by_run.setdefault(str(row[0]), []).append(row)
    cells: dict[tuple[str, str], CellState] = {}
    rows: list[tuple[str, str, str, str, float | None]] = []
    for run_id in order:
        for _, scen, country, n, se, value, lo, hi in by_run.get(run_id, []):
            key = (str(scen), str(country))
            b = ref.get(key)
            obs = None
            if (b is not None and n >= MIN_CELL_N and b[2] >= MIN_CELL_N
                    and math.isfinite(se) and math.isfinite(b[3])):
                se_now = max(se, b[3] * math.sqrt(b[2] / n))  # as watch.evaluate
                obs = Observation(value, se_now, lo, hi, int(n), b[4], b[3])
            new = step(cells.get(key, CellState()), obs, drift_points=t.drift_md_points,
                       h=t.cusum_h, md_threshold=t.md_points, min_runs_firing=a.min_runs_firing)
            cells[key] = new
            rows.append((run_id, *key, new.state, None if obs is None else new.z))
    return pd.DataFrame(rows, columns=["run_id", "scenario", "country", "state", "z"])


def history(store: Store, endpoint: str, since: datetime | None = None, *,
            local: Mapping[str, Sequence[str]] | None = None,
            baseline_runs: Sequence[str] | None = None, jsd: bool = True,
            thresholds: Thresholds | None = None, alerts: Alerts | None = None) -> pd.DataFrame:
    """Every finished run of `endpoint` started at or after `since`, recomputed:
    rows of kind "md" (key = country; value = MD with CI and n, DiD, and the
    alert state and z after that run against the baseline) and, with jsd=True,
    "jsd" (key = language or "overall"; value = excess bits, CI, p_value).
    Columns: HISTORY_COLUMNS. Baseline: `baseline_runs`, else the active one,
    else the first AUTO_BASELINE_RUNS runs (they get no state). Runs asked in
    other languages than the latest run are left out."""
    if local is None:
        from monitor.catalog import load_catalog

        local = {lang: list(c) for lang, c in load_catalog().languages.items()}
    runs = [r for r in store.runs(endpoint) if r.finished_at is not None
            and r.status in ("complete", "partial")]
    if not runs:
        return pd.DataFrame(columns=HISTORY_COLUMNS)
    languages = runs[-1].languages
    runs = [r for r in runs if r.languages == languages]
    if baseline_runs is None:
        active = store.baseline(endpoint)
        baseline_runs = (active["run_ids"] if active
                         else [r.run_id for r in runs[:AUTO_BASELINE_RUNS]])
    started = {r.run_id: r.started_at for r in runs}
    in_base = set(baseline_runs)
    order = [r.run_id for r in runs if r.run_id not in in_base]
    shown = {r.run_id for r in runs if since is None or r.started_at >= since}
    seeds = {r.run_id: r.seed for r in runs}
    data = None
    with store.session():  # the file is held for the queries only (~3 s at 1M calls)
        store.query("SET enable_progress_bar = false")  # no bar on a report's stderr
        base = md_frame(store, languages, local, run_ids=baseline_runs, pooled=True)
        # The CUSUM of a run depends on every run before it: MD of all, replayed.
        with _units(store, languages, endpoint) as t:
            md = _md(store, t, languages, local, pooled=False)
            if jsd and since is None:
                data = _jsd_inputs(store, t, len(languages))
        if jsd and since is not None:
            with _units(store, languages, endpoint, since) as t:
                data = _jsd_inputs(store, t, len(languages))
    j = None if data is None else _jsd_runs(data, languages, seeds, n_perm=200, n_boot=1000)
    states = drift_replay(md, base, order, thresholds=thresholds, alerts=alerts)
    md = md[md["run_id"].isin(shown)].merge(states, on=["run_id", "scenario", "country"],
                                             how="left")
    parts = [md.rename(columns={"country": "key", "md": "value"}).assign(kind="md",
                                                                         p_value=np.nan)]
    if j is not None:
        parts.append(j[j["run_id"].isin(shown)].rename(
            columns={"language": "key", "jsd_bits": "value"}).assign(kind="jsd"))
    out = pd.concat(parts, ignore_index=True)
    out["started_at"] = out["run_id"].map(started)
    out = out.sort_values(["started_at", "run_id", "kind", "scenario", "key"], ignore_index=True)
    return out.reindex(columns=HISTORY_COLUMNS)


def _xlog2x(x: np.ndarray) -> np.ndarray:
    out: np.ndarray = x * np.log2(np.maximum(x, 1.0))  # 0 log 0 = 0
    return out


class _Table:
    """JSD of a language's histogram c (n scores) against the pooled g (L n):
    log2(2Ln) - log2(n)/2 - log2(Ln)/2 + sum_k T(c_k, g_k) / (2Ln) with
    T(c, g) = L f(c) + f(g) - f(Lc + g), f = x log2 x: one lookup per bin, not
    jsd_bits' three log2 (a long history's bootstrap has ~10^9 bins). The index
    stride c + g comes straight out of the GEMM that builds the histograms."""

    def __init__(self, n: int, n_l: int) -> None:
        cs, gs = np.arange(n + 1, dtype=float)[:, None], np.arange(n_l * n + 1, dtype=float)
        self.flat = (n_l * _xlog2x(cs) + _xlog2x(gs) - _xlog2x(n_l * cs + gs)).ravel()
        self.stride = float(n_l * n + 1)
        self.norm = 2.0 * n_l * n
        self.const = math.log2(self.norm) - math.log2(n) / 2 - math.log2(n_l * n) / 2

    def jsd(self, index: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.clip(
            self.const + self.flat[index.astype(np.int32)].sum(axis=0) / self.norm, 0.0, None)
        return out


def _cells(run: np.ndarray, scen: np.ndarray) -> list[tuple[str, list[tuple[str, np.ndarray]]]]:
    """Per run (units contiguous, in stats' unit order): its cells with >= 2 units."""
    starts = np.flatnonzero(np.r_[True, run[1:] != run[:-1]])
    out = []
    for a, b in zip(starts, [*starts[1:], len(run)], strict=True):
        sc = scen[a:b]
        cells = [(name, a + np.flatnonzero(sc == name)) for name in sorted(set(sc))]
        cells.append(("all", np.arange(a, b)))
        out.append((str(run[a]), [(n, i) for n, i in cells if i.size >= 2]))
    return out


def _jsd_runs(data: tuple[np.ndarray, ...], languages: Sequence[str],
              seeds: Mapping[str, int], *, n_perm: int, n_boot: int) -> pd.DataFrame:
    run, scen, u, li, score = data
    n_l, bins = len(languages), 10
    b = np.clip(np.floor(score + 0.5).astype(int), 1, bins) - 1  # as stats._counts
    counts = np.bincount((u * n_l + li) * bins + b, minlength=len(run) * n_l * bins).reshape(
        len(run), n_l, bins).astype(float)
    groups: dict[tuple[int, tuple[int, ...]], list[tuple[str, list[tuple[str, np.ndarray]]]]] = {}
    for run_id, cells in _cells(run, scen):
        key = (int(seeds.get(run_id, 0)), tuple(i.size for _, i in cells))
        groups.setdefault(key, []).append((run_id, cells))
    keys: list[tuple[list[str], list[str], int]] = []
    values: list[np.ndarray] = []
    for (seed, sizes), members in groups.items():
        rng = np.random.default_rng(seed)  # the draws of jsd_table, cell after cell
        for j, size in enumerate(sizes):
            order = np.argsort(rng.random((n_perm, size, n_l)), axis=2)
            weights = rng.multinomial(size, np.full(size, 1.0 / size), size=n_boot)
            onehot = (order[..., None] == np.arange(n_l)).astype(float)  # perm, unit, l, l'
            perm_t = onehot.transpose(1, 3, 2, 0).reshape(size * n_l, n_l * n_perm)
            weights_t = np.ascontiguousarray(weights.T, dtype=float)
            for k in range(0, len(members), _CHUNK):
                part = members[k:k + _CHUNK]
                cell = np.stack([counts[c[j][1]] for _, c in part])  # runs, units, l, bins
                values.append(_jsd_chunk(cell, perm_t, weights_t))
                keys.append(([r for r, _ in part], [c[j][0] for _, c in part], size))
    if not values:
        return pd.DataFrame(columns=JSD_COLUMNS)
    langs = [*languages, "overall"]
    out = pd.DataFrame(np.concatenate(values), columns=JSD_COLUMNS[3:])
    out.insert(0, "run_id", [r for rs, _, _ in keys for r in rs for _ in langs])
    out.insert(1, "scenario", [s for _, ss, _ in keys for s in ss for _ in langs])
    out.insert(2, "language", langs * (len(out) // len(langs)))
    out["n"] = [n for rs, _, n in keys for _ in rs for _ in langs]
    return out.sort_values(["run_id", "scenario", "language"], ignore_index=True)


def _quantiles(x: np.ndarray, qs: tuple[float, ...]) -> list[np.ndarray]:
    """np.quantile(x, q, axis=-1) ("linear", numpy's lerp): one sort beats its partition."""
    s = np.sort(x, axis=-1)
    out = []
    for q in qs:
        v = q * (x.shape[-1] - 1)
        lo = math.floor(v)
        a, b, t = s[..., lo], s[..., min(lo + 1, x.shape[-1] - 1)], v - lo
        out.append(b - (b - a) * (1 - t) if t >= 0.5 else a + (b - a) * t)
    return out


def _jsd_chunk(cell: np.ndarray, perm_t: np.ndarray, weights_t: np.ndarray) -> np.ndarray:
    """stats._jsd_cell for a stack of runs sharing the draws: rows per (run,
    language + overall), columns JSD_COLUMNS[3:]. perm_t: (unit, l') x (l, perm)
    one-hot of the shuffles; weights_t: unit x bootstrap replicate."""
    n_r, n_u, n_l, bins = cell.shape
    n_perm = perm_t.shape[1] // n_l
    p = cell.sum(axis=1)
    g = p.sum(axis=1)
    plug = jsd_bits(p, g[:, None, :])
    per_unit = cell.sum(axis=3)
    assert (per_unit == 3).all(), "complete units hold 3 scores per language"
    table = _Table(3 * n_u, n_l)
    # Permutation null and bootstrap: one GEMM each over every run of the chunk,
    # giving the table index stride c + g directly (integer counts: exact sums).
    # float32 GEMMs (twice as fast) while every index is an integer float32 holds exactly
    ft = np.float32 if table.flat.size < 2**24 else np.float64
    x = cell.transpose(3, 0, 1, 2).reshape(bins * n_r, n_u * n_l).astype(ft)
    null_idx = (x @ (table.stride * perm_t + 1.0).astype(ft)).reshape(bins, n_r, n_l, n_perm)
    null = table.jsd(null_idx)
    mixed = table.stride * cell + cell.sum(axis=2, keepdims=True)
    xb = mixed.transpose(3, 0, 2, 1).reshape(bins * n_r * n_l, n_u).astype(ft)
    boot = table.jsd((xb @ weights_t.astype(ft)).reshape(bins, n_r, n_l, -1))  # runs, l, boot
    plug_i = table.jsd(table.stride * p.transpose(2, 0, 1) + g.T[:, :, None])  # as the null

    def with_mean(x: np.ndarray) -> np.ndarray:  # + "overall", the mean over languages
        return np.concatenate([x, x.mean(axis=1, keepdims=True)], axis=1)

    plug_a, plug_ia, null_a, boot_a = (with_mean(v) for v in (plug, plug_i, null, boot))
    q_lo, q_hi = _quantiles(boot_a, (0.025, 0.975))
    nat = np.sqrt(plug * math.log(2))  # scipy's jensenshannon: the natural-log distance
    ge = null_a >= plug_ia[:, :, None]
    close = np.abs(null_a - plug_ia[:, :, None]) < 1e-10
    if close.any():  # a tie to rounding (equal JSD of other histograms): decide as stats does
        rr, pp = np.nonzero(close.any(axis=1))
        c = (null_idx[:, rr, :, pp].astype(np.int64) // int(table.stride)).astype(float)
        c = np.ascontiguousarray(c.transpose(0, 2, 1))
        exact = with_mean(jsd_bits(c, g[rr][:, None, :]))
        ge[rr, :, pp] = np.where(close[rr, :, pp], exact >= plug_a[rr], ge[rr, :, pp])
    cols = [plug_a - null_a.mean(axis=2), np.clip(2 * plug_a - q_hi, 0, None),
            np.clip(2 * plug_a - q_lo, 0, None), (1 + ge.sum(axis=2)) / (n_perm + 1),
            np.full(plug_a.shape, float(n_u)), plug_a, np.sqrt(plug_a), with_mean(nat)]
    return np.stack([c.ravel() for c in cols], axis=1)
