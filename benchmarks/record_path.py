"""The path a marked test's item, entry and record take through the package, from the item's call to the end of
the session (issue: "a test's record is built once and flows one way").

Runs one marked test of a tiny suite in process under a profile hook and logs every call into a module of the
package that receives, as an argument, the pytest item, the test's ``TestEntry``, its ``Recorder``, a
``Judgement`` or its ``TestRecord`` (the suite has one test: every such object is that test's), from
collection to the end of the session. Prints the modules in the order entered, then: stays (runs of calls in
one module), modules, folders, returns to a module already left, and folders entered again after leaving.
Compare two checkouts with ``--checkout DIR`` (their own package is imported).

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

    # the suite has one test: every object of these types is that test's, as it flows
    FOLLOWED = {"Function", "TestEntry", "TestRecord", "Recorder", "Judgement"}

    def hook(frame, event, arg):
        if event != "call":
            return
        filename = frame.f_code.co_filename
        if not filename.startswith(package):
            return
        code = frame.f_code
        arguments = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
        if any(type(frame.f_locals.get(name)).__name__ in FOLLOWED for name in arguments):
            log.append((filename[len(package) + 1:], code.co_name))

    sys.setprofile(hook)
    import threading
    threading.setprofile(hook)
    code = pytest.main(sys.argv[1:])
    sys.setprofile(None)
    Path("path.json").write_text(json.dumps({"code": int(code), "log": log}))
""")


def measure(checkout: Path | None) -> list[tuple[str, str]]:
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
        return [tuple(x) for x in result["log"]]


def figures(log: list[tuple[str, str]]) -> dict[str, int]:
    stays: list[str] = []
    for module, _ in log:
        if not stays or stays[-1] != module:
            stays.append(module)
    folders = [m.split("/")[0] if "/" in m else "." for m in stays]
    folder_runs: list[str] = []
    for folder in folders:
        if not folder_runs or folder_runs[-1] != folder:
            folder_runs.append(folder)
    returns = sum(1 for i, m in enumerate(stays) if m in stays[:i])
    folder_returns = sum(1 for i, f in enumerate(folder_runs) if f in folder_runs[:i])
    return {"calls": len(log), "stays": len(stays), "modules": len(set(stays)), "folders": len(set(folders)),
            "returns": returns, "folders entered again": folder_returns}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, help="measure the package of this checkout")
    parser.add_argument("--show", action="store_true", help="print every stay")
    args = parser.parse_args()
    log = measure(args.checkout)
    if args.show:
        last = None
        for module, function in log:
            if module != last:
                print(f"{module}: {function}")
                last = module
    print(json.dumps(figures(log)))


if __name__ == "__main__":
    main()
