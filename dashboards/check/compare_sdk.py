"""The dashboard mutations of tests/test_dashboard_schema.py through the other candidate,
PyPI grafana-foundation-sdk (not used by the suite: the TypeScript check catches more).

A mutation counts as caught if Dashboard.from_json raises, or the from_json -> to_json
round trip loses or changes a value that it keeps for the shipped dashboard.
    pip install 'grafana-foundation-sdk==1769699681!11.1.0'
    python3 dashboards/check/compare_sdk.py
"""
import copy
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from grafana_foundation_sdk.cog import plugins
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import Dashboard

from tests.test_dashboard_schema import DASHBOARD, MUTATIONS

plugins.register_default_plugins()

def flat(node, path="$"):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out.update(flat(v, f"{path}.{k}"))
        return out or {path: "{}"}
    if isinstance(node, list):
        out = {}
        for i, v in enumerate(node):
            out.update(flat(v, f"{path}[{i}]"))
        return out or {path: "[]"}
    return {path: json.dumps(node)}

def diff(d):
    back = json.loads(json.dumps(Dashboard.from_json(copy.deepcopy(d)), cls=JSONEncoder))
    a, b = flat(d), flat(back)
    return {(p, a.get(p), b.get(p)) for p in a.keys() | b.keys() if a.get(p) != b.get(p)}

orig = json.loads(DASHBOARD.read_text())
base = diff(orig)
print(f"shipped dashboard: round trip differs at {len(base)} paths (e.g. {sorted(base)[:3]})")
caught = 0
for name, (mutate, _) in MUTATIONS.items():
    d = copy.deepcopy(orig)
    mutate(d)
    try:
        new = diff(d) - base
        verdict = f"caught ({sorted(new)[0]})" if new else "NOT caught"
    except Exception as e:
        verdict = f"caught (raised {type(e).__name__}: {e})"
    caught += verdict.startswith("caught")
    print(f"{name}: {verdict}")
print(f"{caught}/{len(MUTATIONS)} caught")
