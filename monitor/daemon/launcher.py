"""The scheduler's side of a run: it launches one `python -m monitor.daemon.child`
process per run and reads what the child reports.

Each run is a short-lived child process: LiteLLM, pandas and SciPy are about
300 MB that the scheduler would otherwise hold for good between runs. The
scheduler keeps the schedule, the metrics (read back from DuckDB after each
run) and the failure and skip counts; a child that crashes or is killed is a
failed run, never a dead daemon, and the run it left `running` is closed as
interrupted at once (the next run resumes it). On SIGTERM the child gets
SIGTERM too, stores what arrived and marks its run interrupted.

A replica runs at most `schedule.max_concurrent_runs` run processes at once
(each peaks at ~420 MB: the cap is what fits a pod's memory limit). A slot that
finds them all going waits for one to end, at most its misfire grace (half a
period), then is skipped and counted. On a shared store the slot is claimed only
once there is room, so a replica with room (or the first to have it) claims it;
a replica may claim an endpoint's next slot while its run of the last one goes
on (the new process waits for the endpoint's lease), so that a slot is not left
unclaimed because every replica was still ending its last run. On a store of
one's own the endpoint's next slot is skipped while its run goes on, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from monitor.serve.metrics import MetricsState
from monitor.store import Store
from monitor.store import owner as owners

__all__ = ["SKIP_LOG_S", "SLOT_SKIPPED", "RunLauncher", "child_counts"]

log = logging.getLogger(__name__)

SKIP_LOG_S = 600.0

#: A run process's line for a slot it skipped: another process held the endpoint (its
#: run went on) past the wait (endpoint, seconds).
SLOT_SKIPPED = "endpoint %s: slot skipped: another process's run of it was still going after %gs"


def child_counts(*, failures: int = 0, delivery_failures: int = 0,
                 flags: dict[str, int] | None = None, skipped: int = 0) -> dict[str, Any]:
    """What a run process reports to this side when it ends (read by RunLauncher._apply):
    failed runs, failed deliveries, the budget's flag, slots skipped."""
    return {"failures": failures, "delivery_failures": delivery_failures,
            "flags": flags or {}, "skipped": skipped}


class RunLauncher:
    """The scheduler's side of a job: one `python -m monitor.daemon.child` process per run."""

    STOP_GRACE_S = 25.0  # after SIGTERM, the child's time to store and mark its run
    COMMAND = (sys.executable, "-m", "monitor.daemon.child")  # tests swap in a stand-in

    def __init__(self, config: Path | None, store: Store, state: MetricsState, *,
                 slot: Callable[[datetime], datetime] | None = None,
                 lease_wait_s: float = 0.0, max_runs: int = 2,
                 room_wait_s: float = 0.0) -> None:
        """`slot`: on a shared store, the schedule's slot a time falls in: a run is launched
        only for a slot this replica claims first (monitor.store.coordination);
        `max_runs`: run processes at once (schedule.max_concurrent_runs); `room_wait_s`:
        how long a slot waits for one of them to end."""
        self.config = config
        self.store = store
        self.slot = slot
        self.lease_wait_s = lease_wait_s
        self.replica = owners.token()  # the daemon process: who claimed a slot
        self.max_runs = max_runs
        self.room_wait_s = room_wait_s
        self.active: Counter[str] = Counter()  # endpoint -> its run processes here
        self.busy = 0  # run processes (or slots being claimed for one) of this replica
        self._room = asyncio.Event()  # set whenever one ends
        self.state = state
        self.started = time.time()
        self.heartbeat = time.time()
        self.running: set[asyncio.Task[Any]] = set()
        self.failures: dict[str, int] = {}
        self.delivery_failures: dict[str, int] = {}
        self.skips: dict[str, int] = {}
        self._skip_logged: dict[tuple[str, str], float] = {}

    def count_failure(self, endpoint: str, why: str | None, n: int = 1) -> None:
        self.failures[endpoint] = self.failures.get(endpoint, 0) + n
        self.state.set_flag("run_failures", endpoint, self.failures[endpoint])
        if why is not None:  # None: the child has logged it already
            log.warning("endpoint %s: run not completed: %s", endpoint, why)

    def count_skip(self, endpoint: str, why: str) -> None:
        """A slot that found the previous run still going: counted, not a failure."""
        self.skips[endpoint] = self.skips.get(endpoint, 0) + 1
        self.state.set_flag("runs_skipped", endpoint, self.skips[endpoint])
        now = time.monotonic()
        # Logged once in a while for each reason: an overrun every slot is not a line a slot.
        if now - self._skip_logged.get((endpoint, why), -SKIP_LOG_S) >= SKIP_LOG_S:
            self._skip_logged[(endpoint, why)] = now
            log.info("endpoint %s: scheduled slot skipped (%s); %d skipped since start",
                     endpoint, why, self.skips[endpoint])

    async def run_job(self, name: str, *, resume_only: bool = False) -> None:
        """A scheduled slot of `name` (or, `resume_only`, the takeover of its run)."""
        slot_at = self.slot(datetime.now(UTC)) if self.slot is not None else None
        if resume_only:  # the watcher tries again in a while
            if name in self.active or self.busy >= self.max_runs:
                return
        elif slot_at is None and name in self.active:
            self.count_skip(name, "the previous run is still going")
            return
        elif not await self._wait_for_room():
            self.count_skip(name, f"{self.max_runs} run process(es) of this replica were "
                                  "still going (schedule.max_concurrent_runs)")
            return
        self.busy += 1  # no await since the check: the room is ours
        self.active[name] += 1
        try:
            if slot_at is not None and not resume_only:
                if self.active[name] > 1:
                    # Our run of the last slot goes on: a replica without one claims this
                    # slot first if there is one (one process fewer importing the run stack).
                    await asyncio.sleep(min(1.0, self.room_wait_s / 2))
                won = await asyncio.to_thread(self.store.claim_slot, name, slot_at,
                                              self.replica)
                if not won:
                    log.debug("endpoint %s: slot %s is another replica's", name, slot_at)
                    return
            await self._launch(name, resume_only)
        finally:
            self.busy -= 1
            self.active[name] -= 1
            if self.active[name] <= 0:
                del self.active[name]
            self._room.set()

    async def _wait_for_room(self) -> bool:
        """Whether a run process may start now, after waiting at most room_wait_s."""
        deadline = time.monotonic() + self.room_wait_s
        while self.busy >= self.max_runs:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            self._room.clear()  # no await since the check: an end is not missed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), left)
        return True

    async def _launch(self, name: str, resume_only: bool) -> None:
        """The run process of a slot (or of a takeover) this replica holds, to its end."""
        task = asyncio.current_task()
        if task is not None:
            self.running.add(task)
        read_fd, write_fd = os.pipe()
        # A thread reads the report while the child runs; it ends at EOF, when the
        # child (holding the only write end once _child has closed ours) exits.
        reading = asyncio.ensure_future(asyncio.to_thread(_read_all, read_fd))
        try:
            code = await self._child(name, write_fd, resume_only)  # closes write_fd
            report = await reading
            if code is None:
                return  # shutdown: the child stored its answers and marked the run
            self._apply(name, report, code)
            if code != 0:
                await asyncio.to_thread(self._reap, name, code)
            await asyncio.to_thread(self.state.refresh, self.store, name)
        except asyncio.CancelledError:
            return  # shutdown before the child started: nothing to interrupt
        except Exception as exc:  # a job never raises into the scheduler
            self.count_failure(name, f"{type(exc).__name__}: {str(exc)[:300]}")
        finally:
            if task is not None:
                self.running.discard(task)
            if not reading.done():  # write_fd is closed: EOF is at most a moment away
                with contextlib.suppress(BaseException):
                    await asyncio.shield(reading)
            os.close(read_fd)

    def _reap(self, name: str, code: int) -> None:
        """A child that died (OOM, SIGKILL) leaves its run `running`: close it now,
        so that the next run resumes it."""
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        for run in self.store.close_orphans(name):
            log.warning("endpoint %s: run %s was left running by its process (%s); marked "
                        "interrupted, resumed by the next run", name, run.run_id, how)

    async def _child(self, name: str, report_fd: int, resume_only: bool = False) -> int | None:
        """The child's exit code, or None when the run was interrupted by shutdown."""
        level = logging.getLevelName(logging.getLogger().getEffectiveLevel())
        args = [*self.COMMAND[1:], "--endpoint", name, "--report-fd", str(report_fd),
                "--log-level", str(level), "--parent-pid", str(os.getpid())]
        if resume_only:
            args.append("--resume-only")
        elif self.lease_wait_s:
            args += ["--lease-wait", f"{self.lease_wait_s:g}"]
        if self.config is not None:
            args += ["--config", str(self.config)]
        # Its own session: a terminal's Ctrl-C reaches only this process, which
        # then stops the child itself (below), once.
        try:
            proc = await asyncio.create_subprocess_exec(self.COMMAND[0], *args,
                                                        start_new_session=True,
                                                        pass_fds=(report_fd,))
        finally:
            os.close(report_fd)  # only the child holds the write end now
        try:
            return await proc.wait()
        except asyncio.CancelledError:
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    await asyncio.wait_for(proc.wait(), self.STOP_GRACE_S)
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
            log.info("endpoint %s: run interrupted by shutdown; it resumes at the next start",
                     name)
            return None

    def _apply(self, name: str, report: bytes, code: int) -> None:
        try:
            data = json.loads(report) if report else None
        except ValueError:
            data = None
        if code != 0 or not data:
            self.count_failure(name, f"run process exited with code {code}")
            return
        if data["failures"]:
            self.count_failure(name, None, int(data["failures"]))
        if data["delivery_failures"]:
            self.delivery_failures[name] = (self.delivery_failures.get(name, 0)
                                            + int(data["delivery_failures"]))
            self.state.set_flag("delivery_failures", name, self.delivery_failures[name])
        if data.get("skipped"):
            self.count_skip(name, "another replica's run of it was still going")
        for flag, value in data["flags"].items():
            self.state.set_flag(flag, name, int(value))


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)
