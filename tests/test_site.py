"""/report over real HTTP: the daemon's server on a real folder published by
monitor.daemon.site. Redirect to the latest run, the runs index, each run's files
with their types and security headers; nothing outside the folder (.., encoded
.., absolute paths, symlinks out), no listing, no hidden file, GET and HEAD only."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.daemon import site
from monitor.daemon.exporter import MetricsServer, make_registry
from monitor.daemon.metrics import MetricsState

SECRET = "top-secret-outside-the-folder"
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32


def _entry(run_id: str, endpoint: str = "prod", verdict: str = "no drift alert") -> site.Entry:
    return site.Entry(run_id=run_id, endpoint=endpoint, started_at="2026-12-01T10:00:00+00:00",
                      finished_at="2026-12-01T10:05:00+00:00", status="complete", verdict=verdict)


def _publish(root: Path, run_id: str, keep: int = 50, **kw: str) -> list[site.Entry]:
    built = site.scratch(root, run_id)
    (built / "index.html").write_text(f"<html><body>report of {run_id}</body></html>",
                                      encoding="utf-8")
    (built / "prod-scores.png").write_bytes(PNG)
    (built / "prod.json").write_text(json.dumps({"runs": [run_id]}), encoding="utf-8")
    return site.publish(root, _entry(run_id, **kw), built, keep)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, Path]]:
    """One server for the module (stopping one takes its poll interval, 0.5 s)."""
    tmp = tmp_path_factory.mktemp("site")
    root = tmp / "data" / "reports"
    root.mkdir(parents=True)
    (tmp / "data" / "monitor.duckdb").write_text(SECRET)  # beside the folder
    (tmp / "outside.html").write_text(SECRET)
    (tmp / "secret.html").write_text(SECRET)
    srv = MetricsServer(make_registry(MetricsState()), "127.0.0.1", 0,
                        lambda: (True, {}), root).start()
    try:
        yield srv.port, root
    finally:
        srv.stop()


@pytest.fixture
def served(server: tuple[int, Path]) -> tuple[int, Path]:
    """The module's server on an empty folder."""
    port, root = server
    for p in root.iterdir():
        if p.is_symlink() or p.is_file():
            p.unlink()
        else:
            shutil.rmtree(p)
    return port, root


def _req(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)  # sent exactly as written: no client-side normalising
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_latest_index_and_files_with_their_headers(served: tuple[int, Path]) -> None:
    port, root = served
    status, _, body = _req(port, "/report")
    assert status == 404 and b"no report yet" in body
    _publish(root, "prod-20261201T100000Z-aaaaaa")
    _publish(root, "prod-20261201T160000Z-bbbbbb", verdict="drift FIRING: CN <b>")
    status, head, _ = _req(port, "/report")
    assert status == 302 and head["location"] == "report/prod-20261201T160000Z-bbbbbb/"
    status, head, body = _req(port, "/report/prod-20261201T160000Z-bbbbbb/")
    assert status == 200 and body == b"<html><body>report of prod-20261201T160000Z-bbbbbb" \
        b"</body></html>"
    assert head["content-type"] == "text/html; charset=utf-8"
    assert head["cache-control"] == "no-cache" and head["x-content-type-options"] == "nosniff"
    csp = head["content-security-policy"]
    assert "default-src 'none'" in csp and "img-src 'self' data:" in csp
    assert "script-src" not in csp  # no script at all: default-src 'none' covers it
    status, head, _ = _req(port, "/report/prod-20261201T100000Z-aaaaaa")
    assert status == 302 and head["location"] == "prod-20261201T100000Z-aaaaaa/"
    status, head, body = _req(port, "/report/prod-20261201T100000Z-aaaaaa/prod-scores.png")
    assert (status, head["content-type"], body) == (200, "image/png", PNG)
    status, head, body = _req(port, "/report/runs.json")
    assert status == 200 and head["content-type"] == "application/json"
    assert [r["run_id"] for r in json.loads(body)["runs"]] == [
        "prod-20261201T160000Z-bbbbbb", "prod-20261201T100000Z-aaaaaa"]
    status, _, index = _req(port, "/report/")
    page = index.decode()
    assert status == 200 and page.index("160000Z") < page.index("100000Z")  # newest first
    assert 'href="prod-20261201T160000Z-bbbbbb/"' in page
    assert "drift FIRING: CN &lt;b&gt;" in page and "<b>" not in page  # escaped
    assert _req(port, "/report/?x=1")[2] == index  # a query changes nothing
    # HEAD: the same headers, no body.
    status, head, body = _req(port, "/report/runs.json", "HEAD")
    assert status == 200 and body == b"" and int(head["content-length"]) > 0


@pytest.mark.parametrize("path", [
    "/report/../outside.html", "/report/%2e%2e/outside.html", "/report/%2E%2E%2Foutside.html",
    "/report/..%2f..%2foutside.html", "/report/%2e%2e/monitor.duckdb", "/report/../monitor.duckdb",
    "/report//etc/passwd", "/report/%2fetc%2fpasswd", "/report/%252e%252e/outside.html",
    "/report/r1/../../outside.html", "/report/.lock", "/report/.tmp-x/index.html",
    "/report/r1/sub/", "/report/r1/x.py", "/report/r1/..", "/report/%00", "/report/r1\\..",
    "/report/out-link.html", "/report/out-dir/secret.html", "/report/r1/a/b/c.html",
    "/reports", "/report.html", "/report/.hidden.html", "/report/r1/sub/deep.html",
])
def test_nothing_outside_the_folder_is_served(served: tuple[int, Path], path: str) -> None:
    port, root = served
    _publish(root, "r1")
    (root / "r1" / "sub").mkdir()
    (root / "r1" / "x.py").write_text(SECRET)
    (root / "r1" / "sub" / "deep.html").write_text(SECRET)  # no listing, no depth beyond run
    (root / ".hidden.html").write_text(SECRET)
    (root / "out-link.html").symlink_to(root.parent.parent / "outside.html")
    (root / "out-dir").symlink_to(root.parent.parent, target_is_directory=True)
    status, _, body = _req(port, path)
    assert status == 404, (path, status)
    assert SECRET.encode() not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_read_only(served: tuple[int, Path], method: str) -> None:
    port, root = served
    _publish(root, "r1")
    for path in ("/report/", "/report/r1/index.html", "/metrics"):
        status, head, _ = _req(port, path, method)
        assert status == 405 and head["allow"] == "GET, HEAD", (method, path)
    assert (root / "r1" / "index.html").is_file()


def test_only_the_latest_runs_are_kept_and_concurrent_publishes_all_land(tmp_path: Path) -> None:
    root = tmp_path / "reports"
    for i in range(3):
        kept = _publish(root, f"r{i}", keep=2)
    assert [e.run_id for e in kept] == ["r2", "r1"]
    assert not (root / "r0").exists() and (root / "r1" / "index.html").is_file()
    _publish(root, "r1", keep=2)  # written again (a resumed run): replaced, listed first
    assert [e.run_id for e in site.entries(root)] == ["r1", "r2"]
    # Two run processes finishing together: the lock keeps every entry.
    threads = [threading.Thread(target=_publish, args=(root, f"c{i}")) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert {e.run_id for e in site.entries(root)} >= {f"c{i}" for i in range(8)}
    assert not [p for p in os.listdir(root) if p.startswith((".tmp-", ".old-"))]


def test_no_folder_configured_is_not_found(tmp_path: Path) -> None:
    server = MetricsServer(make_registry(MetricsState()), "127.0.0.1", 0,
                           lambda: (True, {})).start()
    try:
        assert _req(server.port, "/report")[0] == 404
        assert _req(server.port, "/metrics")[0] == 200
    finally:
        server.stop()
