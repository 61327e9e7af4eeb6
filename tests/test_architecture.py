"""The layout's rules, checked on the source: pytest only in the glue, small modules, one exceptions module."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest_roofline

PACKAGE = Path(pytest_roofline.__file__).parent
MODULES = sorted(PACKAGE.rglob("*.py"))
MAX_LINES = 600


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_only_the_glue_imports_pytest() -> None:
    offenders = [str(p.relative_to(PACKAGE)) for p in MODULES
                 if p.parent.name != "plugin" and {"pytest", "_pytest"} & imported_modules(p)]
    assert offenders == []
    assert any("pytest" in imported_modules(p) for p in (PACKAGE / "plugin").glob("*.py"))  # the check sees imports


def test_no_module_over_the_limit() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text().splitlines()) for p in MODULES}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_exception_classes_live_in_errors() -> None:
    defined_elsewhere = []
    for path in MODULES:
        if path.name == "errors.py":
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                bases = {getattr(b, "id", None) or getattr(b, "attr", "") for b in node.bases}
                if any(b.endswith(("Error", "Exception", "Warning")) for b in bases):
                    defined_elsewhere.append(f"{path.relative_to(PACKAGE)}:{node.name}")
    assert defined_elsewhere == []


def test_every_folder_is_a_documented_layer() -> None:
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    architecture = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert [f for f in folders if f"`{f}/`" not in architecture] == []
    assert (PACKAGE / "py.typed").is_file()
