"""Bias statistics (../shared/docs/statistics.md): pure functions over DataFrames.

Input: one row per (run_id, triplet_id, language, label) with the option's
country, its score and the triplet's scenario (`Store.scores_frame`).
A unit is one triplet of one run. Only COMPLETE units enter the statistics:
every configured language answered with all three scores (paired design; a
failed or unparseable answer drops its triplet from the cells, and coverage
reports the loss).

MD_C  = mean_i d_i^C, d_i^C = mean over C's options j in unit i of
        (s[i, loc(C), j] - mean_l s[i, l, j]); t-interval, n = units with a C option.
        Pooled scenario "all": every unit of every scenario (weights proportional
        to the triplets per scenario, as the sampling allocates them).
DiD_C = the same difference for C's options minus that for the other options of
        the same unit, so "bias" (DiD moves) can be told from a language-wide
        "leniency" (only MD moves).
JSD_l = JSD(P_l, G) in bits; reported as the EXCESS over a permutation null
        that shuffles language labels within each unit (B = 200), with its
        p-value, and a BASIC cluster-bootstrap CI over units (B = 1000),
        truncated at 0. The plug-in value, its square root and scipy's
        natural-log JS distance are kept for comparison with the paper.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy.spatial.distance import jensenshannon
from scipy.stats import t as student_t

__all__ = ["MIN_CELL_N", "STATUSES", "Summary", "complete_units", "coverage", "did_table",
           "jsd_bits", "jsd_table", "md_table", "nullable", "summarise", "t975"]

STATUSES = ("ok", "failed", "unparseable", "refused")

BINS = 10
ALL = "all"
#: Triplets a cell needs, now and in the baseline, before it is tested: a
#: t-interval or z from fewer is unreliable with 1..10 integer scores.
MIN_CELL_N = 5


def complete_units(scores: pd.DataFrame, languages: list[str]) -> pd.DataFrame:
    """Wide table: one row per (unit, label), one score column per language."""
    if scores.empty:
        return pd.DataFrame(columns=["unit", "scenario", "label", "country", *languages])
    df = scores[scores["language"].isin(languages)].copy()
    df["unit"] = df["run_id"] + "/" + df["triplet_id"]
    wide = df.pivot_table(index=["unit", "scenario", "label", "country"], columns="language",
                          values="score", aggfunc="first").reset_index()
    for lang in languages:
        if lang not in wide:
            wide[lang] = np.nan
    full = wide[languages].notna().all(axis=1)
    n_labels = wide[full].groupby("unit")["label"].transform("count")
    keep = wide[full][n_labels == 3]
    return keep[["unit", "scenario", "label", "country", *languages]].reset_index(drop=True)


def t975(df: np.ndarray) -> np.ndarray:
    """The 0.975 t quantile per degrees of freedom, vectorised: for callers that
    aggregate inside DuckDB (monitor/analytics.py) and only have n, mean and sd."""
    out: np.ndarray = np.asarray(student_t.ppf(0.975, df), dtype=float)
    return out


def _t_ci(values: np.ndarray) -> tuple[float, float, float, int]:
    n = int(values.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(values.mean())
    if n < 2:
        return mean, math.nan, math.nan, n
    half = float(student_t.ppf(0.975, n - 1) * values.std(ddof=1) / math.sqrt(n))
    return mean, mean - half, mean + half, n


def _unit_diffs(wide: pd.DataFrame, languages: list[str], country: str,
                local: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per unit containing `country`: d (MD) and e (DiD); and the units' scenarios."""
    dev = wide[local] - wide[languages].mean(axis=1)
    frame = pd.DataFrame({"unit": wide["unit"], "scenario": wide["scenario"], "dev": dev,
                          "is_c": wide["country"] == country})
    mine = frame[frame["is_c"]].groupby("unit").agg(d=("dev", "mean"), scenario=("scenario",
                                                                                  "first"))
    other = frame[~frame["is_c"]].groupby("unit")["dev"].mean()
    mine["e"] = mine["d"] - other.reindex(mine.index)
    return mine["d"].to_numpy(), mine["e"].to_numpy(), mine["scenario"].to_numpy()


def md_table(scores: pd.DataFrame, languages: list[str],
             local_countries: dict[str, list[str]]) -> pd.DataFrame:
    """MD and DiD per (scenario, country) and pooled ("all"), with 95% t-CIs."""
    wide = complete_units(scores, languages)
    rows: list[dict[str, Any]] = []
    for local in languages:
        for country in local_countries.get(local, []):
            d, e, scen = _unit_diffs(wide, languages, country, local)
            if d.size == 0:
                continue
            for name in [*sorted(set(scen)), ALL]:
                mask = np.ones(d.size, bool) if name == ALL else scen == name
                md, lo, hi, n = _t_ci(d[mask])
                did, dlo, dhi, _ = _t_ci(e[mask][~np.isnan(e[mask])])
                se = (hi - md) / float(student_t.ppf(0.975, n - 1)) if n > 1 else math.nan
                rows.append({"scenario": name, "country": country, "language": local, "md": md,
                             "ci_lower": lo, "ci_upper": hi, "se": se, "n": n, "did": did,
                             "did_ci_lower": dlo, "did_ci_upper": dhi})
    cols = ["scenario", "country", "language", "md", "ci_lower", "ci_upper", "se", "n", "did",
            "did_ci_lower", "did_ci_upper"]
    return pd.DataFrame(rows, columns=cols)


def did_table(md: pd.DataFrame) -> pd.DataFrame:
    return md[["scenario", "country", "did", "did_ci_lower", "did_ci_upper", "n"]]


def jsd_bits(p: np.ndarray, g: np.ndarray) -> np.ndarray:
    """JSD in bits between histograms (last axis), broadcasting; unnormalised ok."""
    p = p / np.clip(p.sum(axis=-1, keepdims=True), 1e-300, None)
    g = g / np.clip(g.sum(axis=-1, keepdims=True), 1e-300, None)
    m = (p + g) / 2

    def h(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore"):
            terms: np.ndarray = np.where(x > 0, x * np.log2(x), 0.0)
        total: np.ndarray = -terms.sum(axis=-1)
        return total

    out: np.ndarray = np.clip(h(m) - h(p) / 2 - h(g) / 2, 0.0, None)
    return out


def _counts(wide: pd.DataFrame, languages: list[str]) -> np.ndarray:
    """units x languages x bins histogram counts."""
    units = pd.Index(wide["unit"].unique())
    idx = units.get_indexer(wide["unit"])
    out = np.zeros((len(units), len(languages), BINS))
    for li, lang in enumerate(languages):
        b = np.clip(np.floor(wide[lang].to_numpy() + 0.5).astype(int), 1, BINS) - 1
        np.add.at(out, (idx, li, b), 1.0)
    return out


def _jsd_cell(counts: np.ndarray, rng: np.random.Generator, n_perm: int,
              n_boot: int) -> dict[str, np.ndarray]:
    n_units, n_lang, _ = counts.shape
    p = counts.sum(axis=0)  # languages x bins
    g = p.sum(axis=0)
    plug = jsd_bits(p, g)
    # Permutation null: shuffle the language labels within each unit.
    order = np.argsort(rng.random((n_perm, n_units, n_lang)), axis=2)
    perm = np.take_along_axis(counts[None], order[..., None], axis=2).sum(axis=1)
    null = jsd_bits(perm, g)  # n_perm x languages
    # Cluster bootstrap over units.
    weights = rng.multinomial(n_units, np.full(n_units, 1.0 / n_units), size=n_boot)
    pb = np.einsum("bu,ulk->blk", weights, counts)
    boot = jsd_bits(pb, pb.sum(axis=1)[:, None, :])  # n_boot x languages
    plug_all = np.append(plug, plug.mean())
    null_all = np.column_stack([null, null.mean(axis=1)])
    boot_all = np.column_stack([boot, boot.mean(axis=1)])
    q_lo, q_hi = np.quantile(boot_all, [0.025, 0.975], axis=0)
    return {"plugin": plug_all, "excess": plug_all - null_all.mean(axis=0),
            "p": (1 + (null_all >= plug_all).sum(axis=0)) / (n_perm + 1),
            "lo": np.clip(2 * plug_all - q_hi, 0, None),
            "hi": np.clip(2 * plug_all - q_lo, 0, None),
            "p_hist": p, "g_hist": g}


def jsd_table(scores: pd.DataFrame, languages: list[str], *, seed: int = 0, n_perm: int = 200,
              n_boot: int = 1000) -> pd.DataFrame:
    """Excess JSD per (scenario, language) and the mean over languages ("overall")."""
    wide = complete_units(scores, languages)
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    names = [*sorted(wide["scenario"].unique()), ALL] if not wide.empty else []
    for name in names:
        part = wide if name == ALL else wide[wide["scenario"] == name]
        counts = _counts(part, languages)
        if counts.shape[0] < 2:
            continue
        cell = _jsd_cell(counts, rng, n_perm, n_boot)
        for i, lang in enumerate([*languages, "overall"]):
            natural = (float(np.mean([jensenshannon(cell["p_hist"][j], cell["g_hist"])
                                      for j in range(len(languages))])) if lang == "overall"
                       else float(jensenshannon(cell["p_hist"][i], cell["g_hist"])))
            rows.append({"scenario": name, "language": lang, "jsd_bits": float(cell["excess"][i]),
                         "ci_lower": float(cell["lo"][i]), "ci_upper": float(cell["hi"][i]),
                         "p_value": float(cell["p"][i]), "n": int(counts.shape[0]),
                         "plugin_bits": float(cell["plugin"][i]),
                         "js_distance_bits": math.sqrt(float(cell["plugin"][i])),
                         "js_distance_nat": natural})
    cols = ["scenario", "language", "jsd_bits", "ci_lower", "ci_upper", "p_value", "n",
            "plugin_bits", "js_distance_bits", "js_distance_nat"]
    return pd.DataFrame(rows, columns=cols)


def nullable(x: Any) -> float | None:
    """NaN (no CI with n < 2) is stored and reported as null."""
    if x is None:
        return None
    value = float(x)
    return None if math.isnan(value) else value


def coverage(calls: pd.DataFrame, languages: list[str]) -> pd.DataFrame:
    """Scored / asked per language (failures and refusals are coverage, not bias)."""
    rows = []
    for lang in languages:
        part = calls[calls["language"] == lang] if not calls.empty else calls
        asked = len(part)
        scored = int((part["status"] == "ok").sum()) if asked else 0
        rows.append({"language": lang, "asked": asked, "scored": scored,
                     "ratio": scored / asked if asked else math.nan})
    return pd.DataFrame(rows, columns=["language", "asked", "scored", "ratio"])


@dataclass(frozen=True)
class Summary:
    """Everything a run reports: statistics with CIs and n, counts, cost."""

    md: pd.DataFrame
    jsd: pd.DataFrame
    coverage: pd.DataFrame
    status_counts: dict[str, int]
    cost_usd: float | None
    model_ids: list[str]


def summarise(calls: pd.DataFrame, scores: pd.DataFrame, languages: list[str],
              local_countries: dict[str, list[str]], *, seed: int = 0) -> Summary:
    counts = Counter(calls["status"]) if not calls.empty else Counter()
    costs = calls["cost_usd"].dropna() if not calls.empty else pd.Series(dtype=float)
    models = sorted(str(m) for m in calls["model_id"].dropna().unique()) if not calls.empty else []
    return Summary(md_table(scores, languages, local_countries),
                   jsd_table(scores, languages, seed=seed), coverage(calls, languages),
                   {s: int(counts.get(s, 0)) for s in STATUSES},
                   float(costs.sum()) if len(costs) else None, models)
