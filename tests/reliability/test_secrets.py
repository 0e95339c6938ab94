"""A canary API key never appears in logs at any level, in DuckDB, in the JSON
output or in error messages - even when the provider echoes it back."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from monitor.cli import main
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, serve

CANARY = "sk-canary-debug-1f0e2d3c4b5a"


def test_the_key_is_nowhere_even_at_debug_level(
        tmp_path: Path, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CANARY_KEY", CANARY)

    def echo(req: Request) -> Reply:  # a provider that puts the key in its error text
        return Reply(status=401, raw=f'{{"error": {{"message": "bad key {CANARY}"}}}}'.encode())

    caplog.set_level(logging.DEBUG)  # every logger, every level
    with serve(echo) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base,
                                                      api_key_env="CANARY_KEY")])
        assert main(["probe", "--once", "--json", "--config", str(cfg), "--triplets", "1"]) == 3
        assert server.requests[0].headers["authorization"] == f"Bearer {CANARY}"
    out = capsys.readouterr()
    stored = (tmp_path / "monitor.duckdb").read_bytes().decode("latin-1")
    for where, text in (("logs", caplog.text), ("stdout", out.out), ("stderr", out.err),
                        ("duckdb", stored)):
        assert CANARY not in text, where
    assert "***" in stored or "***" in out.out  # the echoed key was masked, not dropped
