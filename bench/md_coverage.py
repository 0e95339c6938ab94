"""MD CI coverage with the simulated endpoint's known injected bias (not a test).

    python bench/md_coverage.py [--runs 100] [--bias 0.9] [--triplets 40]

Each seeded run samples triplets, asks the simulated model in six languages
(no HTTP), parses and computes MD per country; the truth is b - b/6 for the
countries with an injected bias b (only their local language is biased).
Prints coverage of the 95% t-interval, the mean estimate and its bias.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--bias", type=float, default=0.9)
    ap.add_argument("--triplets", type=int, default=40)
    args = ap.parse_args()

    from monitor.catalog import load_catalog
    from monitor.stats import md_table
    from tests.test_stats import LANGS, simulate_run

    catalog = load_catalog()
    truth = args.bias - args.bias / len(LANGS)
    local = {lang: list(c) for lang, c in catalog.languages.items()}
    hits = total = 0
    estimates = []
    for seed in range(args.runs):
        md = md_table(simulate_run(catalog, args.bias, seed, args.triplets), LANGS, local)
        for row in md[md["scenario"] == "all"].to_dict("records"):
            if math.isnan(row["ci_lower"]):
                continue
            total += 1
            estimates.append(row["md"])
            hits += row["ci_lower"] <= truth <= row["ci_upper"]
    mean = sum(estimates) / len(estimates)
    print(json.dumps({"runs": args.runs, "triplets_per_run": args.triplets,
                      "bias_points": args.bias, "true_md": round(truth, 4),
                      "cells": total, "ci_coverage": round(hits / total, 4),
                      "mean_md": round(mean, 4), "mean_bias": round(mean - truth, 4)},
                     indent=2))


if __name__ == "__main__":
    main()
