"""The monitor's exception hierarchy.

    MonitorError               anything the monitor reports to the user
    ├── UsageError             bad configuration or command line   -> exit 2
    │   ├── ConfigError        a config file, key or env override is wrong
    │   └── CatalogError       the probe catalog fails validation
    ├── StoreError             the DuckDB file cannot be used        -> exit 2
    └── NoResultsError         a run produced no usable answers      -> exit 3

Messages are one line, name the file / key / value and say how to fix it,
and never contain a secret.
"""

from __future__ import annotations

__all__ = [
    "CatalogError",
    "ConfigError",
    "MonitorError",
    "NoResultsError",
    "StoreError",
    "UsageError",
]


class MonitorError(Exception):
    """Base class: an error the CLI turns into one line on stderr."""

    exit_code = 2


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


class NoResultsError(MonitorError):
    """A run could not produce results (endpoint unreachable, all failed)."""

    exit_code = 3
