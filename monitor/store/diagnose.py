"""What a storage file is and what its errors mean: the texts the user reads.

- A file whose header is not DuckDB's is refused before DuckDB reads it (DuckDB
  would hand a SQLite file to an extension it downloads), saying what it is.
- A DuckDB error becomes one StoreError: damaged (restore a copy, export what is
  readable), a failed write with its cause told apart (a read-only mount, no
  permission, no space: only a full disk asks to free space) or another error.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from pathlib import Path

from monitor.errors import StoreDamagedError, StoreError, StoreWriteError, WriteCause
from monitor.store.records import FileSystem

__all__ = ["classify", "duckdb_shaped", "file_system", "refuse_foreign", "size_text"]

_NO_ROOM = re.compile(r"no space left on device|disk quota exceeded|file too large",
                      re.IGNORECASE)
_READ_ONLY = re.compile(r"read-only file system", re.IGNORECASE)
_DENIED = re.compile(r"permission denied", re.IGNORECASE)
_IO = re.compile(r"could not (?:write|fsync|truncate|create)|input/output error|i/o error|"
                 r"permission denied|read-only file system", re.IGNORECASE)
_DAMAGED = re.compile(r"corrupt|checksum|metadatareader|replaying wal|not a valid duckdb",
                      re.IGNORECASE)
# A DuckDB file: 3 header blocks of 4 KiB, then blocks of 256 KiB; its magic bytes
# follow the first header's 8-byte checksum.
_HEADER, _BLOCK = 12288, 262144
_MAGIC, _MAGIC_AT = b"DUCK", 8
# Formats DuckDB would hand to an extension, by their own magic: named in the error.
_FORMATS = ((b"SQLite format 3\x00", "a SQLite database"), (b"PAR1", "a Parquet file"))


def file_system(path: Path) -> FileSystem:
    p = path.resolve().parent
    while not os.path.ismount(p) and p != p.parent:
        p = p.parent
    fstype = "?"
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) > 2 and parts[1] == str(p):
                fstype = parts[2]  # the last entry for a mount point is the visible one
    try:
        usage = shutil.disk_usage(p)
        return FileSystem(str(p), fstype, usage.free, usage.total)
    except OSError:
        return FileSystem(str(p), fstype, 0, 0)


def _mounted_read_only(mount: str) -> bool:
    try:
        return bool(os.statvfs(mount).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def duckdb_shaped(path: Path) -> bool:
    """The file has DuckDB's layout (header blocks + whole 256 KiB blocks): a
    DuckDB database whose header is damaged, not someone else's file."""
    try:
        size = path.stat().st_size
    except OSError:
        return False
    return size > _HEADER and (size - _HEADER) % _BLOCK == 0


def refuse_foreign(path: Path) -> None:
    """A file with content whose header is not DuckDB's is refused before DuckDB
    opens it: at once, with what it seems to be, and never written to. (A DuckDB
    file whose header block is damaged keeps its layout: DuckDB reports it.)"""
    try:
        with path.open("rb") as fh:
            head = fh.read(16)  # the longest magic: SQLite's
    except FileNotFoundError:
        return  # a new database
    except OSError as exc:
        raise StoreError(f"{path}: cannot read ({exc.strerror}); check storage.path "
                         "and the file's permissions") from None
    if not head or head[_MAGIC_AT:_MAGIC_AT + len(_MAGIC)] == _MAGIC or duckdb_shaped(path):
        return
    what = next((name for magic, name in _FORMATS if head.startswith(magic)),
                "not a DuckDB database")
    seems = "" if what.startswith("not") else f"; it is {what}"
    raise StoreError(f"{path}: cannot open as a DuckDB database (no DuckDB header"
                     f"{seems}); point storage.path at a new file or a bias-monitor "
                     "database")


def classify(path: Path, text: str) -> StoreError:
    """The one StoreError a DuckDB error's text means to the user."""
    if _NO_ROOM.search(text) or _IO.search(text):
        return _write_error(path, text)
    if _DAMAGED.search(text):
        return StoreDamagedError(
            f"{path}: the database file is damaged ({text}); restore it from a "
            "backup copy, or save what is still readable with `monitor export --parquet "
            "DIR` first; keep the damaged file for inspection")
    return StoreError(f"{path}: storage error ({text})")


def _write_error(path: Path, text: str) -> StoreWriteError:
    """A failed write, with its cause told apart: a file system mounted read-only
    (whatever DuckDB's text says: EROFS shows up as a failed open, write or fsync), a
    file the process may not write, or no room (the only cause freeing space cures)."""
    fs = file_system(path)
    head = f"{path}: cannot write ({text}); "
    if _READ_ONLY.search(text) or _mounted_read_only(fs.mount):
        return StoreWriteError(f"{head}file system {fs.mount} ({fs.fstype}) is mounted "
                               "read-only; remount it read-write or point storage.path at "
                               "a writable place (reading works as it is: report, runs, "
                               "export, baseline show, plan)", mount=fs.mount,
                               free_bytes=fs.free, cause=WriteCause.READ_ONLY)
    if _DENIED.search(text):
        return StoreWriteError(f"{head}this user may not write it or its folder; give "
                               "it write permission or point storage.path elsewhere",
                               mount=fs.mount, free_bytes=fs.free,
                               cause=WriteCause.PERMISSION)
    cause = WriteCause.NO_SPACE if _NO_ROOM.search(text) else WriteCause.IO
    return StoreWriteError(f"{head}file system {fs.mount} ({fs.fstype}) has "
                           f"{size_text(fs.free)} free of {size_text(fs.total)}",
                           mount=fs.mount, free_bytes=fs.free, cause=cause)


def size_text(n: float) -> str:
    """1536 -> '1.5 KB' (binary units, as df -h)."""
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"
