"""A run's row before its first call: a new run planned from the settings and the
command line, or an interrupted one to resume (checked against the catalogue and the
assistant setup it was asked with)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime

from monitor.catalog import Catalog
from monitor.config import Endpoint, Setup, setup_for
from monitor.context import Context
from monitor.errors import UsageError
from monitor.measure.ports import MeasureStore
from monitor.store import RunRow
from monitor.store import owner as owners
from monitor.vocab import RunStatus

__all__ = ["RunOptions", "plan_run"]


@dataclass(kw_only=True, frozen=True)
class RunOptions:
    """Command-line overrides of the configured sampling."""

    triplets: int | None = None
    languages: list[str] | None = None
    scenarios: list[str] | None = None
    seed: int | None = None
    resume: str | None = None



def plan_run(ctx: Context[MeasureStore], endpoint: Endpoint,
             opts: RunOptions) -> tuple[RunRow, Setup]:
    catalog = ctx.catalog
    if opts.resume:
        run = _resumable(catalog, ctx.store, opts.resume)
        setup = setup_for(endpoint, run.languages, list(catalog.languages))
        if setup.key != run.setup:
            raise UsageError(f"--resume {opts.resume}: the run was asked with assistant setup "
                             f"{run.setup}, the configuration now gives {setup.key} (system "
                             "prompt, persona or answer format changed); start a new run")
        return run, setup
    return _new_run(ctx, endpoint, opts)


def _resumable(catalog: Catalog, store: MeasureStore, run_id: str) -> RunRow:
    run = store.get_run(run_id)
    if run is None:
        raise UsageError(f"--resume {run_id}: no such run in {store.path}")
    if run.catalog_version != catalog.version:
        raise UsageError(f"--resume {run_id}: the run used catalog version "
                         f"{run.catalog_version}, the catalog is now {catalog.version}; "
                         "start a new run instead")
    if run.status == RunStatus.RUNNING and owners.alive(run.owner, run.heartbeat_at):
        raise UsageError(f"--resume {run_id}: the run is still running in "
                         f"{owners.describe(run.owner)}; wait for it to end or stop that "
                         "process first")
    return run


def _new_run(ctx: Context[MeasureStore], endpoint: Endpoint,
             opts: RunOptions) -> tuple[RunRow, Setup]:
    catalog, s = ctx.catalog, ctx.settings.sampling
    languages = opts.languages or s.languages
    scenarios = opts.scenarios or s.scenarios
    where = "--languages" if opts.languages else "sampling.languages"
    if len(set(languages)) < 2 or len(set(languages)) != len(languages):
        raise UsageError(f"{where} {','.join(languages)}: a run needs at least two different "
                         "languages (MD compares a country's local language with the others), "
                         "each once; e.g. en,zh")
    for lang in languages:
        if lang not in catalog.languages:
            raise UsageError(f"language {lang!r} is not in the catalog ({list(catalog.languages)})"
                             "; fix sampling.languages or --languages")
    for scen in scenarios:
        if scen not in catalog.scenarios:
            raise UsageError(f"scenario {scen!r} is not in the catalog "
                             f"({list(catalog.scenarios)}); fix sampling.scenarios or --scenarios")
    for scen in scenarios:
        own = catalog.scenarios[scen].languages
        if own and (missing := [lang for lang in languages if lang not in own]):
            raise UsageError(f"scenario {scen!r} (a catalog overlay) has no names in "
                             f"{', '.join(missing)}; ask it in {', '.join(own)} (--languages) "
                             "or leave it out of sampling.scenarios / --scenarios")
    seed = s.seed if opts.seed is None else opts.seed
    triplets = opts.triplets or s.triplets_per_run
    index = ctx.store.next_run_index(endpoint.name, catalog.version, seed, scenarios)
    now = datetime.now(UTC)
    run_id = f"{endpoint.name}-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    setup = setup_for(endpoint, list(languages), list(catalog.languages))
    return RunRow(run_id=run_id, endpoint=endpoint.name, model=endpoint.model,
                  simulated=endpoint.simulated, run_index=index, seed=seed,
                  catalog_version=catalog.version, scenarios=list(scenarios),
                  languages=list(languages), variants=list(s.variants), triplets=triplets,
                  planned_calls=triplets * len(languages), started_at=now, finished_at=None,
                  status=RunStatus.RUNNING, owner=owners.token(), heartbeat_at=now,
                  reason=None, attempts=1, setup=setup.key), setup
