"""The monitor reaches no address but its configured endpoints, sinks and own port.

Each command runs under strace (tests/support/netwatch.py), so a connection
native code tries (DuckDB fetching an extension, a library's telemetry, a
DNS lookup) is seen too, whether or not it got through. The commands:
config check, probe, baseline set / show, runs, report (HTML and Markdown)
and export, against a local OpenAI-protocol server: its port is the only
address allowed.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.helpers import openai_endpoint, write_config
from tests.support.netwatch import traced
from tests.support.openai import Reply, Request, options_in, serve


def _scored(req: Request) -> Reply:
    block = {lab: {"score": 5 + i, "strengths": ["a"], "weaknesses": ["b"]}
             for i, lab in enumerate(options_in(req.user))}
    return Reply(json.dumps(block))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_the_trace_sees_a_connection_it_was_not_told_of(tmp_path: Path) -> None:
    """The check can fail: a TCP connect and a UDP datagram to a loopback port that is
    not allowed are both reported, and a lookup of a name is too (nscd's socket)."""
    port = _free_port()
    code = ("import socket\n"
            f"socket.socket().connect_ex(('127.0.0.1', {port}))\n"
            "udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"udp.sendto(b'x', ('127.0.0.1', {port}))\n"
            "try:\n    socket.getaddrinfo('localhost', 80)\nexcept OSError:\n    pass\n")
    _, seen = traced([], tmp_path, python_code=code, timeout=60)
    bad = [a for a in seen if not a.allowed(set())]
    assert {(a.call, a.host, a.port) for a in bad if a.family == "inet"} >= {
        ("connect", "127.0.0.1", port), ("sendto", "127.0.0.1", port)}
    assert not [a for a in seen if a.allowed({port + 1})]


@pytest.mark.slow
def test_every_command_reaches_only_the_configured_endpoint(tmp_path: Path) -> None:
    with serve(_scored) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)],
                           sampling={"triplets_per_run": 4, "languages": ["en", "zh"]})
        c = ["--config", str(cfg)]
        commands = [["config", "check", *c], ["probe", "--once", "--json", *c],
                    ["baseline", "set", "--latest", *c], ["baseline", "show", *c], ["runs", *c],
                    ["report", "--out", str(tmp_path / "html"), *c],
                    ["report", "--format", "md", "--out", str(tmp_path / "md"), *c],
                    ["export", "--parquet", str(tmp_path / "parquet"), *c]]
        codes, seen = traced(commands, tmp_path)
    assert codes == [0] * len(commands)
    assert any(a.port == server.port for a in seen)  # the probe's calls were traced
    assert [a for a in seen if not a.allowed({server.port})] == []
