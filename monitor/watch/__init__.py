"""Watching: drift against the baseline, alert states, movers, history, the planner.

    scope.py      which runs may be compared or pooled: one rule, with the reason
    baseline.py   which baseline a run is compared with; the automatic one
    reference.py  a baseline as runs are compared with it, read once; h sized against it
    drift.py      the LLR CUSUM, OK -> PENDING -> FIRING, the level condition
    topup.py      the top-up's sequential test (SPRT) on fresh triplets
    evaluate.py   a run's cells against the baseline: their new states, what to tell
    transition.py a cell's alert transition as messages tell it; bias or leniency
    movers.py     the probes that moved most (messages and the report)
    shape.py      the per-cycle JSD of each language against the baseline's
    history.py    a whole history recomputed, the drift states replayed
    plan.py       the run size and h that meet a detection target
    plan_topup.py the same with the top-up, simulated as the daemon runs it
    ports.py      what watching reads from the store

Watching reads and computes; what it changes is written by the run's review
(monitor.review).
"""

from monitor.watch.drift import CellState, Observation, observe, step, z_score
from monitor.watch.evaluate import Evaluation, Suspect, evaluate, suspects
from monitor.watch.history import History, history, replay
from monitor.watch.movers import Mover, rank_movers
from monitor.watch.plan import Cells, cell_shares, make_plan, sd_from_md, simulate
from monitor.watch.ports import WatchStore
from monitor.watch.reference import Reference, ReferenceCache, reference
from monitor.watch.scope import Refusal, Scope
from monitor.watch.transition import Transition, bias_or_leniency, did_verdict

__all__ = ["CellState", "Cells", "Evaluation", "History", "Mover", "Observation", "Reference",
           "ReferenceCache", "Refusal", "Scope", "Suspect", "Transition", "WatchStore",
           "bias_or_leniency", "cell_shares", "did_verdict", "evaluate", "history",
           "make_plan", "observe", "rank_movers", "reference", "replay", "sd_from_md",
           "simulate", "step", "suspects", "z_score"]
