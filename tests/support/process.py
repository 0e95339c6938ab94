"""Processes, ports and waiting: `monitor run` as a real process, a free port, a gate.

Tests wait on states (a condition polled until it holds), never on time.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.openai import Reply, Request

__all__ = ["Gate", "daemon", "free_port", "get", "wait_until"]


def free_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(url: str) -> tuple[int, str]:
    """(status, body) of a GET; 0 while nothing listens yet."""
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except urllib.error.URLError:
        return 0, ""


def wait_until(predicate: Callable[[], object], timeout: float = 60.0) -> None:
    """Poll `predicate` until it holds; fail after `timeout` (a bound, never a pace)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


@contextmanager
def daemon(cfg: Path, log: Path, *extra: str,
           env: dict[str, str] | None = None) -> Iterator[subprocess.Popen[bytes]]:
    """`monitor run --config cfg` with its output in `log`; killed at the end if alive."""
    with log.open("wb") as fh:
        proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", "run", "--config",
                                 str(cfg), *extra], stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


class Gate:
    """Answers the first `open_for` requests with `answer`, then holds every later one
    until released: a run is certainly mid-flight when the test signals it, however
    fast or slow the machine (no race between the run's length and the signal)."""

    def __init__(self, open_for: int, answer: Callable[[Request], Reply]) -> None:
        self.open_for = open_for
        self.answer = answer
        self.released = threading.Event()
        self._lock = threading.Lock()
        self.seen = 0

    def __call__(self, req: Request) -> Reply:
        with self._lock:
            self.seen += 1
            held = self.seen > self.open_for
        if held:
            self.released.wait(timeout=120)
        return self.answer(req)
