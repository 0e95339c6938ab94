"""Which baseline a run is compared with, and whether it may be compared at all.

- The baseline is a set of runs chosen by the user (`monitor baseline set`),
  or, while there is none, made automatically from the first runs once they
  hold enough triplets (baseline.auto_min_triplets, default 20 x
  triplets_per_run: with 10 runs the baseline's own error made the CUSUM page
  on noise about once per 100 runs, bench/stat_validation.py); until then
  nothing is compared and nothing pages.
- Runs are compared only with a baseline of the same catalog version, model
  id and assistant setup (system prompt, persona, answer format:
  monitor.measure.assistant); a run without any answer has no model id and
  is never compared.
"""

from __future__ import annotations

from monitor.config import AUTO_BASELINE_RUNS, Settings
from monitor.store import Baseline, RunRow, Store
from monitor.vocab import RunStatus

__all__ = ["auto_baseline", "comparable", "run_model"]


def run_model(run: RunRow, model_ids: list[str]) -> str:
    """The model id the provider reported (the configured model string if none)."""
    return model_ids[0] if model_ids else run.model


def auto_baseline(settings: Settings, store: Store, run: RunRow, model: str) -> Baseline | None:
    """Set the automatic baseline once the finished runs of this model hold enough triplets."""
    need = (settings.baseline.auto_min_triplets
            or AUTO_BASELINE_RUNS * settings.sampling.triplets_per_run)
    runs = [r for r in store.runs(run.endpoint)
            if r.status == RunStatus.COMPLETE and r.catalog_version == run.catalog_version]
    if not runs:
        return None
    models = store.run_model_ids([r.run_id for r in runs])
    same = [r for r in runs if models.get(r.run_id) == model and r.setup == run.setup]
    if sum(r.triplets for r in same) < need:
        return None
    store.set_baseline(run.endpoint, [r.run_id for r in same], run.catalog_version, model,
                       auto=True, setup=run.setup)
    return store.baseline(run.endpoint)


def comparable(baseline: Baseline, run: RunRow, model: str) -> str | None:
    """None when the run may be compared with the baseline, else why not."""
    if baseline.catalog_version != run.catalog_version:
        return (f"catalog changed ({baseline.catalog_version} -> {run.catalog_version}); not "
                "compared - set a new baseline")
    if baseline.model_id != model:
        return (f"model id changed ({baseline.model_id} -> {model}); not compared - check the "
                "deployment, then `monitor baseline set --latest`")
    if baseline.setup != run.setup:
        return (f"assistant setup changed ({baseline.setup} -> {run.setup}: system prompt, "
                "persona or answer format); not compared - once runs with the new setup are "
                "in, accept them with `monitor baseline set --latest N`")
    if run.run_id in baseline.run_ids:
        return "run is in the baseline"
    return None
