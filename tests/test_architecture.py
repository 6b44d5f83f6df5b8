"""Layers import downward only; configuration is read only in ops; every module says its API.

ledger ← projections ← commands; ledger ← sync; ops may import everything, nothing
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
    "sync": {"ledger", "sync"},
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
