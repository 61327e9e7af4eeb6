"""Under pytest-xdist, which cores each worker measured on and the fractions it got, beside a serial run.

    python benchmarks/xdist_cores.py [--workers 2] [pytest args, default: benchmarks/heldout]

Runs the tests once serially and once with ``-n WORKERS`` (alternating, ``--rounds`` times) and prints per test:
the worker, the cores its measurement used, the threads torch had, and the median fraction of each mode.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# A tiny plugin loaded into every worker: after each test, one JSON line with where its regions ran.
DUMP_PLUGIN = '''
import json, os, pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    result = yield
    recorder = getattr(item, "funcargs", {}).get("roofline")
    regions = getattr(recorder, "regions", None) or []
    verdict = recorder.verdict() if regions else None
    torch = __import__("sys").modules.get("torch")
    line = {"nodeid": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER", "-"),
            "affinity": sorted(os.sched_getaffinity(0)), "torch_threads": torch.get_num_threads() if torch else None,
            "cores": [r.placement.to_dict() if r.placement is not None else None for r in regions],
            "fraction": verdict.fraction if verdict else None}
    with open(os.environ["ROOFLINE_DUMP"], "a") as out:
        out.write(json.dumps(line) + "\\n")
    return result
'''


def run(tmp: Path, name: str, extra: list[str], pytest_args: list[str]) -> list[dict]:
    dump = tmp / f"{name}.jsonl"
    env = {**os.environ, "ROOFLINE_DUMP": str(dump),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp), os.environ.get("PYTHONPATH")]))}
    subprocess.run([sys.executable, "-m", "pytest", "--roofline", "--roofline-dir", str(tmp / name), "-q",
                    "-p", "no:cacheprovider", "-p", "roofline_dump", *extra, *pytest_args],
                   check=False, stdout=subprocess.DEVNULL, env=env)
    return [json.loads(line) for line in dump.read_text().splitlines()] if dump.exists() else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args, pytest_args = parser.parse_known_args()
    pytest_args = pytest_args or ["benchmarks/heldout"]
    serial: dict[str, list[float]] = {}
    parallel: dict[str, list[float]] = {}
    where: dict[str, set[str]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "roofline_dump.py").write_text(DUMP_PLUGIN)
        for index in range(args.rounds):
            for line in run(tmp, f"serial{index}", ["-p", "no:xdist"], pytest_args):
                serial.setdefault(line["nodeid"], []).append(line["fraction"])
            for line in run(tmp, f"xdist{index}", ["-n", str(args.workers)], pytest_args):
                parallel.setdefault(line["nodeid"], []).append(line["fraction"])
                used = sorted({c for p in line["cores"] if p for c in p["used"]})
                where.setdefault(line["nodeid"], set()).add(
                    f"{line['worker']}: affinity {','.join(map(str, line['affinity']))}, measured on "
                    f"{','.join(map(str, used))}, {line['torch_threads']} torch thread(s)")
            print(f"round {index + 1}/{args.rounds} done", file=sys.stderr)
    print(f"{'test':44s} {'serial':>7s} {'-n ' + str(args.workers):>7s} {'ratio':>7s}  workers")
    for nodeid, values in serial.items():
        other = parallel.get(nodeid)
        if not other:
            continue
        ratio = statistics.median(other) / statistics.median(values)
        print(f"{nodeid.split('::')[-1][:44]:44s} {statistics.median(values):7.3f} {statistics.median(other):7.3f} "
              f"{ratio:7.3f}  {' | '.join(sorted(where[nodeid]))}")


if __name__ == "__main__":
    main()
