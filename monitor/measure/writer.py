"""The run's writer: answers into DuckDB in bounded batches, or into the spool.

- Batches are bounded in time and size: arrived answers are written at the
  latest FLUSH_S after the first of them arrived, or as soon as MAX_BATCH
  have arrived, one transaction per batch (the run's heartbeat refreshed in
  it). A crash loses at most the calls in flight and FLUSH_S of answers.
- The connection is held across batches for at most HOLD_S, then released
  for YIELD_S before the next batch: opening a DuckDB file costs ~16 ms of
  CPU, a transaction on an open one under 1 ms, so the cost per answer no
  longer depends on how answers trickle in, while `monitor report` and the
  other commands still get the file within HOLD_S + YIELD_S (they retry for
  60 s). All of the writer's storage work runs on one thread of its own,
  which owns the held connection.
- A busy file (another process holds it for longer than the store waits)
  keeps the answers for the next batch; after a write fails for good (no
  space, read-only, damaged) `failure` is set, the run asks nothing more,
  and every answer, the failed batch first, goes to the run's spool
  (monitor.measure.spool); `import_spools` writes a spool back on --resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from monitor.errors import StoreBusyError, StoreError, StoreWriteError, WriteCause
from monitor.measure.ports import BatchStore
from monitor.measure.rows import Record, columns
from monitor.measure.spool import Spool, find_spools, read_spool
from monitor.store import CALL_COLUMNS, SCORE_COLUMNS, size_text

__all__ = ["FLUSH_S", "HOLD_S", "MAX_BATCH", "YIELD_S", "Writer", "import_spools"]

log = logging.getLogger(__name__)
T = TypeVar("T")

FLUSH_S = 0.25
MAX_BATCH = 256
HOLD_S = 2.0
YIELD_S = 0.6  # longer than the store's longest backoff step (0.5 s): another process gets in
HEARTBEAT_S = 60.0  # a run with nothing to write still says it lives
BUSY_TRIES = 120  # at the end of a run, a busy file is retried for two minutes
_BEAT = "heartbeat"


class Writer:
    """Put records (or None at the end) on `queue`; `run()` writes them."""

    def __init__(self, store: BatchStore, run_id: str, *, resumed: bool = True,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.store = store
        self.run_id = run_id
        self.resumed = resumed  # only a resumed run can replace its own failed rows
        self.queue: asyncio.Queue[Record | str | None] = asyncio.Queue()
        self.failure: StoreError | None = None
        self.spool = Spool(store.path, run_id)
        self.lost = 0  # answers neither written nor spooled (no place took the spool)
        self.written = 0
        self.batches = 0
        self._clock = clock
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="writer")
        self._held = contextlib.ExitStack()
        self._held_since: float | None = None
        self._released_at = -1e9

    async def _on_thread(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._thread, lambda: fn(*args, **kw))

    # -- on the writer's thread ----------------------------------------------------------
    def _write(self, batch: list[Record]) -> None:
        now = self._clock()
        if self._held_since is not None and now - self._held_since >= HOLD_S:
            self._release()
        if self._held_since is None:
            wait = self._released_at + YIELD_S - now
            if wait > 0:
                time.sleep(wait)  # the other processes' turn
            self._held.enter_context(self.store.session())
            self._held_since = self._clock()
        for part in _distinct(batch):
            self.store.write_batch(columns([c for c, _ in part], CALL_COLUMNS),
                                   columns([s for _, ss in part for s in ss], SCORE_COLUMNS),
                                   heartbeat=self.run_id, replaces=self.resumed)

    def _release(self) -> None:
        try:
            self._held.close()  # closing checkpoints: a write may fail here too
        finally:
            self._held = contextlib.ExitStack()
            self._held_since = None
            self._released_at = self._clock()

    def _keep(self, batch: list[Record]) -> None:
        try:
            self.spool.add(batch)
        except OSError as exc:
            self.lost += len(batch)
            log.error("run %s: %d answers could not be spooled either (%s)", self.run_id,
                      len(batch), exc.strerror or type(exc).__name__)

    # -- on the event loop ------------------------------------------------------------------
    async def _next(self, deadline: float | None) -> list[Record | str | None]:
        """What has arrived, waiting at most until `deadline` (None: for the first item)."""
        timeout = None if deadline is None else max(0.0, deadline - self._clock())
        try:
            items: list[Record | str | None] = [
                await asyncio.wait_for(self.queue.get(), timeout)]
        except TimeoutError:
            return []
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        return items

    async def run(self) -> None:
        batch: list[Record] = []
        first_at: float | None = None
        done, busy_tries = False, 0
        try:
            while not done:
                held = self._held_since
                deadlines = [t for t in (None if first_at is None else first_at + FLUSH_S,
                                         None if held is None else held + HOLD_S)
                             if t is not None]
                items = await self._next(min(deadlines) if deadlines else None)
                if not items and not batch and held is not None and (
                        self._clock() - held >= HOLD_S):
                    with contextlib.suppress(StoreError):  # idle: let the others in
                        await self._on_thread(self._release)
                    continue
                done = any(i is None for i in items)
                batch += [i for i in items if isinstance(i, tuple)]
                beat = any(i == _BEAT for i in items)
                if batch and first_at is None:
                    first_at = self._clock()
                due = done or beat or len(batch) >= MAX_BATCH or (
                    first_at is not None and self._clock() - first_at >= FLUSH_S)
                if not due:
                    continue
                if self.failure is not None:
                    if batch:
                        await self._on_thread(self._keep, batch)
                    batch, first_at = [], None
                    continue
                try:
                    await self._on_thread(self._write, batch)
                    self.written += len(batch)
                    self.batches += 1
                    batch, first_at = [], None
                except StoreBusyError as exc:
                    # Another process holds the file longer than the store waits (a big
                    # export): keep the answers for the next batch, never drop them.
                    log.warning("storage busy, %d answers kept for the next write: %s",
                                len(batch), str(exc)[:200])
                    if done:
                        busy_tries += 1
                        if busy_tries < BUSY_TRIES:
                            done = False
                            await asyncio.sleep(1.0)
                            continue
                        self.failure = exc  # two more minutes, then keep them in the spool
                except StoreError as exc:  # no space, read-only, damaged: stop asking
                    self.failure = exc  # the run raises it, with what was kept, at its end
                    log.info("run %s: stops asking: %s", self.run_id, exc)
                if self.failure is not None and batch:
                    await self._on_thread(self._keep, batch)
                    batch, first_at = [], None
        finally:
            with contextlib.suppress(StoreError):
                await self._on_thread(self._release)
            self._thread.shutdown(wait=False)

    async def heartbeat(self) -> None:
        """A task that makes a batch of nothing but the heartbeat every HEARTBEAT_S."""
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            await self.queue.put(_BEAT)

    def stopped(self, exc: StoreError, total: int, not_asked: int) -> StoreError:
        """The one error that says what stopped the run, what was kept where, and what
        to free."""
        sp = self.spool
        parts = [str(exc), f"the run stopped asking ({not_asked} of {total} calls not made)"
                 if not_asked else f"every one of the run's {total} calls had been made"]
        if sp.records:
            parts.append(f"{sp.records} answers not written are kept in {sp.path} and "
                         "imported by --resume")
        if self.lost:
            parts.append(f"{self.lost} answers could not be kept anywhere")
        if isinstance(exc, StoreWriteError) and exc.cause in (WriteCause.NO_SPACE,
                                                              WriteCause.IO):
            parts.append(_room(exc, sp.bytes, sp.records, not_asked))
        if isinstance(exc, StoreWriteError):
            return StoreWriteError("; ".join(parts), mount=exc.mount, free_bytes=exc.free_bytes,
                                   run_id=self.run_id, cause=exc.cause)
        return type(exc)("; ".join(parts))


def _distinct(batch: list[Record]) -> list[list[Record]]:
    """`batch` in order, cut where a call comes again: a call asked again at the run's
    end may meet its failure in one batch, and one INSERT cannot hold a key twice; in
    order, the answer replaces the failure, which is counted (replaced_failures)."""
    parts: list[list[Record]] = [[]]
    seen: set[tuple[str, str]] = set()
    for record in batch:
        key = (record[0]["triplet_id"], record[0]["language"])
        if key in seen:
            parts.append([])
            seen.clear()
        seen.add(key)
        parts[-1].append(record)
    return parts


def _room(exc: StoreWriteError, spooled_bytes: int, spooled: int, not_asked: int) -> str:
    """The space to free: only for a full disk (or an I/O error that may be one); a
    read-only mount or a missing permission says its own cure (monitor.store.db)."""
    per = spooled_bytes / spooled if spooled else 4096.0
    # DuckDB writes the WAL, then checkpoints into new 256 KiB blocks: room for a few
    # times the data, plus a margin for its block allocation.
    need = 4 * (spooled_bytes + not_asked * per) + 8 * 2**20
    return f"free at least {size_text(need)} on {exc.mount} or move storage.path"


def import_spools(store: BatchStore, run_id: str) -> int:
    """Write a stopped run's spooled answers; the spool goes once they are stored."""
    n = 0
    for path in find_spools(store.path, run_id):
        records = list(read_spool(path))
        for i in range(0, len(records), 500):
            part = records[i:i + 500]
            store.write_batch(columns([c for c, _ in part], CALL_COLUMNS),
                              columns([x for _, ss in part for x in ss], SCORE_COLUMNS))
        path.unlink()
        n += len(records)
        log.info("run %s: imported %d spooled answers from %s", run_id, len(records), path)
    return n
