"""The served report folder (report.dir): its layout, publishing into it, and what a URL
under /report may read from it. Standard library only: the scheduler serves it.

    <dir>/index.html       the runs index (newest first), rewritten on each publish
    <dir>/runs.json        the same list for scripts: run_id, endpoint, times, status, verdict
    <dir>/<run_id>/        one run's report as `monitor report --run RUN_ID --out` writes it
    <dir>/fleet/           the fleet page: `monitor report` of every endpoint in the store
                           (each one's latest run), written once the store holds two

A run's report is built in a scratch folder inside <dir> (same file system) and
renamed into place, and the index files are written to a temporary file and
renamed, so a reader never sees half a report (the fleet page alike). Publishing holds
an flock on
<dir>/.lock: the run processes of two endpoints may finish at once. Only the
latest `keep` runs' folders are kept.

`/report` leads to the fleet page where there is one (several endpoints: the page that
names them all), else to the latest run's report. `lookup` maps a request path to a
file: only names of letters, digits, `.`,
`_`, `-` (no leading dot, so no `..`, no hidden file), at most <run>/<file>,
known extensions only, the real path (symlinks followed) inside <dir>; no
directory listing other than the index. Every answer carries the headers of
`HEADERS`: the report is a static page with inline styles and data: images,
so the policy allows exactly those and no script, frame, form or fetch.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import json
import logging
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from urllib.parse import quote, unquote

__all__ = ["FLEET", "HEADERS", "Answer", "Entry", "entries", "lookup", "publish", "publish_fleet",
           "scratch"]

log = logging.getLogger(__name__)

PREFIX = "/report"
INDEX, MANIFEST, LOCK = "index.html", "runs.json", ".lock"
#: The fleet page's folder (a run id always starts with its endpoint and has a time).
FLEET = "fleet"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")
_TYPES = {".html": "text/html; charset=utf-8", ".png": "image/png",
          ".svg": "image/svg+xml", ".json": "application/json",
          ".md": "text/markdown; charset=utf-8", ".txt": "text/plain; charset=utf-8",
          ".css": "text/css; charset=utf-8"}
#: A scratch folder older than this was left by a killed run process.
STALE_SCRATCH_S = 3600.0
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Content-Type-Options": "nosniff",
    "Content-Security-Policy": "default-src 'none'; img-src 'self' data:; "
                               "style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; "
                               "frame-ancestors 'none'",
    "Referrer-Policy": "no-referrer",
}


@dataclass(kw_only=True, frozen=True)
class Entry:
    """One run in the index."""

    run_id: str
    endpoint: str
    started_at: str  # ISO 8601, UTC
    finished_at: str | None
    status: str  # monitor.vocab.RunStatus
    verdict: str  # one line from the alert states after the run


@dataclass(frozen=True)
class Answer:
    """What to send for a request: a file, a redirect or a short text."""

    status: int
    content_type: str = "text/plain; charset=utf-8"
    file: Path | None = None
    body: bytes = b""
    location: str | None = None


def _valid(name: str) -> bool:
    return bool(_NAME.match(name))


def scratch(root: Path, run_id: str) -> Path:
    """A fresh folder inside `root` to build `run_id`'s report in (publish moves it)."""
    if not _valid(run_id):
        raise ValueError(f"run id {run_id!r} cannot name a report folder")
    root.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".tmp-{run_id}-", dir=root))


def entries(root: Path) -> list[Entry]:
    """The published runs, newest first; [] when there are none (or the list is unreadable)."""
    try:
        data = json.loads((root / MANIFEST).read_text(encoding="utf-8"))
        return [Entry(**item) for item in data["runs"]]
    except (OSError, ValueError, KeyError, TypeError):
        return []


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    with open(root / LOCK, "a+b") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def publish(root: Path, entry: Entry, built: Path, keep: int) -> list[Entry]:
    """Move the report built in `built` (a `scratch` folder) to <root>/<run_id>, list it
    first in the index and drop the reports beyond the latest `keep`. The index after."""
    with _locked(root):
        _place(root, entry.run_id, built)
        runs = [entry, *(e for e in entries(root) if e.run_id != entry.run_id)]
        kept, dropped = runs[:keep], runs[keep:]
        _write(root / MANIFEST, json.dumps({"runs": [asdict(e) for e in kept]}, indent=1))
        _write(root / INDEX, index_page(kept, fleet=_has_fleet(root)))
        for e in dropped:
            if _valid(e.run_id):
                shutil.rmtree(root / e.run_id, ignore_errors=True)
        _sweep(root)
    return kept


def publish_fleet(root: Path, built: Path) -> None:
    """Move the fleet page built in `built` (a `scratch` folder) to <root>/fleet, in place
    of the one before, and link it from the index."""
    with _locked(root):
        _place(root, FLEET, built)
        _write(root / INDEX, index_page(entries(root), fleet=True))


def _place(root: Path, name: str, built: Path) -> None:
    target = root / name
    os.chmod(built, 0o755)  # mkdtemp makes it private; the report is for readers
    if target.exists():  # written again (a run resumed, the fleet page): swap, drop the old
        old = Path(tempfile.mkdtemp(prefix=f".old-{name}-", dir=root))
        os.replace(target, old / "report")
        os.replace(built, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(built, target)


def _has_fleet(root: Path) -> bool:
    return (root / FLEET / INDEX).is_file()


def _sweep(root: Path) -> None:
    """Scratch folders a killed run process left behind."""
    now = time.time()
    for p in root.iterdir():
        if p.name.startswith((".tmp-", ".old-")) and p.is_dir():
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > STALE_SCRATCH_S:
                    shutil.rmtree(p, ignore_errors=True)


def index_page(runs: list[Entry], *, fleet: bool = False) -> str:
    latest: dict[str, Entry] = {}
    for e in runs:
        latest.setdefault(e.endpoint, e)
    esc = html.escape
    rows = "\n".join(
        f'<tr data-run="{esc(e.run_id)}"><td>{esc(e.endpoint)}</td>'
        f'<td><a href="{quote(e.run_id)}/">{esc(e.run_id)}</a></td>'
        f"<td>{esc(e.started_at[:19].replace('T', ' '))}</td><td>{esc(e.status)}</td>"
        f"<td>{esc(e.verdict)}</td></tr>" for e in runs)
    heads = " · ".join(f'<a href="{quote(e.run_id)}/">{esc(ep)}</a>'
                       for ep, e in sorted(latest.items()))
    return ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            "<title>bias-monitor reports</title><style>body{font-family:system-ui,sans-serif;"
            "margin:2em;color:#222}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
            "padding:3px 8px;font-size:13px;text-align:left}th{background:#f3f3f3}</style>"
            "</head><body><h1>bias-monitor reports</h1>"
            + ('<p><a href="fleet/">Fleet</a>: every endpoint in the store, its latest '
               "run's report.</p>" if fleet else "")
            + f"<p>Latest report per endpoint: {heads or 'none yet'}.</p>"
            "<table><tr><th>endpoint</th><th>run</th><th>started (UTC)</th><th>status</th>"
            f"<th>verdict</th></tr>\n{rows}\n</table>"
            f"<p>The latest {len(runs)} run(s) are kept (report.keep_runs).</p></body></html>\n")


def _text(status: int, text: str) -> Answer:
    return Answer(status, body=(text + "\n").encode())


def lookup(root: Path, path: str) -> Answer:
    """The answer to GET `path` (the request target, `/report...`), for `root`."""
    raw = path.split("?", 1)[0].split("#", 1)[0]
    if raw == PREFIX:  # the fleet page, else the latest report of any endpoint
        if _has_fleet(root):
            return Answer(302, location=f"report/{FLEET}/", body=b"see the fleet page\n")
        runs = entries(root)
        if not runs:
            return _text(404, "no report yet: the daemon writes one after each run")
        # Relative, so that a proxy serving the daemon under a path prefix keeps it.
        return Answer(302, location=f"report/{quote(runs[0].run_id)}/",
                      body=b"see the latest report\n")
    rest = unquote(raw[len(PREFIX) + 1:]) if raw.startswith(PREFIX + "/") else None
    if rest is None:
        return _text(404, "not found")
    parts = rest.split("/")
    if parts[-1] == "":  # a folder: its index.html
        parts[-1] = INDEX
    if len(parts) > 2 or not all(_valid(p) for p in parts):
        return _text(404, "not found")
    if len(parts) == 1 and (root / parts[0]).is_dir():  # /report/<run>: its folder
        return Answer(302, location=f"{quote(parts[0])}/", body=b"see the folder\n")
    ctype = _TYPES.get(Path(parts[-1]).suffix.lower())
    if ctype is None:
        return _text(404, "not found")
    try:
        base = root.resolve(strict=True)
        file = (base / Path(*parts)).resolve(strict=True)
    except (OSError, RuntimeError):
        return _text(404, "not found")
    if not file.is_relative_to(base) or not file.is_file():  # a symlink out of the folder
        return _text(404, "not found")
    return Answer(200, ctype, file=file)

