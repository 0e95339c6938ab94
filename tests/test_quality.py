"""The code stays ruff- and mypy-clean (the configuration is in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_import_contracts_hold() -> None:
    """The layers, no cycle, each third-party library in its one module
    ([tool.importlinter] in pyproject.toml)."""
    exe = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(exe)], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout and "Contracts: 11 kept" in out.stdout


def test_a_broken_layer_is_caught(tmp_path: Path) -> None:
    """The contracts are not vacuous: the store importing the statistics breaks them."""
    import shutil

    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "monitor", copy / "monitor")
    shutil.copy(ROOT / "pyproject.toml", copy / "pyproject.toml")
    runs = copy / "monitor" / "store" / "runs.py"
    runs.write_text(runs.read_text() + "\nfrom monitor.stats import md_of  # noqa\n")
    exe = Path(sys.executable).with_name("lint-imports")
    out = subprocess.run([str(exe)], cwd=copy, capture_output=True, text=True,
                         env={"PYTHONPATH": str(copy), "PATH": ""})
    assert out.returncode != 0 and "BROKEN" in out.stdout, out.stdout + out.stderr


def test_modules_stay_small_and_cite_the_repositorys_own_docs() -> None:
    for path in sorted((ROOT / "monitor").rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") <= 350, f"{path.relative_to(ROOT)}: split it by concern"
        assert "../shared" not in text, f"{path.relative_to(ROOT)} cites ../shared"
