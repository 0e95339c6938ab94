"""`monitor plan --compare`: the calls `monitor compare` needs to decide a change of
--delta MD points, for an sd of d and a persistence (docs/plan.md, "Planning a
comparison").

The paired difference of one triplet has sd sd_pair = sd sqrt(2 (1 - rho)) (rho:
the share of d that comes back when the same triplet is asked again, the same in
both setups). The comparison's own test (monitor.compare.sequential) is simulated
on normal pairs (monitor.compare.plan) with the catalogue's triplets and countries:
with no change anywhere, and with a change of --delta in the country fewest
triplets hold (the slowest to decide). Live: both endpoints asked; against the
stored baseline: the candidate only.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import numpy as np

from monitor.catalog import load_catalog
from monitor.commands.plan import _number, _persistence, _stored
from monitor.compare import plan as cp
from monitor.compare.sequential import ALPHA, BETA
from monitor.compare.start import BATCH_TRIPLETS, DEFAULT_MAX_CALLS
from monitor.config import load_settings
from monitor.errors import UsageError

__all__ = ["plan_compare"]

REPS = 1000


def _mode(pop: cp.Population, sd_pair: float, delta: float, worst: int, per_triplet: int,
          max_calls: int) -> dict[str, Any]:
    cap = max_calls // per_triplet
    shift = np.zeros(len(pop.names))
    shift[worst] = delta
    none = cp.simulate(pop, cp.normal_draw(pop.holds, np.zeros(len(pop.names)), sd_pair),
                       margin=delta, max_triplets=cap, reps=REPS)
    moved = cp.simulate(pop, cp.normal_draw(pop.holds, shift, sd_pair), margin=delta,
                        max_triplets=cap, reps=REPS, seed=cp.SEED + 1)
    return {"calls_per_triplet": per_triplet, "max_calls": max_calls,
            "no_change": cp.summary(none, per_triplet),
            "change": cp.summary(moved, per_triplet, shifted=worst)}


def plan_compare(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    s = settings.sampling
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    sd_arg = _number(args.sd, "--sd", 1.0) if args.sd is not None else None
    delta = _number(args.delta, "--delta", settings.thresholds.drift_md_points)
    rho_arg = (_number(args.persistence, "--persistence", 0.0)
               if args.persistence is not None else None)
    if rho_arg is not None and not 0 <= rho_arg < 1:
        raise UsageError(f"--persistence {args.persistence}: must lie in [0, 1)")
    max_calls = int(_number(args.max_calls, "--max-calls", DEFAULT_MAX_CALLS, whole=True))
    from monitor.commands.reading import stored

    store = stored(settings.storage)
    pop = cp.population(catalog, s.scenarios, s.languages)
    if not pop.names or not len(pop.holds):
        raise UsageError("sampling.languages / scenarios: no monitored country to compare")
    worst = int(np.argmin(pop.holds.mean(axis=0)))
    names = args.endpoint or [e.name for e in settings.endpoints]
    out = []
    for name in names:
        settings.endpoint(name)
        sd, sd_source, _ = _stored(store, name, catalog, sd_arg)
        rho, rho_source = _persistence(store, name, rho_arg)
        sd_pair = cp.paired_sd(sd, rho)
        langs = len(s.languages)
        out.append({
            "endpoint": name, "sd": round(sd, 4), "sd_source": sd_source,
            "persistence": round(rho, 4), "persistence_source": rho_source,
            "sd_pair": round(sd_pair, 4), "delta": delta, "alpha": ALPHA, "beta": BETA,
            "batch_triplets": BATCH_TRIPLETS, "languages": langs,
            "countries": pop.names, "worst_country": pop.names[worst],
            "live": _mode(pop, sd_pair, delta, worst, 2 * langs, max_calls),
            "against_baseline": _mode(pop, sd_pair, delta, worst, langs, max_calls),
            "method": "monitor compare's sequential test simulated on normal pairs, "
                      f"{REPS} replications"})
    print(json.dumps({"compare_plans": out}, indent=2) if args.json else
          "\n\n".join(_text(r) for r in out))
    return 0


def _line(x: dict[str, Any]) -> str:
    n, c = x["no_change"], x["change"]
    return (f"no change anywhere: {n['calls_mean']:.0f} calls on average, {n['calls_p95']} "
            f"at the 95th percentile, a false regression in {n['p_false_regression']:.1%} "
            f"(inconclusive {n['p_inconclusive']:.1%}); a change of the margin in the "
            f"slowest country: flagged in {c['p_regression']:.1%}, "
            f"{c['calls_mean']:.0f} calls on average ({c['calls_p95']} p95)")


def _text(r: dict[str, Any]) -> str:
    return "\n".join([
        f"endpoint {r['endpoint']}: sd of d {r['sd']:.3f} ({r['sd_source']}), persistence "
        f"{r['persistence']:g} ({r['persistence_source']}): sd of a paired difference "
        f"{r['sd_pair']:.3f}",
        f"  `monitor compare` to decide a change of {r['delta']:g} points per country "
        f"({len(r['countries'])} countries, {r['alpha']:g} false regressions over all, "
        f"{r['beta']:g} missed per country; slowest {r['worst_country']}):",
        f"  live (both endpoints, cap {r['live']['max_calls']}): " + _line(r["live"]),
        f"  --against-baseline (the candidate only, cap {r['against_baseline']['max_calls']}): "
        + _line(r["against_baseline"])])
