"""Which process owns a running run, and whether that process still lives.

A run row carries its owner as `host|boot|pid|start`: the host name, the
kernel's boot id, the process id and the process's start time in clock
ticks since boot (/proc/<pid>/stat field 22). A pid alone is not enough:
after an OOM kill or a container restart the same pid can belong to another
process; the start time tells them apart, and the boot id tells a pid of a
rebooted machine from one of today. Where /proc is missing (macOS), the
start time is "-" and only the pid is checked.

On another host (a shared volume) liveness cannot be checked: such a run
counts as alive while its heartbeat (refreshed by every write of the run)
is younger than REMOTE_STALE_S.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from functools import lru_cache

__all__ = ["REMOTE_STALE_S", "alive", "describe", "token"]

REMOTE_STALE_S = 900.0


@lru_cache(maxsize=1)
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return "-"


def _start_ticks(pid: int) -> str | None:
    """The process's start time (ticks since boot), '-' without /proc, None if gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return None if os.path.isdir("/proc/self") else _pid_exists(pid)
    except OSError:
        return "-"
    # The command name (field 2) may hold spaces and ')': split after the last ')'.
    fields = stat.rsplit(")", 1)[-1].split()
    return fields[19] if len(fields) > 19 else "-"


def _pid_exists(pid: int) -> str | None:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return "-"
    return "-"


def token(pid: int | None = None) -> str:
    """This process's (or `pid`'s) owner token."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()}|{_boot_id()}|{pid}|{_start_ticks(pid) or '-'}"


def alive(owner: str | None, heartbeat_at: datetime | None, *,
          now: datetime | None = None) -> bool:
    """False when the owner is certainly gone (or the run has no owner at all)."""
    if not owner:
        return False
    parts = owner.split("|")
    if len(parts) != 4 or not parts[2].isdigit():
        return False
    host, boot, pid, start = parts
    if host != socket.gethostname():
        now = now or datetime.now(UTC)
        return heartbeat_at is not None and (now - heartbeat_at).total_seconds() < REMOTE_STALE_S
    if boot != _boot_id():
        return False  # the machine rebooted since
    ticks = _start_ticks(int(pid))
    if ticks is None:
        return False
    return ticks == start or "-" in (ticks, start)


def describe(owner: str | None) -> str:
    """'pid 123 on host' for messages."""
    if not owner or owner.count("|") != 3:
        return "an unknown process"
    host, _, pid, _ = owner.split("|")
    return f"pid {pid} on {host}"
