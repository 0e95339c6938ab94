"""A whole history copied from one store to another (`monitor migrate`, a PostgreSQL
store's Parquet export): every table, its rows as they are, in chunks.

The target must hold no runs yet: ids (the outbox's) and keys are kept, so a copy
into a used database would mix two histories. `meta` keeps the target's own
application tag and schema version; only the counters (`replaced_failed/...`) are
copied. After the copy the target's id sequence follows the copied ids.
"""

from __future__ import annotations

from collections.abc import Callable

from monitor.errors import StoreError
from monitor.store.base import Base
from monitor.store.schema import TABLES

__all__ = ["copy_history"]

CHUNK = 20_000


def copy_history(src: Base, dst: Base, *,
                 progress: Callable[[str, int], None] | None = None) -> dict[str, int]:
    """Rows copied per table."""
    if dst._rows("SELECT count(*) FROM runs")[0][0]:
        raise StoreError(f"{dst.where}: already holds runs; migrate into an empty database "
                         "(a new one, or drop the monitor's tables first)")
    counts: dict[str, int] = {}
    for table, cols in TABLES.items():
        names = ", ".join(c for c, _ in cols)
        where = " WHERE key LIKE 'replaced_failed/%'" if table == "meta" else ""
        counts[table] = 0
        for rows in src._stream(f"SELECT {names} FROM {table}{where}", CHUNK):
            data = {c: [r[i] for r in rows] for i, (c, _) in enumerate(cols)}
            with dst._connect() as con, dst._transaction(con):
                dst._insert(con, table, cols, data, replace=False)
            counts[table] += len(rows)
            if progress is not None:
                progress(table, counts[table])
    dst._sync_ids()
    return counts
