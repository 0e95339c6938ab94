"""A cell's alert transition as its messages tell it, and what its DiD says.

Every message carries the cell's DiD with its CI, from the data that decided it
(the run and its top-up's triplets): bias (the local language moves local options
against the others, beyond the language's leniency), leniency (the DiD holds 0 and
stays below half the MD) or cannot tell (docs/statistics.md, DiD). The verdict reads
the DiD's interval at VERDICT_LEVEL, not the shown 95%: it is a second test on data a
page selected, so its error is held below 0.5% a side before that selection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from monitor.stats import t_quantile
from monitor.vocab import Condition
from monitor.watch.movers import Mover

__all__ = ["VERDICT_LEVEL", "Transition", "bias_or_leniency", "did_reading", "did_verdict",
           "verdict_interval"]

#: The verdict's interval: a page is selected on a high MD, and the DiD shares the
#: MD's noise, so a 95% interval said "bias" of a pure leniency in 1 page of 18
#: (bench/topup.py, verdict); at 99% each wrong word is at most 0.5% before that
#: selection, and "cannot tell" takes what the data cannot decide.
VERDICT_LEVEL = 0.99


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
    did_ci: tuple[float, float] = (float("nan"), float("nan"))  # 95%
    did_n: int = 0  # the DiD's triplets (0: as the MD's n, as queued before it was kept)
    # The MD of the DiD's triplets (the run and its top-up's), which the verdict weighs
    # the DiD against: the run's own MD is the one a page selected, so it runs high.
    did_md: float = float("nan")  # NaN: the run's md (the DiD is the run's own)

    @property
    def did_units(self) -> int:
        """The DiD's triplets: did_n, else (a message queued before it was kept) n."""
        return self.did_n or self.n

    @property
    def did_md_or_md(self) -> float:
        """The MD the verdict weighs the DiD against: did_md, else the run's md."""
        return self.did_md if math.isfinite(self.did_md) else self.md

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


def did_verdict(t: Transition) -> str:
    """"bias" (the DiD's CI excludes 0 on the MD's side), "leniency" (its CI holds 0 and
    lies wholly on 0's side of half the MD: most of the shift is the language's, on
    every option), "cannot tell" (otherwise) or "unknown" (no CI). An interval holding 0
    is not evidence of leniency when it holds the MD, or half of it, just as well. The CI
    is the verdict's (verdict_interval)."""
    return did_reading(t.did_md_or_md, t.did, t.did_ci, t.did_units)


def verdict_interval(ci: tuple[float, float], n: int) -> tuple[float, float]:
    """The DiD's interval at VERDICT_LEVEL from its 95% t-interval on n triplets (dof
    n - 1, as the engine's); NaN where there is none."""
    lo, hi = ci
    if n < 2 or not (math.isfinite(lo) and math.isfinite(hi)):
        return math.nan, math.nan
    q = (1 + VERDICT_LEVEL) / 2
    half = (hi - lo) / 2 * float(t_quantile(n - 1, q) / t_quantile(n - 1, 0.975))
    mid = (lo + hi) / 2
    return mid - half, mid + half


def did_reading(md: float, did: float, ci: tuple[float, float], n: int) -> str:
    """did_verdict's rule on numbers: an MD (or an MD change, `monitor compare`) and its
    DiD with the DiD's 95% CI and its n; the rule reads the verdict's interval
    (verdict_interval). Half the MD, not the MD: a shift half bias and half leniency
    has a DiD of half the MD, and an interval that merely excludes the MD would call it
    leniency whenever it is narrower than half the MD (bench/topup.py's mixed case:
    3 of 14 pages); below half, "leniency" is wrong there at most as often as the
    interval misses (0.5%). A DiD beyond 0 on the other side of the MD (local options
    moved against the language's shift) is neither: "cannot tell"."""
    lo, hi = verdict_interval(ci, n)
    if not all(math.isfinite(x) for x in (md, did, lo, hi)):
        return "unknown"
    side = 1.0 if md >= 0 else -1.0
    lo, hi = sorted((side * lo, side * hi))  # on the MD's side: an MD up
    if lo > 0:
        return "bias"
    return "leniency" if 0 <= hi < abs(md) / 2 else "cannot tell"  # lo <= 0 here


def bias_or_leniency(t: Transition) -> str:
    """What a cell's DiD says, with its CI (docs/statistics.md, DiD): the same words in
    every sink, the report and JSON."""
    verdict = did_verdict(t)
    if verdict == "unknown":
        shown = f"{t.did:+.2f}" if math.isfinite(t.did) else "n/a"
        return f"DiD {shown} (no CI): bias or leniency cannot be told apart"
    ci = f"DiD {t.did:+.2f} [{t.did_ci[0]:+.2f}, {t.did_ci[1]:+.2f}]"
    lo, hi = verdict_interval(t.did_ci, t.did_units)
    at = f"its {VERDICT_LEVEL:.0%} CI [{lo:+.2f}, {hi:+.2f}]"
    if verdict == "bias":
        return (f"{ci}: bias - the local language moves local options against the others "
                f"({at} excludes 0)")
    md = f"the MD {t.did_md_or_md:+.2f} of the same triplets"
    if verdict == "leniency":
        return (f"{ci}: leniency - the language scores every option alike ({at} holds 0 "
                f"and stays below half {md})")
    return (f"{ci}: cannot tell bias from leniency - {at} reaches half {md} without "
            f"excluding 0")
