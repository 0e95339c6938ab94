"""House rules the linters cannot see, read from monitor/'s own syntax trees:

- records and constructors are called by keyword: no call of a class defined in
  monitor/ passes more than MAX_POSITIONAL arguments by position, nor unpacks a
  sequence into its positional arguments;
- every vocabulary is spelled once (monitor.vocab): no string literal equal to one of
  its words stands where that word is meant - compared with a field or variable of the
  vocabulary's name (`x.status == "ok"`, `kind in ("md", ...)`), or passed as such a
  keyword (`StatRow(kind="md")`) - nor inside SQL text as a quoted word;
- every bench (bench/, run by hand) imports only names the product still has.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
from enum import StrEnum
from pathlib import Path

import pytest

from monitor import vocab

ROOT = Path(__file__).resolve().parents[1]
MAX_POSITIONAL = 5

#: The names under which a vocabulary's word is meant, and the vocabularies.
VOCAB_NAMES: dict[str, tuple[type[StrEnum], ...]] = {
    "kind": (vocab.StatKind,),
    "status": (vocab.RunStatus, vocab.CallStatus),
    "run_status": (vocab.RunStatus,),
    "condition": (vocab.Condition,),
    "state": (vocab.AlertState,),
    "from_state": (vocab.AlertState, vocab.LevelState),
    "to_state": (vocab.AlertState, vocab.LevelState),
    "new_state": (vocab.AlertState, vocab.LevelState),
    "level": (vocab.LevelState,),
    "side": (vocab.Side,),
    "variant": (vocab.Variant,),
    "persona": (vocab.Persona,),
    "answer_format": (vocab.AnswerFormat,),
}
WORDS = {str(m) for enums in VOCAB_NAMES.values() for e in enums for m in e}


def _sources() -> list[tuple[Path, ast.AST]]:
    return [(p, ast.parse(p.read_text(encoding="utf-8"), str(p)))
            for p in sorted((ROOT / "monitor").rglob("*.py"))]


def _callee(node: ast.Call) -> str | None:
    f = node.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _classes() -> set[str]:
    return {n.name for _, tree in _sources() for n in ast.walk(tree)
            if isinstance(n, ast.ClassDef)}


def positional_calls(tree: ast.AST, classes: set[str]) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and (name := _callee(node)) in classes:
            starred = any(isinstance(a, ast.Starred) for a in node.args)
            if starred or len(node.args) > MAX_POSITIONAL:
                out.append((node.lineno, name))
    return out


def _name_of(node: ast.AST) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _literals(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [x for e in node.elts for x in _literals(e)]
    return []


def vocabulary_literals(tree: ast.AST) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            sides = [node.left, *node.comparators]
            named = {n for s in sides if (n := _name_of(s)) in VOCAB_NAMES}
            for name in named:
                words = {str(m) for e in VOCAB_NAMES[name] for m in e}
                out += [(node.lineno, f"{name} vs {w!r}") for s in sides
                        for w in _literals(s) if w in words]
        elif isinstance(node, ast.Call):
            for kw in node.keywords:
                if kw.arg in VOCAB_NAMES:
                    words = {str(m) for e in VOCAB_NAMES[kw.arg] for m in e}
                    out += [(node.lineno, f"{kw.arg}={w!r}") for w in _literals(kw.value)
                            if w in words]
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and re.search(r"\b(SELECT|UPDATE|INSERT|DELETE)\b", node.value)):
            # SQL text: a quoted word of a vocabulary ("WHERE kind = 'persistence'")
            out += [(node.lineno, f"SQL '{w}'")
                    for w in re.findall(r"'([a-z_]+)'", node.value) if w in WORDS]
    return out


def test_records_and_constructors_are_called_by_keyword() -> None:
    classes = _classes()
    found = [f"{p.relative_to(ROOT)}:{line} {name}" for p, tree in _sources()
             for line, name in positional_calls(tree, classes)]
    assert found == [], f"call these by keyword (more than {MAX_POSITIONAL} positional " \
                        f"arguments or *args): {found}"


def test_no_vocabulary_word_is_spelled_as_a_literal() -> None:
    found = [f"{p.relative_to(ROOT)}:{line} {what}" for p, tree in _sources()
             if p.name != "vocab.py" for line, what in vocabulary_literals(tree)]
    assert found == [], f"use the monitor.vocab member: {found}"


@pytest.mark.parametrize(("code", "caught"), [
    ("RunRow(a, b, c, d, e, f)", True),
    ("RunRow(*values)", True),
    ("RunRow(a, b, c, d, e)", False),
    ("make_run(a, b, c, d, e, f)", False),  # a function, not a record
    ("Path(a, b, c, d, e, f)", False),  # not a class of monitor/
])
def test_the_positional_rule_catches_what_it_should(code: str, caught: bool) -> None:
    assert bool(positional_calls(ast.parse(code), {"RunRow"})) is caught


@pytest.mark.parametrize(("code", "caught"), [
    ('run.status == "complete"', True),
    ('st.kind in ("md", "jsd")', True),
    ('StatRow(kind="drift")', True),
    ('store.rows("SELECT 1 FROM run_stats WHERE kind = \'persistence\'")', True),
    ("st.kind == StatKind.MD", False),
    ('frame["md"]', False),  # a column name, not the vocabulary's word
    ('args.format == "md"', False),
])
def test_the_vocabulary_rule_catches_what_it_should(code: str, caught: bool) -> None:
    assert bool(vocabulary_literals(ast.parse(code))) is caught


def _product_imports(path: Path) -> list[tuple[str, str]]:
    """(module, name) of each `from monitor... import name` in a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [(node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.split(".")[0] == "monitor" for alias in node.names]


def _has(module: str, name: str) -> bool:
    """The product has it: a name of the module, or a submodule of that name."""
    if hasattr(importlib.import_module(module), name):
        return True
    try:
        return importlib.util.find_spec(f"{module}.{name}") is not None
    except ModuleNotFoundError:  # the module is not a package
        return False


def test_every_bench_imports_what_the_product_has() -> None:
    """A bench is run by hand, not by the suite: a name it imports that moved (as
    simulate_topup did to monitor.watch.plan_topup) would break it unseen."""
    missing = [f"{path.name}: {module}.{name}"
               for path in sorted((ROOT / "bench").glob("*.py"))
               for module, name in _product_imports(path)
               if not _has(module, name)]
    assert not missing, "bench imports a name the product no longer has: " + "; ".join(missing)


@pytest.mark.parametrize("code, caught", [
    ("from monitor.watch.plan import cell_shares\n", False),
    ("from monitor.watch.plan import no_such_name\n", True),
])
def test_the_bench_import_rule_catches_what_it_should(tmp_path: Path, code: str,
                                                      caught: bool) -> None:
    f = tmp_path / "b.py"
    f.write_text(code, encoding="utf-8")
    found = [n for m, n in _product_imports(f) if not _has(m, n)]
    assert bool(found) is caught
