"""Statistical validation by simulation (issue 7 item 5; not a test).

    python bench/stat_validation.py [--reps 200] [--jsd-reps 300] [--sizes 40,100,200]
        [--h-grid 3,4,5,5.5,6,6.5,7,8,10,12] [--baseline-runs 20] [--drift-points X]
        [--drift-only] [--quick] [--out PATH]

Writes bench/results/stat_validation.json and PNGs (via monitor/report/figures.py).

The generator is the simulated endpoint's answer model (monitor/measure/simulated.py):
score = clip(round(q_j + b_c [l local to c] + shift_l + N(0, sd)), 1, 10). Asking
it through prompts and the parser costs ~1 ms a call, too slow for the millions
of scores below, so a vectorised replica draws the same scores for the same
triplets; section `generator_check` compares the real path (Sampler ->
build_prompt -> simulated.answer -> parse_answer) with the replica's exact score
distribution on one configuration. Triplets come from the real Sampler's
rotation (cycle_order), per-run MD from the product's engine (bench/frames.py,
coverage) or a numpy replica checked equal to it (drift sweeps), JSD from the
engine too, and the alert state from monitor.watch.drift.step with the
daemon's observation rule (monitor.stats.rules.tested: the baseline holds
MIN_CELL_N of the cell).

    python bench/stat_validation.py --profile lossy [--languages 6|14] [--reps N]
        [--md-runs N] [--jsd-reps N] [--sizes 40,120]
    python bench/stat_validation.py --languages 14        (the demo profile)

The engine's part (issue 32): the `lossy` profile (the realistic score model, with
a share of each language's answers refused or unreadable; LossyGen, the
endpoint's own persistence hash) at 6 or 14 languages, and the demo at 14. Every
statistic comes from the product's engine on the replica's arrays, as the store
hands them over (monitor.stats: fill, md_rows, jsd_rows; checked equal to
md_table through DuckDB), and each run is observed as the daemon does it
(monitor.watch.evaluate.observed: CUPED against the baseline where it pays).
Writes bench/results/stat_validation_<profile>_<languages>.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.special import ndtr
from scipy.stats import chi2 as chi2_dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.frames import jsd_table, md_table
from bench.languages import FOURTEEN, SIX
from monitor.catalog import VARIANTS, Catalog, load_catalog
from monitor.stats import MIN_CELL_N, Adjusted, MDRow, jsd_bits, jsd_rows, tested
from monitor.stats.covariate import BaseTable, adjust, base_table
from monitor.stats.md import local_pairs, md_rows
from monitor.stats.missing import fill
from monitor.store import UnitScores
from monitor.vocab import POOLED
from monitor.watch.drift import FIRING, OK, CellState, Observation, step
from monitor.watch.evaluate import observed
from monitor.watch.plan import cell_shares, sd_from_md
from monitor.watch.reference import baseline_h

SCENARIOS = ["relocation", "travel", "university"]
DEMO_BIAS = {"CN": 0.9, "KR": 0.6, "JP": 0.4, "FR": 0.3, "DE": 0.0, "US": 0.1, "GB": 0.1,
             "CA": 0.0, "AU": 0.0}  # monitor/data/demo.yaml
OUT = Path(__file__).resolve().parent / "results"
DMDS, PRE, POST = [0.25, 0.5, 1.0], 5, 12  # shifts; monitored runs before one; runs after


class Gen:
    """The simulated model's score distribution over the catalog's triplets, vectorised."""

    def __init__(self, cat: Catalog, bias: dict[str, float], sd: float = 1.0,
                 shift: dict[str, float] | None = None, languages: list[str] = SIX) -> None:
        from monitor.measure.simulated import _unit  # the generator's own quality hash

        self.cat, self.sd, self.langs = cat, sd, list(languages)
        self.trip = [t for s in SCENARIOS for t in cat.scenarios[s].triplets()]
        self.index = {t: i for i, t in enumerate(self.trip)}
        self.scen = np.array([SCENARIOS.index(t.scenario) for t in self.trip])
        self.pop = np.ones(len(self.trip), bool)  # the triplets a truth averages over
        self.cells = [c for lang in self.langs for c in cat.languages[lang]]
        self.cell_lang = np.array([self.langs.index(cat.local_language(c) or "")
                                   for c in self.cells])
        opts = [[cat.option(t.scenario, o) for o in t.option_ids] for t in self.trip]
        self.q = np.array([[4.5 + 3.0 * _unit("quality", t.scenario, o.id) for o in row]
                           for t, row in zip(self.trip, opts, strict=True)])
        self.cell_of = np.array([[self.cells.index(o.country) if o.country in self.cells else -1
                                  for o in row] for row in opts])
        self.loc = np.where(self.cell_of >= 0, self.cell_lang[self.cell_of], -1)
        self.bias = np.array([bias.get(c, 0.0) for c in self.cells])
        self.shift = np.array([(shift or {}).get(lang, 0.0) for lang in self.langs])
        self._samplers: dict[tuple[int, int], Any] = {}
        self._cycles: dict[int, np.ndarray] = {}

    def mu(self, idx: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """units x languages x options: the expected score before noise and rounding."""
        b = np.where(self.cell_of[idx] >= 0, bias[self.cell_of[idx]], 0.0)
        local = self.loc[idx][:, None, :] == np.arange(len(self.langs))[None, :, None]
        out: np.ndarray = (self.q[idx][:, None, :] + self.shift[None, :, None]
                           + b[:, None, :] * local)
        return out

    def probs(self, mu: np.ndarray) -> np.ndarray:
        """P(score = 1..10) exactly: rounding then clipping of a normal."""
        edges = np.concatenate([[-np.inf], np.arange(1.5, 10.0), [np.inf]])
        cdf = ndtr((edges - mu[..., None]) / self.sd)
        out: np.ndarray = np.diff(cdf, axis=-1)
        return out

    def expect(self, mu: np.ndarray) -> np.ndarray:
        """E[score] = 1 + sum_k P(score > k), k = 1..9."""
        out: np.ndarray = 1 + (1 - ndtr((np.arange(1.5, 10) - mu[..., None]) / self.sd)).sum(-1)
        return out

    def truth_md(self, bias: np.ndarray) -> np.ndarray:
        """Per cell: E[d] over the triplet population (the sampler covers it uniformly).
        Only the local-language score of an option depends on the bias."""
        if not hasattr(self, "_sum0"):
            mu0 = self.mu(np.arange(len(self.trip)), np.zeros(len(self.cells)))
            es0 = self.expect(mu0)
            loc = np.clip(self.loc, 0, None)[:, None, :]
            self._loc0 = np.take_along_axis(es0, loc, axis=1)[:, 0, :]
            self._sum0 = es0.sum(axis=1)
            self._qloc = np.take_along_axis(mu0, loc, axis=1)[:, 0, :]
        el = self.expect(self._qloc + np.where(self.cell_of >= 0, bias[self.cell_of], 0.0))
        dev = el - (self._sum0 - self._loc0 + el) / len(self.langs)
        out = np.zeros(len(self.cells))
        for ci in range(len(self.cells)):
            m = (self.cell_of == ci) & self.pop[:, None]
            has = m.any(axis=1)
            out[ci] = ((dev * m).sum(axis=1)[has] / m.sum(axis=1)[has]).mean()
        return out

    def truth_jsd(self, bias: np.ndarray) -> np.ndarray:
        """JSD(P_l, G) in bits of the true score distributions (population mixture)."""
        p = self.probs(self.mu(np.flatnonzero(self.pop), bias)).mean(axis=(0, 2))
        j = jsd_bits(p, p.mean(axis=0)[None, :])
        return np.append(j, j.mean())

    def shift_for(self, dmd: float) -> np.ndarray:
        """The bias per cell that moves the TRUE MD by exactly dmd (bisection: clipping)."""
        target = self.truth_md(self.bias) + dmd
        lo, hi = self.bias - 1.0, self.bias + 3.0 * dmd + 1.0
        for _ in range(30):
            mid = (lo + hi) / 2
            above = self.truth_md(mid) > target
            hi, lo = np.where(above, mid, hi), np.where(above, lo, mid)
        out: np.ndarray = (lo + hi) / 2
        return out

    @property
    def local(self) -> list[tuple[str, str]]:
        """(country, local language) of the cells, as the engine pairs them."""
        return local_pairs(self.langs, self.cat.languages)

    def batch(self, seed: int, n: int, k: int, start: int) -> tuple[np.ndarray, np.ndarray]:
        """Runs start..start+k-1 of the rotation: their triplets' indexes, each one's run."""
        parts = self.runs(seed, n, k, start=start)
        return np.concatenate(parts), np.repeat(np.arange(k), [len(p) for p in parts])

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """units x languages x options: each score's noise in points."""
        out: np.ndarray = self.sd * rng.standard_normal((n, len(self.langs), 3))
        return out

    def draw(self, mu: np.ndarray, noise: np.ndarray) -> np.ndarray:
        out: np.ndarray = np.clip(np.round(mu + noise), 1, 10)
        return out

    def answered(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """units x languages x options: which answers were read (the demo: all)."""
        return np.ones((n, len(self.langs), 3), bool)

    def runs(self, seed: int, n: int, n_runs: int, start: int = 0) -> list[np.ndarray]:
        """Triplet indexes of runs start..start+n_runs-1 of the sampler's rotation for
        `seed`: Sampler.sample without variants and orders (checked identical)."""
        from monitor.measure.sampling import Sampler

        key = (seed, n)
        if key not in self._samplers:
            self._samplers = {key: Sampler(self.cat, scenarios=SCENARIOS,
                                           variants=list(VARIANTS), seed=seed,
                                           triplets_per_run=n, languages=self.langs)}
            self._cycles = {}
        s = self._samplers[key]
        pop, n = s.population, s.triplets_per_run
        out = []
        for r in range(start, start + n_runs):
            g = r * n + np.arange(n)
            for c in set((g // pop).tolist()) - set(self._cycles):
                self._cycles[c] = np.array([self.index[t] for t in s.cycle_order(c)])
            cyc = np.stack([self._cycles[c] for c in range(g[0] // pop, g[-1] // pop + 1)])
            idx = cyc[g // pop - g[0] // pop, g % pop]
            _, first = np.unique(idx, return_index=True)
            out.append(idx[np.sort(first)])
        return out

    def frame(self, idx: np.ndarray, scores: np.ndarray, group: np.ndarray,
              by_scenario: bool = False) -> pd.DataFrame:
        """The long table md_table/jsd_table read (Store.scores_frame's columns).
        The scenario column carries the run (group) unless by_scenario, so one
        md_table call gives every run's pooled cell."""
        n, k = len(idx), 3 * len(self.langs)
        ctry = np.array([[self.cells[c] if c >= 0 else "XX" for c in row]
                         for row in self.cell_of[idx]])
        scen = (np.array([self.trip[i].scenario for i in idx]) if by_scenario
                else group.astype(str))
        return pd.DataFrame({
            "run_id": np.repeat(group.astype(str), k),
            "triplet_id": np.repeat(idx.astype(str), k),
            "language": np.tile(np.repeat(self.langs, 3), n),
            "label": np.tile(list("ABC"), len(self.langs) * n),
            "country": np.repeat(ctry[:, None, :], len(self.langs), axis=1).ravel(),
            "score": scores.ravel(), "scenario": np.repeat(scen, k)})


class LossyGen(Gen):
    """The simulated endpoint's `lossy` profile (monitor/measure/simulated.py PROFILES):
    noise sd 1.3 of which a share persists per (triplet, language, option) (the
    endpoint's own hash), a call's shared noise, a language-wide leniency, and each
    language losing its profile's share of answers (refused, or unreadable) whole."""

    def __init__(self, cat: Catalog, bias: dict[str, float], languages: list[str]) -> None:
        from statistics import NormalDist

        from monitor.measure.sampling import Sampler
        from monitor.measure.simulated import PROFILES, SimParams, _unit

        prof = PROFILES["lossy"]
        p, sd = prof["persistence"], prof["noise_sd"]
        # Given the persistent part (in mu), a score's noise is its call's and its own.
        super().__init__(cat, bias, math.sqrt(sd**2 * (1 - p) + prof["call_sd"] ** 2),
                         prof["language_shift"], languages)
        self.call_sd, self.fresh_sd = prof["call_sd"], sd * math.sqrt(1 - p)
        params = SimParams(refusal_rate=prof["refusal_rate"], garble_rate=prof["garble_rate"])
        # simulated.answer refuses first, then garbles an answer it wrote.
        self.loss = np.array([params.rate("refusal", lang) + (1 - params.rate("refusal", lang))
                              * params.rate("garble", lang) for lang in self.langs])
        pop = Sampler(cat, scenarios=SCENARIOS, variants=list(VARIANTS), seed=0,
                      triplets_per_run=1, languages=self.langs).cycle_order(0)
        self.pop = np.zeros(len(self.trip), bool)
        self.fixed = np.zeros((len(self.trip), len(self.langs), 3))
        inv = NormalDist().inv_cdf
        for t in pop:
            i = self.index[t]
            self.pop[i] = True
            key = "|".join(sorted(t.option_ids))
            self.fixed[i] = [[sd * math.sqrt(p) * inv(min(max(_unit(
                "persist", t.scenario, key, lang, o), 1e-12), 1 - 1e-12))
                for o in t.option_ids] for lang in self.langs]

    def mu(self, idx: np.ndarray, bias: np.ndarray) -> np.ndarray:
        out: np.ndarray = super().mu(idx, bias) + self.fixed[idx]
        return out

    def noise(self, rng: np.random.Generator, n: int) -> np.ndarray:
        out: np.ndarray = (self.call_sd * rng.standard_normal((n, len(self.langs), 1))
                           + self.fresh_sd * rng.standard_normal((n, len(self.langs), 3)))
        return out

    def answered(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """units x languages x options: False where the language's answer was lost."""
        kept = rng.random((n, len(self.langs))) >= self.loss
        return np.repeat(kept[:, :, None], 3, axis=2)


def md_cells(gen: Gen, idx: np.ndarray, scores: np.ndarray, group: np.ndarray,
             n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """md, sd(ddof=1), n per (group, cell): md_table's pooled cells, in numpy."""
    shape = (n_groups, len(gen.cells))
    md, sd, nn = np.full(shape, np.nan), np.full(shape, np.nan), np.zeros(shape, int)
    cell_of = gen.cell_of[idx]
    mean_l = scores.mean(axis=1)
    for ci, lang in enumerate(gen.cell_lang):
        m = cell_of == ci
        has = m.any(axis=1)
        d = ((scores[:, lang, :] - mean_l) * m).sum(axis=1)[has] / m.sum(axis=1)[has]
        g = group[has]
        n = np.bincount(g, minlength=n_groups)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.bincount(g, d, minlength=n_groups) / n
            ss = np.bincount(g, (d - mean[g]) ** 2, minlength=n_groups)
            md[:, ci], sd[:, ci], nn[:, ci] = mean, np.sqrt(ss / (n - 1)), n
    return md, sd, nn


def t975(n: np.ndarray) -> np.ndarray:
    from scipy.stats import t as student_t

    out: np.ndarray = student_t.ppf(0.975, np.maximum(n - 1, 1))
    return out


def generator_check(cat: Catalog, gen: Gen, runs: int, n: int) -> dict[str, Any]:
    """The real path's scores against the replica's exact distribution (same triplets)."""
    from monitor.measure.parse import parse_answer
    from monitor.measure.prompts import build_prompt
    from monitor.measure.sampling import Sampler
    from monitor.measure.simulated import SimParams, answer

    s = Sampler(cat, scenarios=SCENARIOS, variants=list(VARIANTS), seed=0, triplets_per_run=n,
                languages=SIX)
    mine = gen.runs(0, n, runs)
    obs, exp = np.zeros((6, 10)), np.zeros((6, 10))
    resid = var = 0.0
    rows: list[dict[str, Any]] = []
    same, wrong = True, 0
    for r in range(runs):
        specs = s.sample(r)
        same &= [gen.index[sp.triplet] for sp in specs] == mine[r].tolist()
        params = SimParams(bias_points=DEMO_BIAS, noise_sd=gen.sd, seed=r)
        for sp in specs:
            p = gen.probs(gen.mu(np.array([gen.index[sp.triplet]]), gen.bias))[0]
            for li, lang in enumerate(SIX):
                prompt = build_prompt(cat, sp, lang)
                reply = answer(prompt.messages, params)
                parsed = parse_answer(reply.text, prompt.names, cat.prompts[lang].refusals)
                for lab, opt in parsed.options.items():
                    pos = sp.triplet.option_ids.index(prompt.labels[lab])
                    wrong += int(opt.score) != reply.scores[lab]
                    pk = p[li, pos]
                    e = float(pk @ np.arange(1, 11))
                    obs[li, int(opt.score) - 1] += 1
                    exp[li] += pk
                    resid += opt.score - e
                    var += float(pk @ (np.arange(1, 11) - e) ** 2)
                    rows.append({"run_id": str(r), "triplet_id": sp.triplet.id, "language": lang,
                                 "label": lab, "country": cat.option(sp.triplet.scenario,
                                                                     prompt.labels[lab]).country,
                                 "score": opt.score, "scenario": str(r)})
    keep = exp >= 5  # sparse tail bins pooled into one per language
    o = np.column_stack([np.where(keep, obs, 0), (obs * ~keep).sum(axis=1)])
    e = np.column_stack([np.where(keep, exp, 0), (exp * ~keep).sum(axis=1)])
    ok = e > 0
    stat = float(((o - e) ** 2 / np.where(ok, e, 1))[ok].sum())
    df = int(ok.sum() - 6)  # each language's total is fixed
    local = {lang: list(cat.languages[lang]) for lang in SIX}
    md = md_table(pd.DataFrame(rows), SIX, local)
    md = md[md["scenario"] != "all"]
    truth = dict(zip(gen.cells, gen.truth_md(gen.bias), strict=True))
    fin = md[np.isfinite(md["ci_lower"])]
    hit = ((fin["ci_lower"] <= fin["country"].map(truth)) &
           (fin["country"].map(truth) <= fin["ci_upper"]))
    return {"config": {"bias_points": DEMO_BIAS, "noise_sd": gen.sd, "runs": runs,
                       "triplets_per_run": n, "answer_seed": "run index"},
            "scores": int(obs.sum()), "sampler_rotation_identical": bool(same),
            "parsed_differs_from_generated": wrong,
            "chi2": round(stat, 2), "df": df, "p_value": round(float(chi2_dist.sf(stat, df)), 4),
            "mean_residual_z": round(resid / math.sqrt(var), 3),
            "real_path_md_coverage": round(float(hit.mean()), 4), "real_path_md_cells": len(fin)}


def md_validation(gen: Gen, n: int, runs: int, seed: int) -> dict[str, Any]:
    """MD bias and t-CI coverage with md_table itself; the numpy replica checked equal."""
    truth = gen.truth_md(gen.bias)
    local = {lang: list(gen.cat.languages[lang]) for lang in SIX}
    rng = np.random.default_rng([seed, n, 1])
    per: list[pd.DataFrame] = []
    max_diff = 0.0
    for chunk in range(0, runs, 100):
        k = min(100, runs - chunk)
        idx, group = gen.batch(seed, n, k, chunk)
        scores = gen.draw(gen.mu(idx, gen.bias), gen.noise(rng, len(idx)))
        md = md_table(gen.frame(idx, scores, group), SIX, local)
        md = md[md["scenario"] != "all"].copy()  # "all" here would pool every run
        rmd, rsd, rn = md_cells(gen, idx, scores, group, k)
        ci = md["country"].map({c: i for i, c in enumerate(gen.cells)}).to_numpy()
        g = md["scenario"].astype(int).to_numpy()
        max_diff = max(max_diff, float(np.nanmax(np.abs(rmd[g, ci] - md["md"]))),
                       float(np.nanmax(np.abs(rsd[g, ci] / np.sqrt(rn[g, ci]) - md["se"]))),
                       float(np.abs(rn[g, ci] - md["n"]).max()))
        md["truth"] = truth[ci]
        per.append(md)
    allmd = pd.concat(per)
    fin = allmd[np.isfinite(allmd["ci_lower"])]
    fin = fin.assign(hit=(fin["ci_lower"] <= fin["truth"]) & (fin["truth"] <= fin["ci_upper"]),
                     err=fin["md"] - fin["truth"])
    big = fin[fin["n"] >= MIN_CELL_N]
    cells = {c: {"truth": round(float(truth[i]), 4), "mean_n": round(float(
        allmd[allmd["country"] == c]["n"].mean()), 2),
        "coverage": round(float(fin[fin["country"] == c]["hit"].mean()), 4),
        "bias": round(float(fin[fin["country"] == c]["err"].mean()), 4)}
        for i, c in enumerate(gen.cells)}
    se_bias = float(fin["err"].std() / math.sqrt(len(fin)))
    return {"triplets_per_run": n, "runs": runs, "cell_estimates": len(fin),
            "coverage": round(float(fin["hit"].mean()), 4),
            "coverage_n_ge_5": round(float(big["hit"].mean()), 4),
            "mean_bias": round(float(fin["err"].mean()), 4), "mean_bias_se": round(se_bias, 4),
            "replica_vs_md_table_max_abs_diff": max_diff, "cells": cells}


def jsd_validation(cat: Catalog, bias: dict[str, float], shift: dict[str, float] | None,
                   n: int, reps: int, seed: int) -> dict[str, Any]:
    """Excess JSD (jsd_table, pooled cell 'all') against the true distributions' JSD."""
    gen = Gen(cat, bias, 1.0, shift)
    truth = gen.truth_jsd(gen.bias)
    rng = np.random.default_rng([seed, n, 2])
    # Large-sample check of the truth: the plug-in on 3 draws of the whole population.
    idx = np.tile(np.arange(len(gen.trip)), 3)
    big = gen.draw(gen.mu(idx, gen.bias), gen.noise(rng, len(idx)))
    hist = np.stack([np.bincount(big[:, li, :].ravel().astype(int) - 1, minlength=10)
                     for li in range(6)]).astype(float)
    large = jsd_bits(hist, hist.sum(axis=0)[None, :])
    est, lo, hi, plug = (np.zeros((reps, 7)) for _ in range(4))
    inside, cells = 0, 0  # every cell of the table (each scenario and language): in its CI?
    for r in range(reps):
        idx = gen.runs(seed, n, 1, start=r)[0]
        scores = gen.draw(gen.mu(idx, gen.bias), gen.noise(rng, len(idx)))
        j = jsd_table(gen.frame(idx, scores, np.zeros(len(idx), int), by_scenario=True), SIX,
                      seed=r)
        ok = (j["ci_lower"] <= j["jsd_bits"] + 1e-12) & (j["jsd_bits"] <= j["ci_upper"] + 1e-12)
        inside, cells = inside + int(ok.sum()), cells + len(j)
        j = j[j["scenario"] == "all"].set_index("language").loc[[*SIX, "overall"]]
        est[r], lo[r], hi[r], plug[r] = (j[c].to_numpy() for c in
                                         ("jsd_bits", "ci_lower", "ci_upper", "plugin_bits"))
    cover = ((lo <= truth + 1e-12) & (truth - 1e-12 <= hi)).mean(axis=0)
    names = [*SIX, "overall"]
    return {"bias_points": bias, "language_shift": shift or {}, "triplets": n, "reps": reps,
            "truth_bits": dict(zip(names, np.round(truth, 5).tolist(), strict=True)),
            "large_sample_plugin_bits": dict(zip(names, np.round(np.append(
                large, large.mean()), 5).tolist(), strict=True)),
            "coverage": dict(zip(names, np.round(cover, 4).tolist(), strict=True)),
            "coverage_min": round(float(cover.min()), 4),
            "estimate_inside_its_ci": {"cells": cells, "share": round(inside / max(1, cells), 4)},
            "excess_bias": dict(zip(names, np.round(est.mean(0) - truth, 5).tolist(),
                                    strict=True)),
            "plugin_bias": dict(zip(names, np.round(plug.mean(0) - truth, 5).tolist(),
                                    strict=True))}


def drift_data(gen: Gen, n: int, reps: int, base_runs: int, monitored: int, pre: int, post: int,
               dmds: list[float], seed: int) -> dict[str, Any]:
    """Per rep: the baseline cell (B runs pooled, as the automatic baseline) and each
    monitored run's cells; for each shift the same noise with the bias moved at run pre."""
    rng = np.random.default_rng([seed, n, 3])
    shifted = {d: gen.shift_for(d) for d in dmds}
    C, T = len(gen.cells), base_runs + monitored
    base = np.zeros((3, reps, C))
    runs = np.zeros((3, reps, monitored, C))
    after = {d: np.zeros((3, reps, post, C)) for d in dmds}
    for r in range(reps):
        idx, group = gen.batch(seed, n, T, r * T)  # consecutive runs, as the daemon walks
        noise = gen.noise(rng, len(idx))
        scores = gen.draw(gen.mu(idx, gen.bias), noise)
        inb = group < base_runs
        base[:, r] = np.array(md_cells(gen, idx[inb], scores[inb], np.zeros(inb.sum(), int), 1))[
            :, 0]
        runs[:, r] = np.array(md_cells(gen, idx[~inb], scores[~inb], group[~inb] - base_runs,
                                       monitored))
        win = (group >= base_runs + pre) & (group < base_runs + pre + post)
        for d in dmds:
            s2 = gen.draw(gen.mu(idx[win], shifted[d]), noise[win])
            after[d][:, r] = np.array(md_cells(gen, idx[win], s2, group[win] - base_runs - pre,
                                               post))
    return {"base": base, "runs": runs, "after": after, "pre": pre, "post": post}


def observations(base: np.ndarray, runs: np.ndarray) -> list[list[list[Observation | None]]]:
    """watch.evaluate's rules (monitor.stats.rules.tested: the run holds the cell, the
    baseline MIN_CELL_N of it with a finite SE). [rep][cell][run]."""
    out: list[list[list[Observation | None]]] = []
    for r in range(runs.shape[1]):
        per_cell = []
        for c in range(runs.shape[3]):
            bm, bsd, bn = base[:, r, c]
            seq: list[Observation | None] = []
            for t in range(runs.shape[2]):
                m, _, nt = runs[:, r, t, c]
                se_b = bsd / math.sqrt(bn) if bn > 0 else math.nan
                if tested(int(nt), int(bn), se_b):
                    seq.append(Observation(md=m, n=int(nt), ci_lower=math.nan, ci_upper=math.nan,
                                           md_base=bm, se_base=se_b, n_base=int(bn)))
                else:
                    seq.append(None)
            per_cell.append(seq)
        out.append(per_cell)
    return out


def replay(obs: list[list[list[Observation | None]]], h: float | list[float],
           drift_points: float, min_runs: int) -> tuple[np.ndarray, np.ndarray]:
    """monitor.watch.drift.step over every cell's runs: when each cell entered FIRING / PENDING.
    `h`: one for all, or each rep's (the h its baseline gives). The absolute threshold
    is off (md_threshold=inf): only drift is validated here."""
    R, C, T = len(obs), len(obs[0]), len(obs[0][0])
    fire, pend = np.zeros((R, T, C), bool), np.zeros((R, T, C), bool)
    for r in range(R):
        hr = h[r] if isinstance(h, list) else h
        for c in range(C):
            st = CellState()
            for t, o in enumerate(obs[r][c]):
                new = step(st, o, drift_points=drift_points, h=hr, md_threshold=math.inf,
                           min_runs_firing=min_runs)
                fire[r, t, c] = new.state == FIRING and st.state != FIRING
                pend[r, t, c] = new.state != OK and st.state == OK
                st = new
    return fire, pend


def first_hit(events: np.ndarray, pre: int, post: int) -> np.ndarray:
    """Runs after the shift to the first event (post+1 = not within post); NaN when the
    cell already alarmed before the shift (excluded)."""
    before = events[:, :pre].any(axis=1)
    hit = events[:, pre:pre + post]
    delay = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, post + 1).astype(float)
    delay[before] = np.nan
    return delay


def sweep(gen: Gen, data: dict[str, Any], h_grid: list[float], drift_points: float,
          min_runs: int, dmds: list[float]) -> dict[str, Any]:
    base, runs, pre, post = data["base"], data["runs"], data["pre"], data["post"]
    o_fa = observations(base, runs)
    o_det = {d: observations(base, np.concatenate([runs[:, :, :pre], data["after"][d]], axis=2))
             for d in dmds}
    return sweep_obs(gen, o_fa, o_det, np.nanmean(runs[2], axis=(0, 1)),
                     np.nanmean(base[1], axis=0), h_grid, drift_points, min_runs, pre, post)


def sweep_obs(gen: Gen, o_fa: list[list[list[Observation | None]]],
              o_det: dict[float, list[list[list[Observation | None]]]], n_cell: np.ndarray,
              sd_cell: np.ndarray, h_grid: list[float], drift_points: float, min_runs: int,
              pre: int, post: int, h_auto: list[float] | None = None) -> dict[str, Any]:
    """False pages and detection per h from the detector's observations [rep][cell][run]:
    o_fa without a change, o_det[dMD] with the shift from monitored run pre + 1 on;
    row "auto": each rep at `h_auto`, the h its baseline gives."""
    R, C, M = len(o_fa), len(o_fa[0]), len(o_fa[0][0])
    dmds = list(o_det)
    out: dict[str, Any] = {"mean_n_per_cell": dict(zip(gen.cells, np.round(n_cell, 2).tolist(),
                                                       strict=True)),
                           "sd_d_per_cell": dict(zip(gen.cells, np.round(sd_cell, 3).tolist(),
                                                     strict=True)), "h": {}}
    hs: list[tuple[str, float | list[float]]] = [(str(h), h) for h in h_grid]
    for key, h in hs + ([("auto", h_auto)] if h_auto else []):
        fire, pend = replay(o_fa, h, drift_points, min_runs)
        per_rep = fire.sum(axis=(1, 2)) / M * 100
        arl0 = R * M * C / max(1, int(fire.sum()))  # runs per false page, per cell
        arl0_cusum = R * M * C / max(1, int(pend.sum()))  # runs per false CUSUM alarm
        row: dict[str, Any] = {
            "false_alarms_per_100_runs": round(float(per_rep.mean()), 3),
            "false_alarms_se": round(float(per_rep.std(ddof=1) / math.sqrt(R)), 3),
            "cusum_alarms_per_100_runs": round(float(pend.sum() / R / M * 100), 3),
            "false_pages": int(fire.sum()), "arl0_runs_per_cell": round(arl0, 1),
            "arl0_is_lower_bound": bool(fire.sum() == 0), "detection": {}}
        for d in dmds:
            f2, p2 = replay(o_det[d], h, drift_points, min_runs)
            delay = first_hit(f2.transpose(0, 2, 1).reshape(R * C, -1), pre, post).reshape(R, C)
            dp = first_hit(p2.transpose(0, 2, 1).reshape(R * C, -1), pre, post).reshape(R, C)
            ok = ~np.isnan(delay)
            within = [float((delay[ok] <= k).mean()) for k in range(1, post + 1)]
            p3 = np.array([np.mean(delay[ok[:, c], c] <= 3) for c in range(C)])
            eff = {}
            for name, dl, a0 in (("firing", delay, arl0), ("cusum", dp, arl0_cusum)):
                cells = []
                for c in range(C):
                    v = dl[~np.isnan(dl[:, c]), c]
                    if (v <= post).mean() < 0.95:
                        continue  # too many undetected within the window: no mean delay
                    bound = 2 * sd_cell[c] ** 2 * math.log(a0 * n_cell[c]) / d ** 2
                    cells.append(bound / (v.mean() * n_cell[c]))
                eff[name] = round(float(np.median(cells)), 3) if cells else None
            row["detection"][str(d)] = {
                "p_within_3_runs": round(within[2], 4),
                "p_within_3_worst_cell": round(float(p3.min()), 4),
                "worst_cell": gen.cells[int(p3.argmin())],
                "p_within_3_per_cell": dict(zip(gen.cells, np.round(p3, 3).tolist(),
                                                strict=True)),
                "p_within_runs": [round(x, 4) for x in within],
                "mean_delay_runs_detected": round(float(delay[ok][delay[ok] <= post].mean()), 3)
                if (delay[ok] <= post).any() else None,
                "excluded_already_alarmed": int((~ok).sum()),
                "lorden_efficiency_median_cell": eff}
        out["h"][key] = row
    return out


def engine_units(gen: Gen, idx: np.ndarray, scores: np.ndarray, answered: np.ndarray,
                 group: np.ndarray, groups: list[str]) -> UnitScores:
    """The units the store hands the engine (Store.unit_scores) for these answers: a
    triplet answered in no language is no unit; lost cells hold 0."""
    keep = answered.any(axis=(1, 2))
    return UnitScores(languages=gen.langs, groups=groups, group=group[keep],
                      scenarios=SCENARIOS, scenario=gen.scen[idx[keep]], countries=gen.cells,
                      country=gen.cell_of[idx[keep]],
                      scores=np.where(answered, np.rint(scores * 100), 0).astype(np.int64)[keep],
                      triplet=idx[keep].astype(np.int64), answered=answered[keep])


def pooled_rows(gen: Gen, filled: UnitScores) -> dict[tuple[str, str], MDRow]:
    """The engine's pooled MD cells (monitor.stats.md_rows) of units already filled
    (monitor.stats.fill), by (group, country), as md_of computes them."""
    return {(r.group, r.country): r for r in md_rows(filled, gen.local)
            if r.scenario == POOLED}


def engine_md(gen: Gen, n: int, runs: int, seed: int) -> dict[str, Any]:
    """Each run's pooled MD cells from the engine, with the profile's losses, against the
    truth: CI coverage, error, n; the first chunk checked equal to md_table (DuckDB)."""
    truth = dict(zip(gen.cells, gen.truth_md(gen.bias), strict=True))
    rng = np.random.default_rng([seed, n, 4])
    rows: list[MDRow] = []
    max_diff = math.nan
    asked = answered_cells = 0
    for chunk in range(0, runs, 100):
        k = min(100, runs - chunk)
        idx, group = gen.batch(seed, n, k, chunk)
        scores = gen.draw(gen.mu(idx, gen.bias), gen.noise(rng, len(idx)))
        answered = gen.answered(rng, len(idx))
        asked, answered_cells = asked + answered[:, :, 0].size, answered_cells + int(
            answered[:, :, 0].sum())
        names = [str(g) for g in range(k)]
        cells = pooled_rows(gen, fill(engine_units(gen, idx, scores, answered, group, names)))
        rows += cells.values()
        if chunk == 0:  # the same answers stored in DuckDB and read by md_of
            frame = gen.frame(idx, scores, group, by_scenario=True)[answered.ravel()]
            db = md_table(frame, gen.langs, {lang: gen.cat.languages[lang] for lang in gen.langs},
                          by_run=True)
            db = db[db["scenario"] == POOLED]
            max_diff = max(max(abs(cells[(g, c)].md - md), abs(cells[(g, c)].se - se)
                               if math.isfinite(se) else 0.0, abs(cells[(g, c)].n - nn))
                           for g, c, md, se, nn in db[["group", "country", "md", "se", "n"]]
                           .itertuples(index=False))
    df = pd.DataFrame([{"country": r.country, "md": r.md, "lo": r.ci_lower, "hi": r.ci_upper,
                        "n": r.n} for r in rows])
    df["truth"] = df["country"].map(truth)
    fin = df[np.isfinite(df["lo"])].assign(hit=lambda f: (f["lo"] <= f["truth"])
                                           & (f["truth"] <= f["hi"]),
                                           err=lambda f: f["md"] - f["truth"])
    per = fin.groupby("country").agg(coverage=("hit", "mean"), error=("err", "mean"),
                                     n=("n", "mean"))
    return {"triplets_per_run": n, "runs": runs, "cell_estimates": len(fin),
            "answered_share": round(answered_cells / asked, 4),
            "coverage": round(float(fin["hit"].mean()), 4),
            "coverage_worst_cell": round(float(per["coverage"].min()), 4),
            "worst_cell": str(per["coverage"].idxmin()),
            "mean_bias": round(float(fin["err"].mean()), 4),
            "mean_bias_se": round(float(fin["err"].std() / math.sqrt(len(fin))), 4),
            "engine_vs_md_table_max_abs_diff": max_diff,
            "cells": {c: {"truth": round(truth[c], 4), "mean_n": round(float(v.n), 2),
                          "coverage": round(float(v.coverage), 4),
                          "bias": round(float(v.error), 4)} for c, v in per.iterrows()}}


def engine_jsd(gen: Gen, n: int, reps: int, seed: int) -> dict[str, Any]:
    """Each run's excess JSD from the engine (monitor.stats.jsd_rows on the complete
    units, as jsd_of reads them) against the true distributions' JSD: CI coverage."""
    truth = gen.truth_jsd(gen.bias)
    names = [*gen.langs, "overall"]
    rng = np.random.default_rng([seed, n, 6])
    est, lo, hi = (np.full((reps, len(names)), np.nan) for _ in range(3))
    units_n = []
    for r in range(reps):
        idx = gen.runs(seed, n, 1, start=r)[0]
        scores = gen.draw(gen.mu(idx, gen.bias), gen.noise(rng, len(idx)))
        units = engine_units(gen, idx, scores, gen.answered(rng, len(idx)),
                             np.zeros(len(idx), int), ["pooled"]).complete()
        units_n.append(len(units.group))
        rows = {x.language: x for x in jsd_rows(units, {"pooled": r}) if x.scenario == POOLED}
        for i, lang in enumerate(names):
            if lang in rows:
                est[r, i], lo[r, i], hi[r, i] = (rows[lang].jsd_bits, rows[lang].ci_lower,
                                                 rows[lang].ci_upper)
    fin = np.isfinite(lo) & np.isfinite(hi)
    hit = (lo <= truth + 1e-12) & (truth - 1e-12 <= hi)
    cover = np.array([hit[fin[:, i], i].mean() if fin[:, i].any() else np.nan
                      for i in range(len(names))])
    return {"triplets_per_run": n, "reps": reps,
            "complete_units_per_run_mean": round(float(np.mean(units_n)), 1),
            "truth_bits": dict(zip(names, np.round(truth, 5).tolist(), strict=True)),
            "coverage": dict(zip(names, np.round(cover, 4).tolist(), strict=True)),
            "coverage_min": round(float(np.nanmin(cover)), 4),
            "runs_with_an_interval": int(fin[:, -1].sum()),
            "excess_bias": dict(zip(names, np.round(np.nanmean(est, axis=0) - truth, 5)
                                    .tolist(), strict=True))}


def run_observations(gen: Gen, idx: np.ndarray, scores: np.ndarray, answered: np.ndarray,
                     group: np.ndarray, k: int, base: dict[str, MDRow],
                     table: BaseTable | None
                     ) -> tuple[list[list[Observation | None]], np.ndarray, list[float]]:
    """The daemon's observation of each run's pooled cells ([cell][run]): the engine's
    MD of the run, CUPED against the baseline where it pays (monitor.watch.evaluate.
    observed; table None: baseline.covariate off); each cell's n per run; and per run
    the variance factor CUPED gave its cells (their mean; 1.0 where it was not used)."""
    local = gen.local
    names = [f"{g:04d}" for g in range(k)]
    units = fill(engine_units(gen, idx, scores, answered, group, names))
    rows = pooled_rows(gen, units)
    out: list[list[Observation | None]] = [[None] * k for _ in gen.cells]
    n = np.zeros((k, len(gen.cells)))
    factors = []
    for g, name in enumerate(names):
        adj: dict[str, Adjusted] = {}
        if table is not None:
            cells, pers = adjust(units.subset(units.group == g), table, local)
            adj = cells if pers.used else {}
        factors.append(float(np.mean([a.factor for a in adj.values()])) if adj else 1.0)
        for ci, c in enumerate(gen.cells):
            if (r := rows.get((name, c))) is not None:
                out[ci][g] = observed(r, base.get(c), adj)
                n[g, ci] = r.n
    return out, n, factors


def engine_drift(gen: Gen, n: int, reps: int, base_runs: int, monitored: int, pre: int,
                post: int, dmds: list[float], seed: int, covariate: bool = True
                ) -> dict[str, Any]:
    """drift_data and sweep's inputs through the engine (losses and all): per rep the
    automatic baseline (the first B runs pooled, with its covariate table unless
    `covariate` is off), the monitored runs' observations, and for each shift the same
    answers with the bias moved at run pre."""
    local = gen.local
    rng = np.random.default_rng([seed, n, 5])
    shifted = {d: gen.shift_for(d) for d in dmds}
    T = base_runs + monitored
    o_fa: list[list[list[Observation | None]]] = []
    o_det: dict[float, list[list[list[Observation | None]]]] = {d: [] for d in dmds}
    ns: list[np.ndarray] = []
    sds: list[list[float]] = []
    base_sd: list[float] = []  # each rep's baseline, as the daemon sizes its h from it
    factors: list[float] = []
    for r in range(reps):
        idx, group = gen.batch(seed, n, T, r * T)  # consecutive runs, as the daemon walks
        noise, answered = gen.noise(rng, len(idx)), gen.answered(rng, len(idx))
        scores = gen.draw(gen.mu(idx, gen.bias), noise)
        inb = group < base_runs
        base_units = fill(engine_units(gen, idx[inb], scores[inb], answered[inb],
                                       np.zeros(int(inb.sum()), int), ["base"]))
        base = {c: r for (_, c), r in pooled_rows(gen, base_units).items()}
        table = base_table(base_units, local) if covariate else None
        mon = ~inb
        obs, nn, fs = run_observations(gen, idx[mon], scores[mon], answered[mon],
                                       group[mon] - base_runs, monitored, base, table)
        factors += fs
        o_fa.append(obs)
        ns.append(nn)
        base_sd.append(sd_from_md(list(base.values())))
        sds.append([base[c].se * math.sqrt(base[c].n) if c in base else math.nan
                    for c in gen.cells])
        win = (group >= base_runs + pre) & (group < base_runs + pre + post)
        for d in dmds:
            s2 = gen.draw(gen.mu(idx[win], shifted[d]), noise[win])
            after, _, _ = run_observations(gen, idx[win], s2, answered[win],
                                           group[win] - base_runs - pre, post, base, table)
            o_det[d].append([obs[c][:pre] + after[c] for c in range(len(gen.cells))])
        if (r + 1) % 10 == 0:
            print(f"  engine drift {len(gen.langs)} languages, {n}/run: rep {r + 1}/{reps}",
                  flush=True)
    return {"o_fa": o_fa, "o_det": o_det, "n_cell": np.mean(ns, axis=(0, 1)),
            "sd_cell": np.nanmean(np.array(sds), axis=0), "base_sd": base_sd,
            "cuped": {"runs_used_share": round(float(np.mean(np.array(factors) < 1.0)), 4),
                      "variance_factor_mean": round(float(np.mean(factors)), 4)}}


def recommend(drift: dict[str, Any], h_grid: list[float], default_h: float) -> dict[str, Any]:
    """Per run size: the smallest h with <= 1 false page per 100 runs (upper 1-sigma bound),
    and whether dMD = 0.5 is then detected within 3 runs with p >= 0.8."""
    out: dict[str, Any] = {}
    for size, res in drift.items():
        rows = res["h"]
        ok = [h for h in h_grid if rows[str(h)]["false_alarms_per_100_runs"]
              + rows[str(h)]["false_alarms_se"] <= 1.0]
        h = min(ok) if ok else None
        det = rows[str(h)]["detection"]["0.5"] if h is not None else None
        dflt = rows.get(str(default_h))
        out[size] = {
            "h_min_for_fa_target": h,
            "p_detect_0.5_within_3": det["p_within_3_runs"] if det else None,
            "p_detect_0.5_within_3_worst_cell": det["p_within_3_worst_cell"] if det else None,
            "both_targets_met_all_cells_pooled": bool(det and det["p_within_3_runs"] >= 0.8),
            "both_targets_met_every_cell": bool(det and det["p_within_3_worst_cell"] >= 0.8),
            "at_default_h": None if dflt is None else {
                "h": default_h, "false_alarms_per_100_runs": dflt["false_alarms_per_100_runs"],
                "p_detect_0.5_within_3": dflt["detection"]["0.5"]["p_within_3_runs"],
                "p_detect_0.5_within_3_worst_cell":
                    dflt["detection"]["0.5"]["p_within_3_worst_cell"]}}
    return out


def planner_check(cat: Catalog, drift: dict[str, Any], rec: dict[str, Any],
                  drift_points: float, default_h: float, base_runs: int) -> dict[str, Any]:
    """monitor.watch.plan's normal-model simulation against this full simulation, same h."""
    from monitor.watch.plan import assess

    cells = cell_shares(cat, SCENARIOS, SIX)
    out: dict[str, Any] = {}
    for size, res in drift.items():
        sd = float(np.mean(list(res["sd_d_per_cell"].values())))
        for h in {default_h, rec[size]["h_min_for_fa_target"] or default_h}:
            _, fa, p = assess(int(size), cells, sd, 0.5, math.inf, 3, drift_points, 2,
                                base_runs * int(size), hs=np.array([h]))
            row = res["h"][str(h)]
            out[f"{size}/h={h:g}"] = {
                "sd": round(sd, 3), "plan_false_alarms_per_100": fa,
                "bench_false_alarms_per_100": row["false_alarms_per_100_runs"],
                "bench_false_alarms_se": row["false_alarms_se"],
                "plan_p_within_3_worst_cell": p,
                "bench_p_within_3_worst_cell": row["detection"]["0.5"]["p_within_3_worst_cell"]}
    return out


def figures(md: dict[str, Any], drift: dict[str, Any], h_grid: list[float],
            default_h: float, base_runs: int) -> list[str]:
    from monitor.report.figures import Series, bar_chart, line_chart

    paths = [line_chart(OUT / "stat_validation_false_alarms.png", [
        Series(f"{size} triplets/run", h_grid, [max(1e-3, res["h"][str(h)][
            "false_alarms_per_100_runs"]) for h in h_grid]) for size, res in drift.items()],
        title=f"False pages per 100 runs, no drift ({base_runs}-run baseline, 9 country cells)",
        xlabel="CUSUM h (z units)", ylabel="false pages / 100 runs", hlines={"target 1": 1.0},
        logy=True)]
    paths.append(line_chart(OUT / "stat_validation_p3_vs_h.png", [
        Series(f"{size} triplets/run", h_grid, [res["h"][str(h)]["detection"]["0.5"][
            "p_within_3_runs"] for h in h_grid]) for size, res in drift.items()],
        title="P(FIRING within 3 runs of a dMD = 0.5 shift), all cells",
        xlabel="CUSUM h (z units)", ylabel="probability", hlines={"target 0.8": 0.8}))
    series = []
    for size, res in drift.items():
        for d in ("0.5", "1.0"):
            p = res["h"][str(default_h)]["detection"][d]["p_within_runs"]
            series.append(Series(f"{size}/run, dMD={d}", list(range(1, len(p) + 1)), p))
    paths.append(line_chart(OUT / "stat_validation_detection.png", series,
                            title=f"Detection (FIRING) after a shift, h = {default_h:g}",
                            xlabel="runs after the shift", ylabel="P(detected)",
                            hlines={"0.8": 0.8}))
    cells = list(next(iter(md.values()))["cells"])
    paths.append(bar_chart(OUT / "stat_validation_md_coverage.png", cells, {
        f"{m['triplets_per_run']}/run": [m["cells"][c]["coverage"] for c in cells]
        for m in md.values()}, title="MD 95% CI coverage per country cell (target 0.93-0.97)",
        ylabel="coverage"))
    return [str(p.relative_to(OUT.parent.parent)) for p in paths]


def engine_main(args: argparse.Namespace, drift_points: float, fa_target: float,
               default_h: float) -> None:
    """The engine's part: MD's and JSD's coverage and the CUSUM's false pages and detection
    (each rep also at the h the daemon's `cusum_h: auto` derives from its baseline, for
    the CUSUM alone), every statistic from the engine on the generator's arrays: the
    lossy profile at 6 or 14 languages, the demo profile at 14."""
    lossy = args.profile == "lossy"
    languages = SIX if args.languages == 6 else FOURTEEN
    big = (120 if args.languages == 6 else 350) if lossy else 200  # lossy: the planner's
    sizes = [int(x) for x in (args.sizes or f"40,{big}").split(",")]
    h_grid = [float(x) for x in (args.h_grid or "3,4,5,6,7,8,10,12,14,16").split(",")]
    start = time.time()
    cat = load_catalog()
    gen = LossyGen(cat, DEMO_BIAS, languages) if lossy else Gen(cat, DEMO_BIAS,
                                                                 languages=languages)
    cells = cell_shares(cat, SCENARIOS, languages)
    md = {str(n): engine_md(gen, n, args.md_runs if n == sizes[0] else args.md_runs // 3,
                           args.seed) for n in sizes}
    print(json.dumps({n: {k: v for k, v in m.items() if k != "cells"} for n, m in md.items()}),
          flush=True)
    jsd = {str(n): engine_jsd(gen, n, args.jsd_reps, args.seed) for n in sizes}
    print(json.dumps({n: [j["coverage_min"], j["complete_units_per_run_mean"]]
                      for n, j in jsd.items()}), flush=True)
    drift: dict[str, Any] = {}
    for n in sizes:
        data = engine_drift(gen, n, args.reps, args.baseline_runs, args.monitored_runs, PRE,
                            POST, DMDS, args.seed, covariate=not args.no_covariate)
        h_auto = [baseline_h(cells, sd, n, args.baseline_runs * n, fa_target=fa_target,
                             drift_points=drift_points, min_runs_firing=2).h
                  for sd in data["base_sd"]]
        drift[str(n)] = sweep_obs(gen, data["o_fa"], data["o_det"], data["n_cell"],
                                  data["sd_cell"], h_grid, drift_points, 2, PRE, POST, h_auto)
        drift[str(n)]["h_auto_per_rep"] = {f"{h:g}": h_auto.count(h) for h in sorted(set(h_auto))}
        drift[str(n)]["cuped"] = data["cuped"]
    rec = recommend(drift, h_grid, default_h)
    for size, res in drift.items():
        auto = res["h"]["auto"]
        rec[size]["at_auto_h"] = {
            "h": res["h_auto_per_rep"],
            "false_alarms_per_100_runs": auto["false_alarms_per_100_runs"],
            "false_alarms_se": auto["false_alarms_se"],
            "p_detect_0.5_within_3": auto["detection"]["0.5"]["p_within_3_runs"],
            "p_detect_0.5_within_3_worst_cell": auto["detection"]["0.5"]["p_within_3_worst_cell"],
            "worst_cell": auto["detection"]["0.5"]["worst_cell"]}
    doc = {"command": "python bench/stat_validation.py " + " ".join(sys.argv[1:]),
           "machine": f"{platform.machine()}, Python {platform.python_version()}",
           "definitions": {
               "generator": ("the simulated endpoint's lossy profile (monitor/measure/"
                             "simulated.py PROFILES: noise sd 1.3 with 30% persistent per "
                             "triplet x language x option, call sd 0.6, leniency ko +0.3 ja "
                             "-0.2 de -0.2, each language's answers lost whole at its refusal + "
                             "garble rate); a numpy replica (LossyGen)" if lossy else
                             "the demo profile (noise sd 1, every answer read); a numpy "
                             "replica (Gen)") + f", demo biases, {len(languages)} languages",
               "md": "the engine's pooled cell of each run (monitor.stats: fill, md_rows), "
                     "checked equal to md_table (the same answers stored in DuckDB)",
               "jsd": "the engine's excess JSD of each run's pooled cell (jsd_rows on the "
                      "complete units, as jsd_of) against the JSD of the exact population "
                      "score distributions",
               "md_truth": "E[d] over the sampler's population from the exact rounded-and-"
                           "clipped normal score distributions given each triplet's persistent "
                           "part",
               "drift": "the daemon's observation (monitor.watch.evaluate.observed: the run's "
                        "engine MD, CUPED against the baseline where it pays) and its step; "
                        "baseline = the first B runs pooled (the automatic baseline); the CUSUM "
                        "alone (no top-up: bench/topup.py measures it); row 'auto': each rep "
                        "at the h `cusum_h: auto` gives its baseline for the CUSUM alone "
                        "(monitor.watch.reference.baseline_h, floor 0)"},
           "covariate": not args.no_covariate,
           "md": md, "jsd": jsd, "drift": drift, "recommendation": rec,
           "seconds": round(time.time() - start, 1)}
    out = args.out or OUT / (f"stat_validation_{args.profile}_{args.languages}"
                             f"{'_no_covariate' if args.no_covariate else ''}.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"md": {k: [v["coverage"], v["coverage_worst_cell"]] for k, v in md.items()},
                      "jsd_cov_min": {k: v["coverage_min"] for k, v in jsd.items()},
                      "recommendation": rec, "seconds": doc["seconds"]}, indent=1))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--reps", type=int, default=200, help="drift replications per run size")
    ap.add_argument("--jsd-reps", type=int, default=300)
    ap.add_argument("--md-runs", type=int, default=1000)
    ap.add_argument("--check-runs", type=int, default=60, help="real-path runs for the check")
    ap.add_argument("--sizes", default=None, help="default 40,100,200; lossy: 40 and the "
                    "planner's size (120 at 6 languages, 350 at 14); demo at 14: 40,200")
    ap.add_argument("--h-grid", default=None,
                    help="default 3,4,5,5.5,6,6.5,7,8,10,12; the engine's part (lossy, or "
                         "14 languages): 3,4,5,6,7,8,10,12,14,16")
    ap.add_argument("--baseline-runs", type=int, default=20)  # the daemon's default
    ap.add_argument("--monitored-runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny sizes: a smoke test")
    ap.add_argument("--drift-only", action="store_true",
                    help="only the drift sweep (no checks, no figures)")
    ap.add_argument("--drift-points", type=float, default=None,
                    help="thresholds.drift_md_points to simulate (default: the config's)")
    ap.add_argument("--profile", choices=["demo", "lossy"], default="demo",
                    help="lossy: the realistic score model with each language's losses; "
                         "it and 14 languages run the engine's part (engine_main)")
    ap.add_argument("--languages", type=int, choices=[6, 14], default=6,
                    help="the six or the fourteen languages")
    ap.add_argument("--no-covariate", action="store_true",
                    help="the engine's part with baseline.covariate off (no CUPED)")
    ap.add_argument("--out", type=Path, default=None,
                    help="default bench/results/stat_validation.json, or "
                         "stat_validation_<profile>_<languages>[_no_covariate].json")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.jsd_reps, args.md_runs, args.check_runs = 10, 10, 100, 2
    from monitor.config import CUSUM_H, Thresholds

    t = Thresholds()
    drift_points = t.drift_md_points if args.drift_points is None else args.drift_points
    if args.profile == "lossy" or args.languages != 6:
        engine_main(args, drift_points, t.false_alarms_per_100, CUSUM_H)
        return
    args.out = args.out or OUT / "stat_validation.json"
    sizes = [int(x) for x in (args.sizes or "40,100,200").split(",")]
    h_grid = [float(x) for x in (args.h_grid or "3,4,5,5.5,6,6.5,7,8,10,12").split(",")]
    dmds, pre, post = DMDS, PRE, POST
    start = time.time()
    cat = load_catalog()
    gen = Gen(cat, DEMO_BIAS)
    check = None if args.drift_only else generator_check(cat, gen, args.check_runs, 40)
    md = {} if args.drift_only else {str(n): md_validation(
        gen, n, args.md_runs if n == sizes[0] else args.md_runs // 3, args.seed) for n in sizes}
    jsd = {} if args.drift_only else {
        name: {str(n): jsd_validation(cat, DEMO_BIAS, shift, n, args.jsd_reps, args.seed)
               for n in (40, 200)}
        for name, shift in (("demo", None), ("demo+leniency", {"ko": 0.5, "ja": -0.3}))}
    drift = {}
    for n in sizes:
        data = drift_data(gen, n, args.reps, args.baseline_runs, args.monitored_runs, pre, post,
                          dmds, args.seed)
        drift[str(n)] = sweep(gen, data, h_grid, drift_points, 2, dmds)
    rec = recommend(drift, h_grid, CUSUM_H)
    plan_check = planner_check(cat, drift, rec, drift_points, CUSUM_H, args.baseline_runs)
    doc = {"command": "python bench/stat_validation.py " + " ".join(sys.argv[1:]),
           "machine": f"{platform.machine()}, Python {platform.python_version()}",
           "seconds": None,
           "definitions": {
               "generator": "monitor/measure/simulated.py score model, demo biases (monitor/data/"
                            "demo.yaml), noise_sd 1, all 3 scenarios, 6 languages; a numpy "
                            "replica draws the scores (see generator_check)",
               "md_truth": "E[d] over the whole triplet population from the exact rounded-and-"
                           "clipped normal score distribution (not 5b/6: clipping at 10 lowers it)",
               "jsd_truth": "JSD_l = JSD(P_l, G) in bits with P_l the exact population score "
                            "distribution in language l and G their mean (checked against the "
                            "plug-in on 53,100 simulated triplets); estimator = jsd_table's "
                            "excess JSD of the pooled cell 'all'",
               "false_alarm": "a pooled country cell entering FIRING (a page) without any "
                              "change, summed over the 9 cells, per 100 monitored runs; baseline "
                              "= the first B runs pooled (the automatic baseline); drift only "
                              "(md_threshold off); min_runs_firing 2; drift_md_points "
                              f"{drift_points}",
               "detection": f"the bias moves at monitored run {pre + 1} so that every cell's "
                            "true MD moves by dMD; delay = runs from the shift to FIRING; cells "
                            "that alarmed before the shift are excluded",
               "lorden": "efficiency = 2 sd_d^2 ln(ARL0 n) / dMD^2 / (mean delay runs x n), "
                         "n = the cell's triplets per run, ARL0 = runs per false page per cell; "
                         "median over cells detected >= 95% within 12 runs; 'cusum' uses the "
                         "delay to the CUSUM alarm (PENDING) and the ARL0 of CUSUM alarms. The "
                         "bound is asymptotic (ARL0 -> inf): at ARL0 of a few hundred runs an "
                         "efficiency above 1 is possible and means 'at the bound'"},
           "generator_check": check, "md": md, "jsd": jsd, "drift": drift,
           "recommendation": rec, "planner_check": plan_check}
    doc["figures"] = [] if args.drift_only else figures(md, drift, h_grid, CUSUM_H,
                                                              args.baseline_runs)
    doc["seconds"] = round(time.time() - start, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps({"md": {k: v["coverage"] for k, v in md.items()},
                      "jsd_cov_min": {k: {n: v[n]["coverage_min"] for n in v}
                                      for k, v in jsd.items()},
                      "recommendation": rec, "seconds": doc["seconds"]}, indent=1))


if __name__ == "__main__":
    main()
