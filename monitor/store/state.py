"""The daemon's memory: baselines, alert states and their history, the alert outbox.

Alert states (per endpoint x scenario x country) and the CUSUM sums live here,
so that a restart neither forgets a firing cell nor re-sends it; messages owed
to the alert sinks wait in the outbox until each sink took them
(outbox_delivery: one row per message and sink it is owed to).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime

from monitor.store.base import Base
from monitor.store.records import AlertEvent, Baseline, CellRecord, OutboxItem, RunRow
from monitor.store.schema import EVENT_COLUMNS, OUTBOX_COLUMNS, SINK_COLUMNS, STATE_COLUMNS

__all__ = ["StateStore"]

_CELL_FIELDS = [c for c, _ in STATE_COLUMNS if c != "endpoint"]
_EVENT_FIELDS = [c for c, _ in EVENT_COLUMNS if c != "endpoint"]


class StateStore(Base):
    def set_baseline(self, endpoint: str, runs: Sequence[RunRow], *, auto: bool) -> None:
        """`runs` (finished, of one scope: monitor.watch.scope.Scope.common) become the
        endpoint's baseline, with their catalog, model and setup."""
        first = runs[0]
        run_ids = [r.run_id for r in runs]
        catalog_version, setup = first.catalog_version, first.setup
        model_id = first.model_id or first.model
        with self._connect() as con, self._transaction(con):
            con.execute("UPDATE baselines SET active = false WHERE endpoint = ?", [endpoint])
            con.execute("INSERT INTO baselines (endpoint, set_at, run_ids, catalog_version, "
                        "model_id, auto, active, setup) VALUES (?, ?, ?, ?, ?, ?, true, ?)",
                        [endpoint, datetime.now(UTC), json.dumps(list(run_ids)),
                         catalog_version, model_id, auto, setup])
            # A new baseline starts every cell afresh.
            con.execute("DELETE FROM alert_state WHERE endpoint = ?", [endpoint])

    def baseline(self, endpoint: str) -> Baseline | None:
        rows = self._rows("SELECT set_at, run_ids, catalog_version, model_id, auto, setup "
                          "FROM baselines WHERE endpoint = ? AND active", [endpoint])
        if not rows:
            return None
        set_at, run_ids, version, model_id, auto, setup = rows[0]
        return Baseline(endpoint=endpoint, set_at=set_at, run_ids=json.loads(run_ids),
                        catalog_version=version, model_id=model_id, auto=bool(auto),
                        setup=setup or "default")

    def alert_states(self, endpoint: str) -> dict[tuple[str, str], CellRecord]:
        rows = self._rows(f"SELECT {', '.join(_CELL_FIELDS)} FROM alert_state WHERE endpoint = ?",
                          [endpoint])
        out = {}
        for r in rows:
            cell = CellRecord(**dict(zip(_CELL_FIELDS, r, strict=True)))
            out[(cell.scenario, cell.country)] = cell
        return out

    def save_alert_states(self, endpoint: str, states: Sequence[CellRecord],
                          events: Sequence[AlertEvent]) -> None:
        """Cell states and their transitions, in one transaction."""
        with self._connect() as con, self._transaction(con):
            self._insert(con, "alert_state", STATE_COLUMNS,
                   {c: [endpoint if c == "endpoint" else getattr(st, c) for st in states]
                    for c, _ in STATE_COLUMNS})
            self._insert(con, "alert_events", EVENT_COLUMNS,
                   {c: [endpoint if c == "endpoint" else getattr(ev, c) for ev in events]
                    for c, _ in EVENT_COLUMNS}, replace=False)

    def alert_events(self, endpoint: str, since: datetime | None = None,
                     until: datetime | None = None) -> list[AlertEvent]:
        """State changes of an endpoint's cells, oldest first, within [since, until]."""
        rows = self._rows(
            f"SELECT {', '.join(_EVENT_FIELDS)} FROM alert_events WHERE endpoint = ? AND "
            "(? IS NULL OR event_at >= ?) AND (? IS NULL OR event_at <= ?) ORDER BY event_at",
            [endpoint, since, since, until, until])
        return [AlertEvent(**dict(zip(_EVENT_FIELDS, r, strict=True))) for r in rows]

    def mark_notified(self, endpoint: str, cells: Sequence[tuple[str, str]]) -> None:
        with self._connect() as con:
            con.execute("UPDATE alert_state SET notified_at = ? WHERE endpoint = ? AND "
                        "list_contains(?, scenario || chr(31) || country)",
                        [datetime.now(UTC), endpoint, [f"{s}\x1f{c}" for s, c in cells]])

    def outbox_add(self, endpoint: str, payloads: Sequence[str], sinks: Sequence[str]) -> None:
        """Queue one message (its payloads), owed to each of `sinks`."""
        with self._connect() as con, self._transaction(con):
            n = len(payloads)
            ids = self._new_ids(con, "outbox", n)
            self._insert(con, "outbox", OUTBOX_COLUMNS, {
                "id": ids, "endpoint": [endpoint] * n,
                "created_at": [datetime.now(UTC)] * n, "payload": list(payloads),
                "delivered_at": [None] * n}, replace=False)
            owed = [(i, s) for i in ids for s in sinks]
            self._insert(con, "outbox_delivery", SINK_COLUMNS, {
                "id": [i for i, _ in owed], "sink": [s for _, s in owed],
                "delivered_at": [None] * len(owed), "outcome": [None] * len(owed)},
                replace=False)

    def outbox_adopt(self, endpoint: str, sinks: Sequence[str]) -> int:
        """Messages held (queued while no sink could deliver: owed to none) are owed to
        `sinks` from now on; how many."""
        with self._connect() as con, self._transaction(con):
            # Replicas adopting at once: the second sees the first's rows, owes nothing twice.
            self._serialize(con, f"outbox/{endpoint}")
            held = [int(r[0]) for r in con.execute(
                "SELECT id FROM outbox o WHERE endpoint = ? AND delivered_at IS NULL AND NOT "
                "EXISTS (SELECT 1 FROM outbox_delivery d WHERE d.id = o.id) ORDER BY id",
                [endpoint]).fetchall()]
            owed = [(i, s) for i in held for s in sinks]
            self._insert(con, "outbox_delivery", SINK_COLUMNS, {
                "id": [i for i, _ in owed], "sink": [s for _, s in owed],
                "delivered_at": [None] * len(owed), "outcome": [None] * len(owed)},
                replace=False)
        return len(held)

    def outbox_backlog(self, endpoint: str) -> dict[str, int]:
        """Messages not delivered yet: by the sink that owes them, "" for those held while
        no sink could deliver."""
        rows = self._rows(
            "SELECT coalesce(d.sink, ''), count(DISTINCT o.id) FROM outbox o LEFT JOIN "
            "outbox_delivery d ON d.id = o.id WHERE o.endpoint = ? AND o.delivered_at IS NULL "
            "AND d.delivered_at IS NULL GROUP BY 1 ORDER BY 1", [endpoint])
        return {str(sink): int(n) for sink, n in rows}

    def outbox_has(self, endpoint: str, payload: str) -> bool:
        """Whether this very message was ever queued (notices are sent once)."""
        return bool(self._rows("SELECT 1 FROM outbox WHERE endpoint = ? AND payload = ? LIMIT 1",
                               [endpoint, payload]))

    def outbox_pending(self, endpoint: str, sink: str | None = None) -> list[OutboxItem]:
        """What is still owed to `sink` (None: to any sink), oldest first."""
        rows = self._rows(
            "SELECT DISTINCT o.id, o.payload, o.created_at FROM outbox o JOIN outbox_delivery d "
            "USING (id) WHERE o.endpoint = ? AND d.delivered_at IS NULL AND "
            "(? IS NULL OR d.sink = ?) ORDER BY o.id", [endpoint, sink, sink])
        return [OutboxItem(int(r[0]), str(r[1]), r[2]) for r in rows]

    def outbox_delivered(self, ids: Sequence[int], sink: str, outcome: str = "delivered") -> None:
        """`sink` is done with these messages (`outcome`: delivered, rejected by the receiver,
        or skipped as nothing for it); a message done by every sink is delivered."""
        now = datetime.now(UTC)
        with self._connect() as con, self._transaction(con):
            con.execute("UPDATE outbox_delivery SET delivered_at = ?, outcome = ? WHERE sink = ? "
                        "AND list_contains(?, id)", [now, outcome, sink, list(ids)])
            con.execute("UPDATE outbox SET delivered_at = ? WHERE list_contains(?, id) AND NOT "
                        "EXISTS (SELECT 1 FROM outbox_delivery d WHERE d.id = outbox.id AND "
                        "d.delivered_at IS NULL)", [now, list(ids)])
