"""Prometheus alerting: the rules pass promtool's checks and unit tests, every alert
links to its runbook section, the rules only use metrics and labels the exporter emits,
and a real Prometheus scrapes a real `monitor run` and loads the rules.

promtool and prometheus come from the Debian package `prometheus` (.ci/run installs
it). Without them these tests skip, except under CI (env CI set), where they fail.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import Metrics
from monitor.serve.exporter import make_registry, render
from tests.support.helpers import openai_endpoint, write_config
from tests.support.openai import Reply, Request, options_in, serve
from tests.support.process import daemon, free_port, get, wait_until
from tests.test_exporter import filled_state

ROOT = Path(__file__).resolve().parent.parent
PROM = ROOT / "dashboards" / "prometheus"
ALERTS = PROM / "alerts.yml"
ALERTS_TEST = PROM / "alerts_test.yml"
SCRAPE = PROM / "scrape.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_URL = "https://github.com/bias-monitor/bias-monitor/blob/main/docs/runbook.md#"
JOB = "bias-monitor"
TARGET_LABELS = {"job", "instance"}  # added by Prometheus when it scrapes

# alert -> (severity, for); BiasMonitorRunStale has two rules (cause label)
ALERTS_WANTED: dict[str, set[tuple[str, str | None]]] = {
    "BiasMonitorLevelBeyondThreshold": {("info", "1m")},
    "BiasMonitorBiasFiring": {("page", "1m")},
    "BiasMonitorBaselineNotComparable": {("warning", "1h")},
    "BiasMonitorDown": {("warning", "5m")},
    "BiasMonitorRunStale": {("warning", "5m"), ("warning", "1h")},
    "BiasMonitorLastRunFailed": {("warning", "15m")},
    "BiasMonitorCoverageDropping": {("warning", "30m")},
    "BiasMonitorFailuresRising": {("warning", "30m")},
    "BiasMonitorBudgetHit": {("warning", None)},
}


def _tool(name: str) -> str:
    path = shutil.which(name) or shutil.which(name, path="/usr/bin")  # Debian's place
    if path is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed; CI needs the Debian package `prometheus` "
                        "(see .ci/run)")
        pytest.skip(f"{name} is not installed (Debian package `prometheus`)")
    return path


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_tool("promtool"), *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)


def _rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def _slug(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(markdown: str) -> set[str]:
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*$", markdown,
                                                   re.MULTILINE)}


# -- promtool ------------------------------------------------------------------------------


def test_promtool_check_rules_passes() -> None:
    out = _promtool("check", "rules", "dashboards/prometheus/alerts.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in out.stdout


def test_promtool_unit_tests_pass() -> None:
    out = _promtool("test", "rules", "dashboards/prometheus/alerts_test.yml")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_alert_has_a_firing_case_in_the_unit_tests() -> None:
    doc = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))
    assert doc["rule_files"] == ["alerts.yml"]
    fired: set[str] = set()
    quiet: set[str] = set()
    for case in doc["tests"]:
        for check in case["alert_rule_test"]:
            (fired if check["exp_alerts"] else quiet).add(check["alertname"])
            for alert in check["exp_alerts"]:
                assert alert["exp_labels"]["severity"]
                assert set(alert["exp_annotations"]) >= {"summary", "description",
                                                         "runbook_url"}
    assert fired == set(ALERTS_WANTED)
    assert quiet == set(ALERTS_WANTED)


def test_scrape_config_with_the_rules_passes_promtool_check_config(tmp_path: Path) -> None:
    scrape = yaml.safe_load(SCRAPE.read_text(encoding="utf-8"))
    (job,) = scrape["scrape_configs"]
    assert job["job_name"] == JOB
    assert job["scrape_interval"] == "30s"
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"] == [{"targets": [f"localhost:{Metrics().port}"]}]
    config = {"global": {"scrape_interval": "1m", "evaluation_interval": "1m"},
              "rule_files": [str(ALERTS)], "scrape_configs": scrape["scrape_configs"]}
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    out = _promtool("check", "config", str(path))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 1 rule files found" in out.stdout
    assert f"SUCCESS: {len(_rules())} rules found" in out.stdout


# -- the rules themselves --------------------------------------------------------------------


def _seconds(duration: str) -> int:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    parts = re.fullmatch(r"(?:(\d+)([smhd]))+", duration)
    assert parts, f"unreadable duration {duration!r}"
    return sum(int(n) * units[u] for n, u in re.findall(r"(\d+)([smhd])", duration))


def test_every_scrape_job_has_an_up_and_an_absent_rule_lasting_two_scrapes() -> None:
    """The exporter guidelines: a target that is down (up == 0) and one that is not
    scraped at all (absent) both alert, each only after `for` >= 2 scrape intervals, so
    one missed scrape never pages; for every job of the shipped Prometheus configs."""
    jobs: dict[str, int] = {}
    for path in (SCRAPE, *sorted((ROOT / "deploy" / "prometheus").glob("*.yml"))):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        default = doc.get("global", {}).get("scrape_interval", "1m")  # Prometheus' default
        for job in doc["scrape_configs"]:
            interval = _seconds(job.get("scrape_interval", default))
            jobs[job["job_name"]] = max(jobs.get(job["job_name"], 0), interval)
    assert jobs == {JOB: 30}
    for job, interval in jobs.items():
        matcher = f'job="{job}"'
        up = [r for r in _rules() if re.search(rf"\bup\{{[^}}]*{matcher}", r["expr"])]
        absent = [r for r in _rules() if re.search(rf"\babsent\(\s*\w+\{{[^}}]*{matcher}",
                                                   r["expr"])]
        assert up, f"no up{{{matcher}}} rule"
        assert absent, f"no absent(...{{{matcher}}}) rule"
        for rule in up + absent:
            assert _seconds(rule.get("for", "0s")) >= 2 * interval, \
                f"{rule['alert']}: for {rule.get('for')} < 2 x the {interval}s scrape interval"


def test_alerts_severities_and_durations() -> None:
    got: dict[str, set[tuple[str, str | None]]] = {}
    for rule in _rules():
        assert "record" not in rule
        got.setdefault(rule["alert"], set()).add((rule["labels"]["severity"], rule.get("for")))
    assert got == ALERTS_WANTED


def test_every_alert_has_annotations_and_a_runbook_section() -> None:
    runbook = RUNBOOK.read_text(encoding="utf-8")
    anchors = _anchors(runbook)
    sections = set(re.findall(r"^## (BiasMonitor\w+)\s*$", runbook, re.MULTILINE))
    assert sections == set(ALERTS_WANTED), "one runbook section per alert, named after it"
    for rule in _rules():
        name, ann = rule["alert"], rule["annotations"]
        for key in ("summary", "description", "runbook_url"):
            assert str(ann.get(key, "")).strip(), f"{name}: no {key}"
        assert "{{" in ann["description"], f"{name}: description without $labels/$value"
        url = ann["runbook_url"]
        assert url.startswith(RUNBOOK_URL), url
        anchor = url.removeprefix(RUNBOOK_URL)
        assert anchor == name.lower()
        assert anchor in anchors, f"{name}: no heading for #{anchor} in docs/runbook.md"
    # the runbook's own links to its sections resolve too
    for target in re.findall(r"\]\(#([^)]+)\)", runbook):
        assert target in anchors, f"docs/runbook.md links to missing #{target}"
    assert "127.0.0.1" in runbook and "never" in runbook  # how to expose /metrics safely


def test_rules_use_only_metrics_and_labels_the_exporter_emits() -> None:
    text = render(make_registry(filled_state())).decode()
    labels: dict[str, dict[str, set[str]]] = {}  # sample name -> label -> values
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            for key, value in s.labels.items():
                labels.setdefault(s.name, {}).setdefault(key, set()).add(value)
    every_label = {key for table in labels.values() for key in table} | TARGET_LABELS
    used: set[str] = set()
    for rule in _rules():
        name, expr = rule["alert"], rule["expr"]
        for m in re.finditer(r"\b(bias_monitor_\w+)(?:\{([^}]*)\})?", expr):
            metric, matchers = m.group(1), m.group(2) or ""
            used.add(metric)
            assert metric in labels, f"{name}: {metric} is not emitted by the exporter"
            for key, op, value in re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers):
                if key in TARGET_LABELS:
                    continue
                assert key in labels[metric], f"{name}: {metric} has no label {key}"
                if op == "=":
                    assert value in labels[metric][key], f"{name}: {metric}{{{key}={value!r}}}"
        for group in re.findall(r"\b(?:by|on|ignoring|without)\s*\(([^)]*)\)", expr):
            for key in (k.strip() for k in group.split(",") if k.strip()):
                assert key in every_label, f"{name}: grouping by unknown label {key}"
        for template in rule["annotations"].values():
            for key in re.findall(r"\$labels\.(\w+)", str(template)):
                assert key in every_label, f"{name}: template uses unknown label {key}"
    assert used >= {"bias_monitor_alert_state", "bias_monitor_last_run_timestamp_seconds",
                    "bias_monitor_last_run_success", "bias_monitor_coverage_ratio",
                    "bias_monitor_probes_total", "bias_monitor_budget_exhausted",
                    "bias_monitor_baseline_comparable"}


# -- a real Prometheus scraping a real daemon -----------------------------------------------


def _answer(req: Request) -> Reply:
    names = options_in(req.user)
    return Reply(json.dumps({lab: {"score": 5 + i} for i, lab in enumerate(names)}),
                 delay_s=0.05)


@contextmanager
def _prometheus(config: Path, data: Path, port: int, log: Path) -> Iterator[
        subprocess.Popen[bytes]]:
    with log.open("wb") as fh:
        proc = subprocess.Popen([_tool("prometheus"), f"--config.file={config}",
                                 f"--storage.tsdb.path={data}",
                                 f"--web.listen-address=127.0.0.1:{port}"],
                                stdout=fh, stderr=subprocess.STDOUT)
        try:
            yield proc
        finally:
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def _api(port: int, path: str, **params: str) -> Any:
    """The `data` of a Prometheus HTTP API answer, or None while it is not ready."""
    query = f"?{urllib.parse.urlencode(params)}" if params else ""
    status, body = get(f"http://127.0.0.1:{port}/api/v1/{path}{query}")
    if status != 200:
        return None
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    return answer["data"]


def _until(predicate: Callable[[], bool], timeout: float, what: str, *logs: Path) -> None:
    try:
        wait_until(predicate, timeout, *logs)
    except AssertionError as exc:
        raise AssertionError(f"{what}: {exc}") from None


@pytest.mark.slow
def test_real_prometheus_scrapes_the_daemon_and_loads_the_rules(tmp_path: Path) -> None:
    _tool("prometheus")
    metrics_port, prom_port = free_port(), free_port()
    (job,) = yaml.safe_load(SCRAPE.read_text(encoding="utf-8"))["scrape_configs"]
    job = {**job, "scrape_interval": "1s", "scrape_timeout": "1s",
           "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}
    prom_cfg = tmp_path / "prometheus.yml"
    prom_cfg.write_text(yaml.safe_dump({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(ALERTS)], "scrape_configs": [job]}, sort_keys=False),
        encoding="utf-8")
    groups_in_file = {g["name"]: len(g["rules"]) for g in
                      yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]}
    daemon_log, prom_log = tmp_path / "daemon.log", tmp_path / "prometheus.log"
    logs = (daemon_log, prom_log)

    with serve(_answer) as server:
        cfg = write_config(tmp_path, [openai_endpoint(server.api_base, max_concurrency=2)],
                           schedule={"every": "1h", "cron": None},
                           sampling={"triplets_per_run": 6},
                           metrics={"host": "127.0.0.1", "port": metrics_port})
        with daemon(cfg, daemon_log) as proc, \
                _prometheus(prom_cfg, tmp_path / "tsdb", prom_port, prom_log) as prom:

            def pooled_md() -> list[dict[str, Any]]:
                data = _api(prom_port, "query", query="bias_monitor_md_points")
                return [r for r in (data or {}).get("result", [])
                        if r["metric"].get("scenario") == "all"]

            # the daemon runs once at start (36 calls), Prometheus scrapes every second
            _until(lambda: bool(pooled_md()), 300, "bias_monitor_md_points{scenario='all'}",
                   *logs)
            series = pooled_md()
            assert all(r["metric"]["job"] == JOB and r["metric"]["endpoint"] == "local"
                       for r in series)
            assert {r["metric"]["instance"] for r in series} == {f"127.0.0.1:{metrics_port}"}

            up = _api(prom_port, "query", query=f'up{{job="{JOB}"}} == 1')["result"]
            assert len(up) == 1, up

            def rules() -> list[dict[str, Any]]:
                data = _api(prom_port, "rules")
                return [] if data is None else data["groups"]

            def evaluated() -> bool:
                loaded = rules()
                return bool(loaded) and all(r["health"] != "unknown"
                                            for g in loaded for r in g["rules"])

            _until(evaluated, 120, "every rule evaluated", *logs)
            loaded = rules()
            assert {g["name"]: len(g["rules"]) for g in loaded} == groups_in_file
            assert str(ALERTS) in {g["file"] for g in loaded}
            broken = [(r["name"], r.get("lastError")) for g in loaded for r in g["rules"]
                      if r["health"] != "ok"]
            assert not broken, broken
            # a healthy daemon after one good run: nothing fires
            firing = [a for a in _api(prom_port, "alerts")["alerts"] if a["state"] == "firing"]
            assert not firing, firing

            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0
            prom.terminate()
            assert prom.wait(timeout=30) == 0
