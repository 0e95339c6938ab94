"""On a signal a run waits only for the requests already out (they are paid for), not
for calls still queued for an rpm token: under a tight rpm a SIGTERM used to take
DRAIN_S (10 s) and then some, past Docker's default 10 s before SIGKILL."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from monitor.catalog import Catalog
from monitor.config import Settings, load_settings
from monitor.context import Context
from monitor.measure import run as run_mod
from monitor.measure.run import run_endpoint
from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import Gate


def _answer(req: Request) -> Reply:
    block = {lab: {"score": 5 + i} for i, lab in enumerate(options_in(req.user))}
    return Reply(json.dumps(block))


def _setup(tmp_path: Path, api_base: str, **endpoint: Any) -> tuple[Settings, Store]:
    """A run of 4 triplets against the server, no retries; its store."""
    cfg = write_config(tmp_path, [openai_endpoint(api_base, max_retries=0, **endpoint)],
                       sampling={"triplets_per_run": 4})
    settings, _ = load_settings(cfg)
    return settings, Store(settings.storage.path)


async def _until(what: str, cond: Callable[[], bool]) -> None:
    """Until `cond` holds (a state, e.g. requests out and held by the gate); fails with
    `what` after 60 s."""
    deadline = time.monotonic() + 60
    while not cond():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.02)


def test_a_signal_waits_for_requests_out_not_for_calls_queued_for_a_token(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    # Were the queued calls awaited, this long drain would let them get their rpm
    # tokens (one a minute here) and reach the server: the count below would grow.
    monkeypatch.setattr(run_mod, "DRAIN_S", 3600.0)
    gate = Gate(0, _answer)  # every request is held until released: certainly out
    with serve(gate) as server:
        settings, store = _setup(tmp_path, server.api_base, max_concurrency=8, rpm=1)

        async def main() -> int:
            task = asyncio.ensure_future(run_endpoint(Context(settings, shipped_catalog, store),
                                                      settings.endpoints[0]))
            await _until("a request out", lambda: len(server.requests) >= 1)
            out = len(server.requests)
            task.cancel()  # what SIGTERM does to a run (monitor.commands.probe.terminable)
            gate.released.set()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 45)  # a guard only: a regression hangs ~60 s
            return out

        out = asyncio.run(main())
        assert len(server.requests) == out == 1  # no queued call was asked after the signal
    [run] = store.runs()
    assert run.status == "interrupted"
    assert len(store.calls_frame([run.run_id])) == out  # the request that was out is kept


def test_more_signals_while_stopping_cut_nothing_short(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    # `monitor run`'s child gets SIGTERM once per thread of a killed daemon, a few ms
    # apart: each later cancel used to cut the stop short, the paid answers on the
    # wire were dropped and the run stayed "running" instead of "interrupted".
    gate = Gate(0, _answer)
    with serve(gate) as server:
        settings, store = _setup(tmp_path, server.api_base, max_concurrency=2)

        async def main() -> int:
            task = asyncio.ensure_future(run_endpoint(Context(settings, shipped_catalog, store),
                                                      settings.endpoints[0]))
            await _until("two requests out", lambda: len(server.requests) >= 2)
            task.cancel()
            await _until("the run stopping", lambda: "stopping: no new call" in caplog.text)
            for _ in range(3):
                task.cancel()
                await asyncio.sleep(0)  # let each one land in the stop
            gate.released.set()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 45)
            return len(server.requests)

        with caplog.at_level("INFO", logger="monitor.measure.run"):
            out = asyncio.run(main())
    assert out == 2
    [run] = store.runs()
    assert run.status == "interrupted"
    assert len(store.calls_frame([run.run_id])) == out  # both paid answers kept


def test_calls_still_out_when_the_drain_ends_are_abandoned_and_said(
        tmp_path: Path, shipped_catalog: Catalog, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    # The stop waits DRAIN_S for the requests out, then gives up on them: a user must
    # hear that calls were paid for and not stored, and that --resume asks them again.
    monkeypatch.setattr(run_mod, "DRAIN_S", 0.2)
    gate = Gate(0, _answer)  # held past the drain: never answered in time
    with serve(gate) as server:
        settings, store = _setup(tmp_path, server.api_base, max_concurrency=2, timeout_s=120)

        async def main() -> None:
            task = asyncio.ensure_future(run_endpoint(Context(settings, shipped_catalog, store),
                                                      settings.endpoints[0]))
            await _until("both slots' requests out",  # and held
                         lambda: len(server.requests) >= 2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 45)

        try:
            with caplog.at_level("WARNING", logger="monitor.measure.run"):
                asyncio.run(main())
        finally:
            gate.released.set()
    assert "abandoned after 0.2 s: 2 calls still in flight" in caplog.text
    [run] = store.runs()
    assert run.status == "interrupted"
    assert store.calls_frame([run.run_id]).empty  # nothing answered was stored
