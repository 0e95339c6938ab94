"""One measurement run for one endpoint: sample -> prompts -> LLM -> parse -> store -> stats.

`run_endpoint` is what both `monitor probe --once` and the daemon call. It
never raises for a failed probe: failures are stored and counted. Answers are
written as they arrive: a writer task drains whatever has arrived into one
batch (so a slow endpoint's answers are stored one by one, a fast one's in
batches), and a crash loses at most the calls in flight. Heavy statistics run
in a worker thread, off the event loop.

On SIGTERM or Ctrl-C no new call starts; the calls already on the wire are
awaited for up to DRAIN_S (they are paid for), stored, and the run is
marked interrupted. When a write fails for good (no space left, a read-only or damaged file),
the run asks nothing more, the answers it holds (the failed batch and the
calls still in flight, all paid for) go to a spool file (monitor.measure.spool),
and StoreWriteError says where; `--resume` imports the spool first. The
run row names its owner process and every batch refreshes its heartbeat, so
that a run whose process died is found (Store.close_orphans).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from monitor.catalog import Catalog
from monitor.config import Endpoint, Settings
from monitor.errors import StoreBusyError, StoreError, StoreWriteError, UsageError
from monitor.measure.llm import CallResult, LLMClient
from monitor.measure.parse import ParseResult, parse_answer
from monitor.measure.progress import Progress
from monitor.measure.prompts import Prompt, build_prompt
from monitor.measure.sampling import ProbeSpec, Sampler
from monitor.measure.spool import Spool, find_spools, read_spool
from monitor.stats import nullable, summarise
from monitor.stats.weakness import weakness_table
from monitor.store import CALL_COLUMNS, SCORE_COLUMNS, STAT_COLUMNS, RunRow, Store, size_text
from monitor.store import owner as owners

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["RunOptions", "RunResult", "run_endpoint"]

log = logging.getLogger("monitor.measure.run")

#: Seconds between heartbeats of a run that has nothing to write (a slow endpoint).
HEARTBEAT_S = 60.0
#: On SIGTERM / Ctrl-C, the calls already sent are awaited this long (they are paid
#: for) while no new one starts; then the rest are cancelled. Below Kubernetes'
#: default 30 s grace and the daemon's 25 s for its run process.
DRAIN_S = 10.0
_BEAT = "heartbeat"  # a queue item that only refreshes the heartbeat
Record = tuple[dict[str, Any], list[dict[str, Any]]]


@dataclass(frozen=True)
class RunOptions:
    """Command-line overrides of the configured sampling."""

    triplets: int | None = None
    languages: list[str] | None = None
    scenarios: list[str] | None = None
    seed: int | None = None
    resume: str | None = None
    max_cost_usd: float | None = None  # what is left of today's budget


class _CostGuard:
    """Admits a call only while the spend so far plus the calls in flight (at
    the dearest call seen) stays within the budget, so it is never exceeded."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0
        self.dearest: float | None = None
        self.in_flight = 0
        self.refused = 0
        self._cond = asyncio.Condition()

    async def admit(self) -> bool:
        if self.limit is None:
            return True
        async with self._cond:
            # Until one call has been priced, one call at a time.
            await self._cond.wait_for(lambda: self.dearest is not None or self.in_flight == 0)
            if self.spent + (self.in_flight + 1) * (self.dearest or 0.0) > self.limit:
                self.refused += 1
                return False
            self.in_flight += 1
            return True

    async def settle(self, cost: float | None) -> None:
        if self.limit is None:
            return
        async with self._cond:
            self.in_flight -= 1
            self.spent += cost or 0.0
            self.dearest = max(self.dearest or 0.0, cost or 0.0)
            self._cond.notify_all()


@dataclass
class RunResult:
    run: RunRow
    status_counts: dict[str, int]
    md: pd.DataFrame
    jsd: pd.DataFrame
    coverage: pd.DataFrame
    cost_usd: float | None
    model_ids: list[str] = field(default_factory=list)


def _plan(settings: Settings, catalog: Catalog, store: Store, endpoint: Endpoint,
          opts: RunOptions) -> RunRow:
    if opts.resume:
        run = store.get_run(opts.resume)
        if run is None:
            raise UsageError(f"--resume {opts.resume}: no such run in {store.path}")
        if run.catalog_version != catalog.version:
            raise UsageError(f"--resume {opts.resume}: the run used catalog version "
                             f"{run.catalog_version}, the catalog is now {catalog.version}; "
                             "start a new run instead")
        if run.status == "running" and owners.alive(run.owner, run.heartbeat_at):
            raise UsageError(f"--resume {opts.resume}: the run is still running in "
                             f"{owners.describe(run.owner)}; wait for it to end or stop that "
                             "process first")
        return run
    s = settings.sampling
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
    seed = s.seed if opts.seed is None else opts.seed
    triplets = opts.triplets or s.triplets_per_run
    index = store.next_run_index(endpoint.name, catalog.version, seed, scenarios)
    now = datetime.now(UTC)
    run_id = f"{endpoint.name}-{now:%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"
    return RunRow(run_id, endpoint.name, endpoint.model, endpoint.simulated, index, seed,
                  catalog.version, list(scenarios), list(languages), list(s.variants), triplets,
                  triplets * len(languages), now, None, "running", owners.token(), now, None, 1)


def _records(run: RunRow, catalog: Catalog, spec: ProbeSpec, prompt: Prompt, res: CallResult,
             parsed: ParseResult | None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    status = "failed" if not res.ok else (parsed.status if parsed else "unparseable")
    call = {
        "run_id": run.run_id, "triplet_id": spec.triplet.id, "language": prompt.language,
        "endpoint": run.endpoint, "scenario": spec.triplet.scenario,
        "target_id": spec.triplet.target_id, "pair_id": spec.triplet.pair_id,
        "variant": spec.variant, "option_order": ",".join(spec.order),
        "prompt_hash": prompt.hash, "catalog_version": run.catalog_version, "status": status,
        "detail": parsed.detail if parsed else None, "raw_text": res.text, "error": res.error,
        "latency_s": res.latency_s, "input_tokens": res.input_tokens,
        "output_tokens": res.output_tokens, "cost_usd": res.cost_usd, "model_id": res.model_id,
        "fingerprint": res.fingerprint, "attempts": res.attempts, "created_at": datetime.now(UTC),
    }
    scores = []
    if parsed is not None and parsed.status == "ok":
        for label, opt in parsed.options.items():
            oid = prompt.labels[label]
            scores.append({"run_id": run.run_id, "triplet_id": spec.triplet.id,
                           "language": prompt.language, "label": label, "option_id": oid,
                           "country": catalog.option(spec.triplet.scenario, oid).country,
                           "is_target": oid == spec.triplet.target_id, "score": opt.score,
                           "strengths": opt.strengths, "weaknesses": opt.weaknesses})
    return call, scores


def _columns(rows: list[dict[str, Any]], cols: tuple[tuple[str, str], ...]) -> dict[str, list[Any]]:
    return {c: [r[c] for r in rows] for c, _ in cols}


class _Writer:
    """Drains arrived answers into one DuckDB batch at a time. After a write
    fails for good, `failure` is set (no new calls start) and every answer,
    the failed batch first, goes to the run's spool instead."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store = store
        self.run_id = run_id
        self.queue: asyncio.Queue[Record | str | None] = asyncio.Queue()
        self.failure: StoreError | None = None
        self.spool = Spool(store.path, run_id)
        self.lost = 0  # answers neither written nor spooled (no place took the spool)
        self.written = 0

    def _keep(self, batch: list[Record]) -> None:
        try:
            self.spool.add(batch)
        except OSError as exc:
            self.lost += len(batch)
            log.error("run %s: %d answers could not be spooled either (%s)", self.run_id,
                      len(batch), exc.strerror or type(exc).__name__)

    async def run(self) -> None:
        done = False
        batch: list[Record] = []
        final_tries = 0
        while not done:
            items = [await self.queue.get()]
            while not self.queue.empty():
                items.append(self.queue.get_nowait())
            done = items[-1] is None
            batch += [i for i in items if isinstance(i, tuple)]
            beat = any(i == _BEAT for i in items)
            if self.failure is not None:
                if batch:
                    await asyncio.to_thread(self._keep, batch)
                batch = []
                continue
            while batch or beat:
                calls = [c for c, _ in batch]
                scores = [s for _, ss in batch for s in ss]
                try:
                    await asyncio.to_thread(self.store.write_batch, _columns(calls, CALL_COLUMNS),
                                            _columns(scores, SCORE_COLUMNS),
                                            heartbeat=self.run_id)
                    self.written += len(batch)
                    batch, beat = [], False
                except StoreBusyError as exc:
                    # Another process holds the file longer than the store waits
                    # (a big export): keep the answers and try again, never drop them.
                    log.warning("storage busy, %d answers kept for the next write: %s",
                                len(batch), str(exc)[:200])
                    if not done:
                        break  # write them with the next arrivals
                    final_tries += 1
                    if final_tries >= 120:  # two more minutes, then keep them in the spool
                        self.failure = exc
                    else:
                        await asyncio.sleep(1.0)
                except StoreError as exc:  # no space, read-only, damaged: stop asking
                    self.failure = exc  # the run raises it, with what was kept, at its end
                    log.info("run %s: stops asking: %s", self.run_id, exc)
                if self.failure is not None:
                    if batch:
                        await asyncio.to_thread(self._keep, batch)
                    batch, beat = [], False


async def _heartbeat(queue: asyncio.Queue[Record | str | None]) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        await queue.put(_BEAT)


def _import_spools(store: Store, run_id: str) -> int:
    """Write a stopped run's spooled answers; the spool goes once they are stored."""
    n = 0
    for path in find_spools(store.path, run_id):
        records = list(read_spool(path))
        for i in range(0, len(records), 500):
            part = records[i:i + 500]
            store.write_batch(_columns([c for c, _ in part], CALL_COLUMNS),
                              _columns([x for _, ss in part for x in ss], SCORE_COLUMNS))
        path.unlink()
        n += len(records)
        log.info("run %s: imported %d spooled answers from %s", run_id, len(records), path)
    return n


def _stopped(writer: _Writer, exc: StoreError, total: int, not_asked: int) -> StoreError:
    """The one error that says what stopped the run, what was kept where, and what to free."""
    sp = writer.spool
    parts = [str(exc), f"the run stopped asking ({not_asked} of {total} calls not made)"]
    if sp.records:
        parts.append(f"{sp.records} answers not written are kept in {sp.path} and imported "
                     "by --resume")
    if writer.lost:
        parts.append(f"{writer.lost} answers could not be kept anywhere")
    if isinstance(exc, StoreWriteError):
        per = sp.bytes / sp.records if sp.records else 4096.0
        # DuckDB writes the WAL, then checkpoints into new 256 KiB blocks: room for a
        # few times the data, plus a margin for its block allocation.
        need = 4 * (sp.bytes + not_asked * per) + 8 * 2**20
        parts.append(f"free at least {size_text(need)} on {exc.mount} or move storage.path")
        return StoreWriteError("; ".join(parts), mount=exc.mount, free_bytes=exc.free_bytes,
                               run_id=writer.run_id)
    out = type(exc)("; ".join(parts))
    return out


async def run_endpoint(settings: Settings, catalog: Catalog, store: Store, endpoint: Endpoint,
                       opts: RunOptions = RunOptions(), progress: Progress | None = None,
                       client: LLMClient | None = None) -> RunResult:
    """Run (or resume) one measurement run of `endpoint`; returns its statistics."""
    run = _plan(settings, catalog, store, endpoint, opts)
    if opts.resume is None:
        store.create_run(run)
    else:
        store.claim_run(run.run_id, owners.token())
        await asyncio.to_thread(_import_spools, store, run.run_id)
    sampler = Sampler(catalog, scenarios=run.scenarios, variants=run.variants, seed=run.seed,
                      triplets_per_run=run.triplets)
    done = store.done_calls(run.run_id)
    todo = [(spec, lang) for spec in sampler.sample(run.run_index) for lang in run.languages
            if (spec.triplet.id, lang) not in done]
    extra = {"catalog_path": str(catalog.root)} if endpoint.simulated else None
    client = client or LLMClient(endpoint, extra_params=extra)
    if progress:
        progress.start(run.run_id, len(todo))
    writer = _Writer(store, run.run_id)
    writing = asyncio.create_task(writer.run())
    beating = asyncio.create_task(_heartbeat(writer.queue))
    guard = _CostGuard(opts.max_cost_usd)
    # The calls in flight, as the client allows: a call decides to start only once it
    # has its slot, so that a storage failure stops every call not yet on the wire.
    slots = asyncio.Semaphore(endpoint.max_concurrency)
    not_asked = 0
    stopping = False

    async def one(spec: ProbeSpec, lang: str) -> None:
        nonlocal not_asked
        async with slots:
            if stopping or writer.failure is not None or not await guard.admit():
                not_asked += 1
                return  # storage failed, or today's budget is spent: not asked
            prompt = build_prompt(catalog, spec, lang)
            res: CallResult | None = None
            try:
                res = await client.complete(prompt.messages)
            finally:
                await guard.settle(res.cost_usd if res is not None else None)
        parsed = (parse_answer(res.text, prompt.names, catalog.prompts[lang].refusals)
                  if res.ok and res.text is not None else None)
        record = _records(run, catalog, spec, prompt, res, parsed)
        await writer.queue.put(record)
        if progress:
            progress.advance(record[0]["status"])

    async def drain() -> None:
        beating.cancel()
        await writer.queue.put(None)
        await writing

    tasks = [asyncio.ensure_future(one(spec, lang)) for spec, lang in todo]
    try:
        # wait, not gather: a cancelled gather would cancel the calls on the wire too.
        if tasks:
            await asyncio.wait(tasks)
        for t in tasks:
            t.result()  # a bug in one() must not pass silently
    except BaseException as exc:
        # Ctrl-C, SIGTERM or a crash of this process: keep what arrived (and what
        # is on its way), and leave the run resumable with --resume.
        stopping = True
        flying = [t for t in tasks if not t.done()]
        if flying and isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
            msg = (f"stopping: no new call; the calls in flight are awaited for up to "
                   f"{DRAIN_S:g} s")
            if progress:
                progress.note(msg)
            log.info("run %s: %s", run.run_id, msg)
            with contextlib.suppress(BaseException):
                await asyncio.wait(flying, timeout=DRAIN_S)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await drain()
        why = ("interrupted by a signal (SIGTERM, Ctrl-C) or shutdown"
               if isinstance(exc, asyncio.CancelledError)
               else "interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt)
               else f"interrupted by an error: {type(exc).__name__}")
        with contextlib.suppress(StoreError):
            await asyncio.to_thread(store.finish_run, run.run_id, "interrupted", why)
        raise
    await drain()
    if progress:
        progress.finish()
    if writer.failure is not None:
        err = _stopped(writer, writer.failure, len(todo), not_asked)
        with contextlib.suppress(StoreError):  # may not fit either: then close_orphans will
            await asyncio.to_thread(store.finish_run, run.run_id, "interrupted",
                                    f"storage failed: {writer.failure}"[:500])
        raise err
    return await asyncio.to_thread(finish_run, settings, catalog, store, run,
                                   partial=guard.refused > 0)


def finish_run(settings: Settings, catalog: Catalog, store: Store, run: RunRow, *,
               partial: bool = False) -> RunResult:
    """Compute, store and return the run's statistics; mark the run finished."""
    local = {lang: list(c) for lang, c in catalog.languages.items()}
    with store.session():
        scores = store.scores_frame([run.run_id])
        s = summarise(store.calls_frame([run.run_id]), scores, run.languages, local, seed=run.seed)
        weak = weakness_table(scores, local)
        store.write_stats(run.run_id, _stat_rows(run.run_id, s.md, s.jsd, s.coverage, weak))
        status = "failed" if not s.status_counts["ok"] else "partial" if partial else "complete"
        c = s.status_counts
        reason = (f"no answer could be scored ({c['failed']} failed, {c['unparseable']} "
                  f"unparseable, {c['refused']} refused)" if status == "failed" else
                  "stopped early by the daily budget" if partial else None)
        store.finish_run(run.run_id, status, reason)
        finished = store.get_run(run.run_id) or run
    return RunResult(finished, s.status_counts, s.md, s.jsd, s.coverage, s.cost_usd, s.model_ids)


def _stat_rows(run_id: str, md: pd.DataFrame, jsd: pd.DataFrame, cov: pd.DataFrame,
               weak: pd.DataFrame) -> dict[str, list[Any]]:
    rows: list[dict[str, Any]] = []
    for r in md.itertuples():
        rows.append({"kind": "md", "scenario": r.scenario, "key": r.country, "value": r.md,
                     "ci_lower": r.ci_lower, "ci_upper": r.ci_upper, "n": r.n, "p_value": None,
                     "extra": json.dumps({"se": nullable(r.se), "did": nullable(r.did),
                                          "did_ci_lower": nullable(r.did_ci_lower),
                                          "did_ci_upper": nullable(r.did_ci_upper)})})
    for r in jsd.itertuples():
        rows.append({"kind": "jsd", "scenario": r.scenario, "key": r.language,
                     "value": r.jsd_bits, "ci_lower": r.ci_lower, "ci_upper": r.ci_upper,
                     "n": r.n, "p_value": r.p_value,
                     "extra": json.dumps({"plugin_bits": r.plugin_bits,
                                          "js_distance_bits": r.js_distance_bits,
                                          "js_distance_nat": r.js_distance_nat})})
    for r in cov.itertuples():
        rows.append({"kind": "coverage", "scenario": "all", "key": r.language, "value": r.ratio,
                     "ci_lower": None, "ci_upper": None, "n": r.asked, "p_value": None,
                     "extra": None})
    for w in weak.to_dict("records"):  # kind weakness_local / weakness_foreign, key = country
        for loc in ("local", "foreign"):
            rows.append({"kind": f"weakness_{loc}", "scenario": "all", "key": w["country"],
                         "value": w[f"share_{loc}"], "ci_lower": w[f"{loc}_lower"],
                         "ci_upper": w[f"{loc}_upper"], "n": w["n"], "p_value": None,
                         "extra": json.dumps({"language": w["language"],
                                              "points": w[f"points_{loc}"]})})
    for row in rows:
        row["run_id"] = run_id
        for k in ("value", "ci_lower", "ci_upper", "p_value"):
            row[k] = nullable(row[k])
    return _columns(rows, STAT_COLUMNS)
