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
Part "reask" (6 languages): whether a lost answer is worth asking again, per call.
The same runs (a) with their losses, (b) with each lost answer asked once more and
answered with the language's own odds (a real model's second answer drawn afresh;
the optimistic case for asking again), (c) with the calls (b) spent given to more
triplets instead. Figures: calls per run and the mean half-width of the pooled MD
intervals per country (the precision a run's calls buy).
Writes bench/results/missing.json.
"""

from __future__ import annotations

import argparse
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
from bench.languages import FOURTEEN, SIX
from monitor.catalog import Catalog, load_catalog
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import PROFILES, _unit  # the generator's own hash
from monitor.vocab import POOLED

DEMO_BIAS = {"CN": 0.9, "KR": 0.6, "JP": 0.4, "FR": 0.3, "DE": 0.0, "US": 0.1, "GB": 0.1,
             "CA": 0.0, "AU": 0.0}  # monitor/data/demo.yaml
#: The share of each language's answers lost (failed, refused or unreadable together).
LOSS = {"en": 0.05, "ja": 0.10, "zh": 0.15, "fr": 0.08, "de": 0.12, "ko": 0.20, "es": 0.07,
        "pt": 0.10, "ar": 0.18, "hi": 0.20, "id": 0.12, "it": 0.06, "tr": 0.15, "ru": 0.14}
SCENARIOS = ["relocation", "travel", "university"]
NORMAL = NormalDist()


def frame(cat: Catalog, languages: list[str], runs: int, triplets: int, seed: int, *,
          lose: bool, reask: bool = False, calls: list[int] | None = None) -> pd.DataFrame:
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
                if calls is not None:
                    calls.append(1)
                if lose and rng.random() < LOSS[lang]:
                    if not reask:
                        continue  # the whole answer: no score of any option
                    if calls is not None:
                        calls.append(1)
                    if rng.random() < LOSS[lang]:
                        continue  # lost again
                call = rng.normal(0, prof["call_sd"])
                for label, opt in zip("ABC", opts, strict=True):
                    q = 4.5 + 3.0 * _unit("quality", t.scenario, opt.id)
                    local = cat.local_language(opt.country) == lang
                    u = min(max(_unit("persist", t.scenario, "|".join(sorted(t.option_ids)),
                                      lang, opt.id), 1e-12), 1 - 1e-12)
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


def reask_part(cat: Catalog, runs: int, triplets: int) -> dict[str, Any]:
    """(a) losses kept, (b) every lost answer asked once more, (c) (b)'s calls as more
    triplets: calls per run and the MD intervals' mean half-width, pooled cells."""
    local = {lang: list(cat.languages.get(lang, ())) for lang in SIX}
    out: dict[str, Any] = {}
    extra = 0.0
    for name, size, reask in (("kept", triplets, False), ("asked_again", triplets, True),
                              ("more_triplets", 0, False)):
        if name == "more_triplets":
            size = triplets + round(extra / len(SIX))
        calls: list[int] = []
        md = md_table(frame(cat, SIX, runs, size, 1, lose=True, reask=reask, calls=calls),
                      SIX, local, by_run=True)
        pooled = md[md["scenario"] == POOLED].dropna(subset=["ci_lower", "ci_upper"])
        half = float(((pooled["ci_upper"] - pooled["ci_lower"]) / 2).mean())
        per_run = len(calls) / runs
        if name == "asked_again":
            extra = per_run - triplets * len(SIX)
        out[name] = {"triplets_per_run": size, "calls_per_run": round(per_run, 1),
                     "md_ci_half_width_mean": round(half, 4)}
        print(f"reask {name:13s}: {size} triplets, {per_run:.1f} calls/run, MD CI "
              f"+-{half:.3f}", flush=True)
    return out


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
              "fourteen": measure(cat, FOURTEEN, args.runs, args.triplets),
              "reask": reask_part(cat, args.runs, args.triplets)}
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for k in ("six", "fourteen"):
        r = result[k]
        print(f"{r['languages']} languages: {r['share_in_md_now']:.0%} of answered cells in MD "
              f"(complete triplets only: {r['share_in_md_complete_only']:.0%}); MD CI coverage "
              f"{r['md_ci_coverage_all']:.3f} (worst country "
              f"{r['md_ci_coverage_worst_country']:.3f}); {r['seconds']} s")


if __name__ == "__main__":
    main()
