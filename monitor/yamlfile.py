"""YAML files: the only module that imports PyYAML (pydantic-settings uses it too).

A syntax error keeps PyYAML's position: `file:line:column: problem`.
"""

from __future__ import annotations

from pathlib import Path

import yaml

__all__ = ["YamlError", "load_yaml"]


class YamlError(ValueError):
    """Not valid YAML; the message is one line with the file, line and column."""

    def __init__(self, message: str, *, line: int | None = None, problem: str = "") -> None:
        super().__init__(message)
        self.line = line
        self.problem = problem


def load_yaml(path: Path) -> object:
    try:
        with path.open(encoding="utf-8") as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        column = f" at column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).strip().splitlines()[0]
        context = getattr(exc, "context", None)
        more = f" ({context})" if context else ""
        where = f":{line}:{mark.column + 1}" if mark is not None else ""
        raise YamlError(f"{path}{where}: not valid YAML: {problem}{more}", line=line,
                        problem=f"not valid YAML{column}: {problem}{more}") from None
    except UnicodeDecodeError as exc:
        text = f"not UTF-8 text (byte {exc.start}); save it as UTF-8"
        raise YamlError(f"{path}: {text}", problem=text) from None
