"""`monitor migrate --from FILE`: a DuckDB history into the configured PostgreSQL store."""

from __future__ import annotations

import argparse

from monitor.config import load_settings
from monitor.errors import UsageError
from monitor.store import Store, open_store
from monitor.store.transfer import copy_history

__all__ = ["migrate_command"]


def migrate_command(args: argparse.Namespace) -> int:
    settings, source = load_settings(args.config)
    if not settings.storage.url_env:
        raise UsageError(f"{source}: storage.url_env is not set; name the variable holding the "
                         "postgresql:// URL the history goes to (monitor migrate copies a "
                         "DuckDB file into PostgreSQL)")
    if not args.source.is_file():
        raise UsageError(f"--from {args.source}: no such file; give the DuckDB file to copy "
                         "(storage.path of the monitor that wrote it)")
    # Read-only: the file is left as it is (a copy, not a move), even on a read-only mount.
    src = Store(args.source, lock_timeout_s=60, read_only=True, upgrade=False)
    dst = open_store(settings.storage)
    counts = copy_history(src, dst)
    for table, n in counts.items():
        print(f"{table}: {n} rows")
    print(f"copied {args.source} into {dst.where}; the file is unchanged")
    return 0
