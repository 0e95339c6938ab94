"""Runs: their rows, owners, lifecycle and summaries.

A run row names its owner process (monitor.store.owner) and carries a
heartbeat that every batch the run writes refreshes, so that a run whose
process died (SIGKILL, OOM, a full disk) is found by `close_orphans` and
closed as interrupted instead of staying `running` for ever.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from monitor.store import owner as owners
from monitor.store.base import Base, Connection
from monitor.store.records import RunRow, RunSummary
from monitor.store.schema import RUN_FIELDS, RUN_MODEL
from monitor.vocab import CallStatus, RunStatus

__all__ = ["RunsStore", "finish"]


def finish(con: Connection, run_id: str, status: RunStatus, reason: str | None) -> None:
    """End a run as `status` (on `con`, inside the caller's transaction if any)."""
    con.execute(f"UPDATE runs SET status = ?, finished_at = ?, reason = ?, model_id = {RUN_MODEL} "
                "WHERE run_id = ?", [status, datetime.now(UTC), reason, run_id])

_JSON_FIELDS = ("scenarios", "languages", "variants")


class RunsStore(Base):
    def create_run(self, run: RunRow) -> None:
        row = {f: getattr(run, f) for f in RUN_FIELDS}
        for name in _JSON_FIELDS:
            row[name] = json.dumps(row[name])
        values = [row[f] for f in RUN_FIELDS]
        with self._connect() as con:
            con.execute(f"INSERT INTO runs ({', '.join(RUN_FIELDS)}) VALUES "
                        f"({', '.join('?' for _ in RUN_FIELDS)})", values)

    def claim_run(self, run_id: str, owner: str) -> None:
        """This process runs (or resumes) `run_id` from now on."""
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, owner = ?, heartbeat_at = ?, "
                        "finished_at = NULL, reason = NULL, attempts = coalesce(attempts, 0) "
                        "+ 1 WHERE run_id = ?",
                        [RunStatus.RUNNING, owner, datetime.now(UTC), run_id])

    def finish_run(self, run_id: str, status: RunStatus, reason: str | None = None) -> None:
        """The run ended as `status`; its model (schema.RUN_MODEL) is set from its answers."""
        with self._connect() as con:
            finish(con, run_id, status, reason)

    def measured(self, run_id: str) -> RunRow:
        """Every answer of the run is in: its model is set (schema.RUN_MODEL) while it stays
        `running` for its review (monitor.review), which ends it."""
        with self._connect() as con:
            con.execute(f"UPDATE runs SET model_id = {RUN_MODEL} WHERE run_id = ?", [run_id])
        run = self.get_run(run_id)
        assert run is not None, run_id
        return run

    def close_run(self, run_id: str, status: RunStatus, reason: str) -> None:
        """A run that will not be resumed: its status and why, its end time kept
        (a run closed today must not look like today's run)."""
        with self._connect() as con:
            con.execute("UPDATE runs SET status = ?, reason = ?, finished_at = coalesce("
                        "finished_at, heartbeat_at, started_at) WHERE run_id = ?",
                        [status, reason, run_id])

    def get_run(self, run_id: str) -> RunRow | None:
        rows = self._run_rows("WHERE run_id = ?", [run_id])
        return rows[0] if rows else None

    def runs(self, endpoint: str | None = None) -> list[RunRow]:
        """Oldest first."""
        if endpoint is None:
            return self._run_rows("", [])
        return self._run_rows("WHERE endpoint = ?", [endpoint])

    def latest_run(self, endpoint: str, statuses: Sequence[str]) -> RunRow | None:
        """The run of `endpoint` with one of `statuses` that finished last."""
        rows = self._run_rows("WHERE endpoint = ? AND finished_at IS NOT NULL AND "
                              "list_contains(?, status) ORDER BY finished_at DESC LIMIT 1",
                              [endpoint, list(statuses)], order=False)
        return rows[0] if rows else None

    def _run_rows(self, where: str, params: list[Any], *, order: bool = True) -> list[RunRow]:
        out = []
        sort = " ORDER BY started_at, run_id" if order else ""
        for r in self._rows(f"SELECT {', '.join(RUN_FIELDS)} FROM runs {where}{sort}", params):
            values = dict(zip(RUN_FIELDS, r, strict=True))
            for name in _JSON_FIELDS:
                values[name] = json.loads(values[name])
            values["attempts"] = int(values["attempts"] or 0)
            values["setup"] = values["setup"] or "default"
            out.append(RunRow(**values))
        return out

    def close_orphans(self, endpoint: str | None = None, *, now: datetime | None = None,
                      leased_by: str | None = None) -> list[RunRow]:
        """Runs left `running` by a process that is gone (SIGKILL, OOM, a full disk
        that kept even the last status update out) become `interrupted`, with why.
        `leased_by`: the caller holds `endpoint`'s lease (monitor.store.coordination), so
        a running run of another owner lost its lease: its process is gone or cut off."""
        now = now or datetime.now(UTC)
        closed = []
        for run in self.runs(endpoint):
            if run.status != RunStatus.RUNNING:
                continue
            lost = leased_by is not None and run.owner != leased_by
            if not lost and owners.alive(run.owner, run.heartbeat_at, now=now):
                continue
            reason = (f"its process ({owners.describe(run.owner)}) ended without closing it "
                      "(killed, out of memory or out of disk)" if not lost else
                      f"its process ({owners.describe(run.owner)}) lost the endpoint's lease "
                      "(its replica died or was cut off); taken over")
            with self._connect() as con:
                con.execute("UPDATE runs SET status = ?, finished_at = ?, reason = ? "
                            "WHERE run_id = ? AND status = ?",
                            [RunStatus.INTERRUPTED, now, reason, run.run_id, RunStatus.RUNNING])
            closed.append(RunRow(**{**run.__dict__, "status": RunStatus.INTERRUPTED,
                                    "finished_at": now, "reason": reason}))
        return closed

    def next_run_index(self, endpoint: str, catalog_version: str, seed: int,
                       scenarios: Sequence[str]) -> int:
        """Runs walk the sampling cycle: the next index for this sampling setup."""
        rows = self._rows(
            "SELECT max(run_index) FROM runs WHERE endpoint = ? AND catalog_version = ? "
            "AND seed = ? AND scenarios = ?",
            [endpoint, catalog_version, seed, json.dumps(list(scenarios))])
        return 0 if not rows or rows[0][0] is None else int(rows[0][0]) + 1

    def recent_fingerprints(self, endpoint: str, last: int = 2, *,
                            run_id: str | None = None) -> list[tuple[str, str]]:
        """(run_id, its providers' fingerprints joined by ',') of the latest measured runs,
        newest first; `run_id` (a run under review, still running) among them."""
        rows = self._rows(
            "SELECT c.run_id, string_agg(DISTINCT c.fingerprint, ',' ORDER BY c.fingerprint) "
            "FROM probe_calls c JOIN runs r USING (run_id) WHERE c.endpoint = ? AND "
            "c.status = ? AND c.fingerprint IS NOT NULL AND (list_contains(?, r.status) OR "
            "r.run_id = ?) GROUP BY c.run_id, r.started_at ORDER BY r.started_at DESC LIMIT ?",
            [endpoint, CallStatus.OK, [RunStatus.COMPLETE, RunStatus.PARTIAL], run_id, last])
        return [(str(r), str(f)) for r, f in rows]

    def run_summaries(self, endpoint: str | None = None,
                      run_ids: Sequence[str] | None = None) -> list[RunSummary]:
        """Runs with their call counts and most common error (`monitor runs`)."""
        runs = [r for r in self.runs(endpoint) if run_ids is None or r.run_id in run_ids]
        ids = [r.run_id for r in runs]
        counts: dict[str, dict[str, int]] = {i: {} for i in ids}
        for run_id, status, n in self._rows(
                "SELECT run_id, status, count(*) FROM probe_calls WHERE list_contains(?, "
                "run_id) GROUP BY run_id, status", [ids]):
            counts[run_id][status] = int(n)
        top: dict[tuple[str, str], tuple[str, int]] = {}
        for run_id, status, text, n in self._rows(
                "SELECT run_id, status, t, n FROM (SELECT run_id, status, t, count(*) AS n, "
                "row_number() OVER (PARTITION BY run_id, status ORDER BY count(*) DESC, t) AS k "
                "FROM (SELECT run_id, status, coalesce(error, detail, '?') AS t FROM probe_calls "
                "WHERE list_contains(?, run_id) AND list_contains(?, status)) c "
                "GROUP BY run_id, status, t) g WHERE k = 1",
                [ids, [CallStatus.FAILED, CallStatus.UNPARSEABLE]]):
            top[(run_id, status)] = (str(text), int(n))
        out = []
        for r in runs:
            err = top.get((r.run_id, CallStatus.FAILED), (None, 0))
            unp = top.get((r.run_id, CallStatus.UNPARSEABLE), (None, 0))
            out.append(RunSummary(run=r, calls=sum(counts[r.run_id].values()),
                                  counts=counts[r.run_id],
                                  top_error=err[0], top_error_n=err[1], top_unparseable=unp[0],
                                  top_unparseable_n=unp[1]))
        return out
