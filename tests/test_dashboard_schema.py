"""The Grafana dashboard against the types of the Grafana release it is made for.

dashboards/grafana/bias-monitor.json is written out as TypeScript in which each panel
`satisfies` its plugin's Options / FieldConfig from @grafana/schema (pinned in
dashboards/check/package.json) and the whole `satisfies` the schema's Dashboard, then
`tsc --noEmit` checks it (tests/support/grafana_ts.py). The mutation test breaks the
dashboard one way at a time and asserts that the check fails at the broken key, so a
check that stopped looking would fail here too. Every file goes through one tsc run.

tsc comes from `npm ci --prefix dashboards/check` (.ci/run runs it). Without it these
tests skip, except under CI (env CI set), where they fail.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.grafana_ts import CHECK_DIR, PLUGINS, TsError, check, tsc_path, write_ts

ROOT = Path(__file__).resolve().parents[1]
DASHBOARD = ROOT / "dashboards" / "grafana" / "bias-monitor.json"
Dash = dict[str, Any]


def _panel(d: Dash, panel_id: int) -> dict[str, Any]:
    for panel in d["panels"]:
        for p in (panel, *panel.get("panels", [])):
            if p["id"] == panel_id:
                found: dict[str, Any] = p
                return found
    raise KeyError(f"no panel {panel_id} in the dashboard: update the mutation")


def _set(panel_id: int | None, path: str, value: Any) -> Callable[[Dash], None]:
    """A mutation that sets `path` (dot-separated keys and list indexes) of a panel, or of
    the dashboard when panel_id is None; the key before the last must exist."""
    def mutate(d: Dash) -> None:
        node: Any = d if panel_id is None else _panel(d, panel_id)
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value
    return mutate


def _rename(panel_id: int | None, path: str, new: str) -> Callable[[Dash], None]:
    """A mutation that renames the last key of `path`: a misspelt key."""
    def mutate(d: Dash) -> None:
        node: Any = d if panel_id is None else _panel(d, panel_id)
        *parents, last = path.split(".")
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        assert last in node, f"{path} not in panel {panel_id}: update the mutation"
        node[new] = node.pop(last)
    return mutate


# name -> (mutation, the text of the line tsc must point at, or of its message).
# Panels: 2 stat, 9 and 20 timeseries (20 in a collapsed row), 10 table, 13 state-timeline.
MUTATIONS: dict[str, tuple[Callable[[Dash], None], str]] = {
    # wrong enum values
    "stat colorMode enum": (_set(2, "options.colorMode", "backgrnd"), '"colorMode": "backgrnd"'),
    "timeseries legend.displayMode enum": (
        _set(9, "options.legend.displayMode", "tabel"), '"displayMode": "tabel"'),
    "timeseries custom.drawStyle enum": (
        _set(9, "fieldConfig.defaults.custom.drawStyle", "lines"), '"drawStyle": "lines"'),
    "table cellOptions.type enum": (
        _set(10, "fieldConfig.defaults.custom.cellOptions.type", "color-bg"), '"type": "color-bg"'),
    "state-timeline showValue enum": (_set(13, "options.showValue", "sometimes"),
                                      '"showValue": "sometimes"'),
    "value mapping type enum": (_set(13, "fieldConfig.defaults.mappings.0.type", "values"),
                                '"type": "values"'),
    "thresholds mode enum": (_set(2, "fieldConfig.defaults.thresholds.mode", "absolut"),
                             '"mode": "absolut"'),
    "query format enum": (_set(9, "targets.0.format", "timeseries"), '"format": "timeseries"'),
    "dashboard graphTooltip enum": (_set(None, "graphTooltip", 7), '"graphTooltip": 7'),
    # unknown keys
    "timeseries options unknown key": (_rename(9, "options.legend", "legnd"), '"legnd"'),
    "stat options unknown key": (_rename(2, "options.textMode", "textmode"), '"textmode"'),
    "table options unknown key": (_rename(10, "options.showHeader", "showHeaders"),
                                  '"showHeaders"'),
    "timeseries custom unknown key": (
        _rename(9, "fieldConfig.defaults.custom.lineWidth", "lineWidht"), '"lineWidht"'),
    "stat custom key (stat has none)": (
        _set(2, "fieldConfig.defaults.custom", {"lineWidth": 1}), '"lineWidth": 1'),
    "override property unknown id": (
        _set(9, "fieldConfig.overrides.0.properties.0.id", "custom.lineWidht"),
        '"id": "custom.lineWidht"'),
    "nested collapsed-row panel unknown key": (
        _rename(20, "options.tooltip", "toolTip"), '"toolTip"'),
    "query unknown key": (_rename(9, "targets.0.expr", "exp"), '"exp"'),
    "panel unknown key": (_rename(9, "gridPos", "gridpos"), '"gridpos"'),
    "variable unknown key": (_rename(None, "templating.list.1.definition", "definiton"),
                             '"definiton"'),
    # wrong types
    "table showHeader type": (_set(10, "options.showHeader", "yes"), '"showHeader": "yes"'),
    "timeseries custom.lineWidth type": (
        _set(9, "fieldConfig.defaults.custom.lineWidth", "2"), '"lineWidth": "2"'),
    "override property value type": (
        _set(9, "fieldConfig.overrides.0.properties.0.value", "1"),
        '{ id: "custom.lineWidth"; value: string; }'),  # tsc names the property, not the line
    "state-timeline rowHeight type": (_set(13, "options.rowHeight", "0.9"),
                                      '"rowHeight": "0.9"'),
    "field decimals type": (_set(2, "fieldConfig.defaults.decimals", "0"), '"decimals": "0"'),
    "legend.calcs type": (_set(9, "options.legend.calcs", "lastNotNull"),
                          '"calcs": "lastNotNull"'),
    "dashboard schemaVersion type": (_set(None, "schemaVersion", "39"),
                                     '"schemaVersion": "39"'),
}


def _tsc_or_skip() -> None:
    if tsc_path() is None:
        msg = (f"tsc is not installed in {CHECK_DIR.relative_to(ROOT)}: run "
               f"`npm ci --prefix {CHECK_DIR.relative_to(ROOT)}` (node 20 and npm)")
        if os.environ.get("CI"):
            pytest.fail(f"{msg}; CI installs it in .ci/run")
        pytest.skip(msg)


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[TsError]]:
    """The shipped dashboard ("") and every mutation of it, through one tsc run."""
    _tsc_or_skip()
    work = tmp_path_factory.mktemp("dashboard-ts")
    original = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    files = {"": write_ts(original, work / "shipped.ts")}
    for i, (name, (mutate, _)) in enumerate(MUTATIONS.items()):
        broken = copy.deepcopy(original)
        mutate(broken)
        assert broken != original, f"mutation {name!r} changed nothing"
        files[name] = write_ts(broken, work / f"mutation_{i}.ts")
    errors = check(list(files.values()), work)
    return {name: errors[path.resolve()] for name, path in files.items()}


def test_shipped_dashboard_matches_the_grafana_schema(checked: dict[str, list[TsError]]) -> None:
    errors = checked[""]
    assert not errors, "dashboards/grafana/bias-monitor.json does not match @grafana/schema:\n" \
        + "\n".join(map(str, errors))


@pytest.mark.parametrize("name", list(MUTATIONS))
def test_the_check_catches_the_mutation(checked: dict[str, list[TsError]], name: str) -> None:
    errors = checked[name]
    assert errors, f"mutation {name!r} passed the schema check"
    _, where = MUTATIONS[name]
    assert any(where in e.source or where in e.text for e in errors), \
        f"mutation {name!r}: no error at {where!r}, only:\n" + "\n".join(map(str, errors))


def test_every_panel_type_of_the_dashboard_has_its_plugin_types() -> None:
    d = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    kinds = {p["type"] for top in d["panels"] for p in (top, *top.get("panels", []))}
    assert kinds <= set(PLUGINS)
    unknown = copy.deepcopy(d)
    unknown["panels"][1]["type"] = "piechart"
    with pytest.raises(ValueError, match=r"type 'piechart' has no type in the check"):
        write_ts(unknown, Path(os.devnull))


def test_pinned_versions_match_the_grafana_the_compose_file_runs() -> None:
    package = json.loads((CHECK_DIR / "package.json").read_text(encoding="utf-8"))
    lock = json.loads((CHECK_DIR / "package-lock.json").read_text(encoding="utf-8"))
    pinned = package["devDependencies"]
    assert all(v[0].isdigit() for v in pinned.values()), f"pin exact versions: {pinned}"
    for name, version in pinned.items():
        assert lock["packages"][f"node_modules/{name}"]["version"] == version, name
    compose = (ROOT / "deploy" / "docker-compose.yml").read_text(encoding="utf-8")
    assert f"grafana/grafana:{pinned['@grafana/schema']}" in compose, \
        "@grafana/schema must be the Grafana version deploy/docker-compose.yml runs"
