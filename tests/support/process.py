"""Processes, ports and waiting: `monitor run` as a real process, a free port, a gate.

Tests wait on states (a condition polled until it holds), never on time.
"""

from __future__ import annotations

import os
import signal
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
from typing import Any

from tests.support.openai import Reply, Request

__all__ = ["Gate", "daemon", "free_port", "get", "interrupt_cli", "wait_until"]


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


def wait_until(predicate: Callable[[], object], timeout: float = 60.0, *logs: Path) -> None:
    """Poll `predicate` until it holds; fail after `timeout` (a bound, never a pace).

    Bounds on daemon runs are minutes: each run is a child process that imports
    LiteLLM first, which takes 5 s alone and over 30 s on CI's two cores shared
    by four test workers (a 120 s bound on four runs failed there). The pause
    between polls grows to 1 s: a predicate that opens the DuckDB file takes
    its lock, and polling it every 50 ms starves the daemon's own writes.
    """
    deadline = time.monotonic() + timeout
    pause = 0.05
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(pause)
        pause = min(pause * 1.5, 1.0)
    # The daemon's own words say why (a run that failed, a lock, a slow start).
    tails = "".join(f"\n--- {log.name}\n{log.read_text(errors='replace')[-3000:]}"
                    for log in logs if log.exists())
    raise AssertionError(f"condition not reached in {timeout:g} s{tails}")


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


def interrupt_cli(args: list[str], server: Any, gate: Gate, sig: int,
                  held_at: int) -> tuple[int, str]:
    """`python -m monitor.cli *args`, sent `sig` once `held_at` requests reached `server`
    (the gate holding the later ones: certainly mid-run): (exit code, stderr).

    A child inherits an ignored SIGINT (a test worker may have it ignored): as at a
    terminal, it starts with SIGINT at its default, so Ctrl-C reaches the product. The
    held calls are released once the child says it stops asking; they end and are kept.
    """
    lines: list[str] = []
    proc = subprocess.Popen([sys.executable, "-m", "monitor.cli", *args],
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),
                              daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: len(server.requests) >= held_at, 120)
        proc.send_signal(sig)
        try:
            wait_until(lambda: any("stopping: no new call" in ln for ln in lines), 60)
        except AssertionError:  # say what the child's signal state was
            status = Path(f"/proc/{proc.pid}/status").read_text(encoding="utf-8")
            raise AssertionError("".join(lines)[-2000:] + "".join(
                ln + "\n" for ln in status.splitlines() if ln.startswith("Sig"))) from None
        gate.released.set()
        proc.wait(timeout=60)
        reader.join(timeout=10)
    finally:
        gate.released.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, "".join(lines)
