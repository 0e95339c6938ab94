"""Shared fixtures: a writable copy of the shipped catalog to break on purpose."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from monitor.catalog import Catalog, default_catalog_dir, load_catalog


@pytest.fixture(scope="session")
def shipped_catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    dst = tmp_path / "probes"
    shutil.copytree(default_catalog_dir(), dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def edit_csv(path: Path, row_id: str, column: str, value: str, key: str = "id") -> None:
    """Set one cell of a catalog CSV, keeping everything else as it was."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    fields = list(rows[0].keys())
    hit = [r for r in rows if r[key] == row_id]
    assert hit, f"{row_id} not in {path}"
    hit[0][column] = value
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
