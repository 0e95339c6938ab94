"""Which interrupted run the daemon resumes, and which it closes (with why).

The policy, applied before every scheduled run of an endpoint and at start
(docs/reliability.md):
- a run left `running` by a process that is gone is first closed as
  `interrupted` (Store.close_orphans);
- the newest interrupted run is resumed - at the daemon's start, not at the
  next slot - when it is on the current catalog and assistant setup, younger than
  RESUME_WITHIN and was started fewer than MAX_ATTEMPTS times (a run whose
  process keeps dying, e.g. out of memory, must not be retried for ever);
- every other interrupted run is closed as `failed`, its reason stored and
  logged: its answers stay stored (reports of the time range show them),
  only its statistics are not made.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from monitor.store import RunRow
from monitor.vocab import RunStatus

__all__ = ["MAX_ATTEMPTS", "RESUME_WITHIN", "Triage", "triage"]

RESUME_WITHIN = timedelta(days=1)
MAX_ATTEMPTS = 3


@dataclass(frozen=True)
class Triage:
    resume: RunRow | None
    close: list[tuple[RunRow, str]]  # run, why it is not resumed


def triage(runs: Sequence[RunRow], catalog_version: str, setup: str, *,
           now: datetime | None = None) -> Triage:
    now = now or datetime.now(UTC)
    waiting = sorted((r for r in runs if r.status == RunStatus.INTERRUPTED),
                     key=lambda r: (r.started_at, r.run_id), reverse=True)
    resume: RunRow | None = None
    close: list[tuple[RunRow, str]] = []
    for run in waiting:
        if run.catalog_version != catalog_version:
            close.append((run, f"not resumed: the catalog changed since (run on "
                               f"{run.catalog_version}, now {catalog_version})"))
        elif run.setup != setup:
            close.append((run, f"not resumed: the assistant setup changed since (run with "
                               f"{run.setup}, now {setup})"))
        elif now - run.started_at > RESUME_WITHIN:
            close.append((run, "not resumed: interrupted more than "
                               f"{RESUME_WITHIN.total_seconds() / 3600:g} h after it started"))
        elif run.attempts >= MAX_ATTEMPTS:
            close.append((run, f"not resumed: started {run.attempts} times without finishing "
                               f"(last: {run.reason or 'unknown'})"[:500]))
        elif resume is None:
            resume = run
        else:
            close.append((run, f"not resumed: a newer interrupted run ({resume.run_id}) was "
                               "resumed instead"))
    return Triage(resume, close)
