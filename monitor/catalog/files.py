"""Reading the catalog's files: CSV with line numbers, YAML with positions."""

from __future__ import annotations

import csv
from pathlib import Path

from monitor.yamlfile import YamlError, load_yaml

__all__ = ["YamlError", "load_yaml", "read_csv"]


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
