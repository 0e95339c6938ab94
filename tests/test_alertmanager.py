"""The example Alertmanager routes (dashboards/alertmanager/alertmanager.yml):
amtool accepts the file, every alert of the rules goes to the receiver the
file promises, and a real Alertmanager inhibits a bias alert while the run
of its endpoint is stale (amtool's route test does not evaluate inhibition)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "dashboards" / "alertmanager" / "alertmanager.yml"
RULES = ROOT / "dashboards" / "prometheus" / "alerts.yml"
BIAS_ALERTS = {"BiasMonitorBiasFiring", "BiasMonitorLevelBeyondThreshold",
               "BiasMonitorBaselineNotComparable"}


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: apt-get install prometheus-alertmanager (.ci/run does)")
    return path


def routes_test(*labels: str) -> list[str]:
    out = subprocess.run([tool("amtool"), "config", "routes", "test",
                          f"--config.file={CONFIG}", *labels],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_amtool_accepts_the_config() -> None:
    out = subprocess.run([tool("amtool"), "check-config", str(CONFIG)],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS" in out.stdout


def test_every_rule_routes_to_its_receiver() -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    names = {r["alert"] for r in rules}
    assert names >= BIAS_ALERTS  # the route's regex names alerts that exist
    for rule in rules:
        labels = [f"{k}={v}" for k, v in rule.get("labels", {}).items()]
        got = routes_test(f"alertname={rule['alert']}", "job=bias-monitor",
                          "endpoint=simulated-demo", "country=CN", *labels)
        want = "bias" if rule["alert"] in BIAS_ALERTS else "ops"
        assert got == [want], (rule["alert"], got)
    # An alert nobody routed yet (a rule added later) still reaches someone.
    assert routes_test("alertname=SomethingNew") == ["ops"]


def test_amtool_verify_fails_on_a_wrong_receiver() -> None:
    # The routing claim above can fail: amtool's own verification disagrees.
    out = subprocess.run([tool("amtool"), "config", "routes", "test", f"--config.file={CONFIG}",
                          "--verify.receivers=ops", "alertname=BiasMonitorBiasFiring"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode != 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def api(url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        raw = resp.read()
    return json.loads(raw) if raw else None


@pytest.fixture()
def alertmanager(tmp_path: Path) -> Iterator[str]:
    # The real file, its secret paths moved into tmp_path (nothing is sent:
    # the first notification waits for group_wait, past the test's end).
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    for name in ("slack-bias-url", "slack-ops-url"):
        (secrets / name).write_text("http://127.0.0.1:9/unused\n")
    config = tmp_path / "alertmanager.yml"
    config.write_text(CONFIG.read_text().replace("/etc/alertmanager/secrets", str(secrets)))
    port = free_port()
    proc = subprocess.Popen([tool("prometheus-alertmanager"), f"--config.file={config}",
                             f"--storage.path={tmp_path / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address="],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}/api/v2"
    deadline = time.monotonic() + 20
    try:
        while True:
            try:
                api(f"{base}/status")
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
                assert time.monotonic() < deadline, "Alertmanager did not start in 20 s"
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def alert(name: str, **labels: str) -> dict[str, Any]:
    return {"labels": {"alertname": name, "job": "bias-monitor", "instance": "monitor:9464",
                       **labels}}


def statuses(base: str, want: int, settled: str) -> dict[str, dict[str, Any]]:
    """The alerts' statuses once `want` are listed and the alert `settled` (name/endpoint)
    shows as suppressed, or after 20 s: Alertmanager lists an alert as soon as it is
    posted and applies the inhibition rules to it a moment later (under load, later)."""
    deadline = time.monotonic() + 20
    while True:
        got = {f"{a['labels']['alertname']}/{a['labels'].get('endpoint', '')}": a["status"]
               for a in api(f"{base}/alerts")}
        done = len(got) >= want and got.get(settled, {}).get("state") == "suppressed"
        if done or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_a_stale_run_inhibits_the_bias_alerts_of_its_endpoint(alertmanager: str) -> None:
    api(f"{alertmanager}/alerts", [
        alert("BiasMonitorBiasFiring", endpoint="a", country="CN", scenario="all",
              severity="page"),
        alert("BiasMonitorBiasFiring", endpoint="b", country="CN", scenario="all",
              severity="page"),
        alert("BiasMonitorRunStale", endpoint="a", cause="last_run_old", severity="warning"),
    ])
    got = statuses(alertmanager, 3, "BiasMonitorBiasFiring/a")
    assert got["BiasMonitorBiasFiring/a"]["state"] == "suppressed"
    assert got["BiasMonitorBiasFiring/a"]["inhibitedBy"]
    # Another endpoint, still measured, keeps its page; the stale alert pages.
    assert got["BiasMonitorBiasFiring/b"]["state"] == "active"
    assert got["BiasMonitorRunStale/a"]["state"] == "active"


def test_no_run_recorded_inhibits_every_bias_alert_of_the_job(alertmanager: str) -> None:
    api(f"{alertmanager}/alerts", [
        alert("BiasMonitorLevelBeyondThreshold", endpoint="a", country="KR", scenario="all",
              severity="info"),
        {"labels": {"alertname": "BiasMonitorRunStale", "job": "bias-monitor",
                    "cause": "no_run_recorded", "severity": "warning"}},
        alert("BiasMonitorDown", severity="warning"),
    ])
    got = statuses(alertmanager, 3, "BiasMonitorLevelBeyondThreshold/a")
    assert got["BiasMonitorLevelBeyondThreshold/a"]["state"] == "suppressed"
    assert got["BiasMonitorDown/"]["state"] == "active"  # operational alerts are not inhibited
