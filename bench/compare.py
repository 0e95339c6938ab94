"""`monitor compare` on the realistic profile: how often a 0.5-point regression in one
country is flagged, how often a comparison with no change flags one anyway, and the
calls both take - against the unpaired drift path for the same decision.

    python bench/compare.py [--reps 2000] [--real-reps 20] [--real-null-reps 60]
                            [--parts sim,drift,real]
                            [--out bench/results/compare.json]

Part sim (minutes): the comparison's own test (monitor.compare.sequential, run by
monitor.compare.plan.simulate, the planner's code) on paired differences made the way
the simulated model makes scores (monitor/measure/simulated.py, profile
`realistic`: quality per option, bias in the local language, language-wide
leniency, call noise shared by a call's options, 30% of the noise persistent and the
same in both setups, rounding and clipping to 1..10), each side with its own call
noise; the catalogue's monitored triplets and countries at six languages. With no
change (both setups bias 0.5 everywhere) and with the candidate's bias in one country
raised by 0.62 (MD +0.50 at six languages, measured), for every country. Also the same test on
unpaired differences (independent triplets per side) and the reported interval's
coverage at the stop.
Part drift (seconds): the unpaired drift path for the same decision: the daemon's
detector with its top-up (monitor.watch.plan_topup.simulate_topup, the daemon's code) on
the candidate's runs of 40 triplets against a calibration baseline of production
(one rotation cycle, 1,919 triplets), a 0.5-point shift in FR: the runs and calls
until FR pages, and false pages over as many runs with no shift.
Part real (tens of minutes): the real path - prepare + run_comparison with the
LiteLLM client of two `simulated/realistic` endpoints (sampling, prompts, the
simulated model, the parser, DuckDB, the pairs, the looks) - --real-reps times with
no change and with FR's bias +0.62, each with its own seeds. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.languages import SIX
from monitor.catalog import Catalog, load_catalog
from monitor.compare import Budgets, CompareOptions, prepare, run_comparison
from monitor.compare import plan as cp
from monitor.compare import sequential as sq
from monitor.config import CUSUM_H, Settings, load_settings
from monitor.context import Context
from monitor.measure.budget import Allowance
from monitor.measure.run import make_client
from monitor.measure.simulated import PROFILES, _unit
from monitor.stats import t975
from monitor.store import Store
from monitor.vocab import Change
from monitor.watch.plan import cell_shares, cell_sizes
from monitor.watch.plan_topup import simulate_topup

OUT = Path(__file__).resolve().parent / "results" / "compare.json"
LANGS = SIX  # the paper's six
SCENARIOS = ["university", "relocation", "travel"]
REAL = PROFILES["realistic"]
# Calls that come back refused or unreadable, as the history-scale bench has them (section 4:
# ~0.8% failed, ~0.4% unparseable): the simulated model's refusal_rate and garble_rate. A
# triplet is a pair only when all 2 x 6 of its calls are read, so 13.5% of pairs are lost.
REFUSAL, GARBLE = 0.008, 0.004
LOSS = 1 - (1 - REFUSAL - GARBLE) ** (2 * len(LANGS))
LOSS1 = 1 - (1 - REFUSAL - GARBLE) ** len(LANGS)  # one side's triplet lost (drift path)
# Every country's bias, and the candidate's raise in one: 5/6 of it is the MD change before
# rounding; after rounding to whole scores 0.62 gives +0.499 (0.60 gave +0.487).
BIAS, RAISE = 0.5, 0.62
WORST = "FR"  # the country fewest monitored triplets hold: the slowest to decide


class Generator:
    """Paired differences D per (triplet, country) as the simulated model scores."""

    def __init__(self, cat: Catalog, names: list[str], raise_: dict[str, float],
                 loss: float = LOSS) -> None:
        monitored = cat.monitored(LANGS)
        rows_q, rows_c, rows_l = [], [], []
        for s in SCENARIOS:
            scen = cat.scenarios[s]
            for t in scen.monitored_triplets(monitored):
                opts = [scen.options[o] for o in t.option_ids]
                rows_q.append([4.5 + 3.0 * _unit("quality", s, o.id) for o in opts])
                rows_c.append([names.index(o.country) for o in opts])
                rows_l.append([LANGS.index(cat.local_language(o.country) or "") for o in opts])
        self.q, self.c, self.loc = np.array(rows_q), np.array(rows_c), np.array(rows_l)
        self.k = len(names)
        self.loss = loss
        self.raise_ = np.array([raise_.get(n, 0.0) for n in names])
        self.shift = np.array([REAL["language_shift"].get(lang, 0.0) for lang in LANGS])

    def d(self, rng: np.random.Generator, rows: np.ndarray, fixed: np.ndarray,
          extra: np.ndarray) -> np.ndarray:
        """Each option's d on one side (rows (r, m) -> (r, m, 3))."""
        sh = (*rows.shape, len(LANGS), 3)
        local = np.arange(len(LANGS))[None, None, :, None] == self.loc[rows][:, :, None, :]
        call = rng.standard_normal((*rows.shape, len(LANGS), 1)) * REAL["call_sd"]
        p = REAL["persistence"]
        e = math.sqrt(p) * fixed + math.sqrt(1 - p) * rng.standard_normal(sh)
        raw = (self.q[rows][:, :, None, :] + local * (BIAS + extra[self.c[rows]][:, :, None, :])
               + self.shift[None, None, :, None] + call + REAL["noise_sd"] * e)
        score = np.clip(np.round(raw), 1, 10)
        at_home = np.take_along_axis(score, self.loc[rows][:, :, None, :], axis=2)[:, :, 0, :]
        return at_home - score.mean(axis=2)

    def draw(self, paired: bool = True) -> cp.Draw:
        def draw(rng: np.random.Generator, rows: np.ndarray) -> np.ndarray:
            sh = (*rows.shape, len(LANGS), 3)
            fixed = rng.standard_normal(sh)
            base = self.d(rng, rows, fixed, np.zeros(self.k))
            # unpaired: the candidate's d of another (independent) triplet of the same kind
            cand = self.d(rng, rows, fixed if paired else rng.standard_normal(sh), self.raise_)
            out = np.full((*rows.shape, self.k), np.nan)
            for j in range(3):
                np.put_along_axis(out, self.c[rows][:, :, j:j + 1],
                                  (cand - base)[:, :, j:j + 1], axis=2)
            # a triplet with a refused or unreadable call on either side is no pair (its
            # calls are spent all the same)
            out[rng.random(rows.shape) < self.loss] = np.nan
            return out
        return draw


def _coverage(res: cp.SimResult, truth: np.ndarray) -> float:
    """Share of (replication, country) whose 95% t-interval at the stop holds the truth."""
    half = t975(np.maximum(res.n - 1, 1)) * res.sd / np.sqrt(np.maximum(res.n, 1))
    ok = (res.n >= 2) & (np.abs(res.mean - truth[None, :]) <= half)
    return round(float(ok[res.n >= 2].mean()), 4)


def sim_part(cat: Catalog, reps: int) -> dict[str, Any]:
    pop = cp.population(cat, SCENARIOS, LANGS)
    names, per = pop.names, 2 * len(LANGS)
    cap = 12000 // per
    kw: dict[str, Any] = {"margin": 0.5, "max_triplets": cap, "reps": reps}
    # the true MD change and the sd of D, measured on a large draw of the generator
    big = np.random.default_rng(7).integers(0, len(pop.holds), (1, 40000))
    d1 = Generator(cat, names, {WORST: RAISE}).draw()(np.random.default_rng(8), big)[0]
    truth = {n: float(np.nanmean(d1[:, i])) for i, n in enumerate(names)}
    d0 = Generator(cat, names, {}).draw()(np.random.default_rng(9), big)[0]
    sd_pair = float(np.nanstd(d0))
    base = Generator(cat, names, {}).d(np.random.default_rng(10), big,
                                       np.random.default_rng(11).standard_normal(
                                           (1, 40000, 6, 3)), np.zeros(len(names)))
    sd_d = float(base.std())
    out: dict[str, Any] = {"profile": "simulated/realistic", "refusal_rate": REFUSAL,
                           "garble_rate": GARBLE, "pairs_lost": round(LOSS, 4),
                           "true_md_change": truth, "sd_d": round(sd_d, 3),
                           "sd_pair": round(sd_pair, 3), "cap_calls": 12000}
    t0 = time.time()
    null = cp.simulate(pop, Generator(cat, names, {}).draw(), **kw)
    out["no_change"] = {**cp.summary(null, per),
                        "ci_coverage_of_0": _coverage(null, np.zeros(len(names)))}
    print("no change", out["no_change"], f"{time.time() - t0:.0f}s", flush=True)
    out["regression"] = {}
    for i, name in enumerate(names):
        res = cp.simulate(pop, Generator(cat, names, {name: RAISE}).draw(), **kw,
                          seed=cp.SEED + 1 + i)
        if name == WORST:
            fr_res = res
        tr = np.array([truth[WORST] if j == i else 0.0 for j in range(len(names))])
        out["regression"][name] = {**cp.summary(res, per, shifted=i),
                                   "ci_coverage": _coverage(res, tr)}
        print(name, out["regression"][name], flush=True)
    up = cp.simulate(pop, Generator(cat, names, {WORST: RAISE}).draw(paired=False), **kw,
                     seed=cp.SEED + 50)
    un = cp.simulate(pop, Generator(cat, names, {}).draw(paired=False), **kw, seed=cp.SEED + 51)
    # --against-baseline: the same test on the same pairs (the stored answer is one noisy
    # answer per triplet as well), the candidate alone asked: len(LANGS) calls a triplet
    out["against_baseline"] = {"no_change": cp.summary(null, len(LANGS)),
                               "regression_" + WORST: cp.summary(
                                   fr_res, len(LANGS), shifted=names.index(WORST))}
    # the profile as it is, no call lost: what `monitor plan --compare` models
    out["no_failures"] = {
        "no_change": cp.summary(cp.simulate(pop, Generator(cat, names, {}, loss=0.0).draw(),
                                            **kw, seed=cp.SEED + 60), per),
        "regression_" + WORST: cp.summary(cp.simulate(
            pop, Generator(cat, names, {WORST: RAISE}, loss=0.0).draw(), **kw,
            seed=cp.SEED + 61), per, shifted=names.index(WORST))}
    out["unpaired"] = {"no_change": cp.summary(un, per),
                       "regression_" + WORST: cp.summary(up, per, shifted=names.index(WORST))}
    print("unpaired", out["unpaired"], "no failures", out["no_failures"], flush=True)
    return out


def _drift(cat: Catalog, sd: float, reps: int, tp: Any) -> dict[str, Any]:
    s = Settings(endpoints=[{"name": "x", "model": "simulated/realistic"}])
    cells = cell_shares(cat, SCENARIOS, LANGS)
    n = np.array(cell_sizes(40, cells))
    fr = cells.names.index(WORST)
    shift = np.zeros(len(n))
    shift[fr] = 0.5
    runs = 30
    # the same lost calls: a triplet one of whose 6 calls is lost leaves the run's MD
    # (the complete-unit rule), as if each run held 1 - LOSS1 of its triplets
    sd = sd / math.sqrt(1 - LOSS1)
    kw: dict[str, Any] = {"h": CUSUM_H, "tp": tp, "base_triplets": n * 1919 / 40,
                          "drift_points": 0.5, "min_runs_firing": s.alerts.min_runs_firing,
                          "runs": runs, "reps": reps}
    moved = simulate_topup(n, sd, shift=shift, **kw)
    null = simulate_topup(n, sd, shift=0.0, **kw, seed=4321)
    calls = (40 + moved.asked.sum(axis=2)) * len(LANGS)  # (rep, run)
    paged = moved.fired[:, :, fr].any(axis=1)
    first = np.where(paged, moved.fired[:, :, fr].argmax(axis=1), runs - 1)
    upto = np.cumsum(calls, axis=1)[np.arange(reps), first]
    within = [float(moved.fired[:, :k, fr].any(axis=1).mean()) for k in range(1, runs + 1)]
    n90 = next((k + 1 for k, p in enumerate(within) if p >= 0.9), None)
    false = null.fired.any(axis=2)  # any cell paged, per (rep, run)
    calls90 = np.cumsum(calls, axis=1)[:, n90 - 1] if n90 else None
    return {"topup_alpha": tp.alpha, "topup_beta": tp.beta, "p_paged_within_runs": within[:12],
            "runs_to_p90": n90,
            "calls_to_page_mean": round(float(upto[paged].mean()), 1),
            "calls_to_page_p95": int(np.percentile(upto[paged], 95)),
            "calls_in_runs_to_p90_mean": None if calls90 is None
            else round(float(calls90.mean()), 1),
            "p_paged_in_30_runs": round(float(paged.mean()), 4),
            "p_false_page_within_runs_to_p90": round(float(false[:, :n90].any(axis=1).mean()), 4)
            if n90 else None}


def drift_part(cat: Catalog, sd: float, reps: int) -> dict[str, Any]:
    """The product's defaults, and the top-up at the gate's error rates (alpha / 9 per
    country, beta 0.05): the drift path asked for the same decision."""
    tp = Settings(endpoints=[{"name": "x", "model": "simulated/realistic"}]).topup
    out: dict[str, Any] = {"sd_d": sd, "run_triplets": 40, "baseline_triplets": 1919,
                           "baseline_calls": 1919 * len(LANGS),
                           "defaults": _drift(cat, sd, reps, tp),
                           "gate_error_rates": _drift(cat, sd, reps, tp.model_copy(
                               update={"alpha": sq.ALPHA / 9, "beta": sq.BETA}))}
    print("drift path", out, flush=True)
    return out


async def _one(tmp: Path, cat: Catalog, r: int, shifted: bool) -> dict[str, Any]:
    bias = {c: BIAS for c in ["US", "GB", "CA", "AU", "JP", "CN", "FR", "DE", "KR"]}
    cand = {**bias, WORST: BIAS + RAISE} if shifted else bias
    eps = [{"name": name, "model": "simulated/realistic", "rpm": 100000,
            "max_concurrency": 64, "params": {"seed": 1000 * r + k, "bias_points": b,
                                              "refusal_rate": REFUSAL, "garble_rate": GARBLE}}
           for k, (name, b) in enumerate((("prod", bias), ("staging", cand)))]
    cfg = tmp / f"m{r}{shifted}.yaml"
    cfg.write_text(json.dumps({"storage": {"path": str(tmp / f"m{r}{shifted}.duckdb")},
                               "endpoints": eps}))
    settings, _ = load_settings(cfg)
    store = Store(settings.storage.path)
    ctx = Context(settings, cat, store)
    p = prepare(ctx, CompareOptions(baseline="prod", candidate="staging", seed=r))
    now = datetime.now(UTC)
    budgets = Budgets(clients={s.arm: make_client(cat, s.endpoint) for s in p.sides},
                      allowances={s.arm: Allowance.today(settings.budget, store,
                                                         s.endpoint.name, now)
                                  for s in p.sides}, progress_s=1e9)
    res = await run_comparison(ctx, p, budgets)
    return {"rep": r, "shifted": shifted, "calls": res.calls, "triplets": res.triplets,
            "pairs": res.pairs, "status_counts": {str(a): c for a, c in res.status_counts.items()},
            "reason": res.comparison.reason,
            "verdicts": {x.country: str(x.test.change) for x in res.countries},
            "fr_calls": next(x.test.calls for x in res.countries if x.country == WORST)}


def real_part(cat: Catalog, reps: int, null_reps: int, out: dict[str, Any], path: Path
              ) -> dict[str, Any]:
    """Rep r asks both comparisons (no change, FR raised) with the same seeds, so a false
    regression in one is mostly the same event in the other; `null_reps` more comparisons
    with no change, each with its own seeds, count false regressions apart."""
    rows: list[dict[str, Any]] = out.setdefault("real", {}).setdefault("rows", [])
    plan = [(r, s) for r in range(reps) for s in (False, True)]
    plan += [(r, False) for r in range(reps, reps + null_reps)]
    done = {(x["rep"], x["shifted"]) for x in rows}  # a part run stopped goes on
    with tempfile.TemporaryDirectory() as td:
        for r, shifted in (x for x in plan if x not in done):
            t0 = time.time()
            row = asyncio.run(_one(Path(td), cat, r, shifted))
            rows.append(row)
            print(row, f"{time.time() - t0:.0f}s", flush=True)
            path.write_text(json.dumps(out, indent=2))
    null = [x for x in rows if not x["shifted"]]
    moved = [x for x in rows if x["shifted"]]

    def calls(xs: list[dict[str, Any]]) -> dict[str, float]:
        c = np.array([x["calls"] for x in xs])
        return {"mean": round(float(c.mean()), 1), "p95": float(np.percentile(c, 95))}

    out["real"]["summary"] = {
        "comparisons_no_change": len(null), "comparisons_shifted": len(moved),
        "false_regression": sum(any(v == Change.REGRESSION for v in x["verdicts"].values())
                                for x in null),
        "flagged": sum(x["verdicts"][WORST] == Change.REGRESSION for x in moved),
        "false_regression_elsewhere_when_shifted": sum(
            any(v == Change.REGRESSION for c, v in x["verdicts"].items() if c != WORST)
            for x in moved),
        "inconclusive": sum(any(v == Change.INCONCLUSIVE for v in x["verdicts"].values())
                            for x in rows),
        "calls_no_change": calls(null), "calls_shifted": calls(moved),
        "pairs_lost": round(1 - sum(x["pairs"] for x in rows) / sum(x["triplets"] for x in rows),
                            4)}
    print(out["real"]["summary"], flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--real-reps", type=int, default=20)
    ap.add_argument("--real-null-reps", type=int, default=60)
    ap.add_argument("--parts", default="sim,drift,real")
    ap.add_argument("--out", type=Path, default=OUT)
    a = ap.parse_args()
    cat = load_catalog()
    parts = a.parts.split(",")
    out: dict[str, Any] = json.loads(a.out.read_text()) if a.out.exists() else {}
    out["machine"] = {"python": platform.python_version(), "cpus": __import__("os").cpu_count()}
    out["alpha"], out["beta"], out["min_pairs"] = sq.ALPHA, sq.BETA, sq.MIN_PAIRS
    if "sim" in parts:
        out["sim"] = sim_part(cat, a.reps)
        a.out.write_text(json.dumps(out, indent=2))
    if "drift" in parts:
        sd = out.get("sim", {}).get("sd_d", 1.34)
        out["drift"] = drift_part(cat, sd, a.reps)
        a.out.write_text(json.dumps(out, indent=2))
    if "real" in parts:  # the rows stored so far are kept: delete them to start again
        real_part(cat, a.real_reps, a.real_null_reps, out, a.out)
    a.out.write_text(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
