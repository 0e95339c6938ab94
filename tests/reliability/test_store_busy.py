"""Another process holding the DuckDB file (a long export, a CLI command) while
a run writes: the answers wait in memory and are all stored afterwards."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from monitor.catalog import Catalog
from monitor.config import load_settings
from monitor.context import Context
from monitor.measure.run import run_endpoint
from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve


def _answer(req: Request) -> Reply:
    return Reply(json.dumps({k: {"score": 6} for k in options_in(req.user)}), delay_s=0.2)


def test_a_run_survives_a_locked_file_and_loses_nothing(
        tmp_path: Path, shipped_catalog: Catalog, caplog: pytest.LogCaptureFixture) -> None:
    with serve(_answer) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)],
                           sampling={"triplets_per_run": 3})
        settings, _ = load_settings(cfg)
        db = tmp_path / "monitor.duckdb"
        store = Store(db, lock_timeout_s=0.2)
        holder = None

        async def go() -> None:
            nonlocal holder
            task = asyncio.create_task(run_endpoint(Context(settings, shipped_catalog, store),
                                                    settings.endpoints[0]))
            while len(server.requests) < 3:
                await asyncio.sleep(0.01)
            # Hold the file for 1.5 s from another process, mid-run.
            holder = subprocess.Popen([sys.executable, "-c",
                                       "import duckdb, sys, time\n"
                                       f"c = duckdb.connect({str(db)!r}); print('held', "
                                       "flush=True); time.sleep(1.5)"],
                                      stdout=subprocess.PIPE, text=True)
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            result = await task
            assert result.status_counts["ok"] == 18

        asyncio.run(go())
        assert holder is not None and holder.wait(timeout=30) == 0
    assert "storage busy" in caplog.text  # the run did meet the lock
    calls = Store(db).calls_frame([r.run_id for r in Store(db).runs()])
    assert len(calls) == 18 and not calls.duplicated(["triplet_id", "language"]).any()
