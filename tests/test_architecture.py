"""Layers import downward only; configuration is read only in ops; every module says its API.

ledger ← projections ← commands ← sync; ops may import everything, nothing
imports ops.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "ledger": {"ledger"},
    "projections": {"ledger", "projections"},
    "commands": {"ledger", "projections", "commands"},
    "sync": {"ledger", "projections", "commands", "sync"},
    "ops": {"ledger", "projections", "commands", "sync", "ops"},
}
MODULES = sorted(p for layer in ALLOWED for p in (ROOT / layer).rglob("*.py"))


def _imports(tree: ast.AST) -> list[str]:
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_layers_import_downward_only(path: Path) -> None:
    layer = path.relative_to(ROOT).parts[0]
    for name in _imports(ast.parse(path.read_text())):
        top = name.split(".")[0]
        assert top not in ALLOWED, f"bare import of {name!r}: use lessonledger.{name}"
        if top == "lessonledger":
            target = name.split(".")[1]
            assert target in ALLOWED[layer], f"{layer} must not import {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(ROOT)))
def test_environment_is_read_only_in_ops(path: Path) -> None:
    if path.relative_to(ROOT).parts[0] == "ops":
        return
    source = path.read_text()
    assert "os.environ" not in source
    assert "getenv" not in source


@pytest.mark.parametrize(
    "path", [p for p in MODULES if p.name != "__main__.py"], ids=lambda p: str(p.relative_to(ROOT))
)
def test_every_module_declares_its_public_names(path: Path) -> None:
    tree = ast.parse(path.read_text())
    targets = {t.id for node in tree.body if isinstance(node, ast.Assign)
               for t in node.targets if isinstance(t, ast.Name)}
    assert "__all__" in targets or (path.name == "__init__.py" and not tree.body[1:])


def test_nothing_imports_the_bare_folder_names_in_tests() -> None:
    for path in (ROOT / "tests").rglob("*.py"):
        for name in _imports(ast.parse(path.read_text())):
            assert name.split(".")[0] not in ALLOWED, f"{path}: bare import of {name!r}"


def _strings(tree: ast.AST) -> set[str]:
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


@pytest.mark.parametrize("path", [p for p in MODULES if p != ROOT / "ledger" / "events.py"],
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_no_module_spells_an_event_tag_outside_the_catalogue(path: Path) -> None:
    # A tag set written out by hand misses the next event of its kind (an event that
    # names a lesson, left out of what erasure takes, keeps its body); the catalogue's
    # constants and traits (tags_with) are the one source.
    from lessonledger.ledger.events import EVENT_TYPES

    spelled = _strings(ast.parse(path.read_text())) & EVENT_TYPES
    assert not spelled, f"spell these with ledger.events' constants: {sorted(spelled)}"


#: What a ledger keeps to itself: ops asks its queries instead.
_INTERNALS = {"view", "log", "runner", "recaller", "keeper", "_records", "_lmdb"}
#: Names in ops that hold something else with such an attribute (``args.log``: --log).
_NOT_A_LEDGER = {"args", "self", "entries"}


@pytest.mark.parametrize("path", sorted((ROOT / "ops").rglob("*.py")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_ops_reads_a_ledger_through_its_queries(path: Path) -> None:
    reached = [f"{ast.unparse(node)} (line {node.lineno})"
               for node in ast.walk(ast.parse(path.read_text()))
               if isinstance(node, ast.Attribute) and node.attr in _INTERNALS
               and not (isinstance(node.value, ast.Name) and node.value.id in _NOT_A_LEDGER)]
    assert not reached, f"ops reaches around the ledger's API: {reached}"


def test_every_event_that_names_a_lesson_is_taken_by_erasing_the_lesson() -> None:
    from lessonledger.ledger.events import EVENT_CLASSES, NAMES_A_LESSON, tag_of

    for kind in EVENT_CLASSES:
        fields = set(kind.__struct_fields__)
        if "lesson_id" in fields:
            assert tag_of(kind) in NAMES_A_LESSON, f"{kind.__name__} names a lesson"
        if {"lesson_id", "outcome_id"} <= fields:
            assert kind.cites_an_outcome, f"{kind.__name__} cites an outcome"
