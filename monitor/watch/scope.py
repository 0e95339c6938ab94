"""Which runs may be compared or pooled: one rule, with the reason when not.

A run's numbers mean the same as another's only when both asked the same
catalogue version (the options, pairs and prompts), of the same model
(`RunRow.model_id`: the id the provider returned, else the configured model
string), in the same assistant setup (system prompt, persona, answer format,
request template: monitor.config.assistant), over the same scenarios and
variants (a pooled MD averages over them), and when the other run was asked at
least in this one's languages (its answers in them are then read as this run's
are: a run of fewer languages stays comparable). Only finished runs
(complete or partial) have statistics to compare or pool.

Every caller asks this rule: the baseline a run is compared with (and the
automatic one), the recent-runs JSD window and the per-cycle shape check, the
report's pooling of the runs before the reported one, `monitor baseline set`,
and recovery (which knows no model before the run: a field left None is not
checked).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from monitor.store import Baseline, RunRow
from monitor.vocab import FINISHED

__all__ = ["Refusal", "Scope"]


def _set(items: Iterable[str]) -> frozenset[str]:
    return frozenset(items)


def _names(items: frozenset[str]) -> str:
    return ",".join(sorted(items))


@dataclass(frozen=True)
class Refusal:
    """Why runs may not be compared: one line that says what to do. `changed`: the
    deployment changed (catalogue, model, setup), which the alert sinks are told once."""

    text: str
    changed: bool = False

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True, kw_only=True)
class Scope:
    """What a run (or a baseline) asked, of whom: the fields runs must share."""

    catalog_version: str
    setup: str
    model_id: str | None = None  # None: not known yet (recovery), not checked
    scenarios: frozenset[str] | None = None
    variants: frozenset[str] | None = None
    languages: frozenset[str] | None = None

    @classmethod
    def of(cls, run: RunRow) -> Scope:
        return cls(catalog_version=run.catalog_version, setup=run.setup,
                   model_id=run.model_id or run.model, scenarios=_set(run.scenarios),
                   variants=_set(run.variants), languages=_set(run.languages))

    @classmethod
    def of_baseline(cls, baseline: Baseline, runs: Sequence[RunRow]) -> Scope:
        """A baseline's scope: its catalog, model and setup; the scenarios and variants its
        runs asked; the languages every one of its runs was asked in."""
        own = [r for r in runs if r.run_id in set(baseline.run_ids)]
        langs = (frozenset.intersection(*(_set(r.languages) for r in own)) if own
                 else frozenset())
        return cls(catalog_version=baseline.catalog_version, setup=baseline.setup,
                   model_id=baseline.model_id,
                   scenarios=_set(s for r in own for s in r.scenarios),
                   variants=_set(v for r in own for v in r.variants), languages=langs)

    def refuses(self, other: Scope) -> Refusal | None:
        """None when `other`'s answers may be compared or pooled with this scope's;
        else why not, as one line that says what to do."""
        if other.catalog_version != self.catalog_version:
            return Refusal(f"catalog changed ({other.catalog_version} -> "
                           f"{self.catalog_version}); not compared - set a new baseline",
                           changed=True)
        if None not in (self.model_id, other.model_id) and other.model_id != self.model_id:
            return Refusal(f"model id changed ({other.model_id} -> {self.model_id}); not "
                           "compared - check the deployment, then `monitor baseline set "
                           "--latest`", changed=True)
        if other.setup != self.setup:
            return Refusal(f"assistant setup changed ({other.setup} -> {self.setup}: system "
                           "prompt, persona, answer format or request template); not compared "
                           "- once runs with the new setup are in, accept them with `monitor "
                           "baseline set --latest N`", changed=True)
        for what, mine, theirs in (("scenarios", self.scenarios, other.scenarios),
                                   ("variants", self.variants, other.variants)):
            if mine is not None and theirs is not None and mine != theirs:
                return Refusal(f"{what} differ ({_names(theirs)} -> {_names(mine)}: a pooled "
                               f"MD averages over them); not compared - ask the {what} of the "
                               f"other runs (sampling.{what} or --{what}) or set a new "
                               "baseline")
        if (self.languages is not None and other.languages is not None
                and (missing := self.languages - other.languages)):
            return Refusal(f"the baseline or other runs were not asked in {_names(missing)}; "
                           "not compared - ask only languages they have, or set a new "
                           "baseline")
        return None

    def pools(self, runs: Iterable[RunRow]) -> list[RunRow]:
        """The finished runs among `runs` whose answers may be pooled with this scope's."""
        return [r for r in runs if r.status in FINISHED and self.refuses(Scope.of(r)) is None]

    @staticmethod
    def common(runs: Sequence[RunRow]) -> str | None:
        """None when `runs` may make one baseline together (each finished, one catalog,
        model, setup, scenarios and variants); else why not."""
        unfinished = [r.run_id for r in runs if r.status not in FINISHED]
        if unfinished:
            return (f"runs {', '.join(unfinished)} are not finished; finish them with "
                    "`monitor probe --once --resume RUN_ID` or choose others")
        first = Scope.of(runs[0])
        for r in runs[1:]:
            mine = Scope.of(r)
            # Languages may differ between a baseline's runs: each run is compared in its own.
            why = first.refuses(Scope(**{**mine.__dict__, "languages": None}))
            if why is not None:
                return f"run {r.run_id} differs from {runs[0].run_id}: {why.text.split(';')[0]}"
        return None
