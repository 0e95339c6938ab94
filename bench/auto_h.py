"""`thresholds.cusum_h: auto` (issue 14, item 4): the h the daemon sizes against its
baseline, and what the detector does at it, on data the sizing never saw.

    python bench/auto_h.py [--out PATH]

For the demo profile's sd of d at 6 and at 14 languages, the realistic profile's at 6,
and the lossy profile (realistic, 5-20% of each language's answers lost: the cells hold
the usable triplets, issue 32) at 6 and at 14 languages, an automatic 20-run baseline
and a calibration baseline of one rotation cycle, at 40 triplets per run:
- the auto h (monitor.watch.reference.baseline_h: the planner's smallest h of its grid
  meeting thresholds.false_alarms_per_100 = 1 for the CUSUM alone, seed SEED);
- the CUSUM alone at that h and at the default 7: false pages per 100 runs and
  P(page 0.5 within 3 runs) in the worst cell, on 1,600 fresh baselines with other
  seeds than the sizing (monitor.watch.plan.simulate, i.e. drift.advance);
- with the top-up (config defaults): the same, the calls per run, and 200-run
  histories: pages with no shift, false "resolved" under a persistent 0.5 shift
  (simulate_topup, i.e. drift.advance plus topup.suspect/llr/decide/apply), at the
  planner's h, at the daemon's auto h with the top-up on (`auto_h`, floored at the
  default 7) and at 7; a run's top-ups within the run's limit (topup.max_run_share).
Seconds to a minute. Writes bench/results/auto_h.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.languages import FOURTEEN, SIX
from monitor.catalog import load_catalog
from monitor.config import CUSUM_H, Settings, Topup
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import PROFILES as SIM_PROFILES
from monitor.watch.plan import (
    PRE,
    RUNS,
    SEED,
    cell_shares,
    cell_sizes,
    simulate,
    usable_cells,
)
from monitor.watch.plan_topup import simulate_topup
from monitor.watch.reference import auto_h, baseline_h

OUT = Path(__file__).resolve().parent / "results" / "auto_h.json"
#: (profile, sd of d as bench/topup.py, languages); lossy is realistic losing answers.
PROFILES = [("demo", 0.95, SIX), ("demo", 0.95, FOURTEEN), ("realistic", 1.34, SIX),
            ("lossy", 1.34, SIX), ("lossy", 1.34, FOURTEEN)]
REPS = 1600
FRESH = SEED + 1000  # other seeds than the planner's, which chose h


def _alone(n: np.ndarray, sd: float, h: float, base_runs: float, mrf: int) -> dict[str, float]:
    kw: dict[str, Any] = {"hs": np.array([h]), "base_runs": base_runs, "drift_points": 0.5,
                          "min_runs_firing": mrf, "reps": REPS}
    null = simulate(n, sd, shift=0.0, seed=FRESH, **kw)[0]
    det = simulate(n, sd, shift=0.5, runs=PRE + 3, shift_at=PRE, seed=FRESH + 1, **kw)[0]
    clean = ~det[:, :PRE].any(axis=1)
    p = ((det[:, PRE:].any(axis=1) & clean).sum(axis=0) / np.maximum(1, clean.sum(axis=0)))
    return {"false_alarms_per_100": round(float(null.sum() / REPS / RUNS * 100), 3),
            "p_detect_worst": round(float(p.min()), 3)}


def _topup(n: np.ndarray, sd: float, h: float, base: np.ndarray, tp: Topup, mrf: int,
           langs: int) -> dict[str, float]:
    # The run's limit on its top-ups (topup.max_run_share of the run's 40 triplets), as
    # the daemon applies it; the figures before issue 32 had none.
    kw: dict[str, Any] = {"h": h, "tp": tp, "base_triplets": base, "drift_points": 0.5,
                          "min_runs_firing": mrf, "reps": REPS, "run_triplets": 40}
    null = simulate_topup(n, sd, shift=0.0, runs=200, seed=FRESH + 2, **kw)
    # A shift here moves every cell at once; `alone`: each as the run's only suspect
    # (what one country's shift is), else they would share one run's limit.
    shifted = simulate_topup(n, sd, shift=0.5, runs=200, seed=FRESH + 3, alone=True, **kw)
    det = simulate_topup(n, sd, shift=0.5, runs=PRE + 3, shift_at=PRE, seed=FRESH + 4,
                         alone=True, **kw)
    clean = ~det.fired[:, :PRE].any(axis=1)
    p = (det.fired[:, PRE:].any(axis=1) & clean).sum(axis=0) / np.maximum(1, clean.sum(axis=0))
    resolved = ((shifted.state[:, 1:] == 0) & (shifted.state[:, :-1] == 2)).sum(axis=(1, 2))
    pages = null.fired.sum(axis=(1, 2))
    return {"false_alarms_per_100": round(float(pages.mean() / 200 * 100), 4),
            "p_detect_worst": round(float(p.min()), 3),
            "calls_per_run": round(float((40 + null.asked.sum(axis=2)).mean()) * langs, 1),
            "pages_per_200_runs": round(float(pages.mean()), 4),
            "false_resolved_per_200_runs": round(float(resolved.mean()), 4)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    s = Settings(endpoints=[{"name": "x", "model": "simulated/demo"}])
    cat = load_catalog(s.catalog.path, s.catalog.extra_paths)
    mrf, t, tp = s.alerts.min_runs_firing, s.thresholds, s.topup
    rows = []
    for profile, sd, langs in PROFILES:
        cells = cell_shares(cat, s.sampling.scenarios, langs)
        if profile == "lossy":  # a country's cell holds what its language's answers read
            lost = SIM_PROFILES["lossy"]
            read = {c: 1 - lost["refusal_rate"][lang] - lost["garble_rate"][lang]
                    for lang in langs for c in cat.languages.get(lang, ())}
            cells = usable_cells(cells, read)
        cycle = Sampler(cat, scenarios=s.sampling.scenarios,
                        variants=list(s.sampling.variants), seed=0, triplets_per_run=40,
                        languages=langs).population
        n = np.array(cell_sizes(40, cells))
        for base_name, size in (("automatic", None), ("calibration", cycle)):
            d = baseline_h(cells, sd, 40, size, fa_target=t.false_alarms_per_100,
                           drift_points=0.5, min_runs_firing=mrf)
            base_runs = d.baseline_triplets / 40
            row: dict[str, Any] = {"profile": profile, "sd": sd, "languages": len(langs),
                                   "baseline": base_name,
                                   "baseline_triplets": d.baseline_triplets, "auto_h": d.h,
                                   "planner_false_alarms_per_100": d.false_alarms_per_100}
            # The daemon's own rule at these settings (top-up on: floored at 7).
            up = auto_h(s, cells, sd, size)
            row["auto_h_topup"] = up.h
            for label, h in (("auto", d.h), ("default", CUSUM_H)):
                row[f"alone_{label}"] = _alone(n, sd, h, base_runs, mrf)
            for label, h in (("planner_h", d.h), ("auto", up.h), ("default", CUSUM_H)):
                row[f"topup_{label}"] = _topup(n, sd, h, n * base_runs, tp, mrf, len(langs))
            rows.append(row)
            print(json.dumps(row), flush=True)
    args.out.write_text(json.dumps({"runs_per_figure": REPS, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
