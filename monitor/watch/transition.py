"""A cell's alert transition as its messages tell it, and what its DiD says.

Every message carries the cell's DiD with its CI: bias (the local language
moves local options against the others, beyond the language's leniency) or
leniency (docs/statistics.md, DiD).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from monitor.vocab import Condition
from monitor.watch.movers import Mover

__all__ = ["Transition", "bias_or_leniency", "did_verdict"]


@dataclass(kw_only=True, frozen=True)
class Transition:
    """A cell's state change, as Slack is told of it."""

    endpoint: str
    scenario: str
    country: str
    from_state: str
    to_state: str
    run_id: str
    md: float
    ci: tuple[float, float]
    n: int
    md_base: float
    ci_base: tuple[float, float]
    n_base: int
    z: float | None
    reason: str
    movers: list[Mover] = field(default_factory=list)
    condition: Condition = Condition.DRIFT  # or LEVEL: the absolute level vs thresholds.md_points
    did: float = float("nan")
    did_ci: tuple[float, float] = (float("nan"), float("nan"))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Transition:
        """From a queued payload (the outbox holds them as JSON)."""
        movers = [Mover.from_dict(m) for m in data.get("movers", [])]
        fields = {k: v for k, v in data.items() if k not in ("movers", "kind")}
        if "did_ci" in fields:
            fields["did_ci"] = tuple(fields["did_ci"])
        if "condition" in fields:
            fields["condition"] = Condition(fields["condition"])
        return cls(**{**fields, "ci": tuple(data["ci"]), "ci_base": tuple(data["ci_base"]),
                      "movers": movers})


def did_verdict(did: float, lo: float, hi: float) -> str:
    """"bias" (the DiD's whole CI beyond 0), "leniency" (0 inside it) or "unknown" (no CI)."""
    if not all(math.isfinite(x) for x in (did, lo, hi)):
        return "unknown"
    return "bias" if lo > 0 or hi < 0 else "leniency"


def bias_or_leniency(did: float, lo: float, hi: float) -> str:
    """What a cell's DiD says, with its CI (docs/statistics.md, DiD)."""
    verdict = did_verdict(did, lo, hi)
    if verdict == "unknown":
        shown = f"{did:+.2f}" if math.isfinite(did) else "n/a"
        return f"DiD {shown} (no CI): bias or leniency cannot be told apart"
    ci = f"DiD {did:+.2f} [{lo:+.2f}, {hi:+.2f}]"
    if verdict == "bias":
        return f"{ci}: bias - the local language moves local options against the others"
    return (f"{ci}: consistent with leniency - the language scores every option alike "
            "(no bias shown beyond it)")
