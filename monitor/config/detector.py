"""The detector's settings: the drift CUSUM's thresholds and the top-up confirmation."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["CUSUM_H", "Thresholds", "Topup"]

_Strict = ConfigDict(extra="forbid", frozen=True)


#: The LLR CUSUM level (nats) chosen with bench/stat_validation.py for <= 1 false
#: page per 100 runs over the 9 pooled cells at the default run size and automatic
#: baseline (docs/benchmarks.md); with `cusum_h: auto` (the default) the floor of the
#: h sized against a baseline while the top-up is on, and the h of a baseline with
#: no sd to size it from.
CUSUM_H = 7.0


class Thresholds(BaseModel):
    model_config = _Strict
    md_points: float = Field(0.5, gt=0, le=9)
    jsd_excess_bits: float = Field(0.02, gt=0, le=1)
    drift_md_points: float = Field(0.5, gt=0, le=9,
                                   description="Design shift of the drift CUSUM (points).")
    cusum_h: Annotated[float, Field(gt=0, le=100)] | Literal["auto"] = Field(
        "auto", description="LLR CUSUM alarm level (nats), or `auto`: sized against each "
                             "baseline for false_alarms_per_100 (monitor.watch.reference).")
    false_alarms_per_100: float = Field(1.0, gt=0, le=100,
                                        description="False pages per 100 runs (all cells) an "
                                                    "`auto` h is sized for.")


class Topup(BaseModel):
    """The top-up confirmation of a suspected drift (monitor.watch.topup): defaults
    chosen by bench/topup.py (docs/benchmarks.md) for 40-triplet runs."""

    model_config = _Strict
    enabled: bool = Field(True, description="Confirm a suspected drift with fresh triplets "
                                            "in the same run before paging.")
    suspect_h: float = Field(2.5, gt=0, le=100,
                             description="CUSUM level (nats) at which a pooled cell is topped up.")
    alpha: float = Field(0.0001, gt=0, lt=0.5,
                         description="Chance a top-up confirms a shift that is not there.")
    beta: float = Field(0.1, gt=0, lt=0.5,
                        description="Chance a top-up dismisses a real shift of drift_md_points.")
    batch_triplets: int = Field(5, ge=1, le=10_000,
                                description="Fresh triplets holding the country per batch.")
    max_triplets: int = Field(300, ge=1, le=100_000,
                              description="At most this many per cell per run (each asked in "
                                          "every language).")
    max_run_share: float = Field(2.0, gt=0, le=100,
                                 description="The top-ups of one run, all suspects together, "
                                             "ask at most this share of the run's planned "
                                             "calls (2.0: a run costs at most 3x its plan).")
    mean_run_share: float | None = Field(
        None, gt=0, le=100,
        description="Off by default. When set, over any max_run_share / mean_run_share runs "
                    "the top-ups ask at most this share of a run's planned calls on average "
                    "(0.25: runs cost at most 1.25x their plan on average); a run after one "
                    "that spent its whole limit waits for it to leave that window. It costs "
                    "detection (docs/statistics.md, 'Top-up confirmation').")

    @model_validator(mode="after")
    def _sizes(self) -> Topup:
        if self.batch_triplets > self.max_triplets:
            raise ValueError(f"topup.batch_triplets ({self.batch_triplets}) is more than "
                             f"topup.max_triplets ({self.max_triplets}); lower the batch")
        return self
