"""Reading the catalog's files: CSV with line numbers, YAML with positions, YAML into a model."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from monitor.catalog.records import Problem
from monitor.yamlfile import YamlError, load_yaml

__all__ = ["YamlError", "load_yaml", "read_csv", "read_model"]


def read_csv(path: Path) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and (line number, row) pairs; line numbers count the header as 1.
    ValueError (one line) when the file is not UTF-8 CSV."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh)
            header = list(reader.fieldnames or [])
            rows = [(i + 2, {k: (v if isinstance(v, str) else "") for k, v in row.items()
                             if k is not None}) for i, row in enumerate(reader)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text (byte {exc.start}); save the file as UTF-8") from None
    except csv.Error as exc:
        raise ValueError(f"not valid CSV ({exc})") from None
    return header, rows


M = TypeVar("M", bound=BaseModel)


def _merged(under: object, over: object) -> object:
    """`over` laid on `under`: mappings key by key, all else (text, lists) replaced."""
    if isinstance(under, dict) and isinstance(over, dict):
        return {**under, **{k: _merged(under.get(k), v) for k, v in over.items()}}
    return over


def read_model(path: Path, model: type[M], what: str, problems: list[Problem], *,
               missing_fix: str, invalid_fix: str, under: Path | None = None) -> M | None:
    """A YAML file read into `model`; every problem (missing, unreadable, a bad key) appended.
    `under`: the file it inherits from (a locale's prompts from its language's), whose
    keys hold where this file does not override them."""
    f = str(path)
    if not path.is_file():
        problems.append(Problem(f, f"missing {what}", fix=missing_fix))
        return None
    try:
        raw = load_yaml(path)
        if under is not None and under.is_file():
            raw = _merged(load_yaml(under), raw)
        return model.model_validate(raw)
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            problems.append(Problem(f, f"{key}: {err['msg']}", column=key, fix=invalid_fix))
    except YamlError as exc:
        problems.append(Problem(f, exc.problem, row=exc.line))
    except OSError as exc:
        problems.append(Problem(f, f"cannot read: {exc.strerror}"))
    return None
