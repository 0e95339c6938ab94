"""Statistics over many runs, aggregated inside DuckDB (the history path).

`monitor/stats.py` computes one run from pandas frames; over a long history
that is ~30 ms of pivoting per run. Here the same numbers come from one SQL
GROUP BY over every selected run:
- MD / DiD: per (run, scenario, country) and pooled ("all"), DuckDB returns
  n, mean and sample sd of the per-unit paired differences d (and e = DiD);
  the t-interval is mean +- t975(n-1) * sd / sqrt(n), as in stats.md_table.
- JSD: DuckDB returns the complete units' scores as integer codes; the
  per-unit histograms, the permutation null and the cluster bootstrap run in
  numpy, with the same random draws as stats.jsd_table, batched over runs
  whose draws coincide (same seed and cell sizes: the common case).
- Drift: the CUSUM states of monitor/drift.py replayed over the runs in order
  against a baseline, with the observation rule of monitor/watch.py.
Results equal stats.md_table / jsd_table within float tolerance
(tests/test_analytics.py). SQL lives here; duckdb itself only in store.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import numpy as np
import pandas as pd

from monitor.config import Alerts, Thresholds
from monitor.drift import CellState, Observation, step
from monitor.stats import jsd_bits, t975
from monitor.store import Store

__all__ = ["MIN_CELL_N", "drift_replay", "history", "jsd_frame", "md_frame"]

MIN_CELL_N = 5  # as monitor.watch.MIN_CELL_N (not imported: watch pulls in run and llm)

MD_COLUMNS = ["run_id", "scenario", "country", "language", "md", "ci_lower", "ci_upper", "se",
              "n", "did", "did_ci_lower", "did_ci_upper"]

# Complete units (every language answered, three labels), as stats.complete_units.
# $1 languages; {where} selects runs (endpoint / since / run ids) from `runs`.
_UNITS = """
sel AS (SELECT run_id FROM runs WHERE {where}),
sc AS (SELECT s.run_id, s.triplet_id, c.scenario, s.label, s.country, s.language, s.score
       FROM scores s JOIN probe_calls c USING (run_id, triplet_id, language)
       WHERE c.status = 'ok' AND s.run_id IN (SELECT run_id FROM sel)
         AND list_contains($1, s.language) AND s.score IS NOT NULL),
lab AS (SELECT run_id, triplet_id, scenario, label, country, avg(score) AS mean_l
        FROM sc GROUP BY ALL HAVING count(*) = len($1)),
unit AS (SELECT run_id, triplet_id, min(scenario) AS scenario FROM lab
         GROUP BY run_id, triplet_id HAVING count(*) = 3)
"""

# Per unit and country C (with a local language in the run): d = mean over C's
# options of (score in loc(C) - mean over languages); o = the same for the other
# options (DiD e = d - o). $2 / $3: countries and their local languages.
_MD = """
WITH {units},
dev AS (SELECT sc.run_id, sc.triplet_id, sc.scenario, sc.country, sc.language,
               sc.score - lab.mean_l AS dev
        FROM sc JOIN lab USING (run_id, triplet_id, scenario, label, country)
        JOIN unit USING (run_id, triplet_id)),
loc AS (SELECT unnest($2::VARCHAR[]) AS country, unnest($3::VARCHAR[]) AS language),
uc AS (SELECT DISTINCT d.run_id, d.triplet_id, d.scenario, d.country
       FROM dev d JOIN loc USING (country)),
per AS (SELECT {grp} AS grp, uc.scenario, uc.country, uc.triplet_id, uc.run_id,
               avg(d.dev) FILTER (WHERE d.country = uc.country) AS d,
               avg(d.dev) FILTER (WHERE d.country <> uc.country) AS o
        FROM uc JOIN loc USING (country)
        JOIN dev d ON d.run_id = uc.run_id AND d.triplet_id = uc.triplet_id
                      AND d.language = loc.language
        GROUP BY ALL)
SELECT grp, CASE WHEN grouping(scenario) = 1 THEN 'all' ELSE scenario END AS scenario,
       country, count(*) AS n, avg(d) AS md, stddev_samp(d) AS sd, count(d - o) AS n_e,
       avg(d - o) AS did, stddev_samp(d - o) AS sd_e
FROM per GROUP BY GROUPING SETS ((grp, scenario, country), (grp, country))
"""

_JSD_UNITS = "WITH {units} SELECT run_id, scenario FROM unit ORDER BY run_id, triplet_id"
_JSD_SCORES = """WITH {units}
SELECT dense_rank() OVER (ORDER BY run_id, triplet_id) - 1 AS u,
       list_position($1, language) - 1 AS li, score
FROM sc JOIN unit USING (run_id, triplet_id)"""


def _where(endpoint: str | None, since: datetime | None, run_ids: Sequence[str] | None,
           after: int) -> tuple[str, list[Any]]:
    """The run filter and its parameters (numbered after $1..$after)."""
    parts, params = ["true"], []
    for cond, value in (("endpoint = ${}", endpoint), ("started_at >= ${}", since),
                        ("list_contains(${}, run_id)", None if run_ids is None else list(run_ids))):
        if value is not None:
            params.append(value)
            parts.append(cond.format(after + len(params)))
    return " AND ".join(parts), params


def _local(languages: Sequence[str], local: Mapping[str, Sequence[str]]) -> tuple[list[str],
                                                                                  list[str]]:
    pairs = [(c, lang) for lang in languages for c in local.get(lang, [])]
    return [c for c, _ in pairs], [lang for _, lang in pairs]


def md_frame(store: Store, languages: Sequence[str], local: Mapping[str, Sequence[str]], *,
             endpoint: str | None = None, since: datetime | None = None,
             run_ids: Sequence[str] | None = None, pooled: bool = False) -> pd.DataFrame:
    """stats.md_table per run (run_id column), or over all selected runs pooled
    (run_id "pooled", like md_table of their concatenated scores)."""
    where, params = _where(endpoint, since, run_ids, 3)
    countries, locs = _local(languages, local)
    sql = _MD.format(units=_UNITS.format(where=where), grp="'pooled'" if pooled else "uc.run_id")
    agg = store.frame(sql, [list(languages), countries, locs, *params])
    lang_of = dict(zip(countries, locs, strict=True))
    n = agg["n"].to_numpy(float)
    n_e = agg["n_e"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(n > 1, agg["sd"].to_numpy(float) / np.sqrt(n), np.nan)
        half = t975(np.maximum(n - 1, 1)) * se
        half_e = np.where(n_e > 1, t975(np.maximum(n_e - 1, 1))
                          * agg["sd_e"].to_numpy(float) / np.sqrt(n_e), np.nan)
    md, did = agg["md"].to_numpy(float), agg["did"].to_numpy(float)
    out = pd.DataFrame({"run_id": agg["grp"], "scenario": agg["scenario"],
                        "country": agg["country"], "language": agg["country"].map(lang_of),
                        "md": md, "ci_lower": md - half, "ci_upper": md + half, "se": se,
                        "n": agg["n"].astype(int), "did": did, "did_ci_lower": did - half_e,
                        "did_ci_upper": did + half_e})
    return out.sort_values(["run_id", "scenario", "country"], ignore_index=True)[MD_COLUMNS]


def jsd_frame(store: Store, languages: Sequence[str], seeds: Mapping[str, int], *,
              endpoint: str | None = None, since: datetime | None = None,
              run_ids: Sequence[str] | None = None, n_perm: int = 200,
              n_boot: int = 1000) -> pd.DataFrame:
    """stats.jsd_table of every selected run (run_id column), each with its seed."""
    where, params = _where(endpoint, since, run_ids, 1)
    args = [list(languages), *params]
    with store.session():
        units = store.frame(_JSD_UNITS.format(units=_UNITS.format(where=where)), args)
        scores = store.frame(_JSD_SCORES.format(units=_UNITS.format(where=where)), args)
    return _jsd_runs(units["run_id"].to_numpy(), units["scenario"].to_numpy(),
                    scores["u"].to_numpy(np.int64), scores["li"].to_numpy(np.int64),
                    scores["score"].to_numpy(float), list(languages), seeds,
                    n_perm=n_perm, n_boot=n_boot)


def _records(df: Any) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = df.to_dict("records")
    return rows


def drift_replay(md: pd.DataFrame, base: pd.DataFrame, order: Sequence[str], *,
                 thresholds: Thresholds | None = None,
                 alerts: Alerts | None = None) -> pd.DataFrame:
    """The alert state and z of every (run, scenario, country) after that run,
    replaying drift.step over `order` as monitor.watch.evaluate would."""
    t, a = thresholds or Thresholds(), alerts or Alerts()
    ref = {(r["scenario"], r["country"]): r for r in _records(base)}
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in _records(md):
        by_run.setdefault(str(r["run_id"]), []).append(r)
    cells: dict[tuple[str, str], CellState] = {}
    rows: list[tuple[str, str, str, str, float | None]] = []
    for run_id in order:
        for r in by_run.get(run_id, []):
            key = (str(r["scenario"]), str(r["country"]))
            b = ref.get(key)
            obs = None
            if (b is not None and r["n"] >= MIN_CELL_N and b["n"] >= MIN_CELL_N
                    and math.isfinite(r["se"]) and math.isfinite(b["se"])):
                se_now = max(r["se"], b["se"] * math.sqrt(b["n"] / r["n"]))  # as watch.evaluate
                obs = Observation(r["md"], se_now, r["ci_lower"], r["ci_upper"], int(r["n"]),
                                  b["md"], b["se"])
            new = step(cells.get(key, CellState()), obs, drift_points=t.drift_md_points,
                       h=t.cusum_h, md_threshold=t.md_points, min_runs_firing=a.min_runs_firing)
            cells[key] = new
            rows.append((run_id, *key, new.state, new.z))
    return pd.DataFrame(rows, columns=["run_id", "scenario", "country", "state", "z"])


def history(store: Store, endpoint: str, since: datetime | None = None, *,
            local: Mapping[str, Sequence[str]] | None = None,
            baseline_runs: Sequence[str] | None = None, jsd: bool = True,
            thresholds: Thresholds | None = None, alerts: Alerts | None = None) -> pd.DataFrame:
    """Every run of `endpoint` (started at or after `since`), recomputed: one row
    per MD cell (kind "md": key = country, value = MD, DiD, alert state and z
    against the baseline) and, with jsd=True, per JSD cell (kind "jsd": key =
    language, value = excess JSD bits, p_value). Columns: kind, run_id,
    started_at, scenario, key, value, ci_lower, ci_upper, n, p_value, did,
    did_ci_lower, did_ci_upper, state, z. Baseline: `baseline_runs`, else the
    endpoint's active baseline, else its first 10 finished runs; baseline runs
    get no state. Runs with another language set than the latest are skipped."""
    if local is None:
        from monitor.catalog import load_catalog

        local = {lang: list(c) for lang, c in load_catalog().languages.items()}
    runs = [r for r in store.runs(endpoint) if r.finished_at is not None
            and r.status in ("complete", "partial")]
    if not runs:
        return pd.DataFrame(columns=_HISTORY_COLUMNS)
    languages = runs[-1].languages
    runs = [r for r in runs if r.languages == languages]
    if baseline_runs is None:
        active = store.baseline(endpoint)
        baseline_runs = active["run_ids"] if active else [r.run_id for r in runs[:10]]
    started = {r.run_id: r.started_at for r in runs}
    shown = [r.run_id for r in runs if since is None or r.started_at >= since]
    md = md_frame(store, languages, local, endpoint=endpoint, since=since)
    md = md[md["run_id"].isin(started)]
    base = md_frame(store, languages, local, run_ids=baseline_runs, pooled=True)
    in_base = set(baseline_runs)
    states = drift_replay(md, base, [r for r in shown if r not in in_base],
                          thresholds=thresholds, alerts=alerts)
    md = md.merge(states, on=["run_id", "scenario", "country"], how="left")
    parts = [md.rename(columns={"country": "key", "md": "value"}).assign(kind="md",
                                                                         p_value=np.nan)]
    if jsd:
        j = jsd_frame(store, languages, {r.run_id: r.seed for r in runs}, endpoint=endpoint,
                      since=since)
        j = j[j["run_id"].isin(started)]
        parts.append(j.rename(columns={"language": "key", "jsd_bits": "value"}).assign(
            kind="jsd"))
    out = pd.concat(parts, ignore_index=True)
    out["started_at"] = out["run_id"].map(started)
    out = out.sort_values(["started_at", "run_id", "kind", "scenario", "key"], ignore_index=True)
    return out.reindex(columns=_HISTORY_COLUMNS)


_HISTORY_COLUMNS = ["kind", "run_id", "started_at", "scenario", "key", "value", "ci_lower",
                    "ci_upper", "n", "p_value", "did", "did_ci_lower", "did_ci_upper", "state",
                    "z"]


JSD_COLUMNS = ["run_id", "scenario", "language", "jsd_bits", "ci_lower", "ci_upper", "p_value",
               "n", "plugin_bits", "js_distance_bits", "js_distance_nat"]
_CHUNK = 64  # runs per numpy batch: ~0.5 MB per run and array, so memory stays flat


def _xlog2x(top: int) -> np.ndarray:
    x = np.arange(top + 1, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x > 0, x * np.log2(x), 0.0)


def _jsd_counts(c: np.ndarray, g: np.ndarray) -> np.ndarray:
    """jsd_bits for integer histograms via a table of x*log2(x): the permutation
    and bootstrap arrays are too many for three log2 calls per bin."""
    ci, gi = c.astype(np.int64), np.broadcast_to(g, c.shape).astype(np.int64)
    n, ng = ci.sum(axis=-1, keepdims=True), gi.sum(axis=-1, keepdims=True)
    q = ng * ci + n * gi  # m = q / (2 n ng) stays integer-valued
    f = _xlog2x(int(q.max()))
    n, ng = n[..., 0].astype(float), ng[..., 0].astype(float)
    h_c = np.log2(n) - f[ci].sum(axis=-1) / n
    h_g = np.log2(ng) - f[gi].sum(axis=-1) / ng
    h_m = np.log2(2 * n * ng) - f[q].sum(axis=-1) / (2 * n * ng)
    out: np.ndarray = np.clip(h_m - h_c / 2 - h_g / 2, 0.0, None)
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


def _jsd_runs(run: np.ndarray, scen: np.ndarray, u: np.ndarray, li: np.ndarray,
              score: np.ndarray, languages: list[str], seeds: Mapping[str, int], *,
              n_perm: int, n_boot: int) -> pd.DataFrame:
    n_l, bins = len(languages), 10
    b = np.clip(np.floor(score + 0.5).astype(int), 1, bins) - 1  # as stats._counts
    counts = np.bincount((u * n_l + li) * bins + b, minlength=len(run) * n_l * bins).reshape(
        len(run), n_l, bins).astype(float)
    groups: dict[tuple[int, tuple[int, ...]], list[tuple[str, list[tuple[str, np.ndarray]]]]] = {}
    for run_id, cells in _cells(run, scen):
        key = (int(seeds.get(run_id, 0)), tuple(i.size for _, i in cells))
        groups.setdefault(key, []).append((run_id, cells))
    rows: list[pd.DataFrame] = []
    for (seed, sizes), members in groups.items():
        rng = np.random.default_rng(seed)  # the draws of jsd_table, cell after cell
        for j, size in enumerate(sizes):
            order = np.argsort(rng.random((n_perm, size, n_l)), axis=2)
            weights = rng.multinomial(size, np.full(size, 1.0 / size), size=n_boot)
            onehot = (order[..., None] == np.arange(n_l)).astype(float)  # perm, unit, l, l'
            perm_m = onehot.transpose(0, 2, 1, 3).reshape(n_perm * n_l, size * n_l)
            for k in range(0, len(members), _CHUNK):
                part = members[k:k + _CHUNK]
                cell = np.stack([counts[c[j][1]] for _, c in part])  # runs, units, l, bins
                rows.append(_jsd_chunk(cell, perm_m, weights, [r for r, _ in part],
                                       [c[j][0] for _, c in part], languages))
    if not rows:
        return pd.DataFrame(columns=JSD_COLUMNS)
    return pd.concat(rows, ignore_index=True).sort_values(
        ["run_id", "scenario", "language"], ignore_index=True)


def _jsd_chunk(cell: np.ndarray, perm_m: np.ndarray, weights: np.ndarray, run_ids: list[str],
               scenarios: list[str], languages: list[str]) -> pd.DataFrame:
    n_r, n_u, n_l, bins = cell.shape
    n_perm, n_boot = perm_m.shape[0] // n_l, weights.shape[0]
    p = cell.sum(axis=1)
    g = p.sum(axis=1)
    plug = jsd_bits(p, g[:, None, :])
    flat = cell.transpose(1, 2, 0, 3).reshape(n_u * n_l, n_r * bins)  # one GEMM for all runs
    perm = (perm_m @ flat).reshape(n_perm, n_l, n_r, bins).transpose(2, 0, 1, 3)
    null = _jsd_counts(perm, g[:, None, None, :])
    pb = (weights @ cell.transpose(1, 0, 2, 3).reshape(n_u, -1)).reshape(
        n_boot, n_r, n_l, bins).transpose(1, 0, 2, 3)
    boot = _jsd_counts(pb, pb.sum(axis=2)[:, :, None, :])
    plug_i = _jsd_counts(p, g[:, None, :])  # the same function as the null, for ties

    def with_mean(x: np.ndarray) -> np.ndarray:
        return np.concatenate([x, x.mean(axis=-1, keepdims=True)], axis=-1)

    plug_a, plug_ia, null_a, boot_a = (with_mean(x) for x in (plug, plug_i, null, boot))
    q_lo, q_hi = np.quantile(boot_a, [0.025, 0.975], axis=1)
    nat = np.sqrt(plug * math.log(2))  # scipy's jensenshannon: natural-log distance
    langs = [*languages, "overall"]
    return pd.DataFrame({
        "run_id": np.repeat(run_ids, n_l + 1), "scenario": np.repeat(scenarios, n_l + 1),
        "language": np.tile(langs, n_r),
        "jsd_bits": (plug_a - null_a.mean(axis=1)).ravel(),
        "ci_lower": np.clip(2 * plug_a - q_hi, 0, None).ravel(),
        "ci_upper": np.clip(2 * plug_a - q_lo, 0, None).ravel(),
        "p_value": ((1 + (null_a >= plug_ia[:, None, :]).sum(axis=1)) / (n_perm + 1)).ravel(),
        "n": n_u, "plugin_bits": plug_a.ravel(), "js_distance_bits": np.sqrt(plug_a).ravel(),
        "js_distance_nat": with_mean(nat).ravel()})
