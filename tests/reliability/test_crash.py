"""Crash safety: SIGKILL `monitor probe --once` at 10 seeded points of a run,
resume it, and compare with an uninterrupted run on the same answers.

The killed runs are forked from this (already imported) process, so each
starts in milliseconds instead of paying LiteLLM's import again."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import random
import signal
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import OpenAIServer, Reply, Request, options_in, serve

pytestmark = pytest.mark.slow

TRIPLETS = 4
CALLS = TRIPLETS * 6


def _answer(req: Request) -> Reply:
    # A pure function of the prompt: the same probe always gets the same answer.
    rng = random.Random(req.system + req.user)
    block = {lab: {"score": rng.randint(3, 9)} for lab in options_in(req.user)}
    return Reply(json.dumps(block), delay_s=0.1)


def _argv(cfg: Path, *extra: str) -> list[str]:
    return ["probe", "--once", "--json", "--config", str(cfg), "--triplets", str(TRIPLETS),
            *extra]


def _run(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        code = main(argv)
    return code, out.getvalue()


def _silent_main(argv: list[str]) -> None:
    with open(os.devnull, "w") as null, redirect_stdout(null), redirect_stderr(null):
        main(argv)


def _config(tmp: Path, server: OpenAIServer) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    return write_config(tmp, [openai_endpoint(server.api_base, max_concurrency=2)])


def _stats(doc: dict[str, object]) -> object:
    ep = doc["endpoints"][0]  # type: ignore[index]
    return {k: ep[k] for k in ("status_counts", "md", "jsd", "coverage")}


def test_sigkill_at_ten_points_then_resume_equals_an_uninterrupted_run(tmp_path: Path) -> None:
    with serve(_answer) as server:
        code, out = _run(_argv(_config(tmp_path / "ref", server)))
        assert code == 0
        expected = _stats(json.loads(out))
        fork = multiprocessing.get_context("fork")
        rng = random.Random(2026)
        for point in range(10):
            cfg = _config(tmp_path / f"k{point}", server)
            db = tmp_path / f"k{point}" / "monitor.duckdb"
            seen = len(server.requests)
            kill_after = rng.randint(1, CALLS - 2)  # answers asked before the kill
            proc = fork.Process(target=_silent_main, args=(_argv(cfg),))
            proc.start()
            deadline = time.monotonic() + 120
            while len(server.requests) - seen < kill_after and time.monotonic() < deadline:
                time.sleep(0.005)
            assert proc.pid is not None
            os.kill(proc.pid, signal.SIGKILL)
            proc.join(timeout=30)
            store = Store(db)  # the file opens after a hard kill
            runs = store.runs()
            assert len(runs) == 1 and runs[0].status == "running"
            committed = store.calls_frame([runs[0].run_id])
            assert not committed.duplicated(["triplet_id", "language"]).any()
            code, out = _run(_argv(cfg, "--resume", runs[0].run_id))
            assert code == 0
            final = store.calls_frame([runs[0].run_id])
            assert len(final) == CALLS and not final.duplicated(["triplet_id", "language"]).any()
            # Nothing committed before the kill was lost or asked again.
            kept = committed.merge(final, on=["triplet_id", "language"], suffixes=("", "_f"))
            assert len(kept) == len(committed)
            assert (kept["created_at"] == kept["created_at_f"]).all()
            assert _stats(json.loads(out)) == expected, f"kill point {point} ({kill_after})"
