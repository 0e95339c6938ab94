"""The monitor's exception hierarchy.

    MonitorError               anything the monitor reports to the user
    ├── UsageError             bad configuration or command line   -> exit 2
    │   ├── ConfigError        a config file, key or env override is wrong
    │   └── CatalogError       the probe catalog fails validation
    ├── StoreError             the DuckDB file cannot be used        -> exit 2
    │   ├── StoreBusyError     another process holds it too long
    │   ├── StoreDamagedError  the file is damaged (checksum, unreadable block)
    │   └── StoreWriteError    a write failed (disk full, read-only) -> exit 4;
    │                          its WriteCause tells no space, read-only, permission apart
    └── NoResultsError         a run produced no usable answers      -> exit 3

Messages are one line, name the file / key / value and say how to fix it,
and never contain a secret. Exit codes 130 (SIGINT) and 143 (SIGTERM) are
an interrupted `probe --once` (or `compare`): what was stored stays, and it can
be resumed. Exit 1 is a gate that failed as asked (`--fail-on-breach`,
`--fail-on-regression`); exit 5 a comparison that left a country undecided.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "EXIT_BREACH",
    "EXIT_INCONCLUSIVE",
    "EXIT_INTERRUPTED",
    "EXIT_NO_RESULTS",
    "EXIT_OK",
    "EXIT_STORAGE",
    "EXIT_TERMINATED",
    "EXIT_USAGE",
    "CatalogError",
    "ConfigError",
    "MonitorError",
    "NoResultsError",
    "StoreBusyError",
    "StoreDamagedError",
    "StoreError",
    "StoreWriteError",
    "UsageError",
    "WriteCause",
]

EXIT_OK = 0
EXIT_BREACH = 1
EXIT_USAGE = 2
EXIT_NO_RESULTS = 3
EXIT_STORAGE = 4
EXIT_INCONCLUSIVE = 5  # `monitor compare`: no regression shown, a country not decided
EXIT_INTERRUPTED = 130  # 128 + SIGINT
EXIT_TERMINATED = 143  # 128 + SIGTERM


class MonitorError(Exception):
    """Base class: an error the CLI turns into one line on stderr."""

    exit_code = EXIT_USAGE


class UsageError(MonitorError):
    """The user's input (command line, config, catalog) is wrong."""


class ConfigError(UsageError):
    """A configuration file, key or environment override is invalid."""


class CatalogError(UsageError):
    """The probe catalog is invalid; carries every problem found."""

    def __init__(self, problems: list[object]) -> None:
        self.problems = problems
        first = str(problems[0]) if problems else "unknown problem"
        more = f" (and {len(problems) - 1} more; run `monitor catalog validate`)" if len(
            problems
        ) > 1 else ""
        super().__init__(f"invalid probe catalog: {first}{more}")


class StoreError(MonitorError):
    """The storage file cannot be opened or is not a monitor database."""


class StoreBusyError(StoreError):
    """Another process held the file for longer than the store waits."""


class StoreDamagedError(StoreError):
    """The file is a DuckDB database whose blocks fail their checksums."""


class WriteCause(StrEnum):
    """Why a write failed: each has its own cure (free space, remount, permissions)."""

    NO_SPACE = "no space"
    READ_ONLY = "read-only file system"
    PERMISSION = "permission denied"
    IO = "I/O error"


class StoreWriteError(StoreError):
    """A write did not reach the file (no space, read-only, I/O error)."""

    exit_code = EXIT_STORAGE

    def __init__(self, message: str, *, mount: str = "?", free_bytes: int = 0,
                 run_id: str | None = None, cause: WriteCause = WriteCause.IO) -> None:
        super().__init__(message)
        self.mount = mount  # the file system's mount point, for the user's message
        self.free_bytes = free_bytes
        self.run_id = run_id  # the run it stopped, when a run was writing
        self.cause = cause

    @property
    def cause_text(self) -> str:
        """The cause in a few words, with the mount where it is the mount's."""
        if self.cause == WriteCause.READ_ONLY:
            return f"{self.mount} is mounted read-only"
        if self.cause == WriteCause.NO_SPACE:
            return f"no space left on {self.mount}"
        return str(self.cause)


class NoResultsError(MonitorError):
    """A run could not produce results (endpoint unreachable, all failed)."""

    exit_code = EXIT_NO_RESULTS
