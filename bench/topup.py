"""The detector with its top-up confirmation: false pages, detection within 3 runs, calls.

    python bench/topup.py [--quick] [--e2e-reps 40] [--e2e-only CASES] [--parts PARTS] [--out PATH]
    python bench/topup.py --parts none --e2e-only lossy,lossy_14 --e2e-null-runs 200
    python bench/topup.py --verdict-reps 40

Part 1 (normal model; seconds): monitor.watch.plan_topup.assess_topup, i.e. the daemon's
own CUSUM (monitor.watch.drift.advance) and top-up (monitor.watch.topup: suspect,
llr, decide, apply) on normal data per pooled country cell, 400 baselines with
their own estimation error x 100 runs, for the demo profile's sd of d (0.95) and the
realistic one's (1.34), an automatic 20-run baseline and a calibration baseline of
one rotation cycle (1,919 triplets at six languages, `monitor baseline calibrate`'s
default), over run sizes.
Part 2 (normal model): 200-run histories: pages with no shift (a stable accepted
bias is no shift), OK -> PENDING transitions, and FIRING -> OK ("resolved") under a
persistent shift of 0.5 points.
Part 2b (a minute): what equal-share sampling would buy: the effective share of each
cell under the weights that keep the MD the paper's estimand (and under every
weighting part-way to them), the detector on those shares, and the most equal
shares could buy with no weighting loss at all (35 and 40 triplets per run).
Part 2c (window; minutes): topup.mean_run_share unset (the default), 1.0, 0.5 and
0.25: the calls per run it saves and the detection it costs (demo at 40 and 60
triplets, realistic at 120, calibration baseline).
Part 3 (the real path; minutes): the daemon's job itself (ScheduledRun.run: Sampler,
prompts, the simulated model of monitor/measure/simulated.py, the parser, DuckDB,
the statistics engine, evaluate, the top-up asking fresh triplets) for the demo
and realistic profiles: a calibration-sized baseline (one rotation cycle of
40-triplet runs), then (a) 100 runs with nothing changed: pages, calls per run;
(b) --e2e-reps copies of that database, each given 3 runs in which CN's bias grows
by 0.6 points (MD +0.5), each copy with a sampling seed of its own (other triplets):
P(CN paged within 3 runs) and the calls those runs took. Cases (CASES): the demo and
realistic profiles, and the demo with 60% persistent noise at 25 and 30 triplets
per run, with and without the baseline as covariate (baseline.covariate); the lossy
profile (answers refused or unreadable, 5-20% per language) at 6 and at 14
languages with a stable accepted bias (the demo's, monitor/data/demo.yaml) under
which CN's grows. For every case each run's calls (its own and its top-ups') over
its planned calls, the mean and the largest, and FIRING in any cell (pooled or per
scenario) while nothing changes.
The verdict (--verdict-reps N, alone): on the lossy profile, a baseline with no bias,
then N replications of 3 runs for each of three cases - CN's local-language bias
grows (pure bias), zh's language-wide leniency grows (pure leniency), half of each
(mixed), each moving CN's MD by +0.5 - and the verdict of CN's page (bias, leniency,
cannot tell) as its messages word it: how often each is said, per case.

Writes bench/results/topup.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.languages import FOURTEEN, SIX
from monitor.alerts.outbox import build_sinks
from monitor.catalog import Catalog, load_catalog
from monitor.config import CUSUM_H, Settings, Topup, load_settings
from monitor.daemon.scheduled import ScheduledRun
from monitor.measure.calls import CallResult
from monitor.measure.sampling import Sampler
from monitor.measure.simulated import PROFILES as SIM_PROFILES
from monitor.measure.simulated import SimParams, answer
from monitor.store import Store
from monitor.watch.plan import (
    RUNS,
    cell_shares,
    cell_sizes,
)
from monitor.watch.plan_topup import assess_topup, simulate_topup
from monitor.watch.transition import Transition, did_verdict

OUT = Path(__file__).resolve().parent / "results" / "topup.json"
PROFILES = {"demo": 0.95, "realistic": 1.34}  # sd of d (docs/benchmarks.md, issue 14)
SIZES = tuple(range(30, 151, 10))  # a fine grid (issue 14, item 8)
CN_SHIFT = 0.6  # bias points: MD + 5/6 * 0.6 = +0.5
#: A stable accepted bias: the demo's (monitor/data/demo.yaml), in the baseline and
#: every run after it; the shift is CN's growing by CN_SHIFT on top.
DEMO_BIAS = {"CN": 0.9, "KR": 0.6, "JP": 0.4, "FR": 0.3, "DE": 0.0, "US": 0.1, "GB": 0.1,
             "CA": 0.0, "AU": 0.0}
# Baselines per normal-model figure: 4x `monitor plan`'s 400, since the worst of 9
# cells' P3 moved by +-0.02 between seeds at 400 (the minimum of noisy estimates).
NORMAL_REPS = 1600
#: The h the default `thresholds.cusum_h: auto` gives at these settings with the top-up
#: on: its floor (the planner's h for 20-run and calibration baselines is lower;
#: bench/auto_h.py). The real-path cases run the daemon, which sizes it itself.
H = CUSUM_H


def _defaults() -> tuple[Settings, Topup]:
    s = Settings(endpoints=[{"name": "x", "model": "simulated/demo"}])
    return s, s.topup


def normal_part(cat: Catalog, quick: bool) -> dict[str, Any]:
    s, tp = _defaults()
    cells = cell_shares(cat, s.sampling.scenarios, s.sampling.languages)
    sampler = Sampler(cat, scenarios=s.sampling.scenarios, variants=list(s.sampling.variants),
                      seed=0, triplets_per_run=40, languages=s.sampling.languages)
    cycle = sampler.population
    out: dict[str, Any] = {"calibration_triplets": cycle, "rows": []}
    for profile, sd in PROFILES.items():
        for base_name, base in (("automatic", None), ("calibration", cycle)):
            for n in (40,) if quick else SIZES:
                r = assess_topup(n, cells, sd, 0.5, 3, 0.5, s.alerts.min_runs_firing,
                                   None, tp, H, base, reps=NORMAL_REPS)
                row = {"profile": profile, "sd": sd, "baseline": base_name, **r}
                out["rows"].append(row)
                print(f"{profile:9s} {base_name:11s} n={n:3d}: FP {r['false_alarms_per_100']:.2f}"
                      f" (p90 {r['false_alarms_per_100_spread']['p90']:g}), P3 worst "
                      f"{r['p_detect']:.3f} ({r['worst_cell']}) mean {r['p_detect_mean']:.3f}, "
                      f"calls/run {r['triplets_asked_mean'] * 6:.0f} (shifted "
                      f"{r['triplets_asked_shifted'] * 6:.0f}, max {r['triplets_asked_max'] * 6})",
                      flush=True)
    return out


#: topup.mean_run_share values the window part tries (None: unset, the default).
WINDOW_SHARES = (None, 1.0, 0.5, 0.25)
WINDOW_CASES = (("demo", 40), ("demo", 60), ("realistic", 120))


def window_part(cat: Catalog) -> dict[str, Any]:
    """topup.mean_run_share: the calls per run it saves and the detection it costs
    (normal model, calibration baseline, the cases `monitor plan` picks or the default)."""
    s, tp = _defaults()
    cells = cell_shares(cat, s.sampling.scenarios, s.sampling.languages)
    cycle = Sampler(cat, scenarios=s.sampling.scenarios, variants=list(s.sampling.variants),
                    seed=0, triplets_per_run=40, languages=s.sampling.languages).population
    rows = []
    for share in WINDOW_SHARES:
        t = tp.model_copy(update={"mean_run_share": share})
        for profile, n in WINDOW_CASES:
            r = assess_topup(n, cells, PROFILES[profile], 0.5, 3, 0.5,
                             s.alerts.min_runs_firing, None, t, H, cycle, reps=NORMAL_REPS)
            rows.append({"mean_run_share": share, "profile": profile, **r})
            print(f"mean_run_share {share!s:5s} {profile:9s} n={n:3d}: FP "
                  f"{r['false_alarms_per_100']:.3f}, P3 worst {r['p_detect']:.3f} "
                  f"({r['worst_cell']}), calls/run {r['triplets_asked_mean'] * 6:.0f} = "
                  f"{r['triplets_asked_mean'] / n:.2f}x the plan (shifted "
                  f"{r['triplets_asked_shifted'] * 6:.0f}, max {r['triplets_asked_max'] * 6})",
                  flush=True)
    return {"calibration_triplets": cycle, "rows": rows}


def long_part(cat: Catalog) -> dict[str, Any]:
    s, tp = _defaults()
    cells = cell_shares(cat, s.sampling.scenarios, s.sampling.languages)
    out = {}
    for profile, sd in PROFILES.items():
        n = np.array(cell_sizes(40, cells))
        base = n * 1919 / 40  # a calibration baseline of one rotation cycle
        kw: dict[str, Any] = {"h": H, "tp": tp, "base_triplets": base,
                              "drift_points": 0.5, "min_runs_firing": s.alerts.min_runs_firing,
                              "runs": 200, "reps": NORMAL_REPS, "run_triplets": 40}
        null = simulate_topup(n, sd, shift=0.0, **kw)
        pages = null.fired.sum(axis=(1, 2))
        pend = ((null.state[:, 1:] == 1) & (null.state[:, :-1] == 0)).sum(axis=(1, 2))
        shifted = simulate_topup(n, sd, shift=0.5, **kw)
        resolved = ((shifted.state[:, 1:] == 0) & (shifted.state[:, :-1] == 2)).sum(axis=(1, 2))
        out[profile] = {
            "pages_per_200_runs_mean": float(pages.mean()),
            "share_of_baselines_with_0_pages_in_200_runs": float((pages == 0).mean()),
            "ok_to_pending_per_200_runs_mean": float(pend.mean()),
            "resolved_under_persistent_shift_per_200_runs_mean": float(resolved.mean()),
            "share_with_0_false_resolved": float((resolved == 0).mean())}
        print(profile, out[profile], flush=True)
    return out


def _effective(p: np.ndarray, holds: np.ndarray) -> list[tuple[float, float]]:
    """Per cell: (its share of a run under sampling probabilities p, the Kish efficiency of
    the inverse-probability weights that keep its MD the mean over its triplets)."""
    out = []
    for c in range(holds.shape[1]):
        pc = p[holds[:, c] == 1]
        q, ipw = pc / pc.sum(), 1 / pc
        out.append((float(pc.sum()), float((q * ipw).sum() ** 2 / (q * ipw ** 2).sum())))
    return out


def balance_part(cat: Catalog) -> dict[str, Any]:
    """What equal-share ("balanced") sampling would buy (issue 14, item 2), measured
    before building it: sampling probabilities that give every pooled country cell 1/3
    of a run (iterative proportional fitting from the sampler's uniform rotation over
    its population), the inverse-probability weights that keep each cell's MD the
    paper's estimand (the mean over the cell's triplets), their Kish efficiency, and
    so each cell's effective share; then the detector with its top-up on those
    effective shares (assess_topup, demo and realistic sd, calibration baseline)."""
    s, tp = _defaults()
    sampler = Sampler(cat, scenarios=s.sampling.scenarios, variants=list(s.sampling.variants),
                      seed=0, triplets_per_run=40, languages=s.sampling.languages)
    uniform = cell_shares(cat, s.sampling.scenarios, s.sampling.languages)
    names = uniform.names
    trips = [(scen, t) for (scen, _), members in sampler.strata.items() for t in members]
    holds = np.zeros((len(trips), len(names)))
    for i, (scen, t) in enumerate(trips):
        for o in t.option_ids:
            holds[i, names.index(cat.option(scen, o).country)] = 1.0
    w = np.ones(len(trips))
    for _ in range(2000):  # IPF: each triplet's weight moves by its countries' factors
        share = holds.T @ w / w.sum()
        w *= np.exp(holds @ np.log((1 / 3) / share) / 3)
    cells: dict[str, Any] = {}
    effective = []
    for c, (name, (share_c, kish)) in enumerate(zip(names, _effective(w / w.sum(), holds),
                                                    strict=True)):
        effective.append(share_c * kish)
        cells[name] = {"uniform_share": round(uniform.shares[c], 4),
                       "balanced_share": round(share_c, 4), "kish": round(kish, 4),
                       "effective_share": round(effective[-1], 4),
                       "gain": round(effective[-1] / uniform.shares[c], 3)}
    out: dict[str, Any] = {"cells": cells, "weight_range": [round(float(w.min() / w.mean()), 3),
                                                            round(float(w.max() / w.mean()), 3)]}
    worst = min(uniform.shares)
    out["worst_cell_gain"] = round(min(effective) / worst, 3)
    print(f"balanced sampling: worst cell's effective share {min(effective):.3f} vs "
          f"{worst:.3f} uniform ({out['worst_cell_gain']}x)", flush=True)
    # Part-way: weights w^t between uniform (t = 0) and equal shares (t = 1). The best
    # any weighting that keeps the estimand can do for the worst cell is the largest
    # smallest effective share on this path.
    path = []
    for t in np.linspace(0.0, 1.0, 11):
        eff_t = [share_c * kish for share_c, kish in _effective(w ** t / (w ** t).sum(), holds)]
        path.append({"t": round(float(t), 1), "worst_effective_share": round(min(eff_t), 4),
                     "worst_cell": names[int(np.argmin(eff_t))]})
    out["weight_path"] = path
    best = max(path, key=lambda x: x["worst_effective_share"])
    print(f"  best partial weighting: t = {best['t']}, worst effective share "
          f"{best['worst_effective_share']:.4f} ({best['worst_cell']})", flush=True)
    eff = uniform._replace(shares=effective)
    # The most equal shares could ever buy: every cell 1/3 of a run with no weighting
    # loss, as a detector on the design's own (unweighted) mean against a baseline
    # drawn the same way would see it (that mean is no longer the reported MD).
    equal = uniform._replace(shares=[1 / 3] * len(names))
    for profile, sd in PROFILES.items():
        for label, c, sizes in (("uniform", uniform, (35, 40)), ("balanced", eff, (40,)),
                                ("equal_no_loss", equal, (35, 40))):
            for n in sizes:
                r = assess_topup(n, c, sd, 0.5, 3, 0.5, s.alerts.min_runs_firing, None,
                                   tp, H, sampler.population, reps=NORMAL_REPS)
                out[f"{profile}_{label}" + ("" if n == 40 else f"_{n}")] = r
                print(f"  {profile:9s} {label:13s} n={n}: FP {r['false_alarms_per_100']:.3f}, "
                      f"P3 worst {r['p_detect']:.3f} ({r['worst_cell']}), calls/run "
                      f"{r['triplets_asked_mean'] * 6:.0f}", flush=True)
    return out


def h_part(cat: Catalog) -> dict[str, Any]:
    """How much the CUSUM's own level h (thresholds.cusum_h) matters once the top-up
    confirms: false pages and P3 at 40 triplets per run over a grid of h, for both
    profiles and both kinds of baseline (issue 14, item 4: h from the baseline)."""
    s, tp = _defaults()
    cells = cell_shares(cat, s.sampling.scenarios, s.sampling.languages)
    sampler = Sampler(cat, scenarios=s.sampling.scenarios, variants=list(s.sampling.variants),
                      seed=0, triplets_per_run=40, languages=s.sampling.languages)
    out: dict[str, Any] = {}
    for profile, sd in PROFILES.items():
        for base_name, base in (("automatic", None), ("calibration", sampler.population)):
            rows = []
            for h in (4.0, 5.0, 6.0, 7.0, 8.0, 10.0, 14.0):
                r = assess_topup(40, cells, sd, 0.5, 3, 0.5, s.alerts.min_runs_firing,
                                   None, tp, h, base, reps=NORMAL_REPS)
                rows.append({"h": h, "false_alarms_per_100": r["false_alarms_per_100"],
                             "p_detect": r["p_detect"],
                             "triplets_asked_mean": r["triplets_asked_mean"]})
            out[f"{profile}_{base_name}"] = rows
            print(f"h grid {profile:9s} {base_name:11s}: " + ", ".join(
                f"h={x['h']:g} FP {x['false_alarms_per_100']:.3f} P3 {x['p_detect']:.3f}"
                for x in rows), flush=True)
    return out


class _Client:
    """The simulated model answered in-process (no HTTP), seeded per run."""

    def __init__(self, params: dict[str, Any], profile: str, root: Path) -> None:
        self.params = SimParams.from_params({**params, "catalog_path": str(root)}, profile)

    async def complete(self, messages: list[dict[str, str]], **_: Any) -> CallResult:
        reply = answer(messages, self.params)
        return CallResult(text=reply.text, error=None, latency_s=0.001,
                          input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                          cost_usd=0.0001, model_id="simulated/x", fingerprint="fp-sim", attempts=1)


def _daemon(cfg: Path, cat: Catalog) -> tuple[ScheduledRun, Store]:
    settings, _ = load_settings(cfg)
    store = Store(settings.storage.path)
    return ScheduledRun(settings, cat, store, build_sinks(settings.alerts)), store


async def _run(daemon: ScheduledRun, cat: Catalog, profile: str, bias: dict[str, float],
               seed: int, extra: dict[str, Any] | None = None) -> None:
    daemon.client_factory = lambda ep: _Client(  # type: ignore[assignment]
        {"bias_points": bias, "seed": seed, **(extra or {})}, profile, cat.root)
    await daemon.run("sim")


def _calls(store: Store, since: int) -> int:
    rows = store._rows("SELECT count(*) FROM probe_calls", [])
    return int(rows[0][0]) - since


def _firing(store: Store) -> int:
    """FIRING entered by any cell, pooled or per scenario."""
    return int(store._rows("SELECT count(*) FROM alert_events WHERE to_state = 'firing'",
                           [])[0][0])


def _per_run(store: Store, since: Any = None) -> list[float]:
    """Each complete run's calls, its own and its top-ups', over its planned calls."""
    rows = store._rows(
        "SELECT r.planned_calls, (SELECT count(*) FROM probe_calls c WHERE c.run_id = r.run_id "
        "OR c.run_id LIKE r.run_id || '-topup-%') FROM runs r WHERE r.status = 'complete' "
        "AND (? IS NULL OR r.started_at > ?)", [since, since])
    return [int(n) / int(p) for p, n in rows if p]


def _latest(store: Store) -> Any:
    return store._rows("SELECT max(started_at) FROM runs", [])[0][0]


def _round(x: Any, digits: int = 3) -> float | None:
    return None if x is None else round(float(x), digits)


def _wilson(k: int, n: int) -> list[float]:
    """The 95% Wilson interval of k in n."""
    if n == 0:
        return [0.0, 1.0]
    z, p = 1.959964, k / n
    mid, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return [round(max(0.0, (mid - half) / (1 + z * z / n)), 4),
            round(min(1.0, (mid + half) / (1 + z * z / n)), 4)]


def _pages(store: Store, country: str | None = None) -> int:
    q = ("SELECT count(*) FROM alert_events WHERE scenario = 'all' AND to_state = 'firing'"
         + (" AND country = ?" if country else ""))
    return int(store._rows(q, [country] if country else [])[0][0])


#: The real path's cases: (name, profile, the model's params, triplets per run, the
#: baseline as covariate). "persistent" is the demo with 60% of its noise persistent
#: per (triplet, language, option): the issue's stretch, with and without CUPED.
#: ACCEPTED: the cases run with the demo's accepted bias, and their languages.
CASES: list[tuple[str, str, dict[str, Any], int, bool]] = [
    ("demo", "demo", {}, 40, True),
    ("realistic", "realistic", {}, 40, True),
    ("realistic_no_covariate", "realistic", {}, 40, False),
    ("realistic_120", "realistic", {}, 120, True),  # the size the normal model finds
    ("persistent_25", "demo", {"persistence": 0.6}, 25, True),
    ("persistent_25_no_covariate", "demo", {"persistence": 0.6}, 25, False),
    ("persistent_30", "demo", {"persistence": 0.6}, 30, True),
    ("lossy", "lossy", {}, 40, True),
    ("lossy_120", "lossy", {}, 120, True),  # the size the planner finds for its sd
    ("lossy_14", "lossy", {}, 40, True),
    ("lossy_14_350", "lossy", {}, 350, True),  # the planner's size at 14 languages, sd 1.3
]
ACCEPTED = {"lossy": SIX, "lossy_120": SIX, "lossy_14": FOURTEEN, "lossy_14_350": FOURTEEN}
#: Baselines of fewer runs than a rotation cycle: at 14 languages a cycle is 417 runs
#: of 40 triplets (16,659 triplets, 233,000 calls); lossy_14 takes the daemon's
#: automatic baseline instead, 20 runs (baseline.auto_min_triplets' default, 800).
BASELINE_RUNS = {"lossy_14": 20, "lossy_14_350": 20}


def e2e_part(cat: Catalog, reps: int, null_runs: int, only: list[str] | None = None,
             start: Path | None = None, country: str = "CN") -> dict[str, Any]:
    """The real-path cases; `start`: a database whose baseline is set (a case's
    frozen.duckdb) to begin from instead of asking the baseline's runs again; `country`:
    whose bias grows by CN_SHIFT in the shifted runs (another than CN: key NAME@COUNTRY)."""
    out = {}
    for name, profile, extra, size, cov in CASES:
        if only and name not in only:
            continue
        work = Path(tempfile.mkdtemp(prefix=f"topup-{name}-"))
        db = work / "base.duckdb"
        langs = ACCEPTED.get(name, SIX)
        sampler = Sampler(cat, scenarios=["university", "relocation", "travel"],
                          variants=["plain", "cot", "female", "male"], seed=0,
                          triplets_per_run=size, languages=langs)
        cycle = BASELINE_RUNS.get(name, sampler.runs_per_cycle)
        cfg = work / "monitor.yaml"
        cfg.write_text(json.dumps({
            "storage": {"path": str(db)},
            "endpoints": [{"name": "sim", "model": f"simulated/{profile}",
                           "max_concurrency": 64, "rpm": 100000}],
            "sampling": {"triplets_per_run": size, "languages": langs},
            "baseline": {"auto_min_triplets": size * cycle, "covariate": cov}}),
            encoding="utf-8")
        t0 = time.time()
        if start is not None:
            shutil.copy(start, db)
        daemon, store = _daemon(cfg, cat)
        bias = dict(DEMO_BIAS) if name in ACCEPTED else {"CN": 0.0}
        shifted = {**bias, country: bias.get(country, 0.0) + CN_SHIFT}
        for i in range(0 if start else cycle + 1):  # the baseline, set by the run after it
            asyncio.run(_run(daemon, cat, profile, bias, 1000 + i, extra))
        assert store.baseline("sim") is not None
        store_base_calls = _calls(store, 0)
        shutil.copy(db, work / "frozen.duckdb")
        frozen_at = _latest(store)
        print(f"{name}: baseline of {cycle} runs in {time.time() - t0:.0f} s", flush=True)
        # (a) nothing changes
        before, since = _calls(store, 0), _latest(store)
        for i in range(null_runs):
            asyncio.run(_run(daemon, cat, profile, bias, 5000 + i, extra))
        null_calls = _calls(store, before) / max(null_runs, 1)
        null_pages = _pages(store)
        null_firing = _firing(store)
        null_ratio = _per_run(store, since)
        pers = store._rows("SELECT avg(value), avg(CAST(json_extract(extra, '$.used') AS "
                           "BOOLEAN)::INT) FROM run_stats WHERE kind = 'persistence'", [])[0]
        # (b) CN's bias grows; each replication from the frozen baseline
        hits, calls, ratio = 0, [], []
        for r in range(reps):
            rep_db = work / f"rep{r}.duckdb"
            shutil.copy(work / "frozen.duckdb", rep_db)
            rcfg = work / f"rep{r}.yaml"
            doc = json.loads(cfg.read_text(encoding="utf-8"))
            doc["storage"]["path"] = str(rep_db)
            # A sampling seed of its own: each replication's 3 runs ask other triplets (a
            # fresh rotation; the baseline holds them all). With one seed every
            # replication asked the same 3 sets, whose persistent effects then decided
            # the outcome for all of them alike.
            doc["sampling"]["seed"] = 7 + r
            rcfg.write_text(json.dumps(doc), encoding="utf-8")
            d2, s2 = _daemon(rcfg, cat)
            c0 = _calls(s2, 0)
            for k in range(3):
                asyncio.run(_run(d2, cat, profile, shifted, 90_000 + 10 * r + k, extra))
                if _pages(s2, country):
                    break
            hits += _pages(s2, country) > 0
            calls.append(_calls(s2, c0) / (k + 1))
            ratio += _per_run(s2, frozen_at)
            rep_db.unlink()
        key = name if country == "CN" else f"{name}@{country}"
        out[key] = {
            "profile": profile, "params": extra, "triplets_per_run": size, "covariate": cov,
            "languages": len(langs), "accepted_bias": bias if name in ACCEPTED else None,
            "planned_calls_per_run": size * len(langs),
            "baseline_runs": cycle, "baseline_calls": store_base_calls,
            "null_runs": null_runs, "null_pages_all_cells": null_pages,
            "null_pages_per_100_runs": 100 * null_pages / max(null_runs, 1),
            "null_firing_any_cell": null_firing,
            # the share of null runs with a page: 0 of N has the interval [0, ~3.7/N]
            "null_page_runs_share_ci95": _wilson(null_pages, null_runs),
            "null_calls_over_plan_mean": _round(np.mean(null_ratio) if null_ratio else None),
            "null_calls_over_plan_max": _round(np.max(null_ratio) if null_ratio else None),
            "null_calls_per_run": round(null_calls, 1),
            "persistence_mean": None if pers[0] is None else round(float(pers[0]), 3),
            "covariate_used_share": None if pers[1] is None else round(float(pers[1]), 3),
            "shift_reps": reps, "shifted_country": country,
            f"{country.lower()}_paged_within_3_runs": hits / max(reps, 1),
            f"{country.lower()}_paged_within_3_runs_ci95": _wilson(hits, reps),
            "shifted_calls_over_plan_mean": _round(np.mean(ratio) if ratio else None),
            "shifted_calls_over_plan_max": _round(np.max(ratio) if ratio else None),
            "calls_per_run_while_shifted": _round(np.mean(calls) if calls else None, 1),
            "seconds": round(time.time() - t0, 1)}
        print(key, out[key], flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return out


#: The verdict's cases (issue 32 item 5): what grows in CN after the baseline, in the
#: simulated model's points - its local-language bias (bias_points), zh's language-wide
#: leniency (language_shift: every option alike), or half of each. Each moves CN's MD
#: by +0.5 (5/6 of 0.6); its DiD by +0.5, 0 and +0.25.
VERDICT_CASES: dict[str, tuple[float, float]] = {
    "pure_bias": (0.6, 0.0), "pure_leniency": (0.0, 0.6), "mixed": (0.3, 0.3)}
#: The wrong word per case: "cannot tell" is never wrong; in the mixed case the bias is
#: there, so "bias" is right and "leniency" (the language's alone) wrong.
WRONG = {"pure_bias": "leniency", "pure_leniency": "bias", "mixed": "leniency"}


def _cn_pages(store: Store) -> list[dict[str, Any]]:
    """Each page of CN's pooled cell as queued for the sinks: its MD, DiD (95% CI, n, the
    MD of its triplets) and the verdict (bias / leniency / cannot tell) its messages
    carry (did_verdict)."""
    out = []
    for (payload,) in store._rows("SELECT payload FROM outbox ORDER BY id", []):
        t = json.loads(payload)
        if (t.get("kind") == "transition" and t["scenario"] == "all" and t["country"] == "CN"
                and t["to_state"] == "firing" and t["condition"] == "drift"):
            tr = Transition.from_dict(t)
            out.append({"md": tr.md, "did": tr.did, "did_ci": list(tr.did_ci),
                        "did_n": tr.did_units, "did_md": tr.did_md_or_md,
                        "verdict": did_verdict(tr)})
    return out


def verdict_part(cat: Catalog, reps: int, md: float = 0.5, start: Path | None = None,
                 profile: str = "lossy") -> dict[str, Any]:
    """The page's verdict on three injected cases (the real path, as e2e_part): a
    baseline of one rotation cycle with no bias, then per case `reps` copies of it,
    each given up to 3 runs with the case's shift (a sampling seed of its own), and
    the verdict of CN's page where one came. `md`: the cases' shift of CN's MD (their
    points scaled from 0.5); `start`: a database with the baseline set to begin from."""
    size, t0 = 40, time.time()
    work = Path(tempfile.mkdtemp(prefix="topup-verdict-"))
    db = work / "base.duckdb"
    cycle = Sampler(cat, scenarios=["university", "relocation", "travel"],
                    variants=["plain", "cot", "female", "male"], seed=0,
                    triplets_per_run=size, languages=SIX).runs_per_cycle
    doc: dict[str, Any] = {
        "storage": {"path": str(db)},
        "endpoints": [{"name": "sim", "model": f"simulated/{profile}", "max_concurrency": 64,
                       "rpm": 100000}],
        "sampling": {"triplets_per_run": size, "languages": SIX},
        "baseline": {"auto_min_triplets": size * cycle, "covariate": True}}
    cfg = work / "monitor.yaml"
    cfg.write_text(json.dumps(doc), encoding="utf-8")
    if start is not None:
        shutil.copy(start, db)
    daemon, store = _daemon(cfg, cat)
    leniency = dict(SIM_PROFILES.get(profile, {}).get("language_shift") or {})
    for i in range(0 if start else cycle + 1):
        asyncio.run(_run(daemon, cat, profile, {"CN": 0.0}, 1000 + i))
    assert store.baseline("sim") is not None
    print(f"verdict: baseline of {cycle} runs in {time.time() - t0:.0f} s", flush=True)
    out: dict[str, Any] = {"profile": profile, "triplets_per_run": size, "languages": len(SIX),
                           "baseline_runs": cycle, "reps": reps, "md_shift": md,
                           "cases": {}}
    for case, (bias0, lenient0) in VERDICT_CASES.items():
        bias, lenient = bias0 * md / 0.5, lenient0 * md / 0.5
        said: list[str] = []
        detail: list[dict[str, Any]] = []
        for r in range(reps):
            rep_db = work / f"rep{r}.duckdb"
            shutil.copy(db, rep_db)
            rcfg = work / f"rep{r}.yaml"
            rcfg.write_text(json.dumps({**doc, "storage": {"path": str(rep_db)},
                                        "sampling": {**doc["sampling"], "seed": 7 + r}}),
                            encoding="utf-8")
            d2, s2 = _daemon(rcfg, cat)
            extra = {"language_shift": {**leniency, "zh": leniency.get("zh", 0.0) + lenient}}
            for k in range(3):
                asyncio.run(_run(d2, cat, profile, {"CN": bias}, 70_000 + 10 * r + k, extra))
                if _pages(s2, "CN"):
                    break
            first = _cn_pages(s2)[:1]
            said += [p["verdict"] for p in first]
            detail += first
            rep_db.unlink()
        n = len(said)
        counts = {w: said.count(w) for w in ("bias", "leniency", "cannot tell", "unknown")}
        out["cases"][case] = {
            "bias_points_added": bias, "leniency_points_added": lenient, "pages": n,
            "paged_within_3_runs": round(n / reps, 3), "verdicts": counts,
            "rates": {w: round(c / n, 3) if n else None for w, c in counts.items()},
            "rates_ci95": {w: _wilson(c, n) for w, c in counts.items()},
            "wrong": WRONG[case], "wrong_count": counts[WRONG[case]], "pages_detail": detail}
        print(f"verdict {case}: {n} pages of {reps}: {counts}", flush=True)
    out["seconds"] = round(time.time() - t0, 1)
    shutil.rmtree(work, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="run size 40 only, no real path")
    ap.add_argument("--e2e-reps", type=int, default=40)
    ap.add_argument("--e2e-null-runs", type=int, default=100)
    ap.add_argument("--e2e-only", default="",
                    help="comma-separated case names (CASES); the others keep their figures")
    ap.add_argument("--parts", default="",
                    help="comma-separated normal-model parts (normal, long, balanced_sampling, "
                         "h_grid, window) to run alone, no real path; the others keep their "
                         "figures; "
                         "'none': no normal-model part, the real path (--e2e-only) alone")
    ap.add_argument("--verdict-reps", type=int, default=0,
                    help="the verdict's cases (pure bias, pure leniency, mixed): replications "
                         "of each, run alone; 0 (default): not run, the figures kept")
    ap.add_argument("--verdict-md", type=float, default=0.5,
                    help="the verdict's cases' shift of CN's MD (default 0.5)")
    ap.add_argument("--e2e-from", type=Path, default=None,
                    help="begin the --e2e-only case from this database, its baseline set (a "
                         "case's frozen.duckdb), instead of asking the baseline's runs again")
    ap.add_argument("--e2e-country", default="CN",
                    help="the country whose bias grows in the real path's shifted runs; "
                         "another than CN writes its case as NAME@COUNTRY")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    cat = load_catalog(None, [])
    t0 = time.time()
    parts = {"normal": lambda: normal_part(cat, args.quick), "long": lambda: long_part(cat),
             "balanced_sampling": lambda: balance_part(cat), "h_grid": lambda: h_part(cat),
             "window": lambda: window_part(cat)}
    e2e_alone = args.parts == "none"
    chosen = [] if e2e_alone else [p for p in args.parts.split(",") if p] or list(parts)
    unknown = [p for p in chosen if p not in parts]
    if unknown:
        ap.error(f"--parts: unknown {unknown}; choose from {list(parts)}")
    only = [c for c in args.e2e_only.split(",") if c]
    # What a partial invocation (--parts, --e2e-only) leaves out keeps its figures.
    kept_all = (json.loads(args.out.read_text(encoding="utf-8"))
                if (args.parts or only or args.verdict_reps) and args.out.exists() else {})
    if args.verdict_reps:  # alone: everything else keeps its figures
        kept_all["verdict"] = verdict_part(cat, args.verdict_reps, args.verdict_md,
                                           args.e2e_from)
        args.out.write_text(json.dumps(kept_all, indent=2), encoding="utf-8")
        print(f"wrote {args.out} ({time.time() - t0:.0f} s)")
        return 0
    res: dict[str, Any] = {"machine": platform.platform(), "python": platform.python_version(),
                           "runs_per_history": RUNS, "note": kept_all.get("note")}
    for name, run in parts.items():  # a part not chosen keeps its figures as measured
        res[name] = run() if name in chosen else kept_all.get(name)
    if not args.quick and (e2e_alone or not args.parts):  # else e2e keeps its figures
        res["e2e"] = e2e_part(cat, args.e2e_reps, args.e2e_null_runs, only, args.e2e_from,
                              args.e2e_country)
        if only:  # the other cases' figures stay as measured
            kept = kept_all.get("e2e") or {}
            res["e2e"] = {**kept, **res["e2e"]}
    for key, value in kept_all.items():  # what this run did not measure keeps its figures
        res.setdefault(key, value)
    seconds = round(time.time() - t0, 1)
    if args.parts or only:  # the whole command's time stays; this invocation's beside it
        res["seconds"] = kept_all.get("seconds")
        res["seconds_parts"] = {**(kept_all.get("seconds_parts") or {}),
                                args.parts or args.e2e_only: seconds}
    else:
        res["seconds"] = seconds
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(res, indent=2), encoding="utf-8")
    print(f"wrote {args.out} ({seconds} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
