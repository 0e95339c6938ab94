"""The store: the only package that imports duckdb or psycopg, and the only SQL author.

    schema.py    frozen migrations; the column lists of batched inserts
    base.py      what the operations stand on, on either engine (sessions, transactions)
    db.py        the DuckDB file: opening, locking, migrating; Scratch (in memory)
    pg.py        PostgreSQL (storage.url_env): the only psycopg user
    schema_pg.py the same schema versions in PostgreSQL's types
    scoped.py    a PostgreSQL store's reads of a few runs' answers, by DuckDB's SQL
    transfer.py  a whole history copied from one store to another (monitor migrate)
    diagnose.py  what a file is and what its errors mean (foreign, damaged, write causes)
    records.py   the frozen records the store takes and returns
    runs.py      run rows, owners, orphans, summaries
    owner.py     which process owns a run, and whether it lives
    results.py   calls, scores, run statistics, counters' totals
    state.py     baselines, alert states and events, the alert outbox (per sink)
    inputs.py    the statistics engine's inputs, aggregated in DuckDB
    compare.py   comparisons (`monitor compare`): the row linking their runs, their lookups
    coordination.py  replicas taking turns: leases, claimed slots, the outbox's sender
    export.py    every table as Parquet
    store.py     Store (the file), PgStore (PostgreSQL), open_store (the configured one)
"""

from monitor.store import owner
from monitor.store.compare import AskedSpec, Comparison
from monitor.store.diagnose import file_system, size_text
from monitor.store.inputs import CallSummary, UnitScores, WeaknessSums
from monitor.store.records import (
    AlertEvent,
    Baseline,
    CallTotals,
    CellRecord,
    ExportResult,
    FileSystem,
    OptionMean,
    OutboxItem,
    RunRow,
    RunSummary,
    StatRow,
    Usage,
)
from monitor.store.schema import APP, CALL_COLUMNS, MIGRATIONS, SCORE_COLUMNS, STAT_COLUMNS
from monitor.store.store import PgStore, Store, open_store

__all__ = ["APP", "CALL_COLUMNS", "MIGRATIONS", "SCORE_COLUMNS", "STAT_COLUMNS", "AlertEvent",
           "AskedSpec", "Baseline", "CallSummary", "CallTotals", "CellRecord", "Comparison",
           "ExportResult", "FileSystem", "OptionMean", "OutboxItem", "PgStore", "RunRow",
           "RunSummary", "StatRow", "Store", "UnitScores", "Usage", "WeaknessSums",
           "file_system", "open_store", "owner", "size_text"]
