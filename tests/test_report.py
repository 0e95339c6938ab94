"""`monitor report` on real stored runs: the numbers equal the statistics module's,
the figures are valid PNGs, untrusted text is inert, and the page renders in
headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import re
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from monitor.catalog import load_catalog
from monitor.cli import main
from monitor.stats import jsd_of, md_of, weakness_of
from tests.support.db import frame, rows
from tests.support.helpers import DirectSimClient, sim_daemon, write_config

PARAMS = {"bias_points": {"CN": 0.4, "KR": 0.3}, "noise_sd": 1.0, "weakness_drop": 0.5}
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)> <!-- @channel"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """4 baseline runs, 4 with CN's bias raised (the daemon pages), then one
    `monitor probe --once` through LiteLLM's simulated provider."""
    tmp = tmp_path_factory.mktemp("report")
    catalog = load_catalog()
    cfg = write_config(tmp, [{"name": "sim", "model": "simulated/demo", "max_concurrency": 32,
                              "rpm": 100000, "params": PARAMS}],
                       sampling={"triplets_per_run": 30}, baseline={"auto_min_triplets": 120})
    daemon, _, store = sim_daemon(cfg, catalog)

    async def runs() -> None:
        for i in range(8):
            p = {**PARAMS, "seed": i, **({"bias_points": {"CN": 3.0}} if i >= 4 else {})}
            daemon.client_factory = lambda ep, p=p: DirectSimClient(p, catalog.root)  # type: ignore
            await daemon.run_job("sim")

    asyncio.run(runs())
    assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
    last = max(store.runs("sim"), key=lambda r: r.started_at)
    out = tmp / "out"
    assert main(["report", "--config", str(cfg), "--out", str(out)]) == 0
    return {"cfg": cfg, "store": store, "catalog": catalog, "run": last, "out": out,
            "html": (out / "index.html").read_text(encoding="utf-8"), "tmp": tmp}


def _table(page: str, cls: str, scenario: str | None = None) -> str:
    attr = f' data-scenario="{scenario}"' if scenario else ""
    m = re.search(rf'<table class="{cls}"{attr}>(.*?)</table>', page, re.S)
    assert m, f"no table {cls} {scenario}"
    return m.group(1)


def _cells(table: str, key: str) -> dict[str, list[dict[str, float] | None]]:
    """row key -> per column the data-* numbers of a statistic cell (None for n/a)."""
    out: dict[str, list[dict[str, float] | None]] = {}
    for m in re.finditer(rf'<tr data-{key}="([^"]+)">(.*?)</tr>', table, re.S):
        cells: list[dict[str, float] | None] = []
        for td in re.finditer(r"<td([^>]*)>", m.group(2)):
            attrs = dict(re.findall(r'data-(\w+)="([^"]*)"', td.group(1)))
            if "value" in attrs:
                cells.append({k: float(v) for k, v in attrs.items()})
            elif 'class="na"' in td.group(1):
                cells.append(None)
        out[html.unescape(m.group(1))] = cells
    return out


def _same(cell: dict[str, float] | None, row: pd.Series, value: str, lo: str, hi: str) -> None:
    assert cell is not None
    assert cell["value"] == pytest.approx(row[value], abs=1e-12)
    assert cell["n"] == row["n"]
    for got, want in ((cell["lo"], row[lo]), (cell["hi"], row[hi])):
        assert (pd.isna(want) and pd.isna(got)) or got == pytest.approx(want, abs=1e-12)


def test_md_table_equals_the_statistics_engine(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    local = history["catalog"].languages
    variants = ["all", "plain", "cot", "female", "male"]
    checked = 0
    for scenario in ("all", "university"):
        cells = _cells(_table(history["html"], "md", scenario), "country")
        assert "CN" in cells and "US" in cells
        for col, variant in enumerate(variants):
            want = md_of(store, [run.run_id], run.languages, local,
                         variant=None if variant == "all" else variant)
            for r in (r for r in want if r.scenario == scenario):
                _same(cells[r.country][col], pd.Series(asdict(r)), "md", "ci_lower",
                      "ci_upper")
                checked += 1
    assert checked >= 40
    # and the pooled column equals what the run itself stored (probe --json's numbers)
    stored = frame(store.path, "SELECT key, value, n FROM run_stats WHERE run_id = ? AND "
                   "kind = 'md' AND scenario = 'all'", [run.run_id]).set_index("key")
    pooled = _cells(_table(history["html"], "md", "all"), "country")
    for country, row in stored.iterrows():
        assert pooled[str(country)][0]["value"] == pytest.approx(row["value"])  # type: ignore


def test_jsd_table_equals_the_statistics_engine_and_the_stored_run(
        history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    want = jsd_of(store, [run.run_id], run.languages, seed=run.seed)
    cells = _cells(_table(history["html"], "jsd"), "scenario")
    cols = [*run.languages, "overall"]
    assert set(cells) == {r.scenario for r in want}
    for r in want:
        _same(cells[r.scenario][cols.index(r.language)], pd.Series(asdict(r)), "jsd_bits",
              "ci_lower", "ci_upper")
    stored = rows(store.path, "SELECT value FROM run_stats WHERE run_id = ? AND kind = 'jsd' "
                  "AND scenario = 'all' AND key = 'zh'", [run.run_id])[0][0]
    assert cells["all"][cols.index("zh")]["value"] == pytest.approx(stored)  # type: ignore


def test_weakness_table_shows_the_played_down_drawbacks(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    want = weakness_of(store, [run.run_id], history["catalog"].languages)
    cells = _cells(_table(history["html"], "weakness"), "country")
    for w in want:
        row = pd.Series(asdict(w))
        _same(cells[w.country][0], row.rename({"share_local": "v"}), "v", "local_lower",
              "local_upper")
        _same(cells[w.country][2], row, "diff", "diff_lower", "diff_upper")
    assert sum(w.diff for w in want) / len(want) < 0  # weakness_drop = 0.5 locally


def test_pngs_are_valid_and_embedded(history: dict[str, Any]) -> None:
    pngs = sorted(history["out"].glob("*.png"))
    assert [p.name for p in pngs] == ["sim-md-trend.png", "sim-scores.png"]
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', history["html"])
    assert len(embedded) == 2
    for path in pngs:
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200
        assert base64.b64encode(path.read_bytes()).decode() in embedded
    data = json.loads((history["out"] / "sim.json").read_text(encoding="utf-8"))
    assert data["runs"] == [history["run"].run_id] and data["md"]


def test_trend_alert_history_and_movers(history: dict[str, Any]) -> None:
    page = history["html"]
    alerts = _table(page, "alerts")
    assert "all / CN" in alerts and "pending &rarr; firing" in alerts
    movers = _table(page, "movers")
    assert movers.count("<tr>") == 1 + 8  # the header and TOP_MOVERS rows
    assert "<pre dir=\"auto\">" in movers


def test_untrusted_answer_text_is_inert(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    rows(store.path, "UPDATE probe_calls SET raw_text = ? || raw_text WHERE run_id = ?",
         [HOSTILE, run.run_id])
    out = history["tmp"] / "hostile"
    assert main(["report", "--config", str(history["cfg"]), "--out", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<script" not in page and "<img src=x" not in page and "<!--" not in page
    # self-contained: nothing fetched from anywhere
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_markdown_for_pull_requests(history: dict[str, Any],
                                    capsys: pytest.CaptureFixture[str]) -> None:
    store, run = history["store"], history["run"]
    capsys.readouterr()
    assert main(["report", "--config", str(history["cfg"]), "--format", "md",
                 "--out", "-"]) == 0
    text = capsys.readouterr().out
    md = md_of(store, [run.run_id], run.languages, history["catalog"].languages)
    [cn] = [r for r in md if r.scenario == "all" and r.country == "CN"]
    row = next(line for line in text.splitlines() if line.startswith("| CN |"))
    assert f"{cn.md:+.2f}" in row and f"n={cn.n}" in row
    assert "### Weakness share" in text and "### Moved most" in text
    assert "<script" not in text


def test_since_pools_runs(history: dict[str, Any]) -> None:
    out = history["tmp"] / "since"
    assert main(["report", "--config", str(history["cfg"]), "--since", "2000-01-01",
                 "--out", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "Covers 9 runs" in page
    data = json.loads((out / "sim.json").read_text(encoding="utf-8"))
    assert len(data["runs"]) == 9


@pytest.mark.parametrize("argv, code, needle", [
    (["--run", "no-such-run"], 2, "--run no-such-run: no such run"),
    (["--since", "yesterday"], 2, "--since 'yesterday': not a date"),
    (["--since", "2999-01-01"], 3, "no finished runs since 2999-01-01"),
    (["--out", "-"], 2, "only --format md"),
])
def test_errors_are_one_clear_line(history: dict[str, Any], capsys: pytest.CaptureFixture[str],
                                   argv: list[str], code: int, needle: str) -> None:
    capsys.readouterr()
    assert main(["report", "--config", str(history["cfg"]), *argv]) == code
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


CHECK = """<script>window.addEventListener('load', () => {
  const t = [...document.querySelectorAll('table')].map(e => e.getBoundingClientRect());
  const i = [...document.images].map(e => e.naturalWidth);
  document.body.setAttribute('data-check', JSON.stringify({tables: t.length,
    visible: t.filter(r => r.width > 100 && r.height > 20).length, images: i}));
});</script>"""


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="Debian package chromium not installed "
                    "(.ci/run installs it)")
def test_report_renders_in_headless_chromium(history: dict[str, Any], tmp_path: Path) -> None:
    chromium = _chromium()
    assert chromium is not None
    flags = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000"]
    page = history["out"] / "index.html"
    # A copy with a probe script (the report itself carries no script) reports the
    # laid-out tables and decoded images through the DOM.
    probe = history["out"] / "probe.html"
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", CHECK + "</body>"),
                     encoding="utf-8")
    dom = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=120)
    m = re.search(r"data-check=\"([^\"]+)\"", dom.stdout)
    assert m, dom.stderr[-2000:]
    check = json.loads(html.unescape(m.group(1)))
    n_tables = history["html"].count("<table")
    assert check["tables"] == n_tables and check["visible"] == n_tables
    assert len(check["images"]) == 2 and min(check["images"]) > 300
    assert "CONSOLE" not in dom.stderr and "Failed to load resource" not in dom.stderr
    shot = tmp_path / "shot.png"
    run = subprocess.run([*flags, "--window-size=1280,2000", f"--screenshot={shot}",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), run.stderr[-2000:]
    with Image.open(shot) as im:
        gray = im.convert("L")
        assert gray.size == (1280, 2000)
        # the tables' text and borders: a good share of the page is not background
        dark = sum(gray.histogram()[:128])
        assert dark > 0.01 * 1280 * 2000
