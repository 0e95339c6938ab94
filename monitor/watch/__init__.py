"""Watching: drift against the baseline, alert states, movers, history, the planner.

    drift.py     the LLR CUSUM, OK -> PENDING -> FIRING, the level condition
    baseline.py  which baseline a run is compared with, and whether it may be
    evaluate.py  a run's cells against the baseline; the transitions to tell
    movers.py    the probes that moved most (Slack and the report)
    history.py   a whole history recomputed, the drift states replayed
    plan.py      the run size and h that meet a detection target
    reference.py a baseline as runs are compared with it, read once; h sized against it
"""

from monitor.watch.baseline import auto_baseline, comparable, run_model
from monitor.watch.drift import CellState, Observation, observe, step, z_score
from monitor.watch.evaluate import (
    Evaluation,
    Transition,
    bias_or_leniency,
    did_verdict,
    evaluate,
)
from monitor.watch.history import History, history, replay
from monitor.watch.movers import Mover, rank_movers
from monitor.watch.plan import Cells, cell_shares, make_plan, sd_from_md, simulate

__all__ = ["CellState", "Cells", "Evaluation", "History", "Mover", "Observation", "Transition",
           "auto_baseline", "bias_or_leniency", "cell_shares", "comparable", "did_verdict",
           "evaluate", "history", "make_plan", "observe", "rank_movers", "replay", "run_model",
           "sd_from_md", "simulate", "step", "z_score"]
