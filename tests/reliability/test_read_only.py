"""A read-only database or mount: every command that only reads works; one that must
write says the mount is read-only (not "free space"), exit 4.

A tmpfs remounted read-only stands for a mounted backup or a volume snapshot;
mounting needs root (CI runs as root). The disk-full class, told apart from
this one, is tests/reliability/test_failure_classes.py's.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.errors import StoreWriteError, WriteCause
from monitor.measure.writer import Writer
from monitor.store import Store
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def _remount(mnt: Path, mode: str) -> bool:
    return subprocess.run(["mount", "-o", f"remount,{mode}", str(mnt)],
                          capture_output=True).returncode == 0


@pytest.fixture
def mount(tmp_path: Path) -> Iterator[Path]:
    """A 64 MB tmpfs to turn read-only."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root (CI runs as root)")
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mnt)], check=True)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _scored(req: Request) -> Reply:
    block = {lab: {"score": 5 + i, "strengths": ["a"], "weaknesses": ["b"]}
             for i, lab in enumerate(options_in(req.user))}
    return Reply(json.dumps(block))


def test_every_reading_command_works_on_a_read_only_mount(tmp_path: Path, mount: Path) -> None:
    cfg = write_config(tmp_path, [{"name": "sim", "model": "simulated/demo"}],
                       storage={"path": str(mount / "monitor.duckdb")},
                       sampling={"triplets_per_run": 6, "languages": ["en", "zh"]})
    c = ("--config", str(cfg))
    assert _cli("probe", "--once", *c)[0] == 0
    assert _remount(mount, "ro")
    for argv in (["report", "--out", str(tmp_path / "html")],
                 ["report", "--format", "md", "--out", "-"], ["runs"], ["baseline", "show"],
                 ["export", "--parquet", str(tmp_path / "parquet")], ["plan", "--sd", "1"]):
        code, _, err = _cli(*argv, *c)
        assert code == 0, (argv, err)
    assert (tmp_path / "html" / "index.html").is_file()
    # A command that must write: the mount is named as the cause, with its cure.
    code, _, err = _cli("baseline", "set", "--latest", *c)
    assert code == 4
    assert f"{mount} (tmpfs) is mounted read-only; remount it read-write" in err
    assert "free" not in err


@pytest.mark.slow
def test_a_mount_gone_read_only_mid_run_says_so_and_keeps_every_answer(
        tmp_path: Path, mount: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's writer lets the file go between batches: the tmpfs is remounted
    read-only in such a gap (a file open for writing makes a remount busy), and the
    next write fails on the read-only file system."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    done = threading.Event()

    def answer(req: Request) -> Reply:
        if not done.is_set() and len(server.requests) >= 12:
            deadline = time.monotonic() + 30
            while not _remount(mount, "ro") and time.monotonic() < deadline:
                time.sleep(0.05)
            done.set()
        return _scored(req)

    with serve(answer) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=1)],
                           storage={"path": str(mount / "monitor.duckdb")},
                           sampling={"triplets_per_run": 30, "languages": ["en", "zh"]})
        code, _, err = _cli("probe", "--once", "--config", str(cfg))
        asked = len(server.requests)
    assert done.is_set()
    assert code == 4, err
    [line] = [x for x in err.splitlines() if x.startswith("monitor: error:")]
    assert "Read-only file system" in line and "is mounted read-only" in line
    assert "free at least" not in line and " free of " not in line
    assert "answers not written are kept in" in line and "--resume" in line
    assert asked < 60  # it stopped asking
    # every answer paid for is stored or spooled
    store = Store(mount / "monitor.duckdb", read_only=True)
    [run] = store.runs()
    spooled = sum(len(p.read_text().splitlines())
                  for p in (tmp_path / "state").rglob("*.spool.jsonl"))
    assert len(store.calls_frame([run.run_id])) + spooled == asked


@pytest.mark.parametrize(("cause", "wanted", "unwanted"), [
    (WriteCause.READ_ONLY, [], ["free at least", "0 of 60"]),
    (WriteCause.NO_SPACE, ["free at least"], ["0 of 60"]),
])
def test_a_run_that_made_every_call_does_not_say_none_were_made(
        tmp_path: Path, cause: WriteCause, wanted: list[str], unwanted: list[str]) -> None:
    writer = Writer(Store(tmp_path / "monitor.duckdb"), "run-1")
    err = writer.stopped(StoreWriteError("cannot write", mount="/mnt", cause=cause), 60, 0)
    text = str(err)
    assert isinstance(err, StoreWriteError) and err.cause == cause
    assert "every one of the run's 60 calls had been made" in text
    assert all(w in text for w in wanted) and not any(u in text for u in unwanted)
