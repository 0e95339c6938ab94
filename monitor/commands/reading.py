"""The database as the commands that only read it open it.

`report`, `runs`, `baseline show`, `plan` and `export` never write: they open
the file read-only, so they work on a read-only file or mount (a mounted
backup, a volume snapshot) and beside the daemon. Nothing is created to be
read: without a file there is nothing stored.
"""

from __future__ import annotations

from pathlib import Path

from monitor.store import Store

__all__ = ["stored"]


def stored(path: Path, *, upgrade: bool = True) -> Store | None:
    """The database at `path` opened read-only, or None when there is no file yet.
    `upgrade=False` reads the tables of an older schema as they are (the export)."""
    if not path.is_file():
        return None
    return Store(path, lock_timeout_s=60, read_only=True, upgrade=upgrade)
