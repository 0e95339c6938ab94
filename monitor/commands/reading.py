"""The database as the commands that only read it open it.

`report`, `runs`, `baseline show`, `plan` and `export` never write: they open
the file read-only, so they work on a read-only file or mount (a mounted
backup, a volume snapshot) and beside the daemon. Nothing is created to be
read: without a file there is nothing stored.
"""

from __future__ import annotations

from monitor.config import Storage
from monitor.errors import StoreError
from monitor.store import Store, open_store
from monitor.store.store import postgres_url

__all__ = ["stored"]


def stored(storage: Storage, *, upgrade: bool = True) -> Store | None:
    """The configured database opened read-only, or None when nothing is stored yet (no
    file; a PostgreSQL database without the monitor's tables). `upgrade=False` reads the
    tables of an older schema as they are (the export)."""
    if postgres_url(storage) is None and not storage.path.is_file():
        return None
    try:
        return open_store(storage, lock_timeout_s=60, read_only=True, upgrade=upgrade)
    except StoreError as exc:
        if "no bias-monitor data yet" in str(exc):
            return None
        raise
