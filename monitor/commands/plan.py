"""`monitor plan`: the run size, h and cost per day for a detection target (docs/plan.md)."""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import numpy as np

from monitor.catalog import Catalog
from monitor.errors import UsageError
from monitor.stats import md_of
from monitor.store import RunRow, Store
from monitor.vocab import FINISHED, RunStatus
from monitor.watch import Scope
from monitor.watch.plan import (
    POWER,
    Cells,
    assess,
    cell_shares,
    make_plan,
    one_shot_n,
    sd_from_md,
    usable_cells,
)
from monitor.watch.plan_topup import assess_topup, plan_topup
from monitor.watch.reference import auto_h

__all__ = ["READ_RUNS", "Read", "cost_per_call", "plan_command", "read_shares", "stored_usage"]

#: Finished runs whose per-language coverage sizes a plan or a calibration (the latest).
READ_RUNS = 20


class Read(NamedTuple):
    """The share of answers read per language on an endpoint's latest finished runs,
    each local country's (its language's), and how many runs measured it (0: none
    stored, the dicts empty: every answer counts as read)."""

    by_language: dict[str, float]
    by_country: dict[str, float]
    runs: int

    def describe(self) -> str:
        if not self.runs:
            return "no stored runs: every answer counted as read (1.0)"
        shares = ", ".join(f"{lang} {r:.0%}" for lang, r in self.by_language.items())
        return f"answers read per language on the latest {self.runs} runs: {shares}"


def read_shares(store: Store | None, endpoint: str, catalog: Catalog, languages: list[str]
                ) -> Read:
    """The endpoint's measured read shares (Read) on its latest READ_RUNS complete or
    partial runs: what `monitor plan` and `baseline calibrate` size the runs by."""
    if store is None:
        return Read({}, {}, 0)
    runs = [r for r in store.runs(endpoint)
            if r.status in (RunStatus.COMPLETE, RunStatus.PARTIAL)][-READ_RUNS:]
    if not runs:
        return Read({}, {}, 0)
    cov = {lang: scored / asked for lang, asked, scored in
           store.call_summary([r.run_id for r in runs], languages).coverage if asked}
    return Read(cov, {c: cov[lang] for lang in cov for c in catalog.languages.get(lang, ())},
                len(runs))


def _number(text: str | None, flag: str, default: float, *, whole: bool = False) -> float:
    if text is None:
        return default
    try:
        value = int(text) if whole else float(text)
    except ValueError:
        raise UsageError(f"{flag} {text!r} is not a {'whole ' if whole else ''}number") from None
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"{flag} must be positive, got {text}")
    return value


def _runs_per_day(settings: Any, source: Any) -> float:
    from monitor.config import parse_every

    if settings.schedule.every:
        return 86400 / parse_every(settings.schedule.every)
    from monitor.daemon.scheduler import make_trigger, period_seconds  # the apscheduler module

    return 86400 / period_seconds(make_trigger(settings, source))


def _fixed_baseline(store: Store | None, endpoint: str) -> int | None:
    """Triplets of a baseline the user set (`baseline set` / `calibrate`): it stays until
    replaced, so later runs are compared with exactly it. An automatic one is re-collected
    at the planned run size, so it is modelled by the auto rule instead."""
    base = store.baseline(endpoint) if store is not None else None
    if store is None or base is None or base.auto:
        return None
    return sum(r.triplets for r in (store.get_run(x) for x in base.run_ids) if r is not None)


def stored_usage(store: Store | None, endpoint: str) -> dict[str, float | None]:
    """The mean tokens and cost of the endpoint's ok calls (None where nothing is stored):
    what cost_per_call prices."""
    use = store.usage(endpoint) if store is not None else None
    return {"input_tokens": use.mean_input_tokens if use else None,
            "output_tokens": use.mean_output_tokens if use else None,
            "cost_usd": use.mean_cost_usd if use else None}


def _stored(store: Store | None, endpoint: str, catalog: Catalog,
            sd_arg: float | None) -> tuple[float, str, dict[str, float | None]]:
    """sd from the endpoint's baseline runs, and the mean tokens / cost of its ok calls."""
    usage = stored_usage(store, endpoint)
    if sd_arg is not None:
        return sd_arg, "--sd", usage
    base = store.baseline(endpoint) if store is not None else None
    if base is not None:
        assert store is not None
        runs = [r for r in (store.get_run(x) for x in base.run_ids) if r is not None]
        what, note = "baseline", ""
    else:  # no baseline yet: the runs the automatic one would be made of
        runs = _comparable_runs(store, endpoint)
        what, note = "stored runs", "; no baseline yet"
    if store is None or not runs:
        raise UsageError(f"endpoint {endpoint}: no baseline and no complete run to estimate "
                         "the sd from; pass --sd (0.95 is the demo's), run `monitor probe "
                         "--once`, or make a baseline with `monitor baseline calibrate`")
    langs = runs[0].languages
    sd = sd_from_md(md_of(store, [r.run_id for r in runs], langs, catalog.languages))
    if not math.isfinite(sd) or sd <= 0:
        raise UsageError(f"endpoint {endpoint}: too few complete triplets in the {what} to "
                         "estimate the sd; pass --sd, or store more runs")
    return sd, (f"{what} ({len(runs)} runs, {sum(r.triplets for r in runs)} triplets{note})"
                ), usage


def _comparable_runs(store: Store | None, endpoint: str) -> list[RunRow]:
    """The finished runs in the scope of the endpoint's latest one (monitor.watch.scope):
    the runs an automatic baseline would be made of (monitor.watch.baseline)."""
    if store is None:
        return []
    runs = [r for r in store.runs(endpoint) if r.status in FINISHED]
    if not runs:
        return []
    return Scope.of(max(runs, key=lambda r: r.started_at)).pools(runs)


def _persistence(store: Store | None, endpoint: str, arg: float | None
                 ) -> tuple[float, str]:
    """How much of a triplet's d comes back when it is asked again (monitor.stats.covariate):
    --persistence, else the mean the endpoint's runs measured against their baseline
    (run_stats kind "persistence"), else 0."""
    if arg is not None:
        return arg, "--persistence"
    got = store.persistence(endpoint) if store is not None else None
    if got is None:
        return 0.0, "none measured yet"
    rho, runs = got
    return max(0.0, rho), f"measured: mean of {runs} runs against the baseline"


def cost_per_call(ep: Any, usage: dict[str, float | None]) -> tuple[float | None, str]:
    """USD per call: configured prices x mean stored tokens, else the stored cost."""
    price, tin, tout = ep.cost_per_1k_tokens, usage["input_tokens"], usage["output_tokens"]
    if price.input is not None and tin is not None:
        per_call = (tin * price.input + (tout or 0.0) * (price.output or 0.0)) / 1000
        return per_call, "cost_per_1k_tokens x mean stored tokens per call"
    if price.input is None and usage["cost_usd"] is not None:
        return usage["cost_usd"], "mean stored cost per call (provider pricing)"
    return None, ("unknown: no stored calls to measure tokens per call" if price.input
                  is not None else "unknown: set cost_per_1k_tokens or run probes first")


def plan_command(args: Any) -> int:
    import json

    from monitor.catalog import load_catalog
    from monitor.commands.reading import stored
    from monitor.config import load_settings

    settings, source = load_settings(args.config)
    t, s, mrf = settings.thresholds, settings.sampling, settings.alerts.min_runs_firing
    sd_arg = _number(args.sd, "--sd", math.nan) if args.sd is not None else None
    delta = _number(args.delta, "--delta", t.drift_md_points)
    fa = _number(args.false_alarms_per_100, "--false-alarms-per-100",
                 t.false_alarms_per_100)
    within = int(_number(args.within_runs, "--within-runs", 3, whole=True))
    base_arg = (int(_number(args.baseline_triplets, "--baseline-triplets", 1, whole=True))
                if args.baseline_triplets is not None else None)
    pers_arg = (_number(args.persistence, "--persistence", 0.0)
                if args.persistence is not None else None)
    if pers_arg is not None and not 0 <= pers_arg < 1:
        raise UsageError(f"--persistence {args.persistence}: must lie in [0, 1)")
    endpoints = [settings.endpoint(n) for n in args.endpoint or [e.name for e in
                                                                   settings.endpoints]]
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    cells = cell_shares(catalog, s.scenarios, s.languages)
    per_day = _runs_per_day(settings, source)
    store = stored(settings.storage)  # read-only; no file: nothing stored yet
    auto = settings.baseline.auto_min_triplets
    out = []
    for ep in endpoints:
        sd, sd_source, usage = _stored(store, ep.name, catalog, sd_arg)
        fixed = base_arg if base_arg is not None else _fixed_baseline(store, ep.name)
        # A cell's n is the usable triplets: the asked ones times the answers read in its
        # language on this endpoint's stored runs (lost answers leave triplets out).
        read = read_shares(store, ep.name, catalog, s.languages)
        usable = usable_cells(cells, read.by_country)
        # k is half the design shift (statistics.md): the plan designs for --delta.
        p = make_plan(usable, sd, delta, fa, within, drift_points=delta, min_runs_firing=mrf,
                      auto_min_triplets=auto, baseline_triplets=fixed)
        # the h the daemon uses, sized as it sizes it (on the asked cells)
        h_now, h_from = _current_h(settings, cells, sd, fixed)
        _, fa_now, p_now = assess(s.triplets_per_run, usable, sd, delta, math.inf, within,
                                    t.drift_md_points, mrf, auto, hs=np.array([h_now]),
                                    baseline_triplets=fixed)
        calls = round((p["triplets_per_run"] or 0) * len(s.languages) * per_day)
        rho, rho_source = _persistence(store, ep.name, pers_arg)
        if not settings.baseline.covariate:
            rho, rho_source = 0.0, "baseline.covariate is off"
        # With the baseline as covariate the detector sees (1 - rho^2) of the variance
        # (monitor.stats.covariate): the same detector at a smaller sd.
        sd_seen = sd * math.sqrt(1 - rho**2)
        top = _topup(settings, usable, sd_seen, delta, fa, within, fixed, h_now)
        if top is not None:
            top["persistence"] = {"rho": round(rho, 4), "source": rho_source,
                                  "sd_seen_by_the_detector": round(sd_seen, 4)}
        per_call, note = cost_per_call(ep, usage)
        tokens = (None if usage["input_tokens"] is None
                  else usage["input_tokens"] + (usage["output_tokens"] or 0.0))
        out.append({
            "endpoint": ep.name, "sd": round(sd, 4), "sd_source": sd_source, "delta": delta,
            "false_alarms_per_100_target": fa, "within_runs": within, "power": POWER, **p,
            "baseline_model": ("--baseline-triplets" if base_arg is not None else
                               "the stored baseline, set by the user" if fixed is not None
                               else "automatic"),
            "baseline_triplets": fixed,
            "read": {"share": {k: round(v, 4) for k, v in read.by_language.items()},
                     "runs": read.runs, "source": read.describe()},
            "calls_per_run": (p["triplets_per_run"] * len(s.languages) if p["reachable"]
                              else None),
            "current": {"triplets_per_run": s.triplets_per_run, "h": h_now, "h_from": h_from,
                        "drift_md_points": t.drift_md_points,
                        "false_alarms_per_100": None if fa_now is None else round(fa_now, 4),
                        "p_detect": None if p_now is None else round(p_now, 3)},
            "languages": len(s.languages), "runs_per_day": round(per_day, 3),
            "calls_per_day": calls if p["reachable"] else None,
            "mean_tokens_per_call": None if tokens is None else round(tokens, 1),
            "cost_per_day_usd": None if per_call is None or not p["reachable"]
            else round(calls * per_call, 4), "cost_note": note,
            "one_shot_triplets_per_cell": one_shot_n(sd, delta), "topup": top,
            "method": "seeded vectorised CUSUM simulation with baseline estimation error"})
    print(json.dumps({"plans": out}, indent=2) if args.json else
          "\n\n".join(_text(r) for r in out))
    return 0


def _current_h(settings: Any, cells: Cells, sd: float, fixed: int | None) -> tuple[float, str]:
    """The configured h, or with `auto` the h the daemon sizes against this baseline."""
    t = settings.thresholds
    if t.cusum_h != "auto":
        return float(t.cusum_h), "thresholds.cusum_h"
    d = auto_h(settings, cells, sd, fixed)
    return d.h, f"thresholds.cusum_h auto: {d.describe()}"


def _topup(settings: Any, cells: Cells, sd: float, delta: float, fa: float, within: int,
           fixed: int | None, h: float) -> dict[str, Any] | None:
    """The detector with its top-up (config `topup`): at the configured run size, and the
    smallest run size meeting the target; None when the top-up is off."""
    tp = settings.topup
    if not tp.enabled:
        return None
    mrf = settings.alerts.min_runs_firing
    auto = settings.baseline.auto_min_triplets
    now = assess_topup(settings.sampling.triplets_per_run, cells, sd, delta, within,
                         delta, mrf, auto, tp, h, fixed)
    best = plan_topup(cells, sd, delta, fa, within, drift_points=delta, min_runs_firing=mrf,
                      auto_min_triplets=auto, tp=tp, h=h, baseline_triplets=fixed)
    return {"suspect_h": tp.suspect_h, "alpha": tp.alpha, "beta": tp.beta,
            "batch_triplets": tp.batch_triplets, "max_triplets": tp.max_triplets,
            "max_run_share": tp.max_run_share, "mean_run_share": tp.mean_run_share,
            "current": now, "plan": best}


def _topup_text(r: dict[str, Any]) -> list[str]:
    top = r["topup"]
    if top is None:
        return ["  top-up: off (topup.enabled)"]
    langs = r["languages"]

    def line(x: dict[str, Any]) -> str:
        spread = x["false_alarms_per_100_spread"]
        return (f"{x['triplets_per_run']} triplets/run: {x['false_alarms_per_100']:g} false "
                f"pages per 100 runs (p90 over baselines {spread['p90']:g}), p(detect) = "
                f"{x['p_detect']:g} (worst cell {x['worst_cell']}); calls per run "
                f"{x['triplets_asked_mean'] * langs:.0f} on average, "
                f"{x['triplets_asked_shifted'] * langs:.0f} while a shift is confirmed, at "
                f"most {x['triplets_asked_max'] * langs}")
    best = top["plan"]
    pers = top["persistence"]
    cov = ([f"  the baseline as covariate (CUPED): persistence {pers['rho']:g} "
            f"({pers['source']}), so the detector sees an sd of "
            f"{pers['sd_seen_by_the_detector']:g}"] if pers["rho"] > 0 else [])
    return [*cov, f"  with the top-up (suspect_h {top['suspect_h']:g}, alpha {top['alpha']:g}, "
            f"beta {top['beta']:g}, batches of {top['batch_triplets']} up to "
            f"{top['max_triplets']} triplets; a run's top-ups at most "
            f"{top['max_run_share']:g}x its plan"
            + ("" if top["mean_run_share"] is None else
               f", {top['mean_run_share']:g}x on average over runs") + "):",
            "    plan: " + (line(best) if best else "not reachable on the grid"),
            "    now:  " + line(top["current"])]


def _text(r: dict[str, Any]) -> str:
    c, now, e = r["cusum"], r["current"], r["expected"]
    lines = [f"endpoint {r['endpoint']}: sd of paired differences {r['sd']:.3f} "
             f"({r['sd_source']})", f"  target: dMD >= {r['delta']:g} paged (FIRING) within "
             f"{r['within_runs']} runs with p >= {r['power']:g} in every country cell, <= "
             f"{r['false_alarms_per_100_target']:g} false pages per 100 runs",
             f"  sized for usable triplets, {r['read']['source']}"]
    cost = (f"${r['cost_per_day_usd']:.2f} ({r['cost_note']})"
            if r["cost_per_day_usd"] is not None else r["cost_note"])
    lines += [f"  CUSUM alone (no top-up): triplets per run: {r['triplets_per_run']}",
              "  usable triplets per country cell: " + ", ".join(
        f"{k} {v:g}" for k, v in r["triplets_per_cell"].items()) + f" (smallest: "
        f"{r['smallest_cell']}); calls per run {r['calls_per_run']}",
        f"  CUSUM: h = {c['h']:g} nats, gain at the shift "
        f"{c['gain_min']:g}..{c['gain_max']:g} nats/run (thresholds.drift_md_points = "
        f"{c['drift_md_points']:g}), baseline {c['baseline_triplets']} triplets "
        f"({r['baseline_model']}): {e['false_alarms_per_100']:g} false pages per 100 runs, "
        f"p(detect) = {e['p_detect']:g}", f"  calls per day: {r['calls_per_day']} "
        f"({r['triplets_per_run']} x {r['languages']} languages x {r['runs_per_day']:g} "
        f"runs/day)", f"  cost per day: {cost}"] if r["reachable"] else [
        "  not reachable: no run size meets both (catalog size; docs/plan.md)" + (
            "" if r["baseline_triplets"] is None else
            f"; the fixed baseline of {r['baseline_triplets']} triplets "
            f"({r['baseline_model']}) may be too small: its error is shared by every run. "
            "`monitor baseline calibrate` sets a larger one; `--baseline-triplets N` plans "
            "for it")]
    if now["drift_md_points"] != r["delta"]:
        lines.append(f"  note: the config has thresholds.drift_md_points = "
                     f"{now['drift_md_points']:g}; set it to {r['delta']:g} for this plan")
    lines += _topup_text(r)
    if now["h_from"] != "thresholds.cusum_h":
        lines.append(f"  {now['h_from']}")
    return "\n".join([*lines, f"  now: {now['triplets_per_run']} triplets/run, h = {now['h']:g}"
                       f": {now['false_alarms_per_100']:g} false pages per 100 runs, p(detect) "
                       f"= {now['p_detect']:g}; a one-shot test needs "
                       f"{r['one_shot_triplets_per_cell']} triplets containing the country"])
