"""A comparison before its first batch: a new one planned from the command line (its
two run rows and the comparison row that links them), or an interrupted one to
resume; and the triplets it asks, in the order it asks them.

A live comparison asks both endpoints the monitored population in the sampler's
seeded order (monitor.measure.sampling: stratified by scenario x target country, the
variant and option order rotating), so any prefix is a balanced sample. Against a
stored baseline the candidate is asked the baseline's own triplets, each in the
variant and option order the baseline asked it (its latest complete answer when the
baseline holds it twice), in a seeded random order.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from monitor.catalog import Triplet
from monitor.compare.pairs import latest
from monitor.compare.ports import CompareStore
from monitor.compare.sequential import ALPHA, BETA
from monitor.config import Endpoint, Setup, setup_for
from monitor.context import Context
from monitor.errors import UsageError
from monitor.measure.sampling import ProbeSpec, Sampler
from monitor.measure.start import RunOptions, plan_run
from monitor.stats import local_pairs
from monitor.store import Comparison, RunRow, UnitScores
from monitor.store import owner as owners
from monitor.vocab import Arm, CompareMode, RunStatus
from monitor.watch.scope import Scope

__all__ = ["BATCH_TRIPLETS", "DEFAULT_MAX_CALLS", "CompareOptions", "Prepared", "Side",
           "order_of", "prepare"]

#: Triplets per batch: the test looks after each.
BATCH_TRIPLETS = 10
#: --max-calls by default: 1.5 times a live comparison's 95th percentile of calls at the
#: realistic profile's noise, where under 0.2% of comparisons reach it (docs/benchmarks.md,
#: section 9).
DEFAULT_MAX_CALLS = 12000


@dataclass(kw_only=True, frozen=True)
class CompareOptions:
    """The command line of `monitor compare`."""

    candidate: str
    baseline: str | None = None
    against_baseline: bool = False
    languages: list[str] | None = None
    scenarios: list[str] | None = None
    margin: float | None = None
    max_calls: int | None = None
    seed: int | None = None
    resume: str | None = None


@dataclass(kw_only=True, frozen=True)
class Side:
    """One side asked: its endpoint, its run row and the assistant setup it is asked in."""

    arm: Arm
    endpoint: Endpoint
    run: RunRow
    setup: Setup


@dataclass(kw_only=True, frozen=True)
class Prepared:
    comparison: Comparison
    candidate: Side
    baseline: Side | None  # None: paired with the stored baseline's answers
    order: list[ProbeSpec]
    reference: UnitScores | None  # the stored baseline's units, one per triplet
    resumed: bool

    @property
    def sides(self) -> list[Side]:
        return [s for s in (self.baseline, self.candidate) if s is not None]

    @property
    def languages(self) -> list[str]:
        return self.candidate.run.languages

    @property
    def calls_per_triplet(self) -> int:
        return len(self.languages) * len(self.sides)


def prepare(ctx: Context[CompareStore], opts: CompareOptions) -> Prepared:
    if opts.resume:
        return _resume(ctx, opts.resume)
    settings = ctx.settings
    margin = settings.thresholds.drift_md_points if opts.margin is None else opts.margin
    max_calls = DEFAULT_MAX_CALLS if opts.max_calls is None else opts.max_calls
    if not margin > 0:
        raise UsageError(f"--margin {margin:g}: must be a positive number of MD points")
    now = datetime.now(UTC)
    cid = f"cmp-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    seed = settings.sampling.seed if opts.seed is None else opts.seed
    cand_ep = settings.endpoint(opts.candidate)
    if opts.against_baseline:
        prod = opts.baseline or opts.candidate
        base = ctx.store.baseline(prod)
        if base is None:
            raise UsageError(f"--against-baseline: endpoint {prod} has no stored baseline in "
                             f"{ctx.store.path}; set one (`monitor baseline set` or `monitor "
                             "baseline calibrate`), or compare live with --baseline ENDPOINT")
        refs = sorted(base.run_ids)
        runs = [r for r in (ctx.store.get_run(x) for x in refs) if r is not None]
        if not runs:
            raise UsageError(f"--against-baseline: the baseline runs of {prod} "
                             f"({', '.join(refs)}) are not in {ctx.store.path}; set a new "
                             "baseline, or compare live with --baseline ENDPOINT")
        stored = Scope.of_baseline(base, runs)
        have = stored.languages or frozenset()
        langs = opts.languages or [x for x in runs[0].languages if x in have]
        # The one comparability rule (monitor.watch.scope): the same catalogue, the
        # languages asked. Not the model or the setup: they are the change under test; not
        # the scenarios or variants: the candidate is asked the baseline's own triplets.
        asked = Scope(catalog_version=ctx.catalog.version, setup=stored.setup,
                      languages=frozenset(langs))
        if (why := asked.refuses(stored)) is not None:
            fix = ("" if why.changed
                   else f"choose --languages among {','.join(sorted(have))}, ")
            raise UsageError(f"--against-baseline: the stored baseline of {prod}: "
                             f"{why.text.split(';')[0]}; {fix}set a new baseline, or compare "
                             "live with --baseline ENDPOINT")
        scens = opts.scenarios or sorted(stored.scenarios or ())
        if extra := sorted(set(scens) - set(stored.scenarios or ())):
            raise UsageError(f"--scenarios: the baseline of {prod} was not asked in "
                             f"{', '.join(extra)}; choose among "
                             f"{', '.join(sorted(stored.scenarios or ()))}")
        variants = sorted(stored.variants or ())
        mode, base_name = CompareMode.STORED, prod
    else:
        if not opts.baseline:
            raise UsageError("monitor compare: name the production endpoint with --baseline "
                             "ENDPOINT, or pair the candidate with a stored baseline "
                             "(--against-baseline)")
        refs, langs, variants = [], opts.languages or settings.sampling.languages, []
        scens = opts.scenarios or settings.sampling.scenarios
        mode, base_name = CompareMode.LIVE, opts.baseline
    ro = RunOptions(languages=list(langs), scenarios=list(scens), seed=seed)
    c_run, c_setup = plan_run(ctx, cand_ep, ro)
    per = len(langs) * (2 if mode == CompareMode.LIVE else 1)
    if max_calls < BATCH_TRIPLETS * per:
        raise UsageError(f"--max-calls {max_calls}: less than one batch ({BATCH_TRIPLETS} "
                         f"triplets x {len(langs)} languages x {per // len(langs)} side(s) = "
                         f"{BATCH_TRIPLETS * per} calls)")
    cap = max_calls // per
    token = owners.token()
    candidate = Side(arm=Arm.CANDIDATE, endpoint=cand_ep, setup=c_setup,
                     run=_row(c_run, cid, Arm.CANDIDATE, cap, token, variants))
    baseline = None
    if mode == CompareMode.LIVE:
        b_ep = settings.endpoint(base_name)
        b_run, b_setup = plan_run(ctx, b_ep, ro)
        baseline = Side(arm=Arm.BASELINE, endpoint=b_ep, setup=b_setup,
                        run=_row(b_run, cid, Arm.BASELINE, cap, token, variants))
    comparison = Comparison(
        compare_id=cid, mode=mode, baseline_endpoint=base_name, candidate_endpoint=cand_ep.name,
        baseline_run_id=baseline.run.run_id if baseline else None,
        candidate_run_id=candidate.run.run_id, reference_run_ids=refs, margin=margin,
        max_calls=max_calls, alpha=ALPHA, beta=BETA, batch_triplets=BATCH_TRIPLETS, seed=seed,
        started_at=now, finished_at=None, status=RunStatus.RUNNING)
    order, reference = order_of(ctx, comparison, candidate.run)
    if not order:
        raise UsageError(f"--against-baseline: the baseline of {base_name} holds no triplet "
                         f"answered in every one of {', '.join(langs)}; choose --languages it "
                         "answered, or compare live with --baseline ENDPOINT")
    with ctx.store.session():
        for side in (baseline, candidate):
            if side is not None:
                ctx.store.create_run(side.run)
        ctx.store.create_comparison(comparison)
    return Prepared(comparison=comparison, candidate=candidate, baseline=baseline, order=order,
                    reference=reference, resumed=False)


def _row(run: RunRow, cid: str, arm: Arm, cap: int, token: str, variants: list[str]) -> RunRow:
    """A side's run row: status `compare`, outside the rotation (run_index -1)."""
    return replace(run, run_id=f"{cid}-{arm}", run_index=-1, triplets=cap,
                   planned_calls=cap * len(run.languages), status=RunStatus.COMPARE,
                   owner=token, reason=f"the {arm} of comparison {cid}",
                   variants=variants or run.variants)


def order_of(ctx: Context[CompareStore], c: Comparison, run: RunRow
           ) -> tuple[list[ProbeSpec], UnitScores | None]:
    """The triplets in the order asked, and against a stored baseline its units."""
    if c.mode == CompareMode.LIVE:
        sampler = Sampler(ctx.catalog, scenarios=run.scenarios, variants=run.variants,
                          seed=c.seed, triplets_per_run=c.batch_triplets,
                          languages=run.languages)
        return [sampler.spec_at(g) for g in range(sampler.population)], None
    local = local_pairs(run.languages, ctx.catalog.languages)
    units = latest(ctx.store.unit_scores(c.reference_run_ids, run.languages,
                                         [x for x, _ in local], by_run=True).complete())
    specs = {(a.run_id, a.key): a for a in ctx.store.asked_specs(c.reference_run_ids)}
    triplets: dict[str, Triplet] = {t.id: t for s in run.scenarios
                                    for t in ctx.catalog.scenarios[s].triplets()}
    chosen = []
    for i in range(len(units.triplet)):
        a = specs.get((units.groups[units.group[i]], int(units.triplet[i])))
        if a is not None and a.triplet_id in triplets and len(a.option_order) == 3:
            o = a.option_order
            chosen.append(ProbeSpec(triplets[a.triplet_id], a.variant, (o[0], o[1], o[2]),
                                    -1, 0))
    chosen.sort(key=lambda s: s.triplet.id)
    random.Random(f"{ctx.catalog.version}:{c.seed}:compare").shuffle(chosen)
    return [replace(s, position=i) for i, s in enumerate(chosen)], units


def _resume(ctx: Context[CompareStore], cid: str) -> Prepared:
    store = ctx.store
    c = store.get_comparison(cid)
    if c is None:
        raise UsageError(f"--resume {cid}: no such comparison in {store.path}")
    if c.status == RunStatus.COMPLETE:
        raise UsageError(f"--resume {cid}: the comparison is complete ({c.reason}); "
                         f"`monitor compare --show {cid}` prints it again")
    sides = []
    for arm, run_id in ((Arm.BASELINE, c.baseline_run_id), (Arm.CANDIDATE, c.candidate_run_id)):
        run = store.get_run(run_id) if run_id else None
        if run is None:
            continue
        if c.status == RunStatus.RUNNING and owners.alive(run.owner, run.heartbeat_at):
            raise UsageError(f"--resume {cid}: the comparison is still running in "
                             f"{owners.describe(run.owner)}; wait for it or stop that process")
        ep = ctx.settings.endpoint(run.endpoint)
        setup = setup_for(ep, run.languages, list(ctx.catalog.languages))
        # what recovery asks of a run it resumes (monitor.daemon.recovery): the catalogue
        # and the assistant setup the configuration gives now
        now = Scope(catalog_version=ctx.catalog.version, setup=setup.key)
        if (why := now.refuses(Scope.of(run))) is not None:
            raise UsageError(f"--resume {cid}: endpoint {ep.name}: {why.text.split(';')[0]} "
                             "since it started; start a new comparison")
        sides.append(Side(arm=arm, endpoint=ep, run=run, setup=setup))
    store.claim_comparison(cid, [s.run.run_id for s in sides], owners.token())
    cand = sides[-1]
    order, reference = order_of(ctx, c, cand.run)
    return Prepared(comparison=replace(c, status=RunStatus.RUNNING), candidate=cand,
                    baseline=sides[0] if len(sides) == 2 else None, order=order,
                    reference=reference, resumed=True)
