"""`monitor probe --once`: one run per selected endpoint, then the summary.

Exit codes (contract, docs/contract.md): 0 ok; 1 an MD breach and
--fail-on-breach; 2 usage or configuration error; 3 a run produced no
results (every probe failed, or no answer could be read); 4 the storage
could not be written (the run stopped asking; unwritten answers are
spooled); 130 / 143 interrupted by Ctrl-C / SIGTERM. An interrupted or
stopped run keeps what was stored and says how to resume it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import shlex
import signal
import sys
from collections.abc import Coroutine
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from monitor.alerts import build_sinks, owed
from monitor.catalog import load_catalog
from monitor.commands.summary import breaches, json_document, text_summary
from monitor.config import (
    Endpoint,
    Settings,
    demo_config_path,
    load_settings,
    reach_advice,
    schema_advice,
)
from monitor.context import Context
from monitor.errors import (
    EXIT_INTERRUPTED,
    EXIT_NO_RESULTS,
    EXIT_TERMINATED,
    NoResultsError,
    StoreError,
    StoreWriteError,
    UsageError,
)
from monitor.measure.budget import Allowance
from monitor.measure.lease import hold
from monitor.measure.progress import Progress
from monitor.measure.run import RunResult, make_client, run_endpoint
from monitor.measure.start import RunOptions
from monitor.review import Review, review_run
from monitor.store import RunSummary, Store, open_store
from monitor.store import owner as owners
from monitor.vocab import RunStatus

__all__ = ["endpoints_for", "probe_command", "resume_hint", "run_until_stopped"]

log = logging.getLogger("monitor.commands.probe")
T = TypeVar("T")


def endpoints_for(settings: Settings, names: list[str] | None, resume: str | None,
                  store: Store) -> list[Endpoint]:
    """The endpoint of the run to resume, else the named ones, else all."""
    if resume:
        run = store.get_run(resume)
        if run is None:
            raise UsageError(f"--resume {resume}: no such run in {store.where}")
        return [settings.endpoint(run.endpoint)]
    if not names:
        return list(settings.endpoints)
    return [settings.endpoint(n) for n in names]


def resume_hint(run_id: str, config_path: Path, command: str = "monitor probe --once") -> str:
    """The command that resumes `run_id`, with --config unless it is the built-in demo."""
    demo = config_path == demo_config_path()
    config = "" if demo else f" --config {shlex.quote(str(config_path))}"
    return f"{command} --resume {shlex.quote(run_id)}{config}"


async def _leased(ctx: Context[Store], endpoint: Endpoint, work: Coroutine[Any, Any, T]) -> T:
    """`work` while holding the endpoint (a store shared by replicas: monitor.measure.lease),
    so that a replica's run and this one never ask it at once."""
    async with hold(ctx.store, endpoint.name, owners.token(),
                    ctx.settings.storage.lease_seconds) as held:
        if not held:
            work.close()
            raise UsageError(f"endpoint {endpoint.name}: a replica sharing {ctx.store.where} "
                             "is running it now; try again when its run has ended (`monitor "
                             "runs` shows it)")
        return await work


def run_until_stopped(ctx: Context[Store], endpoint: Endpoint, work: Coroutine[Any, Any, T],
                      opts: RunOptions, config_path: Path, *,
                      command: str = "monitor probe --once", what: str = "") -> T | int:
    """`work` (a run of `endpoint`, and its review), or the exit code (130 / 143) when
    Ctrl-C or SIGTERM stopped it: every answer is kept, and one line says where and which
    `command` resumes it (`what` names the run in that line, e.g. "calibration "). A
    storage failure (StoreWriteError, exit 4) gets the same resume command."""
    store = ctx.store
    try:
        return asyncio.run(terminable(_leased(ctx, endpoint, work)))
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        term = isinstance(exc, asyncio.CancelledError)
        run_id = opts.resume
        if run_id is None:
            with contextlib.suppress(StoreError):
                stopped = [r for r in store.runs(endpoint.name)
                           if r.status == RunStatus.INTERRUPTED]
                run_id = stopped[-1].run_id if stopped else None
        hint = (f" Resume with: {resume_hint(run_id, config_path, command)}"
                if run_id else "")
        print(f"\nmonitor: {what}{'terminated (SIGTERM)' if term else 'interrupted'}; answers "
              f"so far are stored in {store.where}.{hint}", file=sys.stderr)
        return EXIT_TERMINATED if term else EXIT_INTERRUPTED
    except StoreWriteError as exc:
        if exc.run_id:  # the answers are in the spool: say how to bring them in
            raise StoreWriteError(f"{exc}; then resume with: "
                                  f"{resume_hint(exc.run_id, config_path, command)}",
                                  mount=exc.mount, free_bytes=exc.free_bytes,
                                  run_id=exc.run_id) from None
        raise


async def terminable(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro`; SIGTERM cancels it the way Ctrl-C interrupts it (run stored as interrupted)."""
    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await task
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def no_results_message(res: RunResult, summary: RunSummary | None) -> str:
    """Why a run has nothing to estimate, with the most common stored reason."""
    c = res.status_counts
    head = f"run {res.run.run_id} of endpoint {res.run.endpoint} produced no results"
    err = (f"; most common error ({summary.top_error_n} of {c['failed']}): {summary.top_error}"
           if summary and summary.top_error else "")
    unread = (f"; most common reason ({summary.top_unparseable_n} of {c['unparseable']}): "
              f"{summary.top_unparseable}" if summary and summary.top_unparseable else "")
    answered = c["unparseable"] + c["refused"]
    if c["failed"] and not answered:
        return f"{head}: all {c['failed']} calls failed{err}; {reach_advice(res.run.model)}"
    if answered and not c["failed"]:
        return (f"{head}: every call was answered, but no answer could be read "
                f"({c['unparseable']} unparseable, {c['refused']} refused){unread}; the answers "
                f"are stored (`monitor report --run {res.run.run_id}` shows them) - check that "
                f"the model follows the prompt's answer format, or {schema_advice(res.run.model)}")
    return (f"{head}: {c['failed']} failed{err}, {c['unparseable']} unparseable{unread}, "
            f"{c['refused']} refused")


async def probe_one(ctx: Context[Store], endpoint: Endpoint, opts: RunOptions,
                    allowance: Allowance, sinks: list[str]) -> Review:
    """One run and its review, as the daemon makes them: the top-ups within today's
    budget, the evaluation against the stored baseline, the messages queued (the
    daemon delivers them; nothing is sent from here)."""
    client = make_client(ctx.catalog, endpoint)
    result = await run_endpoint(ctx, endpoint, opts, allowance=allowance, client=client,
                                progress=Progress(label=f"[{endpoint.name}] "), hold=True)
    return await review_run(ctx, endpoint, result, client, allowance=allowance, sinks=sinks)


def _allowance(ctx: Context[Store], endpoint: Endpoint, opts: RunOptions) -> Allowance:
    """Today's budget for the run (the daemon's too); UsageError when it is spent."""
    allowance = Allowance.today(ctx.settings.budget, ctx.store, endpoint.name, datetime.now(UTC))
    languages = len(opts.languages or ctx.settings.sampling.languages)
    if opts.resume is None and (allowance.spent or allowance.run_size(1, languages) < 1):
        raise NoResultsError(f"endpoint {endpoint.name}: today's budget is spent "
                          f"({allowance.describe()}; budget.max_usd_per_day / "
                          "max_probes_per_day): no call made - raise it or wait until "
                          "midnight UTC")
    return allowance


def probe_command(args: argparse.Namespace) -> int:
    settings, config_path = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    if args.triplets is not None and args.triplets < 1:
        raise UsageError("--triplets must be a positive number")
    reviews: list[Review] = []
    sinks = owed(build_sinks(settings.alerts, settings.report))
    with open_store(settings.storage) as store:
        storage = store.where
        ctx = Context(settings, catalog, store)
        endpoints = endpoints_for(settings, args.endpoint, args.resume, store)
        settings.require_keys(endpoints, config_path)
        for endpoint in endpoints:
            opts = RunOptions(triplets=args.triplets, languages=args.languages,
                              scenarios=args.scenarios, seed=args.seed, resume=args.resume)
            allowance = _allowance(ctx, endpoint, opts)
            want = opts.triplets or settings.sampling.triplets_per_run
            size = allowance.run_size(want, len(opts.languages or settings.sampling.languages))
            if size < want and opts.resume is None:
                print(f"monitor: endpoint {endpoint.name}: {size} of {want} triplets: what "
                      f"today's budget leaves ({allowance.describe()})", file=sys.stderr)
                opts = replace(opts, triplets=size)
            got = run_until_stopped(ctx, endpoint,
                                    probe_one(ctx, endpoint, opts, allowance, sinks), opts,
                                    config_path)
            if isinstance(got, int):
                return got
            reviews.append(got)
        failed = [r for r in reviews if r.run.status == RunStatus.FAILED]
        summaries = {s.run.run_id: s for s in store.run_summaries(
            run_ids=[r.run.run_id for r in failed])} if failed else {}
    if args.json:
        print(json.dumps(json_document(reviews, storage, catalog.version), ensure_ascii=False,
                         indent=2))
    else:
        print(f"# config {config_path}", file=sys.stderr)
        print("\n\n".join(text_summary(r, settings, storage) for r in reviews))
    for r in failed:
        print(f"monitor: error: {no_results_message(r.result, summaries.get(r.run.run_id))}",
              file=sys.stderr)
    if failed:
        return EXIT_NO_RESULTS
    found = [b for r in reviews for b in breaches(r.result, settings)]
    for b in found:
        print(f"monitor: breach: {b}", file=sys.stderr)
    return 1 if found and args.fail_on_breach else 0
