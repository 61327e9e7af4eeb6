"""Change impact for the A/B gate: which tests a change between REF and the working tree can move.

Three parts, plain Python (standard library only, no pytest):

- :class:`CodeTrace` (from :mod:`.code_trace`) records which functions of the repository ran while it was active,
  and which repository files the process had imported. A test's trace is a :class:`TestTrace`.
- :func:`changed_code` diffs REF against the working tree (committed, uncommitted and untracked files) and, per
  Python file, names the functions whose code differs or says the module-level code differs; files tracing cannot
  see into are *opaque* (compare every test), documentation has no impact.
- :func:`impact` joins the two: per test, ``None`` when no change can reach it, else a :class:`Reason`.

Traces come from the working tree's side (the code the session runs): an added function is then seen where it
runs, while a removed one is not, so a removal counts as a module-level change.

Known blind spots, each a reason to keep the full comparison on a schedule: modules imported dynamically with an
``ImportError`` fallback (a deleted or added module changes what the unchanged importer does), data read from
``*.txt`` files (documentation by rule), threads already running when a trace starts on Python < 3.12, and code
that runs outside any trace the caller records (import time, session fixtures built for an earlier test): pass
those functions in each affected test's :class:`TestTrace`.
"""

from __future__ import annotations

import ast
import copy
import os
import re
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pytest_roofline.ab.code_trace import ANY_FUNCTION, MODULE, CodeTrace, TestTrace, block_name, untraced

__all__ = ["ANY_FUNCTION", "MODULE", "Change", "CodeTrace", "FileChange", "Opaque", "Reason", "TestTrace",
           "block_name", "changed_code", "classify", "compare_source", "impact", "untraced"]

MAX_SOURCE_BYTES = 4 << 20  # a larger .py file is not parsed: a module-level change
GIT_TIMEOUT_S = 120.0
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


@dataclass(frozen=True)
class FileChange:
    """One changed Python file. ``module_level``: why its module-level code (imports, constants, class bodies,
    decorators, default values) differs, or None when it does not. ``functions``: the qualified names (as
    ``co_qualname`` spells them) of the functions whose code differs, was added or was removed."""

    path: str
    status: Literal["added", "modified", "deleted"]
    module_level: str | None
    functions: frozenset[str]


@dataclass(frozen=True)
class Opaque:
    """A changed file whose effect tracing cannot see: every test is compared."""

    path: str
    reason: str


@dataclass(frozen=True)
class Change:
    """What differs between REF and the working tree. Paths are relative to the root given to
    :func:`changed_code` (``../`` for a file outside it), in posix form."""

    ref: str
    python: tuple[FileChange, ...] = ()
    opaque: tuple[Opaque, ...] = ()
    no_impact: tuple[str, ...] = ()
    undiffable: str | None = None  # why REF could not be diffed; then every test is compared

    @property
    def compare_all(self) -> str | None:
        """Why every test is compared, or None when the change is known file by file."""
        if self.undiffable is not None:
            return f"REF cannot be diffed: {self.undiffable}"
        if self.opaque:
            first = self.opaque[0]
            more = f" and {len(self.opaque) - 1} more" if len(self.opaque) > 1 else ""
            return f"{first.path} changed (opaque to tracing: {first.reason}){more}"
        return None


@dataclass(frozen=True)
class Reason:
    """Why a test is compared. ``kind``: the rule that applied; ``text``: one line for the report."""

    kind: Literal["compare-all", "untraced", "function", "module"]
    text: str

    def __str__(self) -> str:
        return self.text


# ----------------------------------------------------------------------------------------------- code blocks

_Def = ast.FunctionDef | ast.AsyncFunctionDef


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    # A docstring only sets __doc__: editing it moves no test.
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        return body[1:]
    return body


def _plain(node: _Def) -> bool:
    """A def whose statement does nothing at import beyond binding its name: no decorators, no defaults."""
    return not node.decorator_list and not node.args.defaults and not any(node.args.kw_defaults)


class _Splitter(ast.NodeTransformer):
    """Cuts a module into blocks as pytest-testmon does: each function's arguments and body are a block of their
    own under its ``co_qualname``, and its def statement stays in the enclosing block with the body replaced by a
    placeholder (decorators, defaults and annotations run where the def runs). Class bodies stay in the block
    that runs them. ``skip``: functions whose plain def is left out of module-level code (added functions: defining
    one at import costs nothing a test times, and the trace sees it where it runs)."""

    def __init__(self, skip: frozenset[str]) -> None:
        self.skip = skip
        self.blocks: dict[str, list[str]] = {}
        self._scope: list[str] = []
        self._in_function = 0

    def split(self, tree: ast.Module) -> dict[str, list[str]]:
        tree.body = [self.visit(stmt) for stmt in _without_docstring(tree.body)]
        tree.body = [stmt for stmt in tree.body if stmt is not None]
        self.blocks.setdefault(MODULE, []).append(ast.dump(tree))
        return self.blocks

    def _def(self, node: _Def) -> ast.stmt | None:
        qualname = ".".join([*self._scope, node.name])
        self._scope.append(f"{node.name}.<locals>")
        self._in_function += 1
        body = [self.visit(stmt) for stmt in _without_docstring(node.body)]
        self._in_function -= 1
        self._scope.pop()
        block = ast.Module(body=[stmt for stmt in body if stmt is not None], type_ignores=[])
        self.blocks.setdefault(qualname, []).append(ast.dump(node.args) + ast.dump(block))
        if not self._in_function and qualname in self.skip and _plain(node):
            return None  # a def inside a function runs at each call: it stays
        node.body = [ast.Pass()]
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.stmt | None:
        return self._def(node)

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.stmt | None:
        return self._def(node)

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.stmt:
        self._scope.append(node.name)
        node.body = [stmt for stmt in (self.visit(s) for s in _without_docstring(node.body)) if stmt is not None]
        node.body = node.body or [ast.Pass()]
        self._scope.pop()
        return node

    def generic_visit(self, node: ast.AST) -> ast.AST:
        # Statements nested in if/for/try/with may hold defs; emptied bodies are fine for ast.dump.
        for field, value in ast.iter_fields(node):
            if isinstance(value, list):
                items = [self.visit(item) if isinstance(item, ast.AST) else item for item in value]
                setattr(node, field, [item for item in items if item is not None])
            elif isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
        return node


def _parse(source: bytes) -> ast.Module | None:
    try:
        return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _blocks(tree: ast.Module | None, skip: frozenset[str] = frozenset()) -> dict[str, list[str]]:
    return {} if tree is None else _Splitter(skip).split(tree)


def compare_source(old: bytes | None, new: bytes | None) -> tuple[str | None, frozenset[str]]:
    """(why the module-level code differs or None, the functions whose code differs) between two versions of a
    Python file; None for a side where the file does not exist."""
    old_tree = None if old is None else _parse(old)
    new_tree = None if new is None else _parse(new)
    old_blocks = _blocks(old_tree)
    new_blocks = _blocks(copy.deepcopy(new_tree))  # the splitter edits the tree: a second pass may need it
    names = (set(old_blocks) | set(new_blocks)) - {MODULE}
    if old is None or new is None:
        return ("added" if old is None else "deleted"), frozenset(names)
    if old_tree is None or new_tree is None:
        return f"does not parse {'at REF' if old_tree is None else 'in the working tree'}", frozenset()
    added = frozenset(set(new_blocks) - set(old_blocks))
    if added:
        new_blocks = _blocks(new_tree, added)
    functions = frozenset(name for name in names if old_blocks.get(name) != new_blocks.get(name))
    removed = set(old_blocks) - set(new_blocks)
    if removed:
        return f"removes {', '.join(sorted(removed))}", functions
    if old_blocks[MODULE] != new_blocks[MODULE]:
        return "module-level code differs", functions
    return None, functions


# -------------------------------------------------------------------------------------------------- the diff

_COMPILED = frozenset({".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".cu", ".cuh", ".pyx", ".pxd", ".pxi",
                       ".f", ".f90", ".rs", ".so", ".pyd", ".dylib"})
_BUILD = frozenset({"pyproject.toml", "setup.py", "setup.cfg", "manifest.in", "makefile", "cmakelists.txt",
                    "meson.build", "build.py"})
_LOCK_SUFFIXES = (".lock", "-lock.json", "-lock.yaml")
_DOC_SUFFIXES = (".md", ".rst", ".txt")
_DOC_NAMES = ("license", "licence", "changelog", "readme", "authors", "contributing", "notice", ".gitignore")


_NOT_PYTHON = "not Python: tracing cannot see what reads it"


def classify(path: str) -> str | None:
    """None for a file with no impact on any test (documentation), else why a change to it is opaque to tracing;
    a traced ``.py`` file gets the reason of any file tracing knows nothing of (:func:`changed_code` reads it)."""
    pure = PurePosixPath(path)
    name = pure.name.lower()
    if name == "conftest.py":
        return "fixtures and hooks for every test below it"
    if name in _BUILD or name.startswith("setup.") or name.endswith(".cmake"):
        return "build or packaging file"
    if name.endswith(_LOCK_SUFFIXES) or name.startswith(("requirements", "constraints")):
        return "dependency pins"
    if pure.suffix.lower() in _COMPILED:
        return "compiled source or binary"
    if name in ("pytest.ini", "tox.ini", ".coveragerc") or pure.suffix.lower() in (".cfg", ".ini", ".toml"):
        return "configuration"
    if pure.suffix.lower() == ".pyi" or name == "py.typed":
        return None  # type information: nothing runs it
    if name.endswith(_DOC_SUFFIXES) or name.startswith(_DOC_NAMES) or "docs" in pure.parts[:-1]:
        return None
    return _NOT_PYTHON


class _GitFailed(Exception):
    pass


def _git(args: list[str], cwd: Path) -> bytes:
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}  # C messages; never write the index
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, timeout=GIT_TIMEOUT_S, env=env,
                              check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise _GitFailed(f"git {args[0]} could not run: {exc}") from None
    if done.returncode != 0:
        raise _GitFailed(f"git {args[0]} failed: {os.fsdecode(done.stderr).strip()[:300]}")
    return done.stdout


def _blob(top: Path, ref: str, path: str) -> bytes | None:
    """REF's version of ``path`` (relative to the top), or None when larger than ``MAX_SOURCE_BYTES``."""
    env = {**os.environ, "LC_ALL": "C", "GIT_OPTIONAL_LOCKS": "0"}
    # REF is hex, so "REF:path" cannot read as an option.
    with subprocess.Popen(["git", "cat-file", "blob", f"{ref}:{path}"], cwd=top, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.DEVNULL) as process:
        assert process.stdout is not None
        data = process.stdout.read(MAX_SOURCE_BYTES + 1)
        if len(data) > MAX_SOURCE_BYTES:
            process.kill()
            return None
        if process.wait(timeout=GIT_TIMEOUT_S) != 0:
            raise _GitFailed(f"git cat-file {ref}:{path} failed")
    return data


def _read(path: Path) -> bytes | None:
    with path.open("rb") as handle:
        data = handle.read(MAX_SOURCE_BYTES + 1)
    return None if len(data) > MAX_SOURCE_BYTES else data


def changed_code(root: Path, ref: str) -> Change:
    """What differs between the commit ``ref`` (a full hex id) and the working tree under git at ``root``: what
    a test session there runs, committed, uncommitted and untracked (ignored files excluded). Never raises for
    git's failures: a Change whose ``undiffable`` says why."""
    if not _COMMIT.fullmatch(ref):
        return Change(ref, undiffable=f"{ref!r} is not a full hex commit id")
    try:
        root = Path(os.path.realpath(root))
        top = Path(os.fsdecode(_git(["rev-parse", "--show-toplevel"], root)).strip())
        prefix = os.fsdecode(_git(["rev-parse", "--show-prefix"], root)).strip()
        diff = _git(["diff", "--name-status", "-z", "--no-renames", "--no-ext-diff", "--no-relative",
                     "--end-of-options", ref, "--"], top).split(b"\0")
        others = _git(["ls-files", "--others", "--exclude-standard", "-z", "--full-name"], top).split(b"\0")
        status = {os.fsdecode(path): code.decode()[:1] for code, path in zip(diff[0::2], diff[1::2])}
        status.update((os.fsdecode(path), "A") for path in others if path)
        python: list[FileChange] = []
        opaque: list[Opaque] = []
        no_impact: list[str] = []
        for path, code in sorted(status.items()):
            rel = PurePosixPath(os.path.relpath(path, prefix or ".")).as_posix()
            reason = classify(path)
            if path.endswith(".py") and reason == _NOT_PYTHON:
                if rel.startswith("../"):
                    opaque.append(Opaque(rel, "Python outside the traced root"))
                    continue
                kind: Literal["added", "modified", "deleted"] = (
                    "added" if code == "A" else "deleted" if code == "D" else "modified")
                old = None if kind == "added" else _blob(top, ref, path)
                new = None if kind == "deleted" else _read(top / path)
                if (old is None and kind != "added") or (new is None and kind != "deleted"):
                    python.append(FileChange(rel, kind, f"larger than {MAX_SOURCE_BYTES} bytes", frozenset()))
                    continue
                module_level, functions = compare_source(old, new)
                if module_level is not None or functions:
                    python.append(FileChange(rel, kind, module_level, functions))
            elif reason is None:
                no_impact.append(rel)
            else:
                opaque.append(Opaque(rel, reason))
    except (_GitFailed, OSError) as exc:
        return Change(ref, undiffable=str(exc))
    return Change(ref, tuple(python), tuple(opaque), tuple(no_impact))


# ------------------------------------------------------------------------------------------------ the impact

def _own_function(nodeid: str) -> tuple[str, str]:
    """(file, qualified name) of the test function a pytest node id names: ``a/test_x.py::TestC::test_m[1]``
    is ``("a/test_x.py", "TestC.test_m")``."""
    path, _, rest = nodeid.partition("::")
    bracket = rest.find("[")
    return path, (rest if bracket < 0 else rest[:bracket]).replace("::", ".")


def _enclosing(qualname: str) -> Iterable[str]:
    # A nested function's enclosing functions set its closure and defaults: "a.<locals>.b" yields "a.<locals>.b"
    # and "a".
    parts = qualname.split(".<locals>.")
    for end in range(len(parts), 0, -1):
        yield ".<locals>.".join(parts[:end])


def impact(change: Change, ran: Mapping[str, TestTrace | None]) -> dict[str, Reason | None]:
    """Per test node id in ``ran``: None when no part of ``change`` can move it, else why it is compared.

    Rules, conservative where the evidence is weak: a change that says compare everything (opaque files, an
    undiffable REF) reaches every test; a test without a trace (None, or no function recorded) is compared; a
    changed function reaches the tests that ran it or a function nested in it (a test reaches its own function
    by its node id as well); a module-level change (or an added or deleted file) of F reaches every test that
    imported F or ran any function of F. Node ids and trace paths must be relative to the root the change was
    taken at. Mutates nothing.
    """
    everything = change.compare_all
    files = {f.path: f for f in change.python}
    result: dict[str, Reason | None] = {}
    for nodeid, trace in ran.items():
        if everything is not None:
            result[nodeid] = Reason("compare-all", everything)
        elif trace is None or not trace.functions:
            result[nodeid] = Reason("untraced", "no trace recorded")
        else:
            result[nodeid] = _test_impact(files, _own_function(nodeid), trace)
    return result


def _test_impact(files: Mapping[str, FileChange], own: tuple[str, str], trace: TestTrace) -> Reason | None:
    if not files:
        return None
    ran = sorted(trace.functions | {own})
    for path, qualname in ran:
        changed = files.get(path)
        if changed is None:
            continue
        if qualname == ANY_FUNCTION and changed.functions:
            return Reason("function", f"runs functions of {path} (names not traced), changed")
        for name in _enclosing(qualname):
            if name in changed.functions:
                return Reason("function", f"runs {path}::{name}, changed")
    reached = sorted(trace.imported | {path for path, _ in ran})
    for path in reached:
        changed = files.get(path)
        if changed is not None and changed.module_level is not None:
            how = "imports" if path in trace.imported else "runs code of"
            if changed.status == "modified":
                return Reason("module", f"{how} {path}, changed at module level ({changed.module_level})")
            return Reason("module", f"{how} {path}, {changed.status}")
    return None
