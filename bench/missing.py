"""Every answer used, measured on the realistic profile with losses (issue 32, item 1).

    python bench/missing.py [--runs 200] [--triplets 40] [--out PATH]

For 6 and 14 languages: runs of the real Sampler's triplets answered by the
simulated endpoint's realistic score model (noise sd 1.3, call sd 0.6, persistence
0.3, leniency in ko / ja / de: monitor/measure/simulated.py PROFILES) with the
demo's injected bias, and each language losing a share of its answers (failed,
refused or unreadable: 5-20%, different per language, LOSS below), stored as a
run writes them and estimated by the product's engine (monitor.stats.md_of,
by run). Figures: the share of answered (triplet, language) cells that enter MD
(the old rule kept only complete triplets), MD CI coverage per country against the
truth (the same engine on a large run without losses), and the mean error.
Writes bench/results/missing.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.frames import md_table
from monitor.catalog import Catalog, load_catalog
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import PROFILES
from monitor.vocab import POOLED

DEMO_BIAS = {"CN": 0.9, "KR": 0.6, "JP": 0.4, "FR": 0.3, "DE": 0.0, "US": 0.1, "GB": 0.1,
             "CA": 0.0, "AU": 0.0}  # monitor/data/demo.yaml
SIX = ["en", "ja", "zh", "fr", "de", "ko"]
FOURTEEN = [*SIX, "es", "pt", "ar", "hi", "id", "it", "tr", "ru"]
#: The share of each language's answers lost (failed, refused or unreadable together).
LOSS = {"en": 0.05, "ja": 0.10, "zh": 0.15, "fr": 0.08, "de": 0.12, "ko": 0.20, "es": 0.07,
        "pt": 0.10, "ar": 0.18, "hi": 0.20, "id": 0.12, "it": 0.06, "tr": 0.15, "ru": 0.14}
SCENARIOS = ["relocation", "travel", "university"]
NORMAL = NormalDist()


def _unit(*key: object) -> float:
    h = hashlib.sha256("|".join(map(str, key)).encode()).digest()
    return int.from_bytes(h[:8], "big") / 2**64


def frame(cat: Catalog, languages: list[str], runs: int, triplets: int, seed: int, *,
          lose: bool) -> pd.DataFrame:
    """The scores a run stores, one row per (run, triplet, language, option) answered."""
    prof = PROFILES["realistic"]
    shift: dict[str, float] = prof["language_shift"]
    rng = np.random.default_rng(seed)
    sampler = Sampler(cat, scenarios=SCENARIOS, variants=["plain"], seed=seed,
                      triplets_per_run=triplets, languages=languages)
    rows: dict[str, list[Any]] = {k: [] for k in ("run_id", "triplet_id", "language", "label",
                                                  "country", "score", "scenario")}
    persist, fresh = prof["persistence"] ** 0.5, (1 - prof["persistence"]) ** 0.5
    for r in range(runs):
        for spec in sampler.sample(r):
            t = spec.triplet
            opts = [cat.scenarios[t.scenario].options[o] for o in spec.order]
            for lang in languages:
                if lose and rng.random() < LOSS[lang]:
                    continue  # the whole answer: no score of any option
                call = rng.normal(0, prof["call_sd"])
                for label, opt in zip("ABC", opts, strict=True):
                    q = 4.5 + 3.0 * _unit("quality", t.scenario, opt.id)
                    local = cat.local_language(opt.country) == lang
                    u = min(max(_unit("p", t.id, lang, opt.id), 1e-12), 1 - 1e-12)
                    e = persist * NORMAL.inv_cdf(u) + fresh * rng.standard_normal()
                    raw = (q + (DEMO_BIAS.get(opt.country, 0.0) if local else 0.0)
                           + shift.get(lang, 0.0) + call + prof["noise_sd"] * e)
                    rows["run_id"].append(f"r{r:04d}")
                    rows["triplet_id"].append(t.id.split("/", 1)[1])
                    rows["scenario"].append(t.scenario)
                    rows["language"].append(lang)
                    rows["label"].append(label)
                    rows["country"].append(opt.country)
                    rows["score"].append(float(min(10, max(1, round(raw)))))
    return pd.DataFrame(rows)


def measure(cat: Catalog, languages: list[str], runs: int, triplets: int) -> dict[str, Any]:
    local = {lang: list(cat.languages.get(lang, ())) for lang in languages}
    t0 = time.perf_counter()
    truth_rows = md_table(frame(cat, languages, 1, 6000, 99, lose=False), languages, local)
    truth = {r.country: r.md for r in truth_rows.itertuples() if r.scenario == POOLED}
    lossy = frame(cat, languages, runs, triplets, 1, lose=True)
    md = md_table(lossy, languages, local, by_run=True)
    # An answered cell enters MD when its triplet counts for some country: that
    # country's option read in its language, and the triplet read in another language.
    cells = lossy.drop_duplicates(["run_id", "triplet_id", "language"])
    key = ["run_id", "triplet_id"]
    answered = cells.groupby(key)["language"].agg(set)
    home = lossy.assign(home=lossy["country"].map(
        {c: lang for lang, cs in local.items() for c in cs})).dropna(subset=["home"])
    homes = home.groupby(key)["home"].agg(set)
    both = pd.concat([answered, homes], axis=1).dropna()
    counts = both.apply(lambda r: len(r["language"]) >= 2
                        and bool(r["language"] & r["home"]), axis=1)
    size = answered.apply(len)
    used = int(size[counts[counts].index].sum())
    complete_cells = int(size[counts[counts].index][size == len(languages)].sum())
    pooled = md[md["scenario"] == POOLED].copy()
    pooled["truth"] = pooled["country"].map(truth)
    pooled = pooled.dropna(subset=["ci_lower", "ci_upper", "truth"])
    pooled["covered"] = (pooled["ci_lower"] <= pooled["truth"]) & (
        pooled["truth"] <= pooled["ci_upper"])
    by_country = pooled.groupby("country").agg(coverage=("covered", "mean"), n=("n", "mean"),
                                               error=("md", "mean"), runs=("md", "size"))
    by_country["error"] = by_country["error"] - by_country.index.map(truth)
    return {
        "languages": len(languages), "runs": runs, "triplets_per_run": triplets,
        "loss_per_language": {lang: LOSS[lang] for lang in languages},
        "answered_cells": len(cells), "asked_cells": runs * triplets * len(languages),
        "share_in_md_now": round(used / len(cells), 4),
        "share_in_md_complete_only": round(complete_cells / len(cells), 4),
        "md_ci_coverage_all": round(float(pooled["covered"].mean()), 4),
        "md_ci_coverage_worst_country": round(float(by_country["coverage"].min()), 4),
        "per_country": {c: {"truth_md": round(truth[c], 3), "coverage": round(v.coverage, 3),
                            "mean_n": round(v.n, 1), "mean_error": round(v.error, 3)}
                        for c, v in by_country.iterrows()},
        "seconds": round(time.perf_counter() - t0, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--triplets", type=int, default=40)
    ap.add_argument("--out", type=Path,
                    default=Path(__file__).parent / "results" / "missing.json")
    args = ap.parse_args()
    cat = load_catalog()
    result = {"bench": "missing answers (bench/missing.py)",
              "generator": "realistic profile of monitor/measure/simulated.py, demo biases, "
                           "losses per language LOSS",
              "six": measure(cat, SIX, args.runs, args.triplets),
              "fourteen": measure(cat, FOURTEEN, args.runs, args.triplets)}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for k in ("six", "fourteen"):
        r = result[k]
        print(f"{r['languages']} languages: {r['share_in_md_now']:.0%} of answered cells in MD "
              f"(complete triplets only: {r['share_in_md_complete_only']:.0%}); MD CI coverage "
              f"{r['md_ci_coverage_all']:.3f} (worst country "
              f"{r['md_ci_coverage_worst_country']:.3f}); {r['seconds']} s")


if __name__ == "__main__":
    main()
