"""`monitor report`: which runs a report covers, then build and render it.

- `--run ID`: that run; the trend shows every run of its endpoint up to it;
- `--since DATE`: the finished runs started at or after DATE, pooled (a unit
  is still one triplet of one run); the trend shows the same runs;
- neither: each endpoint's latest finished run; the trend shows all its runs.

A run marked failed because none of its answers could be read (they are
stored) is reported too when it is asked for by `--run` or is the endpoint's
latest: the report says so and shows the answers. Its status stays failed
(the daemon, the baseline and the gauges still skip it), and `--since` pools
only finished runs, which have statistics.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from monitor.catalog import load_catalog
from monitor.commands.reading import stored
from monitor.config import load_settings, parse_since
from monitor.errors import NoResultsError, UsageError
from monitor.report import (
    build,
    latest_runs,
    render_html,
    render_markdown,
    trend_to,
    unreadable,
)
from monitor.store import RunRow, Store
from monitor.vocab import FINISHED, RunStatus

__all__ = ["report_command", "select_runs"]


def select_runs(store: Store, args: argparse.Namespace, storage: str) -> dict[str, list[RunRow]]:
    """endpoint -> the runs the report's tables cover (oldest first)."""
    wanted = set(args.endpoint or [])
    if args.run:
        run = store.get_run(args.run)
        if run is None:
            raise UsageError(f"--run {args.run}: no such run in {storage}; run ids are printed "
                             f"by `monitor probe --once` and in the Slack messages")
        if run.status == RunStatus.FAILED and unreadable(store, [run]):
            return {run.endpoint: [run]}
        if run.status == RunStatus.FAILED:
            raise UsageError(f"--run {args.run}: the run failed with no answer stored "
                             f"({run.reason or 'no reason recorded'}); `monitor runs` shows "
                             "its most common error")
        if run.status not in FINISHED:
            raise UsageError(f"--run {args.run}: the run is {run.status}, not finished; "
                             f"finish it with `monitor probe --once --resume {args.run}`")
        return {run.endpoint: [run]}
    since = parse_since(args.since) if args.since else None
    every = [r for r in sorted(store.runs(), key=lambda r: r.started_at)
             if not wanted or r.endpoint in wanted]
    out: dict[str, list[RunRow]] = {}
    if since is None:
        out = latest_runs(store, wanted)
    else:
        for run in every:
            if run.status in FINISHED and run.started_at >= since:
                out.setdefault(run.endpoint, []).append(run)
    if not out:
        where = f" since {args.since}" if args.since else ""
        names = f" for {', '.join(sorted(wanted))}" if wanted else ""
        hint = (f"; {len(every)} run(s) stored failed or were interrupted: `monitor runs` "
                "says why" if every else "; run `monitor probe --once` first")
        raise NoResultsError(f"no finished runs{names}{where} in {storage}{hint}")
    return out


def report_command(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    store = stored(settings.storage)  # read-only: a backup, a snapshot, a read-only mount
    if store is None:
        raise NoResultsError(f"no finished runs in {settings.storage.path} (no such file); run "
                             "`monitor probe --once` first, or check storage.path")
    chosen = select_runs(store, args, store.where)
    reports = []
    with store.session():
        for runs in chosen.values():
            trend = runs if args.since else trend_to(store, runs[-1])
            reports.append(build(store, catalog, runs, trend))
    if args.format == "md":
        text = render_markdown(reports)
        if args.out == "-":
            sys.stdout.write(text)
            return 0
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(text, encoding="utf-8")
        print(out / "report.md")
        return 0
    if args.out == "-":
        raise UsageError("--out -: only --format md can be written to stdout; give a folder")
    path = render_html(reports, Path(args.out))
    print(path)
    return 0
