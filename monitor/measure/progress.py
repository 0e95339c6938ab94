"""Progress feedback on stderr: calls done / total, failures, rate and ETA.

On a terminal the line is redrawn in place; elsewhere (CI logs, the daemon)
a line is printed at most every `interval_s` seconds, so logs stay readable.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from typing import Protocol

__all__ = ["Lines", "Progress"]


class Lines(Protocol):
    """Where progress goes: stderr, or the daemon's log (monitor.logs.LogLines)."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...

    def isatty(self) -> bool: ...


class Progress:
    def __init__(self, stream: Lines | None = None, *, label: str = "",
                 interval_s: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.label = label
        self.interval_s = interval_s
        self.clock = clock
        self.tty = bool(self.stream.isatty())
        self.total = 0
        self.counts: Counter[str] = Counter()
        self._t0 = 0.0
        self._last = -1e9
        self._printed = -1  # `done` at the last line printed

    @property
    def done(self) -> int:
        return sum(self.counts.values())

    def start(self, run_id: str, total: int) -> None:
        self.total, self._t0 = total, self.clock()
        self.counts.clear()
        print(f"{self.label}run {run_id}: {total} calls to make", file=self.stream, flush=True)

    def note(self, text: str) -> None:
        """A message of its own line (a redrawn progress line is ended first)."""
        print(("\n" if self.tty else "") + f"{self.label}{text}", file=self.stream, flush=True)

    def again(self, n: int, text: str) -> None:
        """`n` failed calls are asked once more: they are to do again (their answers
        replace the failures), said on a line of its own."""
        self.counts["failed"] -= n
        self.note(text)

    def advance(self, status: str) -> None:
        self.counts[status] += 1
        now = self.clock()
        if self.tty or now - self._last >= self.interval_s or self.done == self.total:
            self._last = now
            self._draw(now, final=False)

    def finish(self) -> None:
        self._draw(self.clock(), final=True)

    def line(self, now: float) -> str:
        elapsed = max(now - self._t0, 1e-9)
        rate = self.done / elapsed
        left = self.total - self.done
        eta = f"{left / rate:.0f}s" if rate > 0 and left else "-"
        bad = self.counts["failed"]
        other = self.counts["unparseable"] + self.counts["refused"]
        pct = 100 * self.done / self.total if self.total else 100.0
        return (f"{self.label}{self.done}/{self.total} calls ({pct:.0f}%), {bad} failed, "
                f"{other} unparseable/refused, {rate:.1f}/s, ETA {eta}")

    def _draw(self, now: float, *, final: bool) -> None:
        if self.tty:
            end = "\n" if final else ""
            print(f"\r\033[K{self.line(now)}", end=end, file=self.stream, flush=True)
        elif self._printed != self.done:  # a log line per change, never twice
            print(self.line(now), file=self.stream, flush=True)
        self._printed = self.done
