"""`monitor runs`: the stored runs, each with its calls, failures, most common error and
how much of what it asked its statistics used (monitor.stats.Usable, as `probe --once`
says it).

Read-only (it opens the database read-only, so it answers while the daemon
writes and on a full disk). A run still marked `running` whose process is
gone is shown as `orphaned`: the daemon (or `--resume`) closes it as
interrupted and resumes it.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from typing import Any

from monitor.commands.reading import stored
from monitor.config import Settings, load_settings
from monitor.stats import Usable, usable_by_run
from monitor.store import RunSummary
from monitor.store import owner as owners
from monitor.vocab import RunStatus

__all__ = ["runs_command", "runs_main", "summary_record"]


def _status(s: RunSummary) -> str:
    r = s.run
    if r.status == RunStatus.RUNNING and not owners.alive(r.owner, r.heartbeat_at):
        return "orphaned"
    return r.status


def summary_record(s: RunSummary, usable: Usable | None = None) -> dict[str, Any]:
    r = s.run
    return {"run_id": r.run_id, "endpoint": r.endpoint, "started_at": r.started_at.isoformat(),
            "finished_at": r.finished_at.isoformat() if r.finished_at else None,
            "status": _status(s), "reason": r.reason, "attempts": r.attempts, "setup": r.setup,
            "planned_calls": r.planned_calls, "calls": s.calls,
            "status_counts": {k: s.counts.get(k, 0)
                              for k in ("ok", "failed", "unparseable", "refused")},
            "top_error": s.top_error, "top_error_count": s.top_error_n,
            "top_unparseable": s.top_unparseable, "top_unparseable_count": s.top_unparseable_n,
            "usable": None if usable is None else asdict(usable)}


def runs_command(settings: Settings, endpoints: list[str] | None, *, as_json: bool,
                 limit: int) -> int:
    for name in endpoints or []:
        settings.endpoint(name)  # an unknown name is an error, not an empty list
    store = stored(settings.storage)
    path = store.where if store is not None else str(settings.storage.path)
    rows = [] if store is None else [s for s in store.run_summaries()
                                     if not endpoints or s.run.endpoint in endpoints]
    if limit > 0:
        kept: dict[str, list[RunSummary]] = {}
        for s in rows:
            kept.setdefault(s.run.endpoint, []).append(s)
        rows = sorted((s for group in kept.values() for s in group[-limit:]),
                      key=lambda s: (s.run.started_at, s.run.run_id))
    # A top-up's fresh triplets are never in a run's statistics: nothing to count there.
    usable = {} if store is None else usable_by_run(store, {
        s.run.run_id: s.run.languages for s in rows if s.run.status != RunStatus.TOPUP})
    names = endpoints or [e.name for e in settings.endpoints]
    waiting = {} if store is None else {n: b for n in names if (b := store.outbox_backlog(n))}
    if as_json:
        print(json.dumps({"storage": path, "runs": [summary_record(s, usable.get(s.run.run_id))
                                                    for s in rows],
                          "undelivered": {n: {k or "held": v for k, v in b.items()}
                                          for n, b in waiting.items()}},
                         indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no runs in {path}; start one with `monitor probe --once`")
        return 0
    print(f"{'run':<44} {'started (UTC)':<17} {'status':<12} {'calls':>11} {'failed':>6} "
          f"{'unread':>6} {'complete':>9} {'used':>4}  most common error")
    for s in rows:
        r = s.run
        unread = s.counts.get("unparseable", 0) + s.counts.get("refused", 0)
        top = (f"{s.top_error} (x{s.top_error_n})" if s.top_error else
               f"unreadable: {s.top_unparseable} (x{s.top_unparseable_n})"
               if s.top_unparseable else "")
        # A top-up asks batch by batch until its test decides: no size is planned.
        planned = "-" if r.status == RunStatus.TOPUP else str(r.planned_calls)
        # complete: triplets read in every language of those asked; used: the share of
        # answers MD uses (the run's `usable`, as `probe --once` prints it)
        use = usable.get(r.run_id)
        complete = f"{use.complete}/{use.triplets}" if use and use.triplets else "-"
        used = f"{use.share:.0%}" if use and use.answers_asked else "-"
        print(f"{r.run_id:<44} {r.started_at:%Y-%m-%d %H:%M}  {_status(s):<12} "
              f"{s.calls:>5}/{planned:<5} {s.counts.get('failed', 0):>6} "
              f"{unread:>6} {complete:>9} {used:>4}  {top[:120]}")
        if r.reason:
            print(f"{'':<44} {'':<17} why: {r.reason[:200]}")
    for name, backlog in waiting.items():
        print(f"endpoint {name}: {_undelivered(backlog)}")
    return 0


def _undelivered(backlog: dict[str, int]) -> str:
    """The alert messages an endpoint's outbox still holds, and why."""
    parts = [f"{n} held: no sink can deliver (monitor config check says what to set)"
             if not sink else f"{n} owed to {sink} (its delivery keeps failing; the log says "
             "why)" for sink, n in sorted(backlog.items())]
    return f"{sum(backlog.values())} alert message(s) not delivered: " + "; ".join(parts)


def runs_main(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    return runs_command(settings, args.endpoint, as_json=args.json, limit=args.last)
