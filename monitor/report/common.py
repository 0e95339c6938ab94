"""What the HTML and the Markdown report share: names and orders."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, NamedTuple

from monitor.catalog import Catalog
from monitor.report.ports import ReportStore
from monitor.stats import MIN_CELL_N, jsd_significant, nullable, significant
from monitor.store import RunRow
from monitor.vocab import FINISHED, POOLED, CallStatus, RunStatus, Variant

__all__ = ["NEUTRAL_NOTES_LEAD", "VARIANT_TITLES", "Stat", "country_key", "jsd_star",
           "neutral_notes", "notes_under", "slug", "stat", "trend_to", "unreadable"]


class Stat(NamedTuple):
    """A statistic as a report cell shows it: the value, its CI (None: no interval) and
    n, whether it is significant by the one rule, and whether it is under the minimum n."""

    value: float
    lo: float | None
    hi: float | None
    n: int
    sig: bool
    thin: bool

    def ci(self, fmt: str, missing: str) -> str:
        return (f" [{fmt.format(self.lo)}, {fmt.format(self.hi)}]"
                if self.lo is not None and self.hi is not None else missing)


def stat(value: Any, lo: Any, hi: Any, n: Any, *, test: bool = True,
         sig: bool | None = None) -> Stat | None:
    """None when there is no value. `sig`: a significance the caller decided (JSD: its
    permutation test); else MD's rule (the CI excludes 0 and n >= MIN_CELL_N) if `test`."""
    v, a, b = nullable(value), nullable(lo), nullable(hi)
    if v is None:
        return None
    if sig is None:
        sig = test and significant(a, b, int(n))
    return Stat(value=v, lo=a, hi=b, n=int(n), sig=bool(sig), thin=int(n) < MIN_CELL_N)


def unreadable(store: ReportStore, runs: list[RunRow]) -> set[str]:
    """The failed runs among `runs` that hold answers (stored, none scored): reportable,
    to show why nothing could be read (`monitor report` and the daemon's report alike)."""
    failed = [r.run_id for r in runs if r.status == RunStatus.FAILED]
    if not failed:
        return set()
    return {s.run.run_id for s in store.run_summaries(run_ids=failed)
            if any(n for st, n in s.counts.items() if st != CallStatus.FAILED)}

VARIANT_TITLES = {POOLED: "pooled", Variant.PLAIN: "plain", Variant.COT: "CoT",
                  Variant.FEMALE: "female", Variant.MALE: "male"}
_ORDER = {c: i for i, c in enumerate(["US", "GB", "CA", "AU", "CN", "JP", "FR", "DE", "KR"])}


def neutral_notes(catalog: Catalog, languages: Collection[str]) -> dict[str, dict[str, str]]:
    """scenario -> language -> its prompt file's situation.neutral_note, where the language
    has no gender-free form and the neutral is worded otherwise (probes/README.md)."""
    notes: dict[str, dict[str, str]] = {}
    for lang in languages:
        for scen, text in (catalog.prompts[lang].scenarios.items()
                           if lang in catalog.prompts else ()):
            if text.situation.neutral_note:
                notes.setdefault(scen, {})[lang] = " ".join(text.situation.neutral_note.split())
    return notes


#: What stands before the notes under a variant table (HTML and Markdown alike).
NEUTRAL_NOTES_LEAD = ("The neutral form (plain, CoT) is worded otherwise where a language has "
                      "no gender-free form: ")


def notes_under(notes: dict[str, dict[str, str]], scenario: str, variants: Collection[str]
                ) -> list[str]:
    """The neutral notes a variant table of `scenario` shows ("lang: note"; the pooled
    table names each note's scenario), when it compares the neutral with a gender."""
    if not {Variant.FEMALE, Variant.MALE} & set(variants):
        return []
    return [f"{lang}{'' if scenario == scen else f' ({scen})'}: {note}"
            for scen in sorted(notes) if scenario in (POOLED, scen)
            for lang, note in notes[scen].items()]


def country_key(country: str) -> tuple[int, str]:
    """The paper's order of countries, then the rest alphabetically."""
    return _ORDER.get(country, 99), country


def jsd_star(p_value: Any, n: Any) -> bool:
    """A JSD cell of a report table is marked by its permutation test (stats.rules)."""
    return jsd_significant(nullable(p_value), int(n))


def slug(endpoint: str) -> str:
    """An endpoint's name as a file name."""
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in endpoint)


def latest_runs(store: ReportStore, endpoints: Collection[str] = ()) -> dict[str, list[RunRow]]:
    """endpoint -> [its latest finished run] (of `endpoints`, or every endpoint in the
    store), in the order of their first finished run; an endpoint's latest run that
    failed with its answers stored is taken instead, to show why nothing could be read:
    what `monitor report` covers without --run or --since, and the daemon's fleet page."""
    every = [r for r in sorted(store.runs(), key=lambda r: r.started_at)
             if not endpoints or r.endpoint in endpoints]
    out: dict[str, list[RunRow]] = {}
    latest: dict[str, RunRow] = {}
    for run in every:
        if run.status in FINISHED:
            out[run.endpoint] = [run]
        if run.status in (*FINISHED, RunStatus.FAILED):
            latest[run.endpoint] = run
    unread = unreadable(store, list(latest.values()))
    out.update({ep: [run] for ep, run in latest.items() if run.run_id in unread})
    return out


def trend_to(store: ReportStore, run: RunRow) -> list[RunRow]:
    """The finished runs of `run`'s endpoint up to it, oldest first: the MD trend its
    report shows (`monitor report` and the daemon's report alike)."""
    return sorted((r for r in store.runs(run.endpoint)
                   if r.status in FINISHED and r.started_at <= run.started_at),
                  key=lambda r: r.started_at)
