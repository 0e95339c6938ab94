"""Comparisons (`monitor compare`): the row that links a candidate's run to what it is
compared with, and the lookups a comparison needs.

A comparison's two sides are ordinary run rows of status `compare` (never a run's
statistics, a baseline or a report's pool), one per endpoint; the `comparisons`
row (schema v9) names them: `baseline_run_id` and `candidate_run_id` when both
endpoints were asked, or `candidate_run_id` and the stored baseline's runs
(`reference_run_ids`) when the candidate was paired with them. Its settings (margin,
cap, error rates, batch, seed) are kept so that `--resume` goes on with the same
test; its verdicts are run_stats of the candidate's run (kinds `compare`,
`compare_jsd`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from monitor.store.db import Database
from monitor.vocab import RunStatus

__all__ = ["AskedSpec", "CompareStore", "Comparison"]

_FIELDS = ("compare_id", "mode", "baseline_endpoint", "candidate_endpoint", "baseline_run_id",
           "candidate_run_id", "reference_run_ids", "margin", "max_calls", "alpha", "beta",
           "batch_triplets", "seed", "started_at", "finished_at", "status", "reason", "outcome")


@dataclass(kw_only=True, frozen=True)
class Comparison:
    """One `monitor compare`: its sides, its test's settings, where it stands."""

    compare_id: str
    mode: str  # monitor.vocab.CompareMode
    baseline_endpoint: str
    candidate_endpoint: str
    baseline_run_id: str | None  # the baseline side's run; None against a stored baseline
    candidate_run_id: str
    reference_run_ids: list[str]  # the stored baseline's runs it is paired with (or [])
    margin: float
    max_calls: int
    alpha: float
    beta: float
    batch_triplets: int
    seed: int
    started_at: datetime
    finished_at: datetime | None
    status: str  # monitor.vocab.RunStatus: running, complete, interrupted
    reason: str | None = None  # why it stopped (decided, the cap, the budget, a signal)
    outcome: str | None = None  # regression / inconclusive / no regression


@dataclass(kw_only=True, frozen=True)
class AskedSpec:
    """How a triplet was asked in a run: what a comparison re-asks of its candidate."""

    run_id: str
    triplet_id: str
    variant: str
    option_order: tuple[str, ...]
    key: int  # the triplet's key in monitor.store.inputs.UnitScores.triplet


class CompareStore(Database):
    def create_comparison(self, c: Comparison) -> None:
        row: dict[str, Any] = {f: getattr(c, f) for f in _FIELDS}
        row["reference_run_ids"] = json.dumps(c.reference_run_ids)
        with self._connect() as con:
            con.execute(f"INSERT INTO comparisons ({', '.join(_FIELDS)}) VALUES "
                        f"({', '.join('?' for _ in _FIELDS)})", [row[f] for f in _FIELDS])

    def get_comparison(self, compare_id: str) -> Comparison | None:
        rows = self._rows(f"SELECT {', '.join(_FIELDS)} FROM comparisons WHERE compare_id = ?",
                          [compare_id])
        if not rows:
            return None
        values = dict(zip(_FIELDS, rows[0], strict=True))
        values["reference_run_ids"] = json.loads(values["reference_run_ids"] or "[]")
        return Comparison(**values)

    def claim_comparison(self, compare_id: str, run_ids: Sequence[str], owner: str) -> None:
        """This process goes on with the comparison: it and its runs are its own again."""
        now = datetime.now(UTC)
        with self._connect() as con, self._transaction(con):
            con.execute("UPDATE comparisons SET status = ?, finished_at = NULL, reason = NULL "
                        "WHERE compare_id = ?", [RunStatus.RUNNING, compare_id])
            con.execute("UPDATE runs SET owner = ?, heartbeat_at = ?, attempts = "
                        "coalesce(attempts, 0) + 1 WHERE list_contains(?, run_id)",
                        [owner, now, list(run_ids)])

    def end_comparison(self, compare_id: str, status: RunStatus, reason: str,
                       outcome: str | None = None) -> None:
        """The comparison stopped: complete (with its outcome) or interrupted (resumable)."""
        with self._connect() as con:
            con.execute("UPDATE comparisons SET status = ?, reason = ?, outcome = ?, "
                        "finished_at = ? WHERE compare_id = ?",
                        [status, reason, outcome, datetime.now(UTC), compare_id])

    def triplet_keys(self, triplet_ids: Sequence[str]) -> dict[str, int]:
        """Each triplet id's key as monitor.store.inputs.UnitScores.triplet holds it."""
        rows = self._rows("SELECT t, hash(t) FROM (SELECT unnest(?::VARCHAR[]) AS t)",
                          [list(triplet_ids)])
        return {str(t): int(k) for t, k in rows}

    def asked_specs(self, run_ids: Sequence[str]) -> list[AskedSpec]:
        """How each triplet of `run_ids` was asked (its variant and option order, the same
        in every language of a run), by run and triplet."""
        rows = self._rows(
            "SELECT run_id, triplet_id, any_value(variant), any_value(option_order), "
            "hash(triplet_id) FROM probe_calls WHERE list_contains(?, run_id) "
            "GROUP BY run_id, triplet_id ORDER BY run_id, triplet_id", [list(run_ids)])
        return [AskedSpec(run_id=str(r), triplet_id=str(t), variant=str(v),
                          option_order=tuple(str(o).split(",")), key=int(k))
                for r, t, v, o, k in rows]
