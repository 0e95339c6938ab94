"""`monitor report` on real stored runs: the numbers equal the statistics module's,
the figures are valid PNGs, untrusted text is inert, and the page renders in
headless Chromium."""

from __future__ import annotations

import asyncio
import base64
import html
import json
import os
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
from monitor.stats import MIN_CELL_N, deviation_of, jsd_of, md_of, significant, weakness_of
from monitor.store import Store
from monitor.vocab import RunStatus
from tests.support.db import frame, rows
from tests.support.helpers import DirectSimClient, openai_endpoint, sim_daemon, write_config
from tests.support.openai import Reply, serve

PARAMS = {"bias_points": {"CN": 0.4, "KR": 0.3}, "noise_sd": 1.0, "weakness_drop": 0.5}
RAISED = {**PARAMS, "bias_points": {"CN": 3.0, "KR": 3.0}}
HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)> <!-- @channel"


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """4 baseline runs, 4 with CN's and KR's bias raised (the daemon pages), then one
    `monitor probe --once` through LiteLLM's simulated provider, still raised."""
    tmp = tmp_path_factory.mktemp("report")
    catalog = load_catalog()
    cfg = write_config(tmp, [{"name": "sim", "model": "simulated/demo", "max_concurrency": 32,
                              "rpm": 100000, "params": RAISED}],
                       sampling={"triplets_per_run": 30}, baseline={"auto_min_triplets": 120})
    daemon, _, store = sim_daemon(cfg, catalog)

    async def runs() -> None:
        for i in range(8):
            p = {**(RAISED if i >= 4 else PARAMS), "seed": i}
            daemon.client_factory = lambda ep, p=p: DirectSimClient(p, catalog.root)  # type: ignore
            await daemon.run("sim")

    asyncio.run(runs())
    assert main(["probe", "--once", "--config", str(cfg), "--json"]) == 0
    last = max((r for r in store.runs("sim") if r.status != RunStatus.TOPUP),
               key=lambda r: r.started_at)
    out = tmp / "out"
    assert main(["report", "--config", str(cfg), "--out", str(out)]) == 0
    return {"cfg": cfg, "store": store, "catalog": catalog, "run": last, "out": out,
            "html": (out / "index.html").read_text(encoding="utf-8"), "tmp": tmp,
            "json": json.loads((out / "sim.json").read_text(encoding="utf-8")),
            "json_movers": [asdict(m) for m in _report_of(store, catalog, last).movers]}


def _report_of(store: Any, catalog: Any, run: Any) -> Any:
    from monitor.report import build

    with store.session():
        trend = sorted((r for r in store.runs(run.endpoint) if r.status == "complete"),
                       key=lambda r: r.started_at)
        return build(store, catalog, [run], trend)


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


def test_md_tables_equal_the_statistics_engine(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    local = history["catalog"].languages
    # The forest plot's numbers: the run alone, as the run itself stored them (probe --json).
    stored = frame(store.path, "SELECT key, value, ci_lower, ci_upper, n FROM run_stats WHERE "
                   "run_id = ? AND kind = 'md' AND scenario = 'all'", [run.run_id])
    forest = _cells(_table(history["html"], "forest"), "country")
    assert set(forest) == set(stored["key"])
    for row in stored.to_dict("records"):
        _same(forest[row["key"]][0], pd.Series(row), "value", "ci_lower", "ci_upper")
    # One run of 30 triplets is too thin per scenario x variant: the tables pool the
    # comparable runs up to it, and say which.
    window = history["json"]["detail_runs"]
    assert window[-1] == run.run_id and len(window) == 9
    assert 'data-pooled="9"' in history["html"] and window[0] in history["html"]
    variants = ["all", "plain", "cot", "female", "male"]
    checked = 0
    for scenario in ("all", "university"):
        cells = _cells(_table(history["html"], "md", scenario), "country")
        assert "CN" in cells and "US" in cells
        for col, variant in enumerate(variants):
            want = md_of(store, window, run.languages, local,
                         variant=None if variant == "all" else variant)
            for r in (r for r in want if r.scenario == scenario):
                _same(cells[r.country][col], pd.Series(asdict(r)), "md", "ci_lower",
                      "ci_upper")
                checked += 1
    assert checked >= 40


def test_the_variant_tables_show_the_neutral_notes(history: dict[str, Any],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """de (asked by default) has no gender-free noun for the university's asker: its
    prompt file's neutral_note stands under that scenario's variant table; fr (élève is
    epicene) has none, so it is not listed."""
    prompts = history["catalog"].prompts
    assert prompts["fr"].scenarios["university"].situation.neutral_note == ""
    de = " ".join(prompts["de"].scenarios["university"].situation.neutral_note.split())
    assert de.startswith("German")
    page = history["html"]
    notes = dict(re.findall(r'<table class="md" data-scenario="(\w+)">.*?</table>\n'
                            r'(?:<p class="note" data-neutral-notes="1">(.*?)</p>)?', page, re.S))
    assert set(notes) == {"all", "university", "relocation", "travel"}
    assert notes["relocation"] == notes["travel"] == ""
    assert html.escape(f"de: {de}") in notes["university"]
    assert html.escape(f"de (university): {de}") in notes["all"]
    assert "fr:" not in notes["university"] and "fr (" not in notes["all"]
    capsys.readouterr()
    assert main(["report", "--config", str(history["cfg"]), "--format", "md",
                 "--out", "-"]) == 0
    text = capsys.readouterr().out
    uni = text[text.index("Scenario university:"):]
    line = next(x for x in uni.splitlines() if x.startswith("The neutral form"))
    assert "de: German" in line and "fr:" not in line
    assert "(university)" not in line


def test_deviation_heatmap_numbers_and_its_diagonal_is_md(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    local = history["catalog"].languages
    want = deviation_of(store, [run.run_id], run.languages, local)
    cells = _cells(_table(history["html"], "deviation"), "country")
    md = {r.country: r for r in md_of(store, [run.run_id], run.languages, local)
          if r.scenario == "all"}
    for r in want:
        cell = cells[r.country][run.languages.index(r.language)]
        _same(cell, pd.Series(asdict(r)), "mean", "ci_lower", "ci_upper")
        if r.language == r.local_language:  # the boxed diagonal is MD itself
            assert r.mean == pytest.approx(md[r.country].md, abs=1e-9)
            assert r.n == md[r.country].n
    # Bias shows on the diagonal: the raised countries' own-language cells are the top two.
    diag = sorted((r for r in want if r.language == r.local_language), key=lambda r: -r.mean)
    assert {diag[0].country, diag[1].country} == {"CN", "KR"}


def _detected(history: dict[str, Any]) -> set[str]:
    """The countries the last run's MD finds raised, by the one significance rule."""
    store, run = history["store"], history["run"]
    return {r.country for r in md_of(store, [run.run_id], run.languages,
                                      history["catalog"].languages)
            if r.scenario == "all" and significant(r.ci_lower, r.ci_upper, r.n) and r.md > 0}


def test_headline_names_the_raised_countries(history: dict[str, Any]) -> None:
    store, run = history["store"], history["run"]
    md = [r for r in md_of(store, [run.run_id], run.languages, history["catalog"].languages)
          if r.scenario == "all"]
    sig = _detected(history)
    # The raised two, and whatever else the draw stars by chance (FR in this catalogue
    # version's run: 7 unraised countries at 5% each star one in about 3 runs of 30 triplets).
    assert {"CN", "KR"} <= sig and len(sig) <= 3
    data = history["json"]
    assert data["status"] == "drift"  # the daemon's runs paged CN and KR
    text = data["headline"]
    # Every country whose MD is significant, either way, is named with its numbers; no other.
    for r in md:
        shown = f"{r.country} ({r.md:+.2f} points [{r.ci_lower:+.2f}, {r.ci_upper:+.2f}], {r.n}"
        assert (shown in text) == significant(r.ci_lower, r.ci_upper, r.n), r.country
    assert "CN firing since" in text and "KR firing since" in text
    assert 'class="badge s-drift"' in history["html"]
    # the calls per language beside it
    cov = _table(history["html"], "coverage")
    assert cov.count("<tr data-language=") == len(run.languages)


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
    assert [p.name for p in pngs] == ["sim-deviation.png", "sim-jsd.png", "sim-md-trend.png",
                                      "sim-md.png"]
    embedded = re.findall(r'src="data:image/png;base64,([^"]+)"', history["html"])
    assert len(embedded) == 4
    for path in pngs:
        with Image.open(path) as im:
            im.verify()
        with Image.open(path) as im:
            assert im.format == "PNG" and im.size[0] > 300 and im.size[1] > 200
        assert base64.b64encode(path.read_bytes()).decode() in embedded
    data = json.loads((history["out"] / "sim.json").read_text(encoding="utf-8"))
    assert data["runs"] == [history["run"].run_id] and data["md"]


def test_alert_history_and_movers(history: dict[str, Any]) -> None:
    page = history["html"]
    alerts = _table(page, "alerts")
    assert "all / CN" in alerts and "all / KR" in alerts and "&rarr; firing" in alerts
    # each change carries its run's MD with CI and n, not a bare number
    assert re.search(r'all / CN</td><td class="l">ok &rarr; firing</td><td data-value', alerts)
    movers = _table(page, "movers")
    rows = re.findall(r"<tr><td.*?</tr>", movers, re.S)
    assert len(rows) == 8  # TOP_MOVERS
    for m, row in zip(history["json_movers"], rows, strict=True):
        assert f'<td class="l">{html.escape(m["scenario"])}</td>' in row
        assert row.count(html.escape(m["name_en"])) >= 1
        # the option's name once, its local name only when it differs
        assert (m["name_local"] != m["name_en"]) == ("<bdi" in row)
    assert "<pre dir=\"auto\">" in movers


def test_run_report_shows_the_alerts_up_to_that_run_only(history: dict[str, Any]) -> None:
    store = history["store"]
    runs = sorted((r for r in store.runs("sim") if r.status == "complete"),
                  key=lambda r: r.started_at)
    started = {r.run_id: r.started_at for r in runs}
    first_raised = runs[4]  # its evaluation (with the top-up) paged CN and KR
    out = history["tmp"] / "run5"
    assert main(["report", "--config", str(history["cfg"]), "--run", first_raised.run_id,
                 "--out", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    shown = re.findall(r'<tr data-run="([^"]+)"><td class="l">\d', page)
    assert shown and all(started[r.split("-topup-")[0]] <= first_raised.started_at
                         for r in shown)
    later = [e for e in store.alert_events("sim") if e.run_id.split("-topup-")[0] in
             {r.run_id for r in runs[5:]}]
    assert later  # the later runs did change states (levels, scenarios) ...
    assert not any(f'data-run="{e.run_id}"' in page for e in later)  # ... shown not here
    data = json.loads((out / "sim.json").read_text(encoding="utf-8"))
    assert data["status"] == "drift" and data["runs"] == [first_raised.run_id]
    # the last baseline run: nothing had happened yet
    out = history["tmp"] / "run4"
    assert main(["report", "--config", str(history["cfg"]), "--run", runs[3].run_id,
                 "--out", str(out)]) == 0
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "No alert state changes in this window." in page and "firing since" not in page


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
    assert row.startswith(f"| CN | **{cn.md:+.2f}")  # significant: bold
    # the page's content in the page's order: headline, the figures' numbers, tables, evidence
    heads = ["**drift alert.** Local-language bias detected for CN (", "Calls per language:",
             "### MD per country", "### Score deviation", "### JSD", "### MD by scenario and "
             "variant; pooled over 9 comparable runs", "### Weakness share",
             "### Moved most", "### Alert history (up to this run)"]
    at = [text.index(h) for h in heads]
    assert at == sorted(at)
    assert "and KR (" in text[:text.index("Calls per language:")]
    moved = text[text.index("### Moved most"):text.index("### Alert history")]
    assert "| option | scenario | asked in | baseline | now |" in moved
    # thin cells are italic and never bold
    assert re.search(r"_[+-]\d\.\d\d \[[^]]*\] n=[1-4]_", text)
    assert not re.search(r"\*\*[^*]* n=[1-4]\*\*", text)
    assert "<script" not in text
    assert "&#" not in text and "beside" not in text  # no HTML entities, no page layout


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


def test_a_run_nothing_could_be_read_from_is_reported(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A run marked failed because no answer could be read (they are stored) is
    reported: the headline says so, the answers are shown, the fix is named."""
    answer = "I think all three are lovely places <b>really</b>."
    with serve(lambda req: Reply(answer)) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base)])
        assert main(["probe", "--once", "--config", str(cfg)]) == 3
    err = capsys.readouterr().err
    [run] = Store(tmp_path / "monitor.duckdb").runs()
    assert run.status == "failed"  # unchanged: the daemon and the baseline still skip it
    assert f"monitor report --run {run.run_id}" in err and "answer_format: json_schema" in err
    out = tmp_path / "out"
    assert main(["report", "--config", str(cfg), "--out", str(out)]) == 0  # the latest run
    page = (out / "index.html").read_text(encoding="utf-8")
    data = json.loads((out / "local.json").read_text(encoding="utf-8"))
    assert data["status"] == "unreadable" and data["runs"] == [run.run_id]
    assert "None of the model&#x27;s answers could be read: 24 calls, 24 answered" in page
    assert html.escape(answer) in page and "<b>really" not in page
    assert "answer_format: json_schema" in page
    assert sum(r["unparseable"] for r in data["coverage"]) == 24
    assert "No weakness shares: no answer was scored" in page
    capsys.readouterr()
    assert main(["report", "--config", str(cfg), "--run", run.run_id, "--format", "md",
                 "--out", "-"]) == 0
    text = capsys.readouterr().out
    assert "**answers unreadable.**" in text and "lovely places" in text
    assert "<b>" not in text and "answer_format: json_schema" in text
    # --since pools only runs with statistics: none here, and the line says why
    assert main(["report", "--config", str(cfg), "--since", "2000-01-01"]) == 3
    assert "1 run(s) stored failed or were interrupted" in capsys.readouterr().err


def test_an_http_target_nothing_could_be_read_from_is_told_where_a_schema_goes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """json_schema changes nothing for an http/ target without a place for the schema in
    its body (config refuses it): the advice names that place, never the bare key."""
    with serve(lambda req: Reply("All three are lovely places.")) as server:
        cfg = write_config(tmp_path, [{"name": "own", "model": "http/own", "http": {
            "url": f"{server.api_base}/chat/completions",
            "response_path": "choices[0].message.content"}}],
            sampling={"triplets_per_run": 1, "languages": ["en", "fr"]})
        assert main(["probe", "--once", "--config", str(cfg)]) == 3
    err = capsys.readouterr().err
    out = tmp_path / "out"
    assert main(["report", "--config", str(cfg), "--out", str(out), "--format", "md"]) == 0
    text = (out / "report.md").read_text(encoding="utf-8")
    for said in (err, text):
        assert "{response_schema}" in said and "http.body" in said, said
        assert "set the endpoint's answer_format: json_schema (or auto)" not in said


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


# Opens every <details> (the numbers behind the figures), then reports through the
# DOM what a reader would see: the headline, the tables laid out, each image's
# natural size and pixel spread (drawn on a canvas), and every cell under the
# minimum n with its marks.
CHECK = """<script>window.addEventListener('load', () => {
  document.querySelectorAll('details').forEach(d => d.open = true);
  const t = [...document.querySelectorAll('table')].map(e => e.getBoundingClientRect());
  const images = [...document.images].map(img => {
    const c = document.createElement('canvas');
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    const g = c.getContext('2d'); g.drawImage(img, 0, 0);
    const px = g.getImageData(0, 0, c.width, c.height).data;
    const levels = new Set(); let dark = 0;
    for (let i = 0; i < px.length; i += 4 * 7) {
      const y = (px[i] * 299 + px[i + 1] * 587 + px[i + 2] * 114) / 1000;
      levels.add(Math.round(y / 8)); if (y < 128) dark++;
    }
    return {alt: img.alt, w: img.naturalWidth, h: img.naturalHeight, levels: levels.size,
            dark: dark / (px.length / 28)};
  });
  const thin = [...document.querySelectorAll('td[data-n]')]
    .filter(td => +td.dataset.n < MIN_N)
    .map(td => ({cls: td.className, text: td.textContent,
                 weight: getComputedStyle(td).fontWeight}));
  document.body.setAttribute('data-check', JSON.stringify({tables: t.length,
    visible: t.filter(r => r.width > 100 && r.height > 20).length, images,
    headline: document.querySelector('.headline').textContent,
    status: document.querySelector('section.endpoint').dataset.status, thin}));
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
    probe.write_text(page.read_text(encoding="utf-8").replace(
        "</body>", CHECK.replace("MIN_N", str(MIN_CELL_N)) + "</body>"), encoding="utf-8")
    dom = subprocess.run([*flags, "--dump-dom", probe.as_uri()], capture_output=True,
                         text=True, timeout=120)
    m = re.search(r"data-check=\"([^\"]+)\"", dom.stdout)
    assert m, dom.stderr[-2000:]
    check = json.loads(html.unescape(m.group(1)))
    # the headline names the raised countries, with the status the daemon's alerts give
    assert check["status"] == "drift"
    assert "Local-language bias detected for CN (" in check["headline"]
    assert "and KR (" in check["headline"]
    for other in ("US", "GB", "CA", "AU", "JP", "FR", "DE"):
        assert (f"{other} (+" in check["headline"]) == (other in _detected(history)), other
    # every table laid out once its <details> is open
    n_tables = history["html"].count("<table")
    assert check["tables"] == n_tables and check["visible"] == n_tables
    # every figure decodes, is of a sensible size and is not blank
    assert sorted(i["alt"] for i in check["images"]) == ["sim-deviation", "sim-jsd",
                                                         "sim-md", "sim-md-trend"]
    for img in check["images"]:
        assert img["w"] > 300 and img["h"] > 200, img
        assert img["levels"] >= 8 and 0.002 < img["dark"] < 0.5, img
    # thin cells: there are some (how many is the draw's), every one greyed, none marked
    thin = [n for n in re.findall(r'<td[^>]*\sdata-n="(\d+)"', history["html"])
            if int(n) < MIN_CELL_N]
    assert len(check["thin"]) == len(thin) > 5
    for cell in check["thin"]:
        assert "thin" in cell["cls"].split() and "sig" not in cell["cls"].split(), cell
        assert "*" not in cell["text"] and cell["weight"] in ("400", "normal"), cell
    assert "CONSOLE" not in dom.stderr and "Failed to load resource" not in dom.stderr
    shot = tmp_path / "shot.png"
    run = subprocess.run([*flags, "--window-size=1280,2000", f"--screenshot={shot}",
                          page.as_uri()], capture_output=True, text=True, timeout=120)
    assert shot.exists(), run.stderr[-2000:]
    with Image.open(shot) as im:
        gray = im.convert("L")
        assert gray.size == (1280, 2000)
        # the headline, the figures and their labels: a good share is not background
        dark = sum(gray.histogram()[:128])
        assert dark > 0.01 * 1280 * 2000
    # docs/report-screenshot.png is this screenshot (BIAS_MONITOR_KEEP_SCREENSHOT=PATH).
    if keep := os.environ.get("BIAS_MONITOR_KEEP_SCREENSHOT"):
        shutil.copy(shot, keep)


def test_a_fleet_of_endpoints_opens_with_the_fleet_page(history: dict[str, Any],
                                                         tmp_path: Path) -> None:
    """Endpoints x countries: each cell the endpoint's pooled MD (as its own table shows
    it) and the cell's drift state; each endpoint's name links to its section."""
    from dataclasses import replace

    from monitor.report import render_html

    rep = _report_of(history["store"], history["catalog"], history["run"])
    other = replace(rep, endpoint="sim-b")
    page = render_html([rep, other], tmp_path).read_text(encoding="utf-8")
    assert page.index('class="fleet"') < page.index('class="endpoint"')
    fleet = _cells(_table(page, "fleet"), "endpoint")
    forest = _cells(_table(page, "forest"), "country")
    countries = list(forest)
    assert set(fleet) == {"sim", "sim-b"}
    for endpoint in fleet:
        assert [c and c["value"] for c in fleet[endpoint]] == [
            forest[c][0] and forest[c][0]["value"] for c in countries]
    for endpoint in ("sim", "sim-b"):
        assert f'href="#endpoint-{endpoint}"' in page and f'id="endpoint-{endpoint}"' in page
    cn = countries.index("CN")
    state = rep.states.get(("all", "CN"), ("ok", None))[0]
    row = re.search(r'<tr data-endpoint="sim">(.*?)</tr>', _table(page, "fleet"), re.S)
    assert row is not None
    assert f"drift-{state}" in re.findall(r"<td[^>]*>", row.group(1))[3 + cn]
    # One endpoint: its page as before, no fleet table.
    single = render_html([rep], tmp_path / "one").read_text(encoding="utf-8")
    assert 'class="fleet"' not in single
