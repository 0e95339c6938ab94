"""One measurement run for one endpoint: sample -> prompts -> LLM -> parse -> store -> stats.

`run_endpoint` is what `monitor probe --once`, the daemon and `monitor baseline
calibrate` call; the first two `hold` the run `running` after its statistics, for
its review (monitor.review) to end it. It never raises for a failed probe:
failures are stored and counted. Answers
are written as they arrive, in bounded batches (monitor.measure.writer); a
crash loses at most the calls in flight and a quarter second of answers.
The statistics run in a worker thread, off the event loop.

On SIGTERM or Ctrl-C no new call starts; the calls already on the wire are
awaited for up to DRAIN_S (they are paid for), stored, and the run is
marked interrupted. When a write fails for good (no space left, a read-only
or damaged file), the run asks nothing more, the answers it holds (the
failed batch and the calls still in flight, all paid for) go to a spool file,
and StoreWriteError says where; `--resume` imports the spool first. The run
row names its owner process and every batch refreshes its heartbeat, so that
a run whose process died is found (Store.close_orphans).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from monitor.catalog import Catalog
from monitor.config import Endpoint, Setup
from monitor.context import Context
from monitor.errors import StoreError
from monitor.measure.assistant import answer_schema, apply_setup
from monitor.measure.budget import Allowance
from monitor.measure.calls import ON_WIRE, CallResult, ChatClient, Wire
from monitor.measure.llm import LLMClient
from monitor.measure.parse import parse_answer
from monitor.measure.ports import MeasureStore
from monitor.measure.progress import Progress
from monitor.measure.prompts import build_prompt
from monitor.measure.rows import call_record, stat_rows
from monitor.measure.sampling import ProbeSpec, Sampler
from monitor.measure.start import RunOptions, plan_run
from monitor.measure.writer import Writer, import_spools
from monitor.stats import CoverageRow, JSDRow, MDRow, Summary, summarise
from monitor.store import RunRow
from monitor.store import owner as owners
from monitor.vocab import LABELS, AnswerFormat, CallStatus, RunStatus, Variant

__all__ = ["DRAIN_S", "Failed", "RunResult", "ask", "despite_cancels", "finish_run", "make_client",
           "reasked", "run_endpoint"]

log = logging.getLogger(__name__)

#: On SIGTERM / Ctrl-C, the calls already sent are awaited this long (they are paid
#: for) while no new one starts; then the rest are cancelled. Below Kubernetes'
#: default 30 s grace and the daemon's 25 s for its run process.
DRAIN_S = 10.0


@dataclass(frozen=True)
class RunResult:
    """A measured run and its statistics. `status` / `reason`: how it ends; a run held
    for its review (run_endpoint's `hold`) is still `running` in `run` until the review
    ends it so (monitor.review)."""

    run: RunRow
    summary: Summary
    status: RunStatus
    reason: str | None = None

    @property
    def status_counts(self) -> dict[str, int]:
        return self.summary.status_counts

    @property
    def md(self) -> list[MDRow]:
        return self.summary.md

    @property
    def jsd(self) -> list[JSDRow]:
        return self.summary.jsd

    @property
    def coverage(self) -> list[CoverageRow]:
        return self.summary.coverage

    @property
    def cost_usd(self) -> float | None:
        return self.summary.cost_usd

    @property
    def model_ids(self) -> list[str]:
        return self.summary.model_ids


def make_client(catalog: Catalog, endpoint: Endpoint) -> ChatClient:
    """The endpoint's client (the simulated one is told where the catalogue is)."""
    extra = ({"catalog_path": str(catalog.root), "catalog_extra": [str(p) for p in catalog.extra]}
             if endpoint.simulated else None)
    return LLMClient(endpoint, extra_params=extra)


async def run_endpoint(ctx: Context[MeasureStore], endpoint: Endpoint,
                       opts: RunOptions | None = None, *, allowance: Allowance | None = None,
                       progress: Progress | None = None, client: ChatClient | None = None,
                       hold: bool = False) -> RunResult:
    """Run (or resume) one measurement run of `endpoint`; returns its statistics.
    `allowance`: what it may spend (None: no cap; its review's top-ups share it);
    `hold`: the run stays `running` for its review, which ends it (monitor.review)."""
    store, opts = ctx.store, opts or RunOptions()
    run, setup = plan_run(ctx, endpoint, opts)
    if opts.resume is None:
        store.create_run(run)
    else:
        store.claim_run(run.run_id, owners.token())
        await asyncio.to_thread(import_spools, store, run.run_id)
    sampler = Sampler.of_run(ctx.catalog, run)
    client = client or make_client(ctx.catalog, endpoint)
    allowance = allowance or Allowance()
    await ask(ctx, endpoint, run, setup, sampler.sample(run.run_index), client, allowance,
              progress=progress, resumed=opts.resume is not None)
    return await asyncio.to_thread(finish_run, ctx, run,
                                   partial=allowance.guard.refused > 0, hold=hold)


async def despite_cancels(coro: Coroutine[Any, Any, None]) -> None:
    """Await `coro` to its end even if this task is cancelled again meanwhile.

    An interrupted run's cleanup (the paid calls on the wire, the last batch, the
    interrupted mark) must not be cut short by a second SIGTERM: `monitor run`'s
    child gets the parent-death signal once per thread of the dead daemon, and a
    user or an orchestrator may send two. The cleanup is bounded (DRAIN_S, then
    the store's own timeouts), so waiting for it is safe."""
    inner = asyncio.ensure_future(coro)
    while True:
        try:
            await asyncio.shield(inner)
            return
        except asyncio.CancelledError:
            if inner.done():  # the cleanup itself was cancelled (the loop is closing)
                raise
            log.debug("a further cancel while stopping is ignored: the run is being stored")


async def ask(ctx: Context[MeasureStore], endpoint: Endpoint, run: RunRow, setup: Setup,
              specs: list[ProbeSpec], client: ChatClient, allowance: Allowance, *,
              progress: Progress | None = None, resumed: bool = False,
              stop_status: RunStatus | None = RunStatus.INTERRUPTED, look_up: bool = True
              ) -> int:
    """Ask every spec in every language of `run` (what is already stored is skipped;
    `look_up` False: the caller knows none of `specs` is), storing answers as they
    arrive; returns how many calls were not asked (the budget, a storage failure). On
    a signal or crash the run is marked `stop_status` (None: left as it is) and the
    exception goes on. The calls asked are counted in `allowance`."""
    store, catalog, guard = ctx.store, ctx.catalog, allowance.guard
    writer = Writer(store, run.run_id, resumed=resumed)
    writing = asyncio.create_task(writer.run())
    beating = asyncio.create_task(writer.heartbeat())
    # The calls in flight, as the client allows: a call decides to start only once it
    # has its slot, so that a storage failure stops every call not yet on the wire.
    slots = asyncio.Semaphore(endpoint.max_concurrency)
    not_asked = 0
    stopping = False

    # The response schema is the same for every call of a variant: built once per run.
    schemas = ({cot: answer_schema(list(LABELS), cot=cot) for cot in (False, True)}
               if setup.answer_format != AnswerFormat.TEXT else None)

    failed: list[Failed] = []  # failed in transit in the first pass
    answered = 0

    async def one(spec: ProbeSpec, lang: str, wire: Wire, before: int | None = None) -> None:
        """Ask one call; `before`: the requests a re-asked call already made (the stored
        `attempts` counts every request of the call)."""
        nonlocal not_asked, answered
        ON_WIRE.set(wire)  # this task's own context: the client marks the request out
        async with slots:
            if stopping or writer.failure is not None or not await guard.admit():
                not_asked += 1
                return  # storage failed, or today's budget is spent: not asked
            prompt = apply_setup(setup, build_prompt(catalog, spec, lang))
            schema = schemas[spec.variant == Variant.COT] if schemas else None
            res: CallResult | None = None
            try:
                res = await client.complete(prompt.messages, language=lang, schema=schema)
            finally:
                await guard.settle(res.cost_usd if res is not None else None)
        answered += res.ok
        if before is None and res.transient:
            failed.append(Failed(spec, lang, res.attempts))
        elif before is not None:
            res = replace(res, attempts=res.attempts + before)
        parsed = (parse_answer(res.text, prompt.names, catalog.prompts[lang].refusals,
                               prompt.aliases)
                  if res.ok and res.text is not None else None)
        record = call_record(run, catalog, spec, prompt, res, parsed)
        await writer.queue.put(record)
        if progress:
            progress.advance(record[0]["status"])

    async def drain() -> None:
        beating.cancel()
        await writer.queue.put(None)
        await writing

    todo: list[tuple[ProbeSpec, str]] = []
    wires: list[Wire] = []
    tasks: list[asyncio.Future[None]] = []
    try:
        done = await asyncio.to_thread(store.done_calls, run.run_id) if look_up else set()
        todo = [(spec, lang) for spec in specs for lang in run.languages
                if (spec.triplet.id, lang) not in done]
        if progress:
            progress.start(run.run_id, len(todo))
        wires = [Wire() for _ in todo]
        tasks = [asyncio.ensure_future(one(spec, lang, w))
                 for (spec, lang), w in zip(todo, wires, strict=True)]
        # wait, not gather: a cancelled gather would cancel the calls on the wire too.
        if tasks:
            await asyncio.wait(tasks)
        for t in tasks:
            t.result()  # a bug in one() must not pass silently
        again = reasked(failed, answered=answered, asked=len(todo) - not_asked,
                        share=endpoint.reask_failed, calls_left=allowance.calls)
        if again and writer.failure is None:
            msg = (f"{len(failed)} failed in transit: asking {len(again)} again "
                   f"(endpoints[].reask_failed {endpoint.reask_failed:g})")
            log.info("run %s: %s", run.run_id, msg)
            if progress:
                progress.again(len(again), msg)
            writer.resumed = True  # a re-asked answer replaces its failed row, counted
            more = [Wire() for _ in again]
            wires.extend(more)
            tasks.extend(asyncio.ensure_future(one(f.spec, f.language, w, f.attempts))
                         for f, w in zip(again, more, strict=True))
            await asyncio.wait(tasks[-len(again):])
            for t in tasks[-len(again):]:
                t.result()
    except BaseException as exc:
        # Ctrl-C, SIGTERM or a crash of this process: keep what arrived (and what
        # is on its way), and leave the run resumable with --resume.
        stopping = True

        async def stop(exc: BaseException) -> None:
            # Only requests already out are paid for and worth their answer; a call
            # still queued for a slot or an rpm token, or waiting to retry, is not asked.
            flying = [t for t, w in zip(tasks, wires, strict=True) if not t.done() and w.on]
            if flying and isinstance(exc, asyncio.CancelledError | KeyboardInterrupt):
                msg = (f"stopping: no new call; the calls in flight are awaited for up to "
                       f"{DRAIN_S:g} s")
                if progress:
                    progress.note(msg)
                log.info("run %s: %s", run.run_id, msg)
                _, late = await asyncio.wait(flying, timeout=DRAIN_S)
                if late:  # paid for, but not waited for longer: say so
                    msg = (f"abandoned after {DRAIN_S:g} s: {len(late)} calls still in "
                           "flight (paid for, not stored; --resume asks them again)")
                    if progress:
                        progress.note(msg)
                    log.warning("run %s: %s", run.run_id, msg)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await drain()
            why = ("interrupted by a signal (SIGTERM, Ctrl-C) or shutdown"
                   if isinstance(exc, asyncio.CancelledError)
                   else "interrupted (Ctrl-C)" if isinstance(exc, KeyboardInterrupt)
                   else f"interrupted by an error: {type(exc).__name__}")
            if stop_status is not None:
                try:
                    await asyncio.to_thread(store.finish_run, run.run_id, stop_status, why)
                except StoreError as failed:  # answers stored; the next start closes it
                    log.warning("run %s: could not be marked %s (%s); the next start "
                                "closes it as an orphan", run.run_id, stop_status.value,
                                failed)

        await despite_cancels(stop(exc))
        raise
    await drain()
    if progress:
        progress.finish()
    if writer.failure is not None:
        err = writer.stopped(writer.failure, len(todo), not_asked)
        if stop_status is not None:
            with contextlib.suppress(StoreError):  # may not fit either: close_orphans will
                await asyncio.to_thread(store.finish_run, run.run_id, stop_status,
                                        f"storage failed: {writer.failure}"[:500])
        raise err
    allowance.used(len(tasks) - not_asked)
    return not_asked


class Failed(NamedTuple):
    """A call that failed in transit, and the requests it made."""

    spec: ProbeSpec
    language: str
    attempts: int


def reasked(failed: list[Failed], *, answered: int, asked: int, share: float,
            calls_left: int | None) -> list[Failed]:
    """The calls a run asks once more at its end: those that failed in transit, at most
    `share` of the calls it asked (and what the day's calls leave), in the order asked -
    and none when no call was answered at all (the endpoint is down: asking again would
    only double the time the run spends on it). Unreadable and refused answers are not
    asked again (docs/statistics.md, "Missing answers")."""
    if not failed or not answered:
        return []
    room = int(share * asked)
    if calls_left is not None:
        room = min(room, calls_left - asked)
    return failed[:max(room, 0)]


def finish_run(ctx: Context[MeasureStore], run: RunRow, *, partial: bool = False,
               hold: bool = False) -> RunResult:
    """Compute, store and return the run's statistics; end the run as complete, partial
    (the budget stopped it) or failed (nothing scored) - or, with `hold`, leave it
    `running` with its model set, for its review to end it (monitor.review)."""
    store = ctx.store
    with store.session():
        s = summarise(store, run.run_id, run.languages, ctx.catalog.languages, seed=run.seed)
        store.write_stats(run.run_id, stat_rows(s))
        c = s.status_counts
        status = (RunStatus.FAILED if not c[CallStatus.OK] else RunStatus.PARTIAL if partial
                  else RunStatus.COMPLETE)
        reason = (f"no answer could be scored ({c[CallStatus.FAILED]} failed, "
                  f"{c[CallStatus.UNPARSEABLE]} unparseable, {c[CallStatus.REFUSED]} refused)"
                  if status == RunStatus.FAILED else
                  "stopped early by the daily budget" if partial else None)
        if hold:
            return RunResult(run=store.measured(run.run_id), summary=s, status=status,
                             reason=reason)
        store.finish_run(run.run_id, status, reason)
        finished = store.get_run(run.run_id) or run
    return RunResult(run=finished, summary=s, status=status, reason=reason)
