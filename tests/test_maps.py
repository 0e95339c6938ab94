"""The maps a newcomer reads agree with the code they describe, so they cannot drift:

- README.md "Layout" lists every module of every package of monitor/, and nothing else;
- each package's docstring lists its modules, and nothing else;
- config/example.yaml (which the README says holds every key) names every key of the
  configuration, and the contract's configuration table documents every key and no key
  the configuration does not have.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any, get_args

import pytest
from pydantic import BaseModel

from monitor.config import Settings

ROOT = Path(__file__).resolve().parents[1]
MONITOR = ROOT / "monitor"
PACKAGES = sorted(p.parent for p in MONITOR.glob("*/__init__.py"))


def _modules(package: Path) -> set[str]:
    return {p.name for p in package.glob("*.py") if p.name != "__init__.py"}


def _files(text: str) -> set[str]:
    return set(re.findall(r"\b([a-z_][a-z0-9_]*\.py)\b", text))


def readme_layout() -> dict[str, set[str]]:
    """package (or top-level module) -> the .py files its entry in README "Layout" names."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("### Layout", 1)[1].split("\n## ", 1)[0]
    entries: dict[str, set[str]] = {}
    current: str | None = None
    for line in block.splitlines():
        head = re.match(r"^ {6}([a-z_]+/|[a-z_]+\.py)\s", line)
        if head:
            current = head.group(1)
            entries[current] = _files(line[len(head.group(0)):])
        elif current and line.startswith(" " * 26):
            entries[current] |= _files(line)
        elif not line.startswith("      "):
            current = None
    return entries


def test_the_readme_layout_lists_every_module() -> None:
    entries = readme_layout()
    for package in PACKAGES:
        key = f"{package.name}/"
        assert key in entries, f"README Layout: no entry for monitor/{key}"
        assert entries[key] == _modules(package), (
            f"README Layout, monitor/{key}: missing {sorted(_modules(package) - entries[key])}"
            f", not there {sorted(entries[key] - _modules(package))}")
    tops = {p.name for p in MONITOR.glob("*.py") if p.name != "__init__.py"}
    listed = {k for k in entries if k.endswith(".py")}
    assert listed == tops, f"README Layout: top-level modules {sorted(tops ^ listed)}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.name)
def test_each_package_docstring_lists_its_modules(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"monitor/{package.name}/__init__.py has no docstring"
    named = _files(doc)
    assert named == _modules(package), (
        f"monitor/{package.name}/__init__.py: missing {sorted(_modules(package) - named)}, "
        f"not there {sorted(named - _modules(package))}")


def _model(annotation: Any) -> tuple[type[BaseModel] | None, bool]:
    """The model inside `X`, `X | None`, `list[X]`, and whether it is a list's."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, False
    for arg in get_args(annotation):
        found, _ = _model(arg)
        if found is not None:
            return found, getattr(annotation, "__origin__", None) is list
    return None, False


def config_keys(model: type[BaseModel] = Settings, prefix: str = "") -> set[str]:
    """Every leaf key of the configuration, as the contract writes it
    (`endpoints[].http.url`)."""
    out: set[str] = set()
    for name, field in model.model_fields.items():
        sub, listed = _model(field.annotation)
        path = f"{prefix}{name}{'[]' if listed else ''}"
        if sub is None:
            out.add(path)
        else:
            out |= config_keys(sub, path + ".")
    return out


def contract_keys() -> set[str]:
    """The keys the contract's configuration table documents: `a / b` is two keys; a
    part without the first's prefix (`.output`, `max_probes_per_day`) is its sibling."""
    text = (ROOT / "docs" / "contract.md").read_text(encoding="utf-8")
    table = text.split("| key | default | meaning |", 1)[1].split("\n\n", 1)[0]
    out: set[str] = set()
    for row in table.strip().splitlines()[1:]:
        cell = row.split("|")[1].strip()
        parts = [p.strip() for p in cell.split(" / ")]
        first = parts[0]
        out.add(first)
        parent = first.rsplit(".", 1)[0]
        for part in parts[1:]:
            if part.startswith("."):
                out.add(parent + part)
            elif "." in part and part.split(".", 1)[0] == first.split(".", 1)[0]:
                out.add(part)
            else:
                out.add(f"{parent}.{part}")
    return out


def test_the_contract_documents_every_configuration_key() -> None:
    keys, documented = config_keys(), contract_keys()
    # A model-valued key may have a row of its own (what null means) beside its leaves.
    parents = {k.rsplit(".", 1)[0] for k in keys} | {k.removesuffix("[]") for k in keys}
    assert keys - documented == set(), "docs/contract.md: undocumented keys"
    assert documented - keys - parents == set(), "docs/contract.md: keys the config lacks"


def test_the_example_config_names_every_key() -> None:
    text = (ROOT / "config" / "example.yaml").read_text(encoding="utf-8")
    named = set(re.findall(r"([a-z_0-9]+):", text))
    missing = sorted(k for k in config_keys() if k.rsplit(".", 1)[-1].removesuffix("[]")
                     not in named)
    assert missing == [], f"config/example.yaml does not name {missing}"
