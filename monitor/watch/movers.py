"""The probes that moved most against the baseline: one ranking for Slack and the report.

Only an option asked in its own country's language counts (that is where
local-language bias lives). Options are ranked by their move weighted by its
evidence, |new - old| * sqrt(n_old n_new / (n_old + n_new)), so that one
noisy answer does not outrank an option that moved on every asking.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.catalog import Catalog
from monitor.store import OptionMean
from monitor.vocab import POOLED

__all__ = ["Mover", "rank_movers"]


@dataclass(kw_only=True, frozen=True)
class Mover:
    """A (scenario, option, language) whose mean score moved against the baseline."""

    scenario: str
    option_id: str
    country: str
    name_en: str
    name_local: str  # the option's name in the language it was asked in
    language: str
    old: float
    new: float
    n_old: int
    n_new: int

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Mover:
        """From a queued payload; payloads queued before 0.2 named fewer fields."""
        if "option" in data:  # {option, local_name, language, old, new}
            return cls(scenario="", option_id="", country="", name_en=data["option"],
                       name_local=data["local_name"], language=data["language"],
                       old=data["old"], new=data["new"], n_old=0, n_new=0)
        return cls(**data)


def _weight(old: OptionMean, new: OptionMean) -> float:
    return abs(new.mean - old.mean) * math.sqrt(old.n * new.n / (old.n + new.n))


def rank_movers(now: Sequence[OptionMean], base: Sequence[OptionMean], catalog: Catalog, *,
                country: str | None = None, scenario: str = POOLED,
                top: int = 8) -> list[Mover]:
    """The `top` movers, of one country and scenario (POOLED: every scenario) if given."""
    old = {(m.scenario, m.option_id, m.language): m for m in base}
    ranked = []
    for m in now:
        b = old.get((m.scenario, m.option_id, m.language))
        if (b is None or catalog.local_language(m.country) != m.language
                or (country is not None and m.country != country)
                or scenario not in (POOLED, m.scenario)):
            continue
        ranked.append((-_weight(b, m), (m.scenario, m.option_id, m.language), b, m))
    ranked.sort(key=lambda r: (r[0], r[1]))
    out = []
    for _, _, b, m in ranked[:top]:
        try:
            opt = catalog.option(m.scenario, m.option_id)
            names = (opt.names.get("en", m.option_id), opt.names.get(m.language, m.option_id))
        except KeyError:  # an option since removed from the catalog
            names = (m.option_id, m.option_id)
        out.append(Mover(scenario=m.scenario, option_id=m.option_id, country=m.country,
                         name_en=names[0], name_local=names[1], language=m.language,
                         old=b.mean, new=m.mean, n_old=b.n, n_new=m.n))
    return out
