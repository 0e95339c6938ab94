"""`monitor export`: every table as Parquet, partitioned by date and endpoint.

Opened read-only by the command, so that it also saves what is still
readable of a damaged file: a table that cannot be read is reported, the
others are written.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from monitor.store.base import Base
from monitor.store.db import DatabaseError
from monitor.store.records import ExportResult

__all__ = ["ExportStore"]


class ExportStore(Base):
    def export_parquet(self, out: Path, since: datetime | None) -> ExportResult:
        """Every table as Parquet under out/<table>/, partitioned by date and endpoint.
        A table that cannot be read (a damaged block) is reported, the others written."""
        since = since or datetime(1970, 1, 1, tzinfo=UTC)
        queries = {
            "runs": "SELECT *, CAST(started_at AS DATE) AS date FROM runs WHERE started_at >= $1",
            "probe_calls": "SELECT *, CAST(created_at AS DATE) AS date FROM probe_calls "
                           "WHERE created_at >= $1",
            "scores": "SELECT s.*, c.endpoint, CAST(c.created_at AS DATE) AS date FROM scores s "
                      "JOIN probe_calls c USING (run_id, triplet_id, language) "
                      "WHERE c.created_at >= $1",
            "run_stats": "SELECT s.*, r.endpoint, CAST(r.started_at AS DATE) AS date FROM "
                         "run_stats s JOIN runs r USING (run_id) WHERE r.started_at >= $1",
            "baselines": "SELECT *, CAST(set_at AS DATE) AS date FROM baselines "
                         "WHERE set_at >= $1",
            "alert_state": "SELECT *, CAST(changed_at AS DATE) AS date FROM alert_state "
                           "WHERE changed_at >= $1",
            "alert_events": "SELECT *, CAST(event_at AS DATE) AS date FROM alert_events "
                            "WHERE event_at >= $1",
            "outbox": "SELECT *, CAST(created_at AS DATE) AS date FROM outbox "
                      "WHERE created_at >= $1",
            "outbox_delivery": "SELECT d.*, o.endpoint, CAST(o.created_at AS DATE) AS date "
                               "FROM outbox_delivery d JOIN outbox o USING (id) "
                               "WHERE o.created_at >= $1",
            "comparisons": "SELECT *, candidate_endpoint AS endpoint, CAST(started_at AS DATE) "
                           "AS date FROM comparisons WHERE started_at >= $1",
        }
        counts: dict[str, int] = {}
        damaged: dict[str, str] = {}
        out.mkdir(parents=True, exist_ok=True)
        with self._open() as con:
            for table, sql in queries.items():
                try:
                    row = con.execute(f"SELECT count(*) FROM ({sql})", [since]).fetchone()
                    counts[table] = int(row[0]) if row else 0
                    if counts[table]:
                        target = str(out / table).replace("'", "''")
                        con.execute(f"COPY ({sql}) TO '{target}' (FORMAT PARQUET, "
                                    "PARTITION_BY (date, endpoint), OVERWRITE_OR_IGNORE)",
                                    [since])
                except DatabaseError as exc:
                    counts.pop(table, None)
                    damaged[table] = " ".join(str(exc).split())[:160]
        return ExportResult(counts, damaged)
