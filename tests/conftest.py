"""Shared fixtures: no MONITOR_* variable of the host leaks into a test; a writable
copy of the shipped catalog to break on purpose."""

from __future__ import annotations

import csv
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.catalog import Catalog, default_catalog_dir, load_catalog

#: The files whose tests take longest (minutes, mostly waiting on a schedule), longest
#: first. They start first, so that their waits overlap the short tests on the other
#: workers instead of running alone at the end (`--dist loadfile --no-loadscope-reorder`,
#: pyproject.toml, hands out files in collection order).
LONGEST_FIRST = ("test_daemon_e2e.py", "test_replicas_e2e.py", "test_plan.py",
                 "test_daemon_process.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the other end-to-end (slow) files, then the rest;
    the order within a file is kept."""
    def rank(item: pytest.Item) -> int:
        name = item.path.name
        if name in LONGEST_FIRST:
            return LONGEST_FIRST.index(name)
        return len(LONGEST_FIRST) + (item.get_closest_marker("slow") is None)
    items.sort(key=rank)  # stable: a file's tests stay in their order


@pytest.fixture(autouse=True)
def _no_monitor_environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A developer's MONITOR_STORAGE__PATH would point a test at a real database."""
    for name in list(os.environ):
        if name.upper().startswith("MONITOR_"):
            monkeypatch.delenv(name)
    yield


@pytest.fixture(scope="session")
def shipped_catalog() -> Catalog:
    return load_catalog()


@pytest.fixture
def catalog_dir(tmp_path: Path) -> Path:
    dst = tmp_path / "probes"
    shutil.copytree(default_catalog_dir(), dst, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def edit_csv(path: Path, row_id: str, column: str, value: str, key: str = "") -> None:
    """Set one cell of a catalog CSV, keeping everything else as it was; rows are found
    by `key`, by default the file's first column (option_id, or id in sources/)."""
    with path.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    fields = list(rows[0].keys())
    key = key or fields[0]
    hit = [r for r in rows if r[key] == row_id]
    assert hit, f"{row_id} not in {path}"
    hit[0][column] = value
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
