"""A real PostgreSQL for the tests: initdb into a temporary folder, a free loopback port,
no system service.

`cluster()` starts one server (as the `postgres` user when the tests run as root:
initdb refuses root) and yields a `Cluster`; `Cluster.database()` creates a fresh
database and returns its postgresql:// URL (with a password, so the tests can look
for it where it must never appear). Without Debian's PostgreSQL server binaries the
tests that need it are skipped, except under CI (`CI` set), where that is a failure:
.ci/run installs the package.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.process import free_port

__all__ = ["PASSWORD", "Cluster", "cluster", "pg_bin"]

_TICK = os.sysconf("SC_CLK_TCK")

#: The test role's password: a canary that must appear in no log, store, metric or alert.
PASSWORD = "pg-canary-7c4e1d9b"
_USER = "monitor"
_counter = itertools.count()


def pg_bin() -> Path | None:
    """Debian's server binaries (postgresql-NN), newest first; None when absent."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), reverse=True)
    if found:
        return Path(found[0]).parent
    which = shutil.which("postgres")
    return Path(which).parent if which else None


def require_postgres() -> Path:
    """The binaries' folder, or skip (fail under CI, which must install them)."""
    found = pg_bin()
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("PostgreSQL is not installed; CI needs the Debian package "
                        "`postgresql` (.ci/run installs it)")
        pytest.skip("PostgreSQL server binaries not installed (Debian package `postgresql`)")
    return found


@dataclass
class Cluster:
    bin: Path
    port: int
    admin_url: str = field(repr=False)

    def database(self) -> str:
        """A new, empty database: its URL (user monitor, password PASSWORD)."""
        name = f"t{os.getpid()}_{next(_counter)}"
        self.psql(f'CREATE DATABASE "{name}" OWNER {_USER}')
        return f"postgresql://{_USER}:{PASSWORD}@127.0.0.1:{self.port}/{name}"

    def psql(self, sql: str, db: str = "postgres", timeout: float = 60) -> str:
        out = subprocess.run([str(self.bin / "psql"), "-X", "-q", "-t", "-A", "-h", "127.0.0.1",
                              "-p", str(self.port), "-U", "postgres", "-d", db, "-c", sql],
                             capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "PGPASSWORD": PASSWORD})
        if out.returncode != 0:
            raise RuntimeError(f"psql: {out.stderr.strip()}")
        return out.stdout

    def cpu_s(self) -> float:
        """CPU seconds (user + system) the server has used so far: its postmaster, its
        live children (backends, checkpointer, autovacuum) and the children it has
        reaped (a closed connection's backend), from /proc; for benchmarks."""
        procs: dict[int, tuple[int, float]] = {}
        reaped = 0.0
        master = None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            procs[int(entry.name)] = (int(stat[1]), (int(stat[11]) + int(stat[12])) / _TICK)
            if f"port={self.port}" in cmd and "postgres" in cmd:
                master = int(entry.name)
                reaped = (int(stat[13]) + int(stat[14])) / _TICK
        if master is None:
            raise RuntimeError(f"no PostgreSQL on port {self.port}")
        return procs[master][1] + reaped + sum(cpu for ppid, cpu in procs.values()
                                               if ppid == master)


def _as_postgres(cmd: list[str]) -> list[str]:
    """initdb and postgres refuse to run as root: drop to the `postgres` user."""
    if os.geteuid() != 0:
        return cmd
    return ["runuser", "-u", "postgres", "--", *cmd]


@contextlib.contextmanager
def cluster(settings: str = "") -> Iterator[Cluster]:
    """A running server in a temporary folder; stopped and removed at the end.
    `settings`: more `-c name=value` options (the benchmarks' larger buffers)."""
    binary = require_postgres()
    root = Path(tempfile.mkdtemp(prefix="bm-pg-"))
    data, sock = root / "data", root / "sock"
    sock.mkdir()
    pwfile = root / "pw"
    pwfile.write_text(PASSWORD + "\n")
    if os.geteuid() == 0:
        shutil.chown(root, "postgres")
        shutil.chown(sock, "postgres")
        shutil.chown(pwfile, "postgres")
    port = free_port()
    subprocess.run(_as_postgres([str(binary / "initdb"), "-D", str(data), "-U", "postgres",
                                 "--pwfile", str(pwfile), "--auth=scram-sha-256",
                                 "--encoding=UTF8", "--locale=C.UTF-8"]),
                   check=True, capture_output=True, timeout=120)
    # Small and fast: the tests' data fit in memory; fsync off (a test cluster dies with
    # its folder anyway).
    opts = (f"-c port={port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={sock} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c shared_buffers=64MB -c max_connections=200 " + settings)
    subprocess.run(_as_postgres([str(binary / "pg_ctl"), "-D", str(data), "-o", opts, "-w",
                                 "-t", "60", "-l", str(root / "log"), "start"]),
                   check=True, capture_output=True, timeout=90)
    found = Cluster(binary, port, f"postgresql://postgres:{PASSWORD}@127.0.0.1:{port}/postgres")
    try:
        found.psql(f"CREATE ROLE {_USER} LOGIN PASSWORD '{PASSWORD}'")
        yield found
    finally:
        subprocess.run(_as_postgres([str(binary / "pg_ctl"), "-D", str(data), "-m",
                                     "immediate", "-w", "stop"]), capture_output=True,
                       timeout=60)
        shutil.rmtree(root, ignore_errors=True)
