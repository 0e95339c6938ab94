"""`monitor probe --once`: one run per selected endpoint, then the summary.

Exit codes (contract): 0 ok; 1 an MD breach and --fail-on-breach; 2 usage or
configuration error; 3 a run produced no results (every probe failed).
An interrupted run (Ctrl-C) keeps what was stored and says how to resume it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys

from monitor.catalog import load_catalog
from monitor.config import Endpoint, Settings, load_settings
from monitor.errors import UsageError
from monitor.progress import Progress
from monitor.run import RunOptions, RunResult, run_endpoint
from monitor.store import Store
from monitor.summary import breaches, json_document, text_summary

__all__ = ["probe_command"]

log = logging.getLogger("monitor.probe")


def _endpoints(settings: Settings, names: list[str] | None, resume: str | None,
               store: Store) -> list[Endpoint]:
    if resume:
        run = store.get_run(resume)
        if run is None:
            raise UsageError(f"--resume {resume}: no such run in {store.path}")
        return [settings.endpoint(run.endpoint)]
    if not names:
        return list(settings.endpoints)
    return [settings.endpoint(n) for n in names]


def probe_command(args: argparse.Namespace) -> int:
    settings, config_path = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path)
    if args.triplets is not None and args.triplets < 1:
        raise UsageError("--triplets must be a positive number")
    opts = RunOptions(triplets=args.triplets, languages=args.languages,
                      scenarios=args.scenarios, seed=args.seed, resume=args.resume)
    storage = str(settings.storage.path)
    results: list[RunResult] = []
    with Store(settings.storage.path) as store:
        endpoints = _endpoints(settings, args.endpoint, args.resume, store)
        settings.require_keys(endpoints, config_path)
        for endpoint in endpoints:
            progress = Progress(label=f"[{endpoint.name}] ")
            try:
                results.append(asyncio.run(run_endpoint(settings, catalog, store, endpoint,
                                                        opts, progress)))
            except KeyboardInterrupt:
                running = [r for r in store.runs(endpoint.name) if r.status == "interrupted"]
                hint = f" --resume {running[-1].run_id}" if running else ""
                print(f"\nmonitor: interrupted; answers so far are stored in {storage}. "
                      f"Resume with: monitor probe --once{hint}", file=sys.stderr)
                return 130
    if args.json:
        print(json.dumps(json_document(results, storage, catalog.version), ensure_ascii=False,
                         indent=2))
    else:
        print(f"# config {config_path}", file=sys.stderr)
        print("\n\n".join(text_summary(r, settings, storage) for r in results))
    failed = [r for r in results if r.status_counts["ok"] == 0]
    for r in failed:
        print(f"monitor: error: run {r.run.run_id} of endpoint {r.run.endpoint} produced no "
              f"results ({r.status_counts['failed']} failed, {r.status_counts['unparseable']} "
              f"unparseable, {r.status_counts['refused']} refused); check the endpoint "
              "(model, api_base, key) and the stored errors", file=sys.stderr)
    if failed:
        return 3
    found = [b for r in results for b in breaches(r, settings)]
    for b in found:
        print(f"monitor: breach: {b}", file=sys.stderr)
    return 1 if found and args.fail_on_breach else 0
