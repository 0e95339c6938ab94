"""The JSD shape check (monitor.watch.shape) by simulation: false flags, power, coverage.

    python bench/jsd_shape.py [--reps 60] [--triplets 40] [--baseline-runs 20] [--out PATH]

Per replication (its own sampling seed): the baseline is the first --baseline-runs
runs of the real Sampler's rotation, the cycle the next full rotation cycle
(Sampler.runs_per_cycle), as the daemon pools them after an automatic
baseline. Scores come from the simulated model's distribution (stat_validation.Gen,
demo biases, noise sd 1), each side's pooled excess JSD from the product's engine
(bench/frames.jsd_table, 500 bootstrap replicates as the daemon) and the flag from
monitor.watch.shape.compare at thresholds.jsd_excess_bits. Conditions: nothing
changes (every flag is false); a language-wide leniency of ja +0.5 / +1.0 points in
the cycle only. Coverage: the change's MOVER interval against the change of the
true distributions' JSD (Gen.truth_jsd).

Writes bench/results/jsd_shape.json.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.frames import jsd_table
from bench.stat_validation import DEMO_BIAS, LANGS, OUT, SCENARIOS, Gen
from monitor.catalog import VARIANTS, load_catalog
from monitor.config import Thresholds
from monitor.measure.sampling import Sampler
from monitor.stats import JSDRow
from monitor.watch.shape import compare

NAMES = [*LANGS, "overall"]


def _rows(gen: Gen, runs: list[np.ndarray], first: int, rng: np.random.Generator,
          seed: int) -> list[JSDRow]:
    idx = np.concatenate(runs)
    group = np.concatenate([np.full(len(r), first + k) for k, r in enumerate(runs)])
    scores = gen.draw(gen.mu(idx, gen.bias), rng.standard_normal((len(idx), 6, 3)))
    table = jsd_table(gen.frame(idx, scores, group, by_scenario=True), LANGS, seed=seed,
                      n_boot=500)
    return [JSDRow(**r) for r in table.to_dict("records")]


def condition(cat: Any, shift: dict[str, float], reps: int, n: int, base_runs: int,
              threshold: float) -> dict[str, Any]:
    base_gen, cycle_gen = Gen(cat, DEMO_BIAS), Gen(cat, DEMO_BIAS, 1.0, shift)
    truth = cycle_gen.truth_jsd(cycle_gen.bias) - base_gen.truth_jsd(base_gen.bias)
    flagged = np.zeros((reps, len(NAMES)), bool)
    covered = np.zeros((reps, len(NAMES)), bool)
    inside = np.zeros((reps, len(NAMES)), bool)
    # The daemon's cycle: the sampler's.
    cycle = Sampler(cat, scenarios=SCENARIOS, variants=list(VARIANTS), seed=0,
                    triplets_per_run=n, languages=LANGS).runs_per_cycle
    for r in range(reps):
        rng = np.random.default_rng([r, 77])
        base = _rows(base_gen, base_gen.runs(r, n, base_runs), 0, rng, r)
        now = _rows(cycle_gen, cycle_gen.runs(r, n, cycle, start=base_runs), base_runs, rng, r)
        out = {x.language: x for x in compare(now, base, threshold)}
        for j, name in enumerate(NAMES):
            x = out[name]
            flagged[r, j] = x.changed
            covered[r, j] = x.ci_lower - 1e-12 <= truth[j] <= x.ci_upper + 1e-12
            inside[r, j] = x.ci_lower - 1e-12 <= x.change_bits <= x.ci_upper + 1e-12
    langs = slice(0, len(LANGS))
    return {"language_shift": shift, "reps": reps, "cycle_runs": cycle,
            "true_change_bits": dict(zip(NAMES, np.round(truth, 5).tolist(), strict=True)),
            "flag_share": dict(zip(NAMES, flagged.mean(axis=0).round(4).tolist(), strict=True)),
            "flags_per_cycle": round(float(flagged[:, langs].sum(axis=1).mean()), 4),
            "cycles_with_any_flag": round(float(flagged[:, langs].any(axis=1).mean()), 4),
            "coverage": dict(zip(NAMES, covered.mean(axis=0).round(4).tolist(), strict=True)),
            "change_inside_its_ci": round(float(inside.mean()), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--triplets", type=int, default=40)
    ap.add_argument("--baseline-runs", type=int, default=20)
    ap.add_argument("--out", type=Path, default=OUT / "jsd_shape.json")
    args = ap.parse_args()
    start = time.time()
    cat = load_catalog()
    threshold = Thresholds().jsd_excess_bits
    res = {name: condition(cat, shift, args.reps, args.triplets, args.baseline_runs, threshold)
           for name, shift in (("no change", {}), ("ja +0.5", {"ja": 0.5}),
                               ("ja +1.0", {"ja": 1.0}))}
    doc = {"triplets_per_run": args.triplets, "baseline_runs": args.baseline_runs,
           "threshold_bits": threshold, "conditions": res,
           "seconds": round(time.time() - start, 1), "python": platform.python_version()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(doc, indent=2))


if __name__ == "__main__":
    main()
