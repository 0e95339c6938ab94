"""Which baseline a run is compared with, and whether it may be compared at all.

- The baseline is a set of runs chosen by the user (`monitor baseline set`),
  or, while there is none, made automatically from the first runs once they
  hold enough triplets (baseline.auto_min_triplets, default 20 x
  triplets_per_run: with 10 runs the baseline's own error made the CUSUM page
  on noise about once per 100 runs, bench/stat_validation.py); until then
  nothing is compared and nothing pages.
- Runs are compared only with a baseline in their scope (monitor.watch.scope:
  catalog version, model id, assistant setup, scenarios, variants, languages);
  a run without any answer says nothing about the model and is never compared.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.config import AUTO_BASELINE_RUNS, Settings
from monitor.store import Baseline, RunRow
from monitor.watch.scope import Refusal, Scope

__all__ = ["auto_baseline_runs", "why_not_compared"]


def auto_baseline_runs(settings: Settings, run: RunRow, runs: Sequence[RunRow]
                       ) -> list[RunRow]:
    """The runs that become the automatic baseline once `run` is finished, or [] while
    the finished runs in its scope (`run` included) hold too few triplets."""
    need = (settings.baseline.auto_min_triplets
            or AUTO_BASELINE_RUNS * settings.sampling.triplets_per_run)
    same = Scope.of(run).pools(runs)
    return same if sum(r.triplets for r in same) >= need else []


def why_not_compared(baseline: Baseline, scope: Scope, run: RunRow) -> Refusal | None:
    """None when `run` may be compared with `baseline` (whose scope is `scope`)."""
    if run.run_id in baseline.run_ids:
        return Refusal("run is in the baseline")
    return Scope.of(run).refuses(scope)
