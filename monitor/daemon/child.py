"""`python -m monitor.daemon.child --endpoint NAME --report-fd N`: one run, in its own process.

`monitor run` starts one per scheduled run, so that LiteLLM, pandas and
SciPy (about 300 MB) live only as long as a run and the long-lived scheduler
stays small. What it does is monitor.daemon.scheduled (budget, recovery, the
run, its review, its report, the deliveries); SIGTERM / SIGINT interrupt it
cleanly. The child keeps no metrics: it writes what the parent cannot read
back from the store (failure counts, the budget's flag) as JSON to the pipe N
- no file that a killed parent would leave behind - and the parent reads the
store's metrics once when the child has ended.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path

from monitor.catalog import load_catalog
from monitor.config import load_settings
from monitor.daemon.launcher import SLOT_SKIPPED, child_counts
from monitor.errors import MonitorError
from monitor.logs import setup_logging
from monitor.store import Store, open_store
from monitor.store.coordination import endpoint_lease

__all__ = ["child_main"]

log = logging.getLogger("monitor.daemon.child")  # not __main__: it runs with -m


def _die_with_parent(parent: int | None) -> None:
    """SIGTERM this run when `monitor run` dies, even by SIGKILL or the OOM killer.

    The child has a session of its own (a terminal's Ctrl-C goes to the parent
    only), so nothing else would stop it: it would finish its run beside the next
    daemon and could notify Slack from stale alert states after that daemon had
    moved on. With the signal the run is stored as interrupted and the next
    daemon resumes it. Linux only (prctl); elsewhere the orphan finishes its run.
    """
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) != 0:
        log.warning("could not ask to be stopped with the daemon (prctl errno %d)",
                    ctypes.get_errno())
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def child_main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m monitor.daemon.child")
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--report-fd", type=int, required=True,
                    help="pipe the JSON report is written to for the parent")
    ap.add_argument("--config", type=Path, default=None)
    ap.add_argument("--log-level", default="INFO")
    ap.add_argument("--resume-only", action="store_true",
                    help="only take over an interrupted or abandoned run (a shared store)")
    ap.add_argument("--lease-wait", type=float, default=0.0,
                    help="seconds another process's hold of the endpoint may delay this run")
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="`monitor run`'s pid: the run stops (stored, resumable) if it dies")
    args = ap.parse_args(argv)
    setup_logging(args.log_level)
    _die_with_parent(args.parent_pid)
    try:
        settings, _ = load_settings(args.config)
        store = open_store(settings.storage)
        catalog = load_catalog(settings.catalog.path, settings.catalog.extra_paths)
    except MonitorError as exc:  # one line, as from the CLI; the parent counts the failure
        log.error("endpoint %s: run not started: %s", args.endpoint, exc)
        return exc.exit_code
    wait_s = args.lease_wait
    if not args.resume_only and wait_s > 0 and store.shared:
        wait_s = _lease_free_within(store, args.endpoint, wait_s)
        if wait_s is None:
            log.info(SLOT_SKIPPED, args.endpoint, args.lease_wait)
            return _report(args.report_fd, args.endpoint, child_counts(skipped=1))
    # The run stack (LiteLLM, pandas, SciPy): only for a slot that runs.
    from monitor.alerts import build_sinks
    from monitor.daemon.scheduled import ScheduledRun
    from monitor.serve.publish import Reporter

    slot = ScheduledRun(settings, catalog, store, build_sinks(settings.alerts, settings.report),
                        reporter=Reporter(settings, catalog, store))

    async def main() -> None:
        job = asyncio.ensure_future(slot.run(args.endpoint, resume_only=args.resume_only,
                                             wait_s=wait_s))
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):  # interrupt the run, store it, exit 0
            loop.add_signal_handler(sig, job.cancel)
        await job

    asyncio.run(main())
    return _report(args.report_fd, args.endpoint, slot.counts(args.endpoint))


def _lease_free_within(store: Store, endpoint: str, wait_s: float) -> float | None:
    """The wait left once nobody holds `endpoint`'s lease, None if it was still held
    after `wait_s` (the run's own wait, monitor.measure.lease, takes it then)."""
    deadline = time.monotonic() + wait_s
    while store.lease_holder(endpoint_lease(endpoint)) is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        time.sleep(min(0.5, left))
    return max(0.0, deadline - time.monotonic())


def _report(fd: int, endpoint: str, counts: dict[str, object]) -> int:
    """The counts to the parent's pipe."""
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(counts, fh)
    except BrokenPipeError:  # the daemon died (SIGKILL): the run is stored all the same
        log.info("endpoint %s: the daemon is gone; the run is stored, nothing to report to",
                 endpoint)
    return 0


if __name__ == "__main__":
    sys.exit(child_main())
