"""The path a marked test's item, entry and record take through the package, from the item's call to the end of
the session (issue: "a test's record is built once and flows one way").

Runs one marked test of a tiny suite in process under a profile hook and logs every call into a module of the
package that receives, as an argument, the pytest item, the test's ``TestEntry``, its ``Recorder``, a
``Judgement``, its ``Measured`` or its ``TestRecord`` (the suite has one test: every such object is that
test's), from collection to the end of the session. Prints the modules in the order entered, then: stays (runs
of calls in one module), modules, folders, returns to a module already left, folders entered again after
leaving, and the same within one trip. A trip begins where the package is entered with none of its frames on
the stack (pytest calls a hook, or the test calls the fixture), so "within trips" counts the folders the
package's own calls go back to. Compare two checkouts with ``--checkout DIR`` (their own package is imported).

    python benchmarks/record_path.py [--checkout DIR] [--show]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SUITE = textwrap.dedent("""
    import time
    import pytest

    def work():
        time.sleep(0.002)

    @pytest.mark.roofline(min_fraction=0.05)
    def test_marked(roofline):
        roofline.declare(flops=1e8).measure(work)
""")
MACHINE = {"name": "pinned-path-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}

CHILD = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import pytest
    import pytest_roofline

    package = str(Path(pytest_roofline.__file__).parent)
    log = []
    trip = [True]  # whether the next logged call is the first of a trip

    # the suite has one test: every object of these types is that test's, as it flows
    FOLLOWED = {"Function", "TestEntry", "TestRecord", "Recorder", "Judgement", "Measured"}

    def hook(frame, event, arg):
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(package):
            return
        below = frame.f_back
        while below is not None and not below.f_code.co_filename.startswith(package):
            below = below.f_back
        if below is None:  # no frame of the package under it: pytest, pluggy or the test calls in, a trip begins
            trip[0] = True
        code = frame.f_code
        arguments = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if any(type(frame.f_locals.get(name)).__name__ in FOLLOWED for name in arguments):
            log.append((filename[len(package) + 1:], code.co_name, trip[0]))
            trip[0] = False

    sys.setprofile(hook)
    import threading
    threading.setprofile(hook)
    code = pytest.main(sys.argv[1:])
    sys.setprofile(None)
    Path("path.json").write_text(json.dumps({"code": int(code), "log": log}))
""")


def measure(checkout: Path | None) -> list[tuple[str, str, bool]]:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        (root / "test_path.py").write_text(SUITE)
        (root / "machine.json").write_text(json.dumps(MACHINE))
        (root / "child.py").write_text(CHILD)
        env = dict(os.environ)
        if checkout is not None:
            env["PYTHONPATH"] = str(checkout.resolve()) + os.pathsep + env.get("PYTHONPATH", "")
        done = subprocess.run(
            [sys.executable, "child.py", "-q", "-p", "no:cacheprovider", "--roofline", "--roofline-machine",
             "machine.json", "--roofline-max-time", "0.05", "--roofline-dir", "out", "--junitxml", "r.xml",
             "test_path.py"], cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False)
        found = root / "path.json"
        if not found.is_file():
            raise SystemExit(f"record_path: the run wrote no path:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
        result = json.loads(found.read_text())
        if result["code"] != 0 or not result["log"]:
            raise SystemExit(f"record_path: the run failed or logged nothing (exit {result['code']}):\n"
                             f"{done.stdout[-2000:]}")
        return [(str(m), str(f), bool(outside)) for m, f, outside in result["log"]]


def _runs(items: list[str]) -> list[str]:
    runs: list[str] = []
    for item in items:
        if not runs or runs[-1] != item:
            runs.append(item)
    return runs


def _entered_again(runs: list[str]) -> int:
    return sum(1 for i, item in enumerate(runs) if item in runs[:i])


def folder_of(module: str) -> str:
    return module.split("/")[0] if "/" in module else "."


def figures(log: list[tuple[str, str, bool]]) -> dict[str, int]:
    stays = _runs([module for module, _, _ in log])
    folders = [folder_of(m) for m in stays]
    trips: list[list[str]] = []
    for module, _, outside in log:
        if outside or not trips:
            trips.append([])
        trips[-1].append(folder_of(module))
    return {"calls": len(log), "stays": len(stays), "modules": len(set(stays)), "folders": len(set(folders)),
            "returns": _entered_again(stays), "folders entered again": _entered_again(_runs(folders)),
            "trips": len(trips), "folders entered again within trips": sum(_entered_again(_runs(t)) for t in trips)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, help="measure the package of this checkout")
    parser.add_argument("--show", action="store_true", help="print every stay")
    args = parser.parse_args()
    log = measure(args.checkout)
    if args.show:
        last = None
        for module, function, outside in log:
            if module != last or outside:
                print(f"{'> ' if outside else '  '}{module}: {function}")
                last = module
    print(json.dumps(figures(log)))


if __name__ == "__main__":
    main()
