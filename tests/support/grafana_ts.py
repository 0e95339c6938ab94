"""The Grafana dashboard as TypeScript typed with @grafana/schema, and `tsc --noEmit` on it.

`write_ts` turns the dashboard JSON into a module in which every panel is an object
literal that `satisfies` its plugin's type (dashboards/check/grafana.ts: the plugin's
Options and FieldConfig from @grafana/schema, the Prometheus query), and the dashboard
itself `satisfies` the schema's Dashboard with those panels in it. Object literals get
TypeScript's excess-property check, so an unknown key fails as surely as a wrong type or
an enum value the plugin does not have. `tsc` type-checks many such files in one run
(one start-up of the compiler, ~2 s); `check` maps its errors back to the file.

The tools are npm packages pinned in dashboards/check/package.json (`npm ci` there).
Run by hand: python3 -m tests.support.grafana_ts [DASHBOARD.json]
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["CHECK_DIR", "PLUGINS", "TsError", "check", "tsc_path", "write_ts"]

ROOT = Path(__file__).resolve().parents[2]
CHECK_DIR = ROOT / "dashboards" / "check"
# panel type -> its type in dashboards/check/grafana.ts
PLUGINS = {"timeseries": "TimeseriesPanel", "stat": "StatPanel", "table": "TablePanel",
           "state-timeline": "StateTimelinePanel", "row": "RowPanel"}
_ERROR = re.compile(r"^(?P<file>[^(\n]+)\((?P<line>\d+),(?P<col>\d+)\): error (?P<code>TS\d+): "
                    r"(?P<text>.*(?:\n(?!\S+\(\d+,\d+\): ).*)*)", re.MULTILINE)


class TsError:
    """One tsc error, with the line of the generated file it points at."""

    def __init__(self, file: Path, line: int, code: str, text: str) -> None:
        self.file, self.line, self.code, self.text = file, line, code, text.strip()
        lines = file.read_text(encoding="utf-8").splitlines()
        self.source = lines[line - 1].strip() if 0 < line <= len(lines) else ""
        # the panel the error is in: the nearest `// panel` comment above it
        self.panel = next((ln.removeprefix("// ").strip() for ln in reversed(lines[:line])
                           if ln.startswith(("// panel", "// the dashboard"))), "")

    def __str__(self) -> str:
        where = f"{self.panel}, " if self.panel else ""
        return f"{self.file.name}:{self.line} ({where}`{self.source}`): {self.code} {self.text}"


def tsc_path() -> Path | None:
    tsc = CHECK_DIR / "node_modules" / ".bin" / "tsc"
    return tsc if tsc.exists() and shutil.which("node") else None


def _placeholder(panel_id: int) -> str:
    return f"__panel_{panel_id}__"


def write_ts(dashboard: dict[str, Any], path: Path) -> Path:
    """Write `dashboard` as a TypeScript module at `path` (a .ts file); ValueError names a
    panel whose plugin type the check has no type for."""
    consts: list[str] = []

    def const(panel: dict[str, Any]) -> str:
        kind = panel.get("type")
        if kind not in PLUGINS:
            raise ValueError(f"panel {panel.get('id')} ({panel.get('title')!r}): type {kind!r} "
                             f"has no type in the check; add it to PLUGINS in {__name__} and "
                             f"to dashboards/check/grafana.ts")
        body = dict(panel)
        if "panels" in body:  # a row's own (collapsed) panels, each checked on its own
            body["panels"] = [const(p) for p in body["panels"]]
        name = f"panel_{len(consts)}"
        consts.append(f"// panel {panel.get('id')} {panel.get('title', '')!r} ({kind})\n"
                      f"const {name} = {_literal(body)} satisfies {PLUGINS[kind]};\n")
        return _placeholder(len(consts) - 1)

    top = dict(dashboard)
    top["panels"] = [const(p) for p in dashboard.get("panels", [])]
    used = sorted({"Dashboard", *(PLUGINS[str(p.get("type"))] for p in _all(dashboard))})
    grafana = (CHECK_DIR / "grafana").as_posix()
    text = (f"import type {{ {', '.join(used)} }} from {json.dumps(grafana)};\n\n"
            + "\n".join(consts) + "\n// the dashboard\n"
            + f"export const dashboard = {_literal(top)} satisfies Dashboard;\n")
    path.write_text(text, encoding="utf-8")
    return path


def _all(dashboard: dict[str, Any]) -> Iterable[dict[str, Any]]:
    for panel in dashboard.get("panels", []):
        yield panel
        yield from panel.get("panels", [])


def _literal(value: Any) -> str:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    return re.sub(r'"__panel_(\d+)__"', r"panel_\1", text)


def check(files: Sequence[Path], workdir: Path) -> dict[Path, list[TsError]]:
    """`tsc --noEmit --strict` on `files` in one run; the errors of each file."""
    tsc = tsc_path()
    if tsc is None:
        raise FileNotFoundError(f"{CHECK_DIR}/node_modules/.bin/tsc or node is missing: run "
                                f"`npm ci --prefix {CHECK_DIR.relative_to(ROOT)}`")
    config = {"compilerOptions": {
        "strict": True, "noEmit": True, "target": "ES2022", "module": "ES2022",
        "moduleResolution": "node", "skipLibCheck": True, "types": [],
        # the schema is resolved from the pinned install, wherever the generated files are
        "baseUrl": CHECK_DIR.as_posix(),
        "paths": {"@grafana/schema": ["node_modules/@grafana/schema"],
                  "@grafana/schema/*": ["node_modules/@grafana/schema/*"]}},
        "files": [str(f) for f in files]}
    project = workdir / "tsconfig.json"
    project.write_text(json.dumps(config, indent=2), encoding="utf-8")
    out = subprocess.run([str(tsc), "--project", str(project), "--pretty", "false"],
                         cwd=workdir, capture_output=True, text=True, timeout=120)
    found: dict[Path, list[TsError]] = {f.resolve(): [] for f in files}
    for m in _ERROR.finditer(out.stdout):
        file = (workdir / m["file"]).resolve()
        if file not in found:  # an error outside the generated files: the check is broken
            raise RuntimeError(f"tsc failed outside the generated files:\n{out.stdout}")
        found[file].append(TsError(file, int(m["line"]), m["code"], m["text"]))
    if out.returncode != 0 and not any(found.values()):
        raise RuntimeError(f"tsc exited {out.returncode}:\n{out.stdout}{out.stderr}")
    return found


def main(argv: Sequence[str]) -> int:
    source = Path(argv[0]) if argv else ROOT / "dashboards" / "grafana" / "bias-monitor.json"
    work = CHECK_DIR / ".gen"
    work.mkdir(exist_ok=True)
    target = write_ts(json.loads(source.read_text(encoding="utf-8")), work / "dashboard.gen.ts")
    errors = check([target], work)[target.resolve()]
    for err in errors:
        print(err)
    print(f"{source}: {len(errors)} error(s) against @grafana/schema", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
