"""Replicas sharing one database take turns through it (schema v9; PostgreSQL in
practice, storage.url_env), with nothing but rows and the database's own locks:

- a lease (`leases`): one holder per name until it expires, by the database's clock
  (replicas' clocks may differ). `endpoint/<name>` is held by the process running
  that endpoint's run (its review, top-up and calibration included) and renewed
  while it runs: a replica that dies stops renewing, and after `lease_seconds` the
  run is another's to take over;
- a claimed slot (`slots`): the first replica to claim (endpoint, slot time)
  probes that slot; the others skip it;
- a message's delivery to a sink (`outbox_claim`): one replica at a time sends an
  endpoint's messages to a sink, in order (a PostgreSQL advisory lock of the
  session, released if the process dies; on a DuckDB file one process writes at a
  time anyway).

An upsert whose WHERE admits only an expired lease or its own holder is atomic on
both engines: of two replicas racing, the second sees the first's row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime, timedelta

from monitor.store.base import Base
from monitor.vocab import RunStatus

__all__ = ["CoordinationStore", "endpoint_lease"]


def endpoint_lease(endpoint: str) -> str:
    """The lease that whoever runs `endpoint`'s runs holds."""
    return f"endpoint/{endpoint}"


class CoordinationStore(Base):
    def db_now(self) -> datetime:
        """The database's clock: every replica's leases are timed by it."""
        return self._rows("SELECT now()")[0][0]  # type: ignore[no-any-return]

    def acquire_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Take `name` (free, expired, or ours already: then renewed)."""
        with self._connect() as con, self._transaction(con):
            now = con.execute("SELECT now()").fetchone()[0]
            con.execute(
                "INSERT INTO leases (name, holder, acquired_at, expires_at) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, acquired_at = "
                "excluded.acquired_at, expires_at = excluded.expires_at WHERE leases.expires_at "
                "<= ? OR leases.holder = excluded.holder",
                [name, holder, now, now + timedelta(seconds=seconds), now])
            row = con.execute("SELECT holder FROM leases WHERE name = ?", [name]).fetchone()
            return bool(row and row[0] == holder)

    def renew_lease(self, name: str, holder: str, seconds: float) -> bool:
        """Extend our hold; False when it is no longer ours (it expired and was taken)."""
        with self._connect() as con, self._transaction(con):
            now = con.execute("SELECT now()").fetchone()[0]
            con.execute("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ?",
                        [now + timedelta(seconds=seconds), name, holder])
            row = con.execute("SELECT holder FROM leases WHERE name = ?", [name]).fetchone()
            return bool(row and row[0] == holder)

    def release_lease(self, name: str, holder: str) -> None:
        with self._connect() as con:
            con.execute("DELETE FROM leases WHERE name = ? AND holder = ?", [name, holder])

    def lease_holder(self, name: str) -> str | None:
        """Who holds `name` now (None: nobody, or only an expired hold)."""
        rows = self._rows("SELECT holder FROM leases WHERE name = ? AND expires_at > now()",
                          [name])
        return str(rows[0][0]) if rows else None

    def claim_slot(self, endpoint: str, slot_at: datetime, holder: str) -> bool:
        """True for the one replica that claims (endpoint, slot) first."""
        with self._connect() as con, self._transaction(con):
            con.execute("INSERT INTO slots (endpoint, slot_at, holder, claimed_at) VALUES "
                        "(?, ?, ?, now()) ON CONFLICT (endpoint, slot_at) DO NOTHING",
                        [endpoint, slot_at, holder])
            row = con.execute("SELECT holder FROM slots WHERE endpoint = ? AND slot_at = ?",
                              [endpoint, slot_at]).fetchone()
            return bool(row and row[0] == holder)

    def unattended(self, endpoints: Sequence[str]) -> list[str]:
        """Endpoints with a run left running or interrupted and nobody holding their lease:
        a dead (or stopped) replica's run, for another to take over."""
        rows = self._rows(
            "SELECT DISTINCT r.endpoint FROM runs r WHERE list_contains(?, r.endpoint) AND "
            "list_contains(?, r.status) AND NOT EXISTS (SELECT 1 FROM leases l WHERE "
            "l.name = 'endpoint/' || r.endpoint AND l.expires_at > now()) ORDER BY r.endpoint",
            [list(endpoints), [RunStatus.RUNNING, RunStatus.INTERRUPTED]])
        return [str(r[0]) for r in rows]

    @contextmanager
    def outbox_claim(self, endpoint: str, sink: str) -> Iterator[bool]:
        """Whether this process may send `endpoint`'s messages to `sink` now (another
        replica is at it: False). One writer holds a DuckDB file: always True there."""
        yield True
