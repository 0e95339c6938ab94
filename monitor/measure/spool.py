"""Answers that were paid for but could not be written to DuckDB.

When a write fails for good (no space left, a read-only file system), the
run stops asking and every answer it holds goes to a JSONL spool file, one
record (the call row and its score rows) per line, flushed and fsynced per
batch. `monitor probe --once --resume RUN_ID` (and the daemon's resume)
imports the spool before asking anything, then deletes it; a resumed run
never asks again what a spool holds.

Where: beside the database (`<db>.<run_id>.spool.jsonl`), since that is
where the user looks; when that file system is the full one and even a few
KB do not fit, the first of $XDG_STATE_HOME/bias-monitor/spool,
~/.local/state/bias-monitor/spool and the temp folder that accepts it, under
a name that carries a hash of the database's path so that two databases
never share a spool.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["Spool", "find_spools", "read_spool"]

Record = tuple[dict[str, Any], list[dict[str, Any]]]


def _fallback_dirs() -> list[Path]:
    dirs = []
    if state := os.environ.get("XDG_STATE_HOME"):
        dirs.append(Path(state) / "bias-monitor" / "spool")
    dirs.append(Path.home() / ".local" / "state" / "bias-monitor" / "spool")
    dirs.append(Path(tempfile.gettempdir()) / "bias-monitor-spool")
    return dirs


def candidates(db: Path, run_id: str) -> list[Path]:
    """Every place the spool of `run_id` may be, the preferred one first."""
    db = db.resolve()
    tag = hashlib.sha256(str(db).encode()).hexdigest()[:10]
    beside = db.parent / f"{db.name}.{run_id}.spool.jsonl"
    return [beside, *(d / f"{db.name}-{tag}.{run_id}.spool.jsonl" for d in _fallback_dirs())]


def _default(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    raise TypeError(f"cannot spool {type(value).__name__}")


def _hook(obj: dict[str, Any]) -> Any:
    if set(obj) == {"$datetime"}:
        return datetime.fromisoformat(obj["$datetime"])
    return obj


class Spool:
    """Append-only JSONL of one run's unwritten answers."""

    def __init__(self, db: Path, run_id: str) -> None:
        self.db = db
        self.run_id = run_id
        self.path: Path | None = None
        self.records = 0
        self.bytes = 0

    def add(self, records: list[Record]) -> Path:
        """Append and fsync; OSError only when no candidate place takes it."""
        lines = "".join(json.dumps({"call": c, "scores": s}, default=_default,
                                   ensure_ascii=False) + "\n" for c, s in records)
        data = lines.encode("utf-8")
        places = [self.path] if self.path is not None else candidates(self.db, self.run_id)
        last: OSError | None = None
        for place in places:
            existed = place.exists()
            size = place.stat().st_size if existed else 0
            try:
                place.parent.mkdir(parents=True, exist_ok=True)
                with place.open("ab") as fh:
                    fh.write(data)
                    fh.flush()
                    os.fsync(fh.fileno())
            except OSError as exc:
                last = exc
                self._undo(place, existed, size)  # no torn line, no empty file left
                continue
            self.path = place
            self.records += len(records)
            self.bytes += len(data)
            return place
        assert last is not None
        raise last

    @staticmethod
    def _undo(place: Path, existed: bool, size: int) -> None:
        try:
            if existed:
                os.truncate(place, size)
            else:
                place.unlink(missing_ok=True)
        except OSError:
            pass  # read_spool skips a torn last line anyway


def find_spools(db: Path, run_id: str) -> list[Path]:
    return [p for p in candidates(db, run_id) if p.is_file()]


def read_spool(path: Path) -> Iterator[Record]:
    """The records of a spool file; a torn last line (a crash mid-append) is skipped."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            try:
                rec = json.loads(line, object_hook=_hook)
            except ValueError:
                continue
            # A spool written by 0.3 has no answer_format: it asked in text.
            yield {"answer_format": "text", **rec["call"]}, rec["scores"]
