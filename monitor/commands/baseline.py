"""`monitor baseline set` / `monitor baseline show`.

A baseline is the set of runs an endpoint's new runs are compared with. It
changes only by an explicit user action (or once, automatically, when there
is none: see monitor.watch.evaluate). All its runs must be finished, of one endpoint,
on one catalog version and one model id; a full rotation cycle of runs gives
the most precise baseline. Works while the daemon runs: the store holds the
DuckDB file only per operation.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from monitor.catalog import load_catalog
from monitor.commands.reading import stored
from monitor.config import load_settings
from monitor.errors import UsageError
from monitor.stats import md_of, nullable
from monitor.store import open_store
from monitor.vocab import FINISHED, POOLED, AlertState
from monitor.watch import Scope

__all__ = ["baseline_command", "baseline_set", "baseline_show"]


def baseline_set(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    store = open_store(settings.storage, lock_timeout_s=60)
    names = args.endpoint or [e.name for e in settings.endpoints]
    chosen: dict[str, list[str]] = {}
    if args.run:
        for run_id in args.run:
            run = store.get_run(run_id)
            if run is None:
                raise UsageError(f"--run {run_id}: no such run in {store.where} (see `monitor "
                                 "baseline show` or the probe output for run ids)")
            if args.endpoint and run.endpoint not in args.endpoint:
                raise UsageError(f"--run {run_id} belongs to endpoint {run.endpoint}, not "
                                 f"{', '.join(args.endpoint)}")
            chosen.setdefault(run.endpoint, []).append(run_id)
    else:
        for name in names:
            runs = [r for r in store.runs(name) if r.status in FINISHED]
            if not runs:
                raise UsageError(f"endpoint {name}: no finished run yet; run `monitor probe "
                                 "--once` first")
            chosen[name] = [r.run_id for r in runs[-args.latest:]]
    for endpoint, run_ids in chosen.items():
        runs = [r for r in (store.get_run(x) for x in run_ids) if r is not None]
        if (why := Scope.common(runs)) is not None:
            raise UsageError(f"endpoint {endpoint}: {why}; a baseline must be one model in "
                             "one setup on one catalog, over the same scenarios and variants")
        store.set_baseline(endpoint, runs, auto=False)
        print(f"baseline of {endpoint}: {len(run_ids)} run(s) {', '.join(run_ids)}")
    return 0


def baseline_show(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    store = stored(settings.storage)  # read-only: works on a backup or a read-only mount
    out: list[dict[str, Any]] = []
    for name in args.endpoint or [e.name for e in settings.endpoints]:
        settings.endpoint(name)
        base = store.baseline(name) if store is not None else None
        if base is None:
            out.append({"endpoint": name, "baseline": None})
            continue
        assert store is not None  # a baseline was read from it
        runs = [r for r in (store.get_run(x) for x in base.run_ids) if r is not None]
        langs = runs[0].languages if runs else list(catalog.languages)
        md = md_of(store, base.run_ids, langs, catalog.languages)
        states = store.alert_states(name)
        out.append({
            "endpoint": name, "set_at": str(base.set_at), "auto": base.auto,
            "runs": base.run_ids, "catalog_version": base.catalog_version,
            "model_id": base.model_id,
            "md": [{"scenario": r.scenario, "country": r.country, "md": nullable(r.md),
                    "ci_lower": nullable(r.ci_lower), "ci_upper": nullable(r.ci_upper),
                    "n": r.n, "alert_state": (cell.state if (cell := states.get(
                        (r.scenario, r.country))) else AlertState.OK)} for r in md]})
    if args.json:
        print(json.dumps(out, indent=2, ensure_ascii=False))
        return 0
    for b in out:
        if b.get("baseline", 1) is None:
            print(f"{b['endpoint']}: no baseline yet (set one with `monitor baseline set "
                  f"--latest`, or let the daemon set it after its first runs)")
            continue
        how = "automatic" if b["auto"] else "set by user"
        print(f"{b['endpoint']}: baseline {how} at {b['set_at']}, {len(b['runs'])} run(s), "
              f"model {b['model_id']}, catalog {b['catalog_version']}")
        for r in b["md"]:
            if r["scenario"] != POOLED:
                continue
            ci = ("[   n/a   ]" if r["ci_lower"] is None else
                  f"[{r['ci_lower']:+.2f}, {r['ci_upper']:+.2f}]")
            print(f"  {r['country']}  MD {r['md']:+.2f} {ci} n={r['n']}  state "
                  f"{r['alert_state']}")
    return 0


def baseline_command(args: argparse.Namespace) -> int:
    return baseline_set(args) if args.baseline_command == "set" else baseline_show(args)
