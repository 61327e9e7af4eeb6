"""What a pull request's A/B gate costs now that it compares only what the change reaches, and that it still
catches what it must: side by side in one run, on throwaway git repositories.

``cost`` (the default): the example suite copied into a repository; for each change -- a statement inside the
LSTM tests' own helper (``lstm``), a module-level line in ``workloads.py`` that every test imports (``module``),
a README edit (``docs``) -- a plain ``pytest --roofline`` session and a ``--roofline-compare HEAD`` session of the
changed working tree run alternately; printed: each session's wall time, compare / plain, how many tests were
compared and unchanged, and any test the A/B gate failed (every change is A/A in its timing: a failure is a
false alarm).

``detect``: a small repository of a GEMM, a copy and an LSTM step (``work.py``) and a helper only the GEMM calls
(``helpers.py``); for each plant, a ``--roofline-compare HEAD`` session against the unplanted commit: 7 % more
elements in the copy's own function (``function``: the copy alone fails), 7 % more in a module constant the GEMM
and the copy read (``constant``: those two fail), 7 % more rows in the helper (``helper``: the GEMM fails);
printed: each test's verdict and whether it is the expected one.

    python benchmarks/ab_reach_cost.py [cost|detect] [--rounds 1] [--only lstm module docs] [--keep DIR]

Say which machine it ran on. Exits 1 when a session wrote no results or a verdict is not the expected one.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
from common import git, roofline_session

ROOT = HERE.parent
CHANGES = {
    # a statement inside a function only the LSTM tests run
    "lstm": ("test_lstm.py", "    torch.manual_seed(0)\n", "    torch.manual_seed(0)\n    _ = T + 0\n"),
    # a module-level line in the file every test imports
    "module": ("workloads.py", "\nimport torch\n", "\nimport torch\n\n_BENCH_LINE = 1\n"),
    "docs": ("README.md", "", "An edit to the docs.\n"),
}


def example_repo(root: Path) -> Path:
    """The example suite as a repository of its own (the suite's files at its top, committed once)."""
    repo = root / "suite"
    shutil.copytree(ROOT / "example_suite", repo, ignore=shutil.ignore_patterns("__pycache__"))
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
    (repo / ".gitignore").write_text(".roofline/\n__pycache__/\n")
    (repo / "README.md").write_text("The example suite.\n")
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "base")
    return repo


def apply(repo: Path, change: str) -> None:
    """Plant one change in the working tree (``git checkout .`` undoes it)."""
    name, old, new = CHANGES[change]
    path = repo / name
    text = path.read_text()
    if old and old not in text:
        raise SystemExit(f"ab_reach_cost: {name} no longer holds {old!r}: update CHANGES")
    path.write_text(text.replace(old, new, 1) if old else text + new)


def summary_counts(output: str) -> str:
    line = next((ln for ln in output.splitlines() if "test(s) compared" in ln), "")
    return line.split("compare: ", 1)[-1].split(";", 1)[0] if line else "(no compare line)"


def failed_by_ab(document: dict[str, Any]) -> list[str]:
    return [t["nodeid"] for t in document.get("tests", [])
            if (t.get("compare") or {}).get("verdict") == "regressed"]


def cost(args: argparse.Namespace, root: Path) -> int:
    repo = example_repo(root)
    bad = 0
    print(f"{'change':<8} {'round':>5} {'plain s':>8} {'compare s':>10} {'x':>6}  compared")
    for change in args.only:
        for round_ in range(args.rounds):
            apply(repo, change)
            plain = roofline_session(root / f"plain-{change}-{round_}", [], cwd=repo)
            compare = roofline_session(root / f"compare-{change}-{round_}", ["--roofline-compare", "HEAD"],
                                       cwd=repo, output=True)
            git(repo, "checkout", "-q", ".")
            plain.required(f"the plain session ({change})")
            document = compare.required(f"the compare session ({change})")
            alarms = failed_by_ab(document)
            bad += len(alarms)
            print(f"{change:<8} {round_:>5} {plain.seconds:>8.1f} {compare.seconds:>10.1f} "
                  f"{compare.seconds / plain.seconds:>6.2f}  {summary_counts(compare.output)}"
                  + (f"  FALSE ALARM: {', '.join(alarms)}" if alarms else ""))
    return 1 if bad else 0


WORK = '''
import torch

from helpers import gemm_rows

ELEMENTS = {elements}  # the copy and the GEMM read it


def gemm(a, b):
    return a[: gemm_rows(b.shape[0])] @ b  # a holds twice the rows: the helper picks how many are multiplied


def copy(x):
    return x[: int(ELEMENTS * {copy_share})].clone()


def lstm_step(lstm, x):
    return lstm(x)[0]
'''

HELPERS = '''
def gemm_rows(rows):
    return int(rows * {rows_share})
'''

TESTS = '''
import pytest
import torch

from work import ELEMENTS, copy, gemm, lstm_step


@pytest.mark.roofline
def test_gemm(roofline):
    torch.manual_seed(0)
    n = int((ELEMENTS // 16) ** 0.5)
    a, b = torch.randn(2 * n, n), torch.randn(n, n)
    roofline.measure(gemm, a, b)


@pytest.mark.roofline
def test_copy(roofline):
    roofline.measure(copy, torch.ones(int(ELEMENTS * 1.2)))


@pytest.mark.roofline
def test_lstm(roofline):
    torch.manual_seed(0)
    lstm = torch.nn.LSTM(128, 128)
    roofline.measure(lstm_step, lstm, torch.randn(20, 8, 128))
'''

PLANTS = {  # plant -> (work.py values, helpers.py value, the tests that must fail)
    "function": ({"elements": 2**22, "copy_share": 1.07}, 1.0, {"test_copy"}),
    "constant": ({"elements": int(2**22 * 1.07), "copy_share": 1.0}, 1.0, {"test_gemm", "test_copy"}),
    "helper": ({"elements": 2**22, "copy_share": 1.0}, 1.07, {"test_gemm"}),
}


def verdict_text(block: dict[str, Any]) -> str:
    """``regressed x1.071`` or ``unchanged``: the A/B verdict and, where compared, the time ratio."""
    ratio = ((block.get("changes") or {}).get("time") or {}).get("ratio")
    return f"{block.get('verdict')}" + (f" x{ratio:.3f}" if isinstance(ratio, (int, float)) else "")


def detect(args: argparse.Namespace, root: Path) -> int:
    wrong = 0
    for plant in args.plants:
        values, rows_share, expected = PLANTS[plant]
        repo = root / f"detect-{plant}"
        repo.mkdir()
        (repo / "work.py").write_text(WORK.format(elements=2**22, copy_share=1.0))
        (repo / "helpers.py").write_text(HELPERS.format(rows_share=1.0))
        (repo / "test_work.py").write_text(TESTS)
        (repo / "pytest.ini").write_text("[pytest]\npythonpath = .\n")
        (repo / ".gitignore").write_text(".roofline/\n__pycache__/\n")
        git(repo, "init", "-q")
        git(repo, "add", "-A")
        git(repo, "commit", "-qm", "base")
        (repo / "work.py").write_text(WORK.format(**values))
        (repo / "helpers.py").write_text(HELPERS.format(rows_share=rows_share))
        for round_ in range(args.rounds):
            session = roofline_session(root / f"detect-{plant}-{round_}", ["--roofline-compare", "HEAD"],
                                       cwd=repo, output=True)
            document = session.required(f"the {plant} session")
            verdicts = {t["nodeid"].split("::")[-1]: verdict_text(t.get("compare") or {})
                        for t in document.get("tests", [])}
            failed = {name for name, verdict in verdicts.items() if verdict.startswith("regressed")}
            ok = failed == expected
            wrong += not ok
            shown = ", ".join(f"{n} {v}" for n, v in sorted(verdicts.items()))
            print(f"{plant:<9} {round_:>2} {session.seconds:6.1f} s  {shown}  "
                  f"{'as expected' if ok else f'EXPECTED {sorted(expected)} to fail'}")
    return 1 if wrong else 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=("cost", "detect"), default="cost")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--only", nargs="+", choices=sorted(CHANGES), default=["lstm", "module", "docs"])
    parser.add_argument("--plants", nargs="+", choices=sorted(PLANTS), default=sorted(PLANTS))
    parser.add_argument("--keep", type=Path, default=None, help="keep the repositories and sessions here")
    args = parser.parse_args()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="ab-reach-") as temp:
        root = args.keep or Path(temp)
        root.mkdir(parents=True, exist_ok=True)
        status = cost(args, root) if args.mode == "cost" else detect(args, root)
    print(f"ab_reach_cost {args.mode}: {time.monotonic() - started:.0f} s")
    raise SystemExit(status)


if __name__ == "__main__":
    main()
