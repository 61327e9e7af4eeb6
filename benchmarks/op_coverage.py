"""How much of each test's time do its per-op times account for, and what does the profiler cost?

    python benchmarks/op_coverage.py [pytest paths and options ...]   # default: example_suite
    python benchmarks/op_coverage.py --results .roofline/results.json  # only print the table of a run

Runs ``pytest --roofline <paths> --roofline-ops always -p no:cacheprovider`` in a subprocess (niced), then
prints per measured region: the timed loop's median, the median bare call made beside the profiled ones, how
many ops got a time, how many counted op calls matched a profiler event, the coverage (sum of the op times /
the bare call), the same against the timed median, and the profiler's overhead (profiled / bare call - 1),
with the CPU model. No assertion: these are measured numbers for docs/counters.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pytest_roofline.characterize.fingerprint import cpu_model

HEADER = ("| test | timed median (ms) | bare beside (ms) | ops timed | op calls matched | coverage | of timed median "
          "| profiler overhead |\n|---|---|---|---|---|---|---|---|")


def table(results: Mapping[str, Any]) -> list[str]:
    lines = [HEADER]
    for test in results.get("tests", []):
        name = str(test["nodeid"]).split("::", 1)[-1]
        for region in test.get("regions", []):
            ops = region.get("ops")
            if ops is None:
                lines.append(f"| {name} | {region['time_s'] * 1e3:.3g} | – | – (counter: {region['counter']}) "
                             "| | | | |")
                continue
            of_timed = ops.get("coverage_of_timed_median")
            lines.append(f"| {name} | {region['time_s'] * 1e3:.3g} | {ops['bare_call_s'] * 1e3:.3g} | "
                         f"{ops['ops_timed']}/{ops['ops']} | {ops['counted_calls_matched']}/{ops['counted_calls']} | "
                         f"{ops['coverage']:.2f} | {'' if of_timed is None else f'{of_timed:.2f}'} | "
                         f"{ops['profiler_overhead']:+.0%} |")
    return lines



def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, help="print the table of this results.json instead of running")
    args, pytest_args = parser.parse_known_args(argv)
    if args.results is None:
        directory = Path(tempfile.mkdtemp(prefix="op-coverage-"))
        command = ["nice", "-n", "19", sys.executable, "-m", "pytest", "--roofline", "--roofline-ops", "always",
                   "-p", "no:cacheprovider", "-q", "--roofline-dir", str(directory),
                   *(pytest_args or ["example_suite"])]
        print(" ".join(command), flush=True)
        subprocess.run(command, check=False)
        args.results = directory / "results.json"
    print(f"CPU: {cpu_model()}")
    try:
        rows = table(json.loads(args.results.read_text()))
    except (OSError, ValueError) as exc:
        raise SystemExit(f"op_coverage: no results to read in {args.results}: {exc}") from None
    if len(rows) == 1:
        raise SystemExit(f"op_coverage: {args.results} holds no measured region")
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
