"""The Grafana dashboard queries only what the exporter really emits.

Every PromQL expression in dashboards/grafana/bias-monitor.json is checked against the
exporter's own output: a fully filled MetricsState rendered by make_registry + render and
parsed back with prometheus_client's parser, the way Prometheus reads it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.serve.exporter import make_registry, render
from monitor.serve.metrics import LATENCY_BUCKETS, Snapshot
from tests.test_exporter import filled_state

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "grafana" / "bias-monitor.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
FILTER_VARS = ("endpoint", "scenario", "country", "language")

# The contract's metrics as Prometheus stores them (counters with _total, the histogram
# through its buckets); each must be queried by some panel.
CONTRACT_SERIES = (
    "bias_monitor_md_points",
    "bias_monitor_md_ci_lower_points",
    "bias_monitor_md_ci_upper_points",
    "bias_monitor_md_drift_points",
    "bias_monitor_jsd_bits",
    "bias_monitor_alert_state",
    "bias_monitor_md_level",
    "bias_monitor_last_run_timestamp_seconds",
    "bias_monitor_last_run_success",
    "bias_monitor_coverage_ratio",
    "bias_monitor_probes_total",
    "bias_monitor_probe_latency_seconds_bucket",
    "bias_monitor_tokens_total",
    "bias_monitor_cost_usd_total",
    "bias_monitor_weakness_share",
    "bias_monitor_jsd_shift_bits",
    "bias_monitor_jsd_shift_ci_lower_bits",
    "bias_monitor_jsd_shift_ci_upper_bits",
    "bias_monitor_jsd_shape_changed",
    # exported beyond the contract, shown as health stats
    "bias_monitor_baseline_comparable",
    "bias_monitor_baseline_present",
    "bias_monitor_md_triplets",
    "bias_monitor_budget_exhausted",
    "bias_monitor_run_failures_total",
)

METRIC = re.compile(r"\bbias_monitor_[a-z_]+")
SELECTOR = re.compile(r"\b(bias_monitor_[a-z_]+)\s*\{([^}]*)\}")
MATCHER = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
LABEL_VALUES = re.compile(r"^label_values\(\s*(bias_monitor_[a-z_]+)\s*,\s*([a-z_]+)\s*\)$")
VARIABLE = re.compile(r"\$(?:\{(\w+)(?::\w+)?\}|(\w+))")
BUILTIN_VARS = {"__rate_interval", "__interval", "__range", "__range_s"}

A, B = "gpt4o-prod", "claude-prod"


# -- the exporter's actual output -------------------------------------------------------------


@pytest.fixture(scope="module")
def exported() -> dict[str, set[str]]:
    """Sample name -> the label names its samples carry."""
    state = filled_state()
    snap = state.snapshot()
    assert all(getattr(snap, f.name) for f in fields(Snapshot)), "fill every snapshot field"
    assert len(snap.latency[A][0]) == len(LATENCY_BUCKETS)
    text = render(make_registry(state)).decode()
    labels: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        assert family.samples, f"{family.name} has no sample: fill it in filled_state()"
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)
    return labels


# -- the dashboard --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return data


def all_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, rows' nested (collapsed) panels included, rows themselves too."""
    out: list[dict[str, Any]] = []
    for panel in dashboard["panels"]:
        out.append(panel)
        out.extend(panel.get("panels", []))
    return out


def query_panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in all_panels(dashboard) if p["type"] != "row"]


def exprs(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in query_panels(dashboard) for t in p.get("targets", [])
            if t.get("expr")]


def variables(dashboard: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard["templating"]["list"]}


def walk(node: Any, path: str = "$") -> Iterator[tuple[str, str, Any]]:
    """(path, key, value) for every key of every object in the JSON tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, key, value
            yield from walk(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, item in enumerate(node):
            yield from walk(item, f"{path}[{i}]")


# -- structure ------------------------------------------------------------------------------


def test_dashboard_is_importable(dashboard: dict[str, Any]) -> None:
    assert dashboard["schemaVersion"] >= 39
    assert "id" not in dashboard  # Grafana assigns it; a fixed id breaks import elsewhere
    assert dashboard["uid"] == "bias-monitor"
    assert dashboard["title"] == "bias-monitor: local-language bias"
    assert dashboard["tags"]
    assert dashboard["time"] == {"from": "now-7d", "to": "now"}
    assert dashboard["refresh"] == "1m"
    ids = [p["id"] for p in all_panels(dashboard)]
    assert len(ids) == len(set(ids)), "panel ids must be unique"


def test_datasource_variable(dashboard: dict[str, Any]) -> None:
    ds = variables(dashboard)["datasource"]
    assert (ds["type"], ds["query"]) == ("datasource", "prometheus")


def test_filter_variables(dashboard: dict[str, Any]) -> None:
    found = variables(dashboard)
    for name in FILTER_VARS:
        var = found[name]
        assert var["type"] == "query"
        assert var["multi"] and var["includeAll"], name
        assert var["datasource"] == DATASOURCE
    assert found["scenario"]["current"]["value"] in ("all", ["all"])


def test_every_panel_queries_the_datasource_variable(dashboard: dict[str, Any]) -> None:
    panels = query_panels(dashboard)
    assert any(p.get("gridPos", {}).get("y", 0) > 0 for p in panels)
    nested = [p for row in dashboard["panels"] for p in row.get("panels", [])]
    assert nested, "the collapsed row's panels are checked too"
    for panel in panels:
        title = panel.get("title")
        assert panel["datasource"] == DATASOURCE, title
        assert panel.get("description"), f"{title}: no description"
        assert {"x", "y", "w", "h"} <= set(panel["gridPos"]), title
        targets = [t for t in panel.get("targets", []) if t.get("expr")]
        assert targets, f"{title}: no target with an expr"
        for target in panel["targets"]:
            assert target["datasource"] == DATASOURCE, title


def test_panels_do_not_overlap(dashboard: dict[str, Any]) -> None:
    cells: dict[tuple[int, int], str] = {}
    for panel in all_panels(dashboard):
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"{panel['title']} overlaps {cells[(x, y)]}"
                cells[(x, y)] = panel["title"]


def test_no_hard_coded_datasource_uid(dashboard: dict[str, Any]) -> None:
    for path, key, value in walk(dashboard):
        if key == "datasource":
            assert isinstance(value, dict), f"{path}: datasource must be an object"
            assert value == DATASOURCE, f"{path}: {value}"
        if key == "uid" and path != "$":
            assert value == "${datasource}", f"{path}.uid = {value!r}"


def test_alert_state_timeline_maps_states(dashboard: dict[str, Any]) -> None:
    timelines = [p for p in query_panels(dashboard) if p["type"] == "state-timeline"
                 and any("bias_monitor_alert_state" in t["expr"] for t in p["targets"])]
    assert timelines
    options = timelines[0]["fieldConfig"]["defaults"]["mappings"][0]["options"]
    assert {k: (v["text"], v["color"]) for k, v in options.items()} == {
        "0": ("ok", "green"), "1": ("pending", "yellow"), "2": ("firing", "red")}


def test_thin_md_cells_are_greyed_out(dashboard: dict[str, Any]) -> None:
    """A cell of fewer than 5 triplets is never significant (bias_monitor_md_triplets'
    HELP): the MD panel draws those cells apart, grey and dotted, and the others as usual."""
    (panel,) = [p for p in query_panels(dashboard) if p["title"] == "MD per country (95% CI)"]
    by_ref = {t["refId"]: t["expr"] for t in panel["targets"]}
    thin = re.compile(r"on \(endpoint, scenario, country\) bias_monitor_md_triplets\{[^}]*\} < 5$")
    solid = [r for r, e in by_ref.items() if e.startswith("bias_monitor_md_points")
             and " unless " in e and thin.search(e)]
    grey = [r for r, e in by_ref.items() if e.startswith("bias_monitor_md_points")
            and " and " in e and thin.search(e)]
    assert solid and grey, by_ref
    overrides = {o["matcher"]["options"]: {p["id"]: p["value"] for p in o["properties"]}
                 for o in panel["fieldConfig"]["overrides"] if o["matcher"]["id"] == "byFrameRefID"}
    assert solid[0] not in overrides  # the palette colours, as for every other cell
    style = overrides[grey[0]]
    assert style["color"]["mode"] == "fixed"
    assert style["color"]["fixedColor"].lower() in {"#8e8e8e", "grey", "gray"}
    assert style["custom.lineStyle"]["fill"] == "dot"
    assert "n < 5" in next(t["legendFormat"] for t in panel["targets"] if t["refId"] == grey[0])
    assert "bias_monitor_md_triplets" in panel["description"]


# -- the queries against the exporter's output ---------------------------------------------------


def test_every_metric_queried_is_exported(dashboard: dict[str, Any],
                                          exported: dict[str, set[str]]) -> None:
    used = {name for expr in exprs(dashboard) for name in METRIC.findall(expr)}
    assert used
    assert used <= set(exported), f"not exported: {sorted(used - set(exported))}"


def test_every_contract_metric_has_a_panel(dashboard: dict[str, Any],
                                           exported: dict[str, set[str]]) -> None:
    assert set(CONTRACT_SERIES) <= set(exported)
    used = {name for expr in exprs(dashboard) for name in METRIC.findall(expr)}
    assert set(CONTRACT_SERIES) <= used, f"no panel for {sorted(set(CONTRACT_SERIES) - used)}"


def test_label_matchers_name_labels_of_their_metric(dashboard: dict[str, Any],
                                                    exported: dict[str, set[str]]) -> None:
    checked = 0
    for expr in exprs(dashboard):
        for metric, inside in SELECTOR.findall(expr):
            matched = {label for label, _, _ in MATCHER.findall(inside)}
            assert matched <= exported[metric], f"{metric} has no {matched - exported[metric]}"
            # the dashboard's filters apply wherever the metric has the label
            for var in FILTER_VARS:
                if var in exported[metric]:
                    assert (var, "=~", f"${var}") in MATCHER.findall(inside), \
                        f"{metric} in {expr!r} is not filtered by ${var}"
            checked += 1
    assert checked >= len(CONTRACT_SERIES)


def test_grouping_labels_exist_on_every_metric_of_the_expr(
        dashboard: dict[str, Any], exported: dict[str, set[str]]) -> None:
    grouped = 0
    for expr in exprs(dashboard):
        metrics = set(METRIC.findall(expr))
        for clause in GROUPING.findall(expr):
            for label in filter(None, (x.strip() for x in clause.split(","))):
                for metric in metrics:
                    assert label in exported[metric], f"{metric} has no {label!r} ({expr!r})"
                grouped += 1
    assert grouped


def test_latency_quantiles_use_the_histogram_buckets(dashboard: dict[str, Any]) -> None:
    latency = [e for e in exprs(dashboard) if "bias_monitor_probe_latency_seconds" in e]
    assert latency
    for expr in latency:
        assert "histogram_quantile(" in expr
        assert "bias_monitor_probe_latency_seconds_bucket" in expr
        assert re.search(r"by \(le, endpoint\)", expr), expr


def test_template_queries_name_exported_metric_labels(dashboard: dict[str, Any],
                                                      exported: dict[str, set[str]]) -> None:
    for name in FILTER_VARS:
        var = variables(dashboard)[name]
        query = var["query"]["query"] if isinstance(var["query"], dict) else var["query"]
        assert var.get("definition", query) == query, f"${name}: definition differs"
        match = LABEL_VALUES.match(query)
        assert match, f"${name}: {query!r} is not label_values(metric, label)"
        metric, label = match.groups()
        assert label == name
        assert metric in exported, f"${name}: {metric} is not exported"
        assert label in exported[metric], f"${name}: {metric} has no label {label!r}"


def test_exprs_use_only_defined_variables(dashboard: dict[str, Any]) -> None:
    defined = set(variables(dashboard)) | BUILTIN_VARS
    for expr in exprs(dashboard):
        for braced, bare in VARIABLE.findall(expr):
            assert (braced or bare) in defined, f"undefined variable in {expr!r}"


def balanced(expr: str) -> bool:
    """Brackets pair up outside string literals and every string is closed."""
    pairs = {")": "(", "]": "[", "}": "{"}
    stack: list[str] = []
    quote: str | None = None
    escaped = False
    for ch in VARIABLE.sub("x", expr):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'`":
            quote = ch
        elif ch in "([{":
            stack.append(ch)
        elif ch in pairs and (not stack or stack.pop() != pairs[ch]):
            return False
    return not stack and quote is None


@pytest.mark.parametrize(("expr", "ok"), [
    ('sum by (le) (rate(m{a=~"$a"}[$__rate_interval]))', True),
    ('label_join(m{a="x)"}, "c", " / ", "a")', True),
    ("sum(rate(m[5m])", False),
    ('m{a="x}', False),
    ("m]", False),
])
def test_balanced_checker(expr: str, ok: bool) -> None:
    assert balanced(expr) is ok


def test_exprs_are_balanced(dashboard: dict[str, Any]) -> None:
    for expr in exprs(dashboard):
        assert balanced(expr), expr


def test_every_expr_parses_as_promql(dashboard: dict[str, Any], tmp_path: Path) -> None:
    # promtool has no bare-expression check, but it parses the exprs of rules.
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI"):
            pytest.fail("promtool missing: .ci/run installs the Debian package prometheus")
        pytest.skip("promtool not installed (Debian package prometheus)")
    concrete = [re.sub(r"\$\{?(__rate_interval|__interval|__range|window)\}?", "1h", e)
                for e in exprs(dashboard)]
    concrete = [re.sub(r"\$\{?[A-Za-z_]+(:[a-z]+)?\}?", ".*", e) for e in concrete]
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": e} for i, e in enumerate(concrete)]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(json.dumps(rules))
    out = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
