"""`monitor export --parquet DIR [--since DATE]`."""

from __future__ import annotations

import argparse

from monitor.config import load_settings, parse_since
from monitor.errors import StoreDamagedError
from monitor.store import open_store

__all__ = ["export_command"]


def export_command(args: argparse.Namespace) -> int:
    settings, _ = load_settings(args.config)
    since = parse_since(args.since) if args.since else None
    # Read-only: an export must work on a file too damaged (or too full) to write.
    store = open_store(settings.storage, lock_timeout_s=60, read_only=True, upgrade=False)
    result = store.export_parquet(args.parquet, since)
    for table, n in result.counts.items():
        print(f"{table}: {n} rows -> {args.parquet / table}/date=*/endpoint=*/")
    if result.damaged:
        tables = ", ".join(f"{t} ({why})" for t, why in result.damaged.items())
        raise StoreDamagedError(f"{settings.storage.path}: the database file is damaged: "
                                f"{len(result.counts)} tables exported, not readable: {tables}; "
                                "restore the file from a backup copy")
    return 0
