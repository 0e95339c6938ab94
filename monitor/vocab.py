"""The words the monitor stores, exports and prints, each defined once.

StrEnum members are their strings (`CallStatus.OK == "ok"`), so they go to
DuckDB, JSON and Prometheus labels unchanged; code compares with the member,
never with a literal.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["FINISHED", "LABELS", "LEVEL_VALUE", "POOLED", "STATE_VALUE", "TOPUP_INFIX",
           "WEAKNESS_KIND", "AlertState", "AnswerFormat", "Arm", "CallStatus", "Change",
           "CompareMode", "Condition", "LevelState", "Outcome", "Persona", "RunStatus", "Side",
           "StatKind", "Variant", "base_language"]


def base_language(code: str) -> str | None:
    """The language a locale inherits from (`pt` for `pt-PT`, `zh` for `zh-Hant`: its
    BCP 47 primary subtag), or None for a language. A locale is a catalogue language of
    its own (its local countries, its MD and JSD); what it does not write otherwise -
    a name, a prompt text, an assistant's system prompt file - is its language's."""
    base, sep, _ = code.partition("-")
    return base if sep else None


class CallStatus(StrEnum):
    """What became of one probe call (probe_calls.status, bias_monitor_probes_total)."""

    OK = "ok"  # answered and all three scores read
    FAILED = "failed"  # no usable answer after bounded retries
    UNPARSEABLE = "unparseable"  # answered, but no complete in-range set of scores
    REFUSED = "refused"  # answered with a refusal


class RunStatus(StrEnum):
    """Where a run stands (runs.status)."""

    RUNNING = "running"
    COMPLETE = "complete"
    PARTIAL = "partial"  # stopped early by the daily budget; its statistics are made
    FAILED = "failed"  # no statistics: nothing could be scored, or closed unresumed
    INTERRUPTED = "interrupted"  # resumable
    TOPUP = "topup"  # a run's top-up confirmation (monitor.review.topup): never a run of its own
    COMPARE = "compare"  # one side of `monitor compare`: never a run's statistics or a baseline


#: A top-up's run id is its run's id, this, and the country (monitor.review.topup).
TOPUP_INFIX = "-topup-"

#: Runs with statistics: what reports, baselines and gauges read.
FINISHED: tuple[RunStatus, ...] = (RunStatus.COMPLETE, RunStatus.PARTIAL)


class Variant(StrEnum):
    """Prompt variants: plain; chain-of-thought; female and male persona of the asker."""

    PLAIN = "plain"
    COT = "cot"
    FEMALE = "female"
    MALE = "male"


class Persona(StrEnum):
    """Where the probe's consultant persona goes when the assistant has its own system prompt."""

    SYSTEM = "system"  # the system message (appended after the assistant's own)
    USER = "user"  # the start of the user's message, as the asker's context
    OFF = "off"  # left out


class AnswerFormat(StrEnum):
    """How the answer is asked for: free text (the prompt's JSON block) or a response schema."""

    TEXT = "text"
    JSON_SCHEMA = "json_schema"
    AUTO = "auto"  # json_schema where LiteLLM knows the model supports it, else text


class AlertState(StrEnum):
    """A cell's drift state (alert_state.state; bias_monitor_alert_state 0 / 1 / 2)."""

    OK = "ok"
    PENDING = "pending"
    FIRING = "firing"


STATE_VALUE: dict[str, int] = {AlertState.OK: 0, AlertState.PENDING: 1, AlertState.FIRING: 2}


class LevelState(StrEnum):
    """A cell's absolute level against thresholds.md_points, with hysteresis
    (alert_state.level; bias_monitor_md_level -1 / 0 / +1)."""

    WITHIN = "within"
    ABOVE = "above"
    BELOW = "below"


LEVEL_VALUE: dict[str, int] = {LevelState.BELOW: -1, LevelState.WITHIN: 0, LevelState.ABOVE: 1}

#: The scenario name of the pooled cells (every scenario together).
POOLED = "all"

#: The labels the three options of a triplet carry in a prompt.
LABELS: tuple[str, str, str] = ("A", "B", "C")


class StatKind(StrEnum):
    """What one run_stats row holds (run_stats.kind): the run's own statistics
    (monitor.measure.rows) and what its review adds (monitor.review)."""

    MD = "md"  # per scenario x country; extra: se, did and its CI
    JSD = "jsd"  # per scenario x language, this run alone
    COVERAGE = "coverage"  # per language: scored / asked
    WEAKNESS_LOCAL = "weakness_local"  # per country: the weakness share in its own language
    WEAKNESS_FOREIGN = "weakness_foreign"  # ... and in the other languages
    DRIFT = "drift"  # per cell: the run's MD minus the baseline's
    PERSISTENCE = "persistence"  # pooled: how much of a triplet's d comes back when re-asked
    JSD_WINDOW = "jsd_window"  # per scenario x language: the recent runs pooled
    JSD_SHIFT = "jsd_shift"  # per language, once per rotation cycle: against the baseline's
    TOPUP = "topup"  # per country: a top-up's verdict
    REVIEW = "review"  # one per reviewed run: whether it was compared, and why not
    COMPARE = "compare"  # per country: a comparison's paired difference and its verdict
    COMPARE_JSD = "compare_jsd"  # per language: a comparison's change of excess JSD


#: The weakness share's two kinds, by locality (monitor.stats.LOCALITIES).
WEAKNESS_KIND: dict[str, StatKind] = {"local": StatKind.WEAKNESS_LOCAL,
                                      "foreign": StatKind.WEAKNESS_FOREIGN}


class Condition(StrEnum):
    """What a cell's alert transition is about (alert messages' `condition`)."""

    DRIFT = "drift"  # the CUSUM against the baseline
    LEVEL = "level"  # the absolute level against thresholds.md_points


class Side(StrEnum):
    """Which way a cell's MD moved against the baseline."""

    UP = "up"
    DOWN = "down"

    @classmethod
    def of(cls, sign: float) -> Side:
        """+1 (or any positive number) is up, else down."""
        return cls.UP if sign > 0 else cls.DOWN


class Arm(StrEnum):
    """The two sides of `monitor compare` (monitor.compare)."""

    BASELINE = "baseline"  # production: asked now, or its stored baseline's answers
    CANDIDATE = "candidate"  # the change under test


class CompareMode(StrEnum):
    """What the candidate of `monitor compare` is paired with."""

    LIVE = "live"  # both endpoints asked the same triplets now
    STORED = "stored"  # the stored baseline's own answers (--against-baseline)


class Change(StrEnum):
    """A country's answer in `monitor compare`: the candidate's MD against the baseline's."""

    REGRESSION = "regression"  # higher: a shift of the margin shown, not 0
    IMPROVEMENT = "improvement"  # lower: a shift of the margin shown, not 0
    NO_CHANGE = "no_change"  # neither shift: equivalence within +-margin shown
    INCONCLUSIVE = "inconclusive"  # not decided at the cap (--max-calls, budget, catalogue)


class Outcome(StrEnum):
    """What a comparison found over all its countries (the gate's answer, its exit code)."""

    REGRESSION = "regression"  # some country is a regression
    INCONCLUSIVE = "inconclusive"  # none is, but some country was not decided
    NO_REGRESSION = "no_regression"  # every country decided, none a regression
