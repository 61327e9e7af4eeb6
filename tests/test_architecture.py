"""The layout's rules, checked on the source: the layers' order and no import circles, pytest only in the glue, small
modules, one exceptions module, a repository without wheels or large files."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pytest_roofline

if sys.version_info >= (3, 11):
    import tomllib as toml
else:  # Python 3.10: tomli where it is installed, else the line itself is read (configured_line_length)
    try:
        import tomli as toml
    except ModuleNotFoundError:
        toml = None

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


def test_no_two_modules_share_a_file_name() -> None:
    """A name found in a traceback or a grep points at one file."""
    by_name: dict[str, list[str]] = {}
    for path in MODULES:
        if path.name != "__init__.py":
            by_name.setdefault(path.name, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in by_name.items() if len(paths) > 1} == {}


# a day (2026-11-27), a path out of the repository, or a commit id quoted in backticks or after "commit"
RUN_NOTES = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b|\.\./shared|commit `?[0-9a-f]{7,40}\b|`[0-9a-f]{7,40}`")


def test_the_package_names_no_run_day_shared_path_or_commit() -> None:
    """Which run on which day measured what belongs in the docs and the commit messages, not in the package."""
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*"))
             if path.suffix in (".py", ".md", ".c", ".cu", ".txt") and path.is_file()
             for n, line in enumerate(path.read_text().splitlines(), 1) if RUN_NOTES.search(line)]
    assert found == []
    assert RUN_NOTES.search("on the H100, 2026-11-27") and RUN_NOTES.search("see ../shared/x")  # it sees them
    assert RUN_NOTES.search("at commit e3efc6fc") and not RUN_NOTES.search("THRESHOLD = 1e-3")


def test_every_folder_is_a_documented_layer() -> None:
    folders = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
    architecture = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert [f for f in folders if f"`{f}/`" not in architecture] == []
    assert (PACKAGE / "py.typed").is_file()


# The layer order, lowest first: a module may import its own layer and the layers before it, never one after.
# docs/architecture.md draws it and names each exception.
LAYERS: list[set[str]] = [
    {"errors", "_atomic", "_redact", "_safe_text", "_version", "fixture_types"},
    {"model"},
    {"record"},
    {"host"},
    {"history"},
    {"characterize"},
    {"counters"},
    {"measure"},
    {"session"},
    {"output"},
    {"gates"},
    {"ab"},
    {"doctor", "site"},
    {"plugin", "commands"},
    {"__init__", "__main__"},
]
# An import that runs up the layers, named and justified in docs/architecture.md ("Exceptions").
UPWARD_EXCEPTIONS: set[tuple[str, str]] = set()


def _part(module: str) -> str:
    """``pytest_roofline.measure.gate`` -> ``measure``; the package's own ``__init__`` -> ``__init__``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_imports(path: Path) -> set[str]:
    """Every ``pytest_roofline`` module this file imports, at any depth of the file (lazy imports count too)."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "pytest_roofline")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module.split(".")[0] != "pytest_roofline":
                continue
            found.add(module)
            found.update(f"{module}.{a.name}" for a in node.names
                         if (PACKAGE.parent / f"{module}.{a.name}".replace(".", "/")).with_suffix(".py").is_file()
                         or (PACKAGE.parent / f"{module}.{a.name}".replace(".", "/") / "__init__.py").is_file())
    return found


def _layer_of(part: str) -> int:
    for index, layer in enumerate(LAYERS):
        if part in layer:
            return index
    raise AssertionError(f"pytest_roofline/{part} is in no layer of tests/test_architecture.py's LAYERS")


def test_every_part_has_a_layer() -> None:
    parts = {p.stem if p.is_file() else p.name for p in PACKAGE.iterdir()
             if (p.suffix == ".py") or (p / "__init__.py").is_file()}
    for part in parts:
        _layer_of(part)


def test_imports_run_down_the_layers() -> None:
    upward = []
    for path in MODULES:
        here = _module_name(path)
        for target in package_imports(path):
            a, b = _part(here), _part(target)
            if a != b and _layer_of(b) > _layer_of(a) and (a, b) not in UPWARD_EXCEPTIONS:
                upward.append(f"{path.relative_to(PACKAGE.parent)} imports {target} ({a} sits below {b})")
    assert upward == []


def test_no_import_circles() -> None:
    graph: dict[str, set[str]] = {}
    names = {_module_name(p) for p in MODULES}
    for path in MODULES:
        targets = set()
        for target in package_imports(path):
            while target not in names and "." in target:
                target = target.rpartition(".")[0]
            targets.add(target)
        graph[_module_name(path)] = targets - {_module_name(path)}
    # Tarjan's strongly connected components: a component of two or more modules is a circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert circles == []


def test_the_repository_carries_no_wheels_or_large_files() -> None:
    root = PACKAGE.parent
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True, check=True).stdout
    files = [name for name in listed.decode().split("\0") if name]
    binaries_at_root = [f for f in files if "/" not in f and f.endswith((".whl", ".tar.gz", ".zip", ".so", ".exe"))]
    large = [f for f in files if not f.startswith("tests/fixtures/") and (root / f).is_file()
             and (root / f).stat().st_size > 1_000_000]
    assert [f for f in files if f.endswith(".whl")] == []
    assert binaries_at_root == [] and large == []


def configured_line_length() -> int:
    """``line-length`` of ``[tool.ruff]`` in pyproject.toml, the limit ruff's E501 checks."""
    text = (PACKAGE.parent / "pyproject.toml").read_text(encoding="utf-8")
    if toml is not None:
        return int(toml.loads(text)["tool"]["ruff"]["line-length"])
    section = re.search(r"^\[tool\.ruff\][ \t]*$(.*?)(?=^\[|\Z)", text, re.MULTILINE | re.DOTALL)
    assert section is not None, "pyproject.toml has no [tool.ruff] table"
    setting = re.search(r"^line-length\s*=\s*(\d+)", section.group(1), re.MULTILINE)
    assert setting is not None, "[tool.ruff] sets no line-length"
    return int(setting.group(1))


def test_no_line_is_longer_than_the_configured_length() -> None:
    # ruff's E501 limit, checked here too so a plain pytest run catches a long line without ruff; stricter than
    # ruff, which lets a line run long when it ends in a pragma (``# type: ignore``) or a URL.
    limit = configured_line_length()
    root = PACKAGE.parent
    offenders = []
    for folder in ("pytest_roofline", "tests", "benchmarks"):
        for path in sorted((root / folder).rglob("*.py")):
            lines = path.read_text(encoding="utf-8").split("\n")
            for number, line in enumerate(lines, 1):
                length = len(line.removesuffix("\r"))
                if length > limit and "# noqa: E501" not in line:
                    offenders.append(f"{path.relative_to(root)}:{number}: {length}")
    assert offenders == [], f"{len(offenders)} line(s) over {limit} columns:\n" + "\n".join(offenders[:20])


def test_benchmarks_import_only_names_the_package_has() -> None:
    """The benchmarks run rarely; a name they import from the package that moved breaks them silently."""
    import importlib

    missing: list[str] = []
    scripts = sorted((PACKAGE.parent / "benchmarks").glob("*.py"))
    for script in scripts:
        for node in ast.walk(ast.parse(script.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.startswith("pytest_roofline")):
                continue
            module = importlib.import_module(node.module)
            missing += [f"{script.name}: {node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                        and not (hasattr(module, "__path__")  # a package's submodule, imported by name
                                 and importlib.util.find_spec(f"{node.module}.{a.name}"))]
    assert len(scripts) >= 10 and missing == []
