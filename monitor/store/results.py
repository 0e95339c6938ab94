"""Calls, scores and run statistics: written in batches, read by named questions.

Results are written in batches as they arrive, one columnar INSERT per table
per batch (lists unnested inside DuckDB, never a parameterised insert per row),
calls and their scores in one transaction. The primary key (run_id,
triplet_id, language) makes a resumed run idempotent: a re-asked call
replaces its failed row, nothing is duplicated. A score row exists only for
an answered (`ok`) call: the statistics inputs rely on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from monitor.store.base import Base, Connection
from monitor.store.records import CallTotals, OptionMean, StatRow, Usage
from monitor.store.schema import CALL_COLUMNS, SCORE_COLUMNS, STAT_COLUMNS
from monitor.vocab import TOPUP_INFIX, CallStatus, RunStatus, StatKind

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ResultsStore"]

_STAT_FIELDS = [c for c, _ in STAT_COLUMNS if c != "run_id"]


def _stat(row: Sequence[Any]) -> StatRow:
    """A run_stats row (without its run_id) as a record; its kind as the vocabulary's."""
    fields = dict(zip(_STAT_FIELDS, row, strict=True))
    return StatRow(**{**fields, "kind": StatKind(fields["kind"])})


class ResultsStore(Base):
    def write_batch(self, calls: dict[str, list[Any]], scores: dict[str, list[Any]], *,
                    heartbeat: str | None = None, replaces: bool = True) -> None:
        """One transaction: the calls (replacing earlier failed attempts) and scores,
        and the heartbeat of run `heartbeat`. `replaces=False` (a fresh run: its calls
        are new keys) skips counting the failed rows replaced, a join with probe_calls
        that would grow with the history on every batch."""
        with self._connect() as con, self._transaction(con):
            if replaces:
                _count_replaced_failures(con, calls)
            self._insert(con, "probe_calls", CALL_COLUMNS, calls)
            self._insert(con, "scores", SCORE_COLUMNS, scores)
            if heartbeat is not None:
                con.execute("UPDATE runs SET heartbeat_at = ? WHERE run_id = ?",
                            [datetime.now(UTC), heartbeat])

    def write_stats(self, run_id: str, rows: Sequence[StatRow], *, replace: bool = True) -> None:
        """The run's statistics: all of them (replace=True) or added to / over them."""
        data = {c: [run_id if c == "run_id" else getattr(r, c) for r in rows]
                for c, _ in STAT_COLUMNS}
        with self._connect() as con, self._transaction(con):
            if replace:
                con.execute("DELETE FROM run_stats WHERE run_id = ?", [run_id])
            self._insert(con, "run_stats", STAT_COLUMNS, data)

    def stats_of(self, run_ids: Sequence[str], kind: StatKind | None = None,
                 scenario: str | None = None) -> list[tuple[str, StatRow]]:
        """(run_id, statistic) stored for these runs, optionally one kind / scenario."""
        rows = self._rows(
            "SELECT run_id, kind, scenario, key, value, ci_lower, ci_upper, n, p_value, extra "
            "FROM run_stats WHERE list_contains(?, run_id) AND (? IS NULL OR kind = ?) AND "
            "(? IS NULL OR scenario = ?) ORDER BY run_id, kind, scenario, key",
            [list(run_ids), kind, kind, scenario, scenario])
        return [(r[0], _stat(r[1:])) for r in rows]

    def latest_stats(self, endpoint: str, kind: StatKind) -> list[StatRow]:
        """The statistics of one kind from the endpoint's latest run that holds any."""
        rows = self._rows(
            "SELECT s.kind, s.scenario, s.key, s.value, s.ci_lower, s.ci_upper, s.n, "
            "s.p_value, s.extra FROM run_stats s WHERE s.kind = ? AND s.run_id = ("
            "SELECT r.run_id FROM runs r JOIN run_stats t ON t.run_id = r.run_id "
            "WHERE r.endpoint = ? AND t.kind = ? ORDER BY r.started_at DESC LIMIT 1) "
            "ORDER BY s.scenario, s.key", [kind, endpoint, kind])
        return [_stat(r) for r in rows]

    def topups_since(self, endpoint: str, since: datetime) -> list[tuple[str, StatRow]]:
        """(run_id, verdict): the endpoint's top-up verdicts (run_stats kind "topup") of
        runs started at or after `since`, oldest first: the last per country may hold
        its cell back (monitor.watch.topup.held)."""
        rows = self._rows(
            "SELECT s.run_id, s.kind, s.scenario, s.key, s.value, s.ci_lower, s.ci_upper, s.n, "
            "s.p_value, s.extra FROM run_stats s JOIN runs r ON r.run_id = s.run_id "
            "WHERE r.endpoint = ? AND s.kind = ? AND r.started_at >= ? "
            "ORDER BY r.started_at, r.run_id", [endpoint, StatKind.TOPUP, since])
        return [(r[0], _stat(r[1:])) for r in rows]

    def topup_calls_before(self, endpoint: str, before: datetime, runs: int) -> int:
        """Calls the top-ups of the endpoint's last `runs` runs started before `before`
        asked (failed ones included): what the window of topup.mean_run_share has spent
        (monitor.watch.topup.run_limit)."""
        if runs < 1:
            return 0
        rows = self._rows(
            "SELECT count(*) FROM probe_calls c JOIN runs t ON t.run_id = c.run_id JOIN ("
            "SELECT run_id FROM runs WHERE endpoint = ? AND status NOT IN (?, ?) AND "
            "started_at < ? ORDER BY started_at DESC LIMIT ?) p ON "
            "starts_with(t.run_id, p.run_id || ?) WHERE t.status = ?",
            [endpoint, RunStatus.TOPUP, RunStatus.COMPARE, before, runs, TOPUP_INFIX,
             RunStatus.TOPUP])
        return int(rows[0][0])

    def done_calls(self, run_id: str) -> set[tuple[str, str]]:
        """(triplet_id, language) of calls that need no retry on resume."""
        rows = self._rows("SELECT triplet_id, language FROM probe_calls WHERE run_id = ? AND "
                          "status <> ?", [run_id, CallStatus.FAILED])
        return {(r[0], r[1]) for r in rows}

    def replaced_failures(self, endpoint: str) -> int:
        """Failed calls later replaced by a resumed run's answer: still counted, so
        that bias_monitor_probes_total{status="failed"} never goes down."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [f"replaced_failed/{endpoint}"])
        return int(rows[0][0]) if rows else 0

    def call_totals(self, endpoint: str, latency_buckets: Sequence[float]) -> CallTotals:
        """Counts by status (replaced failures included), tokens, cost and latency of
        the answered calls: what the exporter's counters show."""
        by_status = {str(s): int(n) for s, n in self._rows(
            "SELECT status, count(*) FROM probe_calls WHERE endpoint = ? GROUP BY status",
            [endpoint])}
        if replaced := self.replaced_failures(endpoint):
            by_status[CallStatus.FAILED] = by_status.get(CallStatus.FAILED, 0) + replaced
        buckets = ", ".join(f"count(*) FILTER (WHERE latency_s <= {float(b)!r})"
                            for b in latency_buckets)
        row = self._rows(
            f"SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), "
            f"sum(cost_usd), count(*) FILTER (WHERE cost_usd IS NULL), "
            f"coalesce(sum(latency_s), 0), count(*){', ' + buckets if buckets else ''} "
            f"FROM probe_calls WHERE endpoint = ? AND status <> ?",
            [endpoint, CallStatus.FAILED])[0]
        return CallTotals(by_status=by_status, input_tokens=int(row[0]), output_tokens=int(row[1]),
                          cost_usd=None if row[2] is None else float(row[2]), unpriced=int(row[3]),
                          latency_sum_s=float(row[4]),
                          latency_count=int(row[5]), latency_buckets=[int(x) for x in row[6:]])

    def usage(self, endpoint: str, since: datetime | None = None) -> Usage:
        """Calls and known cost since a time (the daily budget), and the mean tokens and
        cost of an answered call (the planner's price of a run)."""
        calls, usd = self._rows(
            "SELECT count(*), coalesce(sum(cost_usd), 0) FROM probe_calls WHERE endpoint = ? "
            "AND (? IS NULL OR created_at >= ?)", [endpoint, since, since])[0]
        tin, tout, cost = self._rows(
            "SELECT avg(input_tokens), avg(output_tokens), avg(cost_usd) FROM probe_calls "
            "WHERE endpoint = ? AND status = ?", [endpoint, CallStatus.OK])[0]
        return Usage(int(calls), float(usd), tin, tout, cost)

    def persistence(self, endpoint: str) -> tuple[float, int] | None:
        """The mean persistence the endpoint's runs measured against their baseline (the
        n-weighted mean of run_stats kind "persistence") and the runs; None: none yet."""
        row = self._rows(
            "SELECT sum(s.value * s.n) / sum(s.n), count(*) FROM run_stats s JOIN runs r "
            "USING (run_id) WHERE r.endpoint = ? AND s.kind = ? AND s.n > 0",
            [endpoint, StatKind.PERSISTENCE])[0]
        return None if not row[1] or row[0] is None else (float(row[0]), int(row[1]))

    def option_means(self, run_ids: Sequence[str]) -> list[OptionMean]:
        """Mean score per (scenario, option, language) over answered calls: what moved
        against a baseline (Slack's movers, the report's evidence)."""
        rows = self._rows(
            "SELECT split_part(triplet_id, '/', 1), option_id, country, language, avg(score), "
            "count(*) FROM scores WHERE list_contains(?, run_id) GROUP BY ALL ORDER BY ALL",
            [list(run_ids)])
        return [OptionMean(scenario=r[0], option_id=r[1], country=r[2], language=r[3],
                           mean=float(r[4]), n=int(r[5])) for r in rows]

    def answer_text(self, run_ids: Sequence[str], scenario: str, option_id: str, language: str,
                    near: float, *, farthest: bool) -> str | None:
        """The stored answer whose score of the option is nearest (or farthest from) `near`."""
        order = "DESC" if farthest else "ASC"
        rows = self._rows(
            "SELECT c.raw_text FROM scores s JOIN probe_calls c USING (run_id, triplet_id, "
            "language) WHERE list_contains(?, s.run_id) AND c.status = ? AND c.scenario = ? "
            f"AND s.option_id = ? AND s.language = ? ORDER BY abs(s.score - ?) {order}, "
            "c.run_id, c.triplet_id LIMIT 1",
            [list(run_ids), CallStatus.OK, scenario, option_id, language, near])
        return str(rows[0][0] or "") if rows else None

    def calls_frame(self, run_ids: Sequence[str], *, with_text: bool = False) -> pd.DataFrame:
        cols = ", ".join(c for c, _ in CALL_COLUMNS if with_text or c != "raw_text")
        return self._frame(f"SELECT {cols} FROM probe_calls WHERE list_contains(?, run_id)",
                           [list(run_ids)])

    def scores_frame(self, run_ids: Sequence[str]) -> pd.DataFrame:
        """Scores with their call's scenario and variant (the report's score plots)."""
        return self._frame(
            "SELECT s.*, c.scenario, c.variant FROM scores s JOIN probe_calls c "
            "USING (run_id, triplet_id, language) "
            "WHERE list_contains(?, s.run_id) AND c.status = ?", [list(run_ids), CallStatus.OK])


def _count_replaced_failures(con: Connection, calls: dict[str, list[Any]]) -> None:
    if not calls["run_id"]:
        return
    # (run, triplet, language) as one text: the same SQL on every engine.
    keys = [f"{r}\x1f{t}\x1f{lang}" for r, t, lang in
            zip(calls["run_id"], calls["triplet_id"], calls["language"], strict=False)]
    rows = con.execute(
        "SELECT endpoint, count(*) FROM probe_calls WHERE list_contains(?, run_id) AND "
        "list_contains(?, run_id || chr(31) || triplet_id || chr(31) || language) AND "
        "status = ? GROUP BY endpoint",
        [sorted(set(calls["run_id"])), keys, CallStatus.FAILED]).fetchall()
    for endpoint, n in rows:
        key = f"replaced_failed/{endpoint}"
        old = con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        if old is None:
            con.execute("INSERT INTO meta (key, value) VALUES (?, ?)", [key, str(int(n))])
        else:
            con.execute("UPDATE meta SET value = ? WHERE key = ?",
                        [str(int(old[0]) + int(n)), key])
