"""Every socket a process tries to reach, seen by the kernel's system calls.

`traced(argvs, ...)` runs `monitor` commands one after another in one Python
process under `strace -f` (threads and children included) and returns each
connect / sendto / sendmsg that named an address. Tracing system calls, not
Python's socket module, also sees what native code does (DuckDB's own HTTP
client fetching an extension, a resolver asking DNS), and a refused or failed
attempt counts as much as one that got through. `python -m tests.support.netwatch
ARGV_JSON RESULT_JSON` is the traced process: it runs each argv with
`monitor.cli.main` and writes the exit codes.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

_CALL = re.compile(r"^\d+\s+(connect|sendto|sendmsg)\((.*)$")
_INET = re.compile(r'sa_family=AF_INET, sin_port=htons\((\d+)\), sin_addr=inet_addr\("([^"]+)"\)')
_INET6 = re.compile(r'sa_family=AF_INET6, sin6_port=htons\((\d+)\).*?inet_pton\(AF_INET6, '
                    r'"([^"]+)"')
_UNIX = re.compile(r'sa_family=AF_UNIX, sun_path=@?"([^"]*)"')
_LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|::1|::ffff:127\.\d+\.\d+\.\d+)$")


@dataclass(frozen=True)
class Attempt:
    """One address a system call named: AF_INET(6) host and port, or a unix socket path."""

    call: str
    family: str
    host: str
    port: int | None

    def allowed(self, ports: set[int]) -> bool:
        """Loopback to one of `ports` (the configured endpoints, sinks, own port). A unix
        socket is never the monitor's: nscd's is how glibc starts a name lookup."""
        return self.family != "unix" and bool(_LOOPBACK.match(self.host)) and (
            self.port in ports)


def strace() -> str:
    import pytest  # not in the traced process

    path = shutil.which("strace") or shutil.which("strace", path="/usr/bin")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("strace is not installed; CI needs the Debian package `strace` "
                        "(see .ci/run)")
        pytest.skip("strace is not installed (Debian package `strace`)")
    return path


def attempts(log: str) -> list[Attempt]:
    out = []
    for line in log.splitlines():
        m = _CALL.match(line)
        if not m:
            continue
        call, rest = m.groups()
        if (a := _INET.search(rest)) is not None:
            out.append(Attempt(call, "inet", a.group(2), int(a.group(1))))
        elif (a := _INET6.search(rest)) is not None:
            out.append(Attempt(call, "inet6", a.group(2), int(a.group(1))))
        elif (a := _UNIX.search(rest)) is not None:
            out.append(Attempt(call, "unix", a.group(1), None))
    return out


def traced(argvs: Sequence[Sequence[str]], work: Path, *, env: dict[str, str] | None = None,
           python_code: str | None = None, timeout: float = 300) -> tuple[list[int],
                                                                          list[Attempt]]:
    """Exit codes of `argvs` (or of `python_code` run with -c) and every attempt to reach
    an address, run in `work` under strace."""
    log, result = work / "strace.log", work / "exit-codes.json"
    spec = work / "argv.json"
    spec.write_text(json.dumps([list(a) for a in argvs]), encoding="utf-8")
    program = (["-c", python_code] if python_code is not None else
               ["-m", "tests.support.netwatch", str(spec), str(result)])
    root = Path(__file__).resolve().parents[2]
    cmd = [strace(), "-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,sendto,sendmsg",
           "-e", "signal=none", "-o", str(log), sys.executable, *program]
    proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "PYTHONPATH": str(root), **(env or {})})
    assert proc.returncode == 0, proc.stderr[-2000:]
    codes = json.loads(result.read_text()) if python_code is None else []
    return codes, attempts(log.read_text(encoding="utf-8", errors="replace"))


def _main(spec: str, result: str) -> int:
    from monitor.cli import main

    codes = []
    for argv in json.loads(Path(spec).read_text(encoding="utf-8")):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            codes.append(main(argv))
        if codes[-1] != 0:
            print(f"{argv}: exit {codes[-1]}: {err.getvalue()[-1500:]}", file=sys.stderr)
    Path(result).write_text(json.dumps(codes), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1], sys.argv[2]))
