"""Change impact: what a diff between REF and the working tree changed (on throwaway git repositories), what a
trace records, and which tests the two together say a change can move."""

from __future__ import annotations

import importlib
import itertools
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Literal

import pytest

from pytest_roofline.ab.impact import (
    MODULE,
    Change,
    CodeTrace,
    FileChange,
    Opaque,
    Reason,
    TestTrace,
    block_name,
    changed_code,
    classify,
    impact,
    untraced,
)

WORK = '''\
"""Workloads."""
import math

SCALE = 2


def gemm(n):
    # the hot loop
    return sum(i * SCALE for i in range(n))


def lstm_step(x):
    return [math.tanh(v) for v in x]


class Runner:
    rows = 4

    def run(self, n):
        return gemm(n) + self.rows

    @staticmethod
    def helper():
        def inner(k):
            return k + 1
        return inner(1)
'''


class Repo:
    """A throwaway git repository: files written, committed, and the commit id."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir()
        self.git("init", "-q")

    def git(self, *args: str) -> str:
        done = subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                               *args], cwd=self.path, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    def write(self, name: str, text: str) -> None:
        target = self.path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "c", "--allow-empty")
        return self.git("rev-parse", "HEAD")

    def edit(self, name: str, old: str, new: str) -> None:
        text = (self.path / name).read_text()
        assert old in text
        self.write(name, text.replace(old, new))


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    made = Repo(tmp_path / "repo")
    made.write("pkg/work.py", WORK)
    made.write("README.md", "# r\n")
    return made


def only(path: str, functions: set[str], module_level: str | None = None,
         status: Literal["added", "modified", "deleted"] = "modified") -> FileChange:
    return FileChange(path, status, module_level, frozenset(functions))


# ----------------------------------------------------------------------------------------------- changed_code

def test_a_change_inside_one_function_names_that_function_only(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "math.tanh(v)", "math.tanh(v) * 1.0")
    assert changed_code(repo.path, ref) == Change(ref, (only("pkg/work.py", {"lstm_step"}),))


def test_comments_blank_lines_line_shifts_and_docstrings_change_nothing(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "    # the hot loop\n", "\n\n    # the hottest loop\n\n")
    repo.edit("pkg/work.py", '"""Workloads."""', '"""Workloads, documented."""\n# a comment')
    repo.edit("pkg/work.py", "return sum(i * SCALE", "return sum(i   *   SCALE")
    change = changed_code(repo.path, ref)
    assert change == Change(ref)
    assert change.compare_all is None


def test_a_module_constant_is_a_module_level_change(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "SCALE = 2", "SCALE = 3")
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", set(), "module-level code differs"),)


def test_a_decorator_or_default_value_is_a_module_level_change(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "    @staticmethod\n", "    @classmethod\n")
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", set(), "module-level code differs"),)
    repo.edit("pkg/work.py", "    @classmethod\n", "    @staticmethod\n")
    repo.edit("pkg/work.py", "def gemm(n):", "def gemm(n=3):")
    # The arguments are the function's own block too: the default runs at import, the signature at each call.
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"gemm"}, "module-level code differs"),)


def test_a_method_and_a_nested_function_are_named_by_their_qualified_names(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "gemm(n) + self.rows", "gemm(n) - self.rows")
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"Runner.run"}),)
    repo.edit("pkg/work.py", "gemm(n) - self.rows", "gemm(n) + self.rows")
    repo.edit("pkg/work.py", "return k + 1", "return k + 2")
    # The enclosing function holds a placeholder where the nested def's body was: it is unchanged.
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"Runner.helper.<locals>.inner"}),)


def test_a_class_attribute_is_a_module_level_change(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "rows = 4", "rows = 5")
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", set(), "module-level code differs"),)


def test_an_added_function_is_a_function_change_and_a_removed_one_module_level(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "class Runner:", "def fresh(x):\n    return x\n\n\nclass Runner:")
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"fresh"}),)
    repo.edit("pkg/work.py", "def fresh(x):", "@staticmethod\ndef fresh(x):")  # a decorator runs at import
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"fresh"}, "module-level code differs"),)
    repo.write("pkg/work.py", WORK.replace("def lstm_step(x):\n    return [math.tanh(v) for v in x]\n", ""))
    assert changed_code(repo.path, ref).python == (only("pkg/work.py", {"lstm_step"}, "removes lstm_step"),)


def test_a_file_that_does_not_parse_is_a_module_level_change(repo: Repo) -> None:
    ref = repo.commit()
    repo.edit("pkg/work.py", "def gemm(n):", "def gemm(n:")
    assert changed_code(repo.path, ref).python == (
        only("pkg/work.py", set(), "does not parse in the working tree"),)


def test_docs_only_change_has_no_impact_and_nothing_opaque(repo: Repo) -> None:
    repo.write("docs/guide.md", "guide\n")
    repo.write("docs/img/plot.png", "png")
    repo.write("LICENSE", "mit\n")
    ref = repo.commit()
    for name in ("README.md", "docs/guide.md", "docs/img/plot.png", "LICENSE"):
        repo.write(name, "changed\n")
    repo.write("CHANGELOG.md", "new\n")
    repo.write("notes.txt", "new\n")
    change = changed_code(repo.path, ref)
    assert change == Change(ref, no_impact=("CHANGELOG.md", "LICENSE", "README.md", "docs/guide.md",
                                            "docs/img/plot.png", "notes.txt"))
    assert change.compare_all is None
    assert impact(change, {"t.py::test_a": TestTrace(frozenset({("t.py", "test_a")}), frozenset())}) == {
        "t.py::test_a": None}


def test_conftest_c_source_and_pyproject_are_opaque(repo: Repo) -> None:
    repo.write("conftest.py", "X = 1\n")
    repo.write("pkg/kernel.c", "int f(void) { return 1; }\n")
    repo.write("pyproject.toml", "[project]\n")
    ref = repo.commit()
    repo.write("conftest.py", "X = 2\n")
    repo.write("pkg/kernel.c", "int f(void) { return 2; }\n")
    repo.write("pyproject.toml", "[project]\nname = 'x'\n")
    repo.write("requirements-dev.txt", "numpy\n")
    repo.write("data/table.csv", "1,2\n")
    change = changed_code(repo.path, ref)
    assert change == Change(ref, opaque=(
        Opaque("conftest.py", "fixtures and hooks for every test below it"),
        Opaque("data/table.csv", "not Python: tracing cannot see what reads it"),
        Opaque("pkg/kernel.c", "compiled source or binary"),
        Opaque("pyproject.toml", "build or packaging file"),
        Opaque("requirements-dev.txt", "dependency pins")))
    assert change.compare_all == (
        "conftest.py changed (opaque to tracing: fixtures and hooks for every test below it) and 4 more")


def test_committed_uncommitted_staged_untracked_and_deleted_files_all_count(repo: Repo) -> None:
    repo.write("pkg/gone.py", "def g():\n    return 1\n")
    repo.write("pkg/staged.py", "def s():\n    return 1\n")
    repo.write(".gitignore", "ignored.py\n")
    ref = repo.commit()
    repo.edit("pkg/work.py", "return gemm(n)", "return 2 * gemm(n)")
    repo.commit()  # committed after REF
    repo.edit("pkg/work.py", "math.tanh(v)", "math.sin(v)")  # uncommitted
    repo.edit("pkg/staged.py", "return 1", "return 2")
    repo.git("add", "pkg/staged.py")
    repo.write("pkg/new.py", "def n():\n    return 1\n")  # untracked
    repo.write("ignored.py", "def i():\n    return 1\n")  # ignored: the session may run it, git does not see it
    (repo.path / "pkg/gone.py").unlink()
    assert changed_code(repo.path, ref).python == (
        only("pkg/gone.py", {"g"}, "deleted", "deleted"),
        only("pkg/new.py", {"n"}, "added", "added"),
        only("pkg/staged.py", {"s"}),
        only("pkg/work.py", {"Runner.run", "lstm_step"}))


def test_paths_are_relative_to_the_root_and_files_outside_it_are_opaque(repo: Repo) -> None:
    repo.write("sub/mod.py", "def f():\n    return 1\n")
    repo.write("other/lib.py", "def h():\n    return 1\n")
    ref = repo.commit()
    repo.edit("sub/mod.py", "return 1", "return 2")
    repo.edit("other/lib.py", "return 1", "return 2")
    repo.write("sub/untracked.py", "def u():\n    return 1\n")
    assert changed_code(repo.path / "sub", ref) == Change(
        ref, python=(only("mod.py", {"f"}), only("untracked.py", {"u"}, "added", "added")),
        opaque=(Opaque("../other/lib.py", "Python outside the traced root"),), no_impact=())


@pytest.mark.parametrize("ref", ["HEAD", "--output=/tmp/x", "abc123", "A" * 40])
def test_a_ref_that_is_not_a_full_hex_id_is_never_passed_to_git(repo: Repo, ref: str) -> None:
    repo.commit()
    change = changed_code(repo.path, ref)
    assert change == Change(ref, undiffable=f"{ref!r} is not a full hex commit id")
    assert change.compare_all == f"REF cannot be diffed: {ref!r} is not a full hex commit id"


def test_an_unknown_commit_or_a_folder_outside_git_compares_everything(repo: Repo, tmp_path: Path) -> None:
    repo.commit()
    unknown = changed_code(repo.path, "0" * 40)
    assert unknown.undiffable is not None and unknown.undiffable.startswith("git diff failed: fatal: bad object 0000")
    (tmp_path / "plain").mkdir()
    outside = changed_code(tmp_path / "plain", "0" * 40)
    assert outside.undiffable is not None
    assert outside.undiffable.startswith("git rev-parse failed: fatal: not a git repository")
    assert impact(outside, {"t.py::test_a": TestTrace(frozenset({("t.py", "test_a")}), frozenset())}) == {
        "t.py::test_a": Reason("compare-all", f"REF cannot be diffed: {outside.undiffable}")}


@pytest.mark.parametrize(("path", "reason"), [
    ("docs/conf.yaml", None), ("pkg/types.pyi", None), ("CHANGELOG", None), ("a/b/README.rst", None),
    ("CMakeLists.txt", "build or packaging file"), ("setup.py", "build or packaging file"),
    ("uv.lock", "dependency pins"), ("tox.ini", "configuration"), ("setup.cfg", "build or packaging file"),
    ("pkg/k.cu", "compiled source or binary"), ("tests/conftest.py", "fixtures and hooks for every test below it"),
    ("model.bin", "not Python: tracing cannot see what reads it")])
def test_classify(path: str, reason: str | None) -> None:
    assert classify(path) == reason


# ------------------------------------------------------------------------------------------------------- impact

def trace(*functions: str, imported: tuple[str, ...] = ()) -> TestTrace:
    pairs = frozenset((path, name) for path, _, name in (f.partition("::") for f in functions))
    return TestTrace(pairs, frozenset(imported))


RAN = {
    "tests/test_w.py::test_gemm": trace("tests/test_w.py::test_gemm", "pkg/work.py::gemm",
                                        imported=("pkg/work.py", "tests/test_w.py")),
    "tests/test_w.py::TestLstm::test_step[2]": trace("tests/test_w.py::TestLstm.test_step",
                                                     "pkg/work.py::lstm_step", "pkg/nest.py::outer.<locals>.inner",
                                                     imported=("pkg/work.py", "tests/test_w.py")),
    "tests/test_o.py::test_other": trace("tests/test_o.py::test_other", imported=("tests/test_o.py",)),
}


def test_a_function_change_reaches_the_tests_that_ran_it_only() -> None:
    change = Change("0" * 40, (only("pkg/work.py", {"lstm_step"}),))
    before = dict(RAN)
    assert impact(change, RAN) == {
        "tests/test_w.py::test_gemm": None,
        "tests/test_w.py::TestLstm::test_step[2]": Reason("function", "runs pkg/work.py::lstm_step, changed"),
        "tests/test_o.py::test_other": None}
    assert RAN == before


def test_a_module_level_change_reaches_every_test_that_imported_the_file() -> None:
    change = Change("0" * 40, (only("pkg/work.py", set(), "module-level code differs"),))
    reason = Reason("module", "imports pkg/work.py, changed at module level (module-level code differs)")
    assert impact(change, RAN) == {"tests/test_w.py::test_gemm": reason,
                                   "tests/test_w.py::TestLstm::test_step[2]": reason,
                                   "tests/test_o.py::test_other": None}


def test_a_change_to_an_enclosing_function_reaches_the_tests_that_ran_the_nested_one() -> None:
    change = Change("0" * 40, (only("pkg/nest.py", {"outer"}),))
    assert impact(change, RAN)["tests/test_w.py::TestLstm::test_step[2]"] == Reason(
        "function", "runs pkg/nest.py::outer, changed")
    assert impact(change, RAN)["tests/test_w.py::test_gemm"] is None


def test_a_changed_test_reaches_itself_by_its_node_id() -> None:
    change = Change("0" * 40, (only("tests/test_w.py", {"TestLstm.test_step"}),))
    untraced_own = {"tests/test_w.py::TestLstm::test_step[2]": trace("pkg/work.py::lstm_step")}
    assert impact(change, untraced_own) == {"tests/test_w.py::TestLstm::test_step[2]": Reason(
        "function", "runs tests/test_w.py::TestLstm.test_step, changed")}
    assert impact(change, RAN)["tests/test_w.py::test_gemm"] is None


def test_an_opaque_change_or_a_missing_trace_compares() -> None:
    opaque = Change("0" * 40, opaque=(Opaque("conftest.py", "fixtures"),))
    assert impact(opaque, RAN) == dict.fromkeys(RAN, Reason(
        "compare-all", "conftest.py changed (opaque to tracing: fixtures)"))
    nothing = Change("0" * 40)
    untraced = Reason("untraced", "no trace recorded")
    assert impact(nothing, {"a.py::t": None, "b.py::t": TestTrace(frozenset(), frozenset({"b.py"})),
                            **RAN}) == {"a.py::t": untraced, "b.py::t": untraced, **dict.fromkeys(RAN)}


def test_a_deleted_or_added_module_reaches_the_tests_that_imported_it() -> None:
    change = Change("0" * 40, (only("pkg/work.py", {"gemm"}, "deleted", "deleted"),
                               only("tests/test_o.py", {"test_other"}, "added", "added")))
    assert impact(change, RAN) == {
        "tests/test_w.py::test_gemm": Reason("function", "runs pkg/work.py::gemm, changed"),
        "tests/test_w.py::TestLstm::test_step[2]": Reason("module", "imports pkg/work.py, deleted"),
        "tests/test_o.py::test_other": Reason("function", "runs tests/test_o.py::test_other, changed")}


def test_block_name_folds_lambdas_and_comprehensions_into_their_function() -> None:
    assert [block_name(q) for q in ("f.<locals>.<lambda>", "A.m.<locals>.<listcomp>", "<genexpr>", "A.<lambda>",
                                    "f.<locals>.g", "<module>")] == ["f", "A.m", MODULE, "A", "f.<locals>.g",
                                                                      MODULE]


# ---------------------------------------------------------------------------------------------------- CodeTrace

_names = itertools.count()

SOURCE = '''\
def f():
    return g() + (lambda: 1)()

def g():
    return 1

class A:
    def m(self):
        def inner():
            return 2
        return inner()

def later():
    return 3
'''


@pytest.fixture
def load(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Path, str], ModuleType]]:
    """Imports a module written to a folder under a fresh name; removed from sys.modules afterwards."""
    loaded: list[str] = []

    def do(folder: Path, source: str) -> ModuleType:
        name = f"impact_probe_{next(_names)}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(folder))
        loaded.append(name)
        return importlib.import_module(name)

    yield do
    for name in loaded:
        sys.modules.pop(name, None)


def test_code_trace_records_functions_under_the_root_and_no_others(
        tmp_path: Path, load: Callable[[Path, str], ModuleType]) -> None:
    root = tmp_path / "root"
    inside = load(root / "pkg", SOURCE)
    outside = load(tmp_path / "elsewhere", SOURCE)
    venv = root / "env"
    (venv / "lib").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr\n")
    in_venv = load(venv / "lib", SOURCE)
    in_site = load(root / "lib" / "site-packages", SOURCE)
    with CodeTrace(root) as code_trace:
        assert inside.f() == 2 and inside.A().m() == 2
        assert outside.f() == 2 and in_venv.f() == 2 and in_site.f() == 2
    inside.later()
    rel = f"pkg/{inside.__name__}.py"
    assert code_trace.functions() == {(rel, "f"), (rel, "g"), (rel, "A.m"), (rel, "A.m.<locals>.inner")}
    assert code_trace.imported_files() == {rel}
    assert code_trace.result() == TestTrace(code_trace.functions(), frozenset({rel}))
    assert sys.getprofile() is None


def test_code_trace_stops_recording_after_exit_in_every_thread(
        tmp_path: Path, load: Callable[[Path, str], ModuleType]) -> None:
    module = load(tmp_path, SOURCE)
    go_during, go_after, done_during = threading.Event(), threading.Event(), threading.Event()

    def worker() -> None:
        go_during.wait(10)
        module.g()
        done_during.set()
        go_after.wait(10)
        module.later()

    code_trace = CodeTrace(tmp_path)
    with code_trace:
        thread = threading.Thread(target=worker)
        thread.start()
        go_during.set()
        assert done_during.wait(10)
    go_after.set()
    thread.join(10)
    module.f()
    rel = f"{module.__name__}.py"
    assert code_trace.functions() == {(rel, "g")}
    assert code_trace.incomplete is None


def test_code_trace_nests_and_ignores_a_stop_without_a_start(
        tmp_path: Path, load: Callable[[Path, str], ModuleType]) -> None:
    module = load(tmp_path, SOURCE)
    rel = f"{module.__name__}.py"
    code_trace = CodeTrace(tmp_path)
    code_trace.stop()
    other = CodeTrace(tmp_path)
    with code_trace:
        with code_trace:
            module.g()
        assert code_trace.active
        with other:
            module.later()
        module.A().m()
    module.f()
    assert not code_trace.active
    assert code_trace.functions() == {(rel, "g"), (rel, "later"), (rel, "A.m"), (rel, "A.m.<locals>.inner")}
    assert other.functions() == {(rel, "later")}


def test_untraced_calls_are_not_recorded_and_tracing_resumes_after(
        tmp_path: Path, load: Callable[[Path, str], ModuleType]) -> None:
    module = load(tmp_path, SOURCE)
    rel = f"{module.__name__}.py"
    with CodeTrace(tmp_path) as code_trace:
        with untraced():
            module.later()
            assert sys.getprofile() is None
        module.g()
    assert code_trace.functions() == {(rel, "g")}


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring shares no hook with sys.setprofile")
def test_code_trace_under_another_profiler_is_incomplete(tmp_path: Path) -> None:
    def foreign(frame: object, event: str, arg: object) -> None:
        return None

    sys.setprofile(foreign)
    try:
        with CodeTrace(tmp_path) as code_trace:
            pass
        assert sys.getprofile() is foreign
    finally:
        sys.setprofile(None)
    assert code_trace.incomplete is not None and code_trace.incomplete.startswith("another profiler is active")
    assert code_trace.result() is None
