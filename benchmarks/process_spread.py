"""What varies between processes when nothing takes turns: one workload timed alone in fresh processes, one
after the other, each on one core with one thread and the plugin's malloc settings (as a compare twin has them).
Each process times two blocks of calls after a warm-up; the spread of the first blocks' medians between
processes, against the spread of the second block over the first inside each process, says whether a process
carries its own speed (its buffers' pages, the library's choices) or only the calls vary. Compare it with the
between-pair CV that ``ab_sensitivity.py`` reports for the same workload taking turns.

    python benchmarks/process_spread.py [--workload conv2d|gemm|copy] [--processes 12] [--calls 60]
        [--variant LABEL=NAME=VALUE[,NAME=VALUE] ...] [--no-aslr-variant]

Variants run interleaved (process by process), so a drift of the host hits each alike; ``as twins`` (the
environment as the plugin gives its twins: ``THP_MEM_ALLOC_ENABLE=1``) always runs. Say which machine it ran on.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import subprocess
import sys

from pytest_roofline.host.allocator import THP_ENV

CHILD = r'''
import json, os, statistics, sys, time
os.sched_setaffinity(0, {max(os.sched_getaffinity(0))})
from pytest_roofline.host.allocator import tune_malloc
tune_malloc()
import torch
torch.set_num_threads(1)
torch.manual_seed(int(sys.argv[2]))
workload, calls = sys.argv[1], int(sys.argv[3])
if workload == "conv2d":
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).eval()
    x = torch.randn(4, 64, 56, 56)
    def call():
        with torch.no_grad():
            conv(x)
elif workload == "gemm":
    a, b = torch.randn(768, 768), torch.randn(768, 768)
    def call():
        torch.mm(a, b)
else:
    n = 16 * 2**20
    src, dst = torch.randn(n), torch.empty(n)
    def call():
        dst.copy_(src)
def block(count):
    times = []
    for _ in range(count):
        start = time.perf_counter(); call(); times.append(time.perf_counter() - start)
    return statistics.median(times)
block(max(10, calls // 2))
print(json.dumps([block(calls), block(calls)]))
'''


def one_process(workload: str, seed: int, calls: int, env: dict[str, str], prefix: list[str]) -> tuple[float, float]:
    done = subprocess.run([*prefix, sys.executable, "-c", CHILD, workload, str(seed), str(calls)], env=env,
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"process failed ({workload}, {env}):\n{done.stderr[-2000:]}")
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    return first, second


def parse_variant(text: str) -> tuple[str, dict[str, str]]:
    label, _, assignments = text.partition("=")
    pairs = [item.split("=", 1) for item in assignments.split(",") if item]
    if not label or not pairs or any(len(p) != 2 or not p[0] for p in pairs):
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected LABEL=NAME=VALUE[,NAME=VALUE]")
    return label, dict(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", choices=("conv2d", "gemm", "copy"), default="conv2d")
    parser.add_argument("--processes", type=int, default=12)
    parser.add_argument("--calls", type=int, default=60, help="calls per timed block (two blocks per process)")
    parser.add_argument("--variant", type=parse_variant, action="append", default=[],
                        help="another environment to run beside the twins' (e.g. hugetlb=GLIBC_TUNABLES="
                             "glibc.malloc.hugetlb=1)")
    parser.add_argument("--no-aslr-variant", action="store_true",
                        help="also run the twins' environment without address-space randomization (setarch -R)")
    args = parser.parse_args()
    if args.processes < 3:
        parser.error(f"--processes {args.processes}: needs 3 or more for a spread")
    twins = {**os.environ, THP_ENV: "1"}  # as the plugin asks for its twins (host.allocator.enable_torch_thp)
    variants: dict[str, tuple[dict[str, str], list[str]]] = {"as twins": (twins, [])}
    for label, extra in args.variant:
        variants[label] = ({**twins, **extra}, [])
    if args.no_aslr_variant:
        if shutil.which("setarch") is None:
            parser.error("--no-aslr-variant needs setarch (util-linux)")
        variants["no ASLR"] = (twins, ["setarch", "-R"])
    found: dict[str, list[tuple[float, float]]] = {label: [] for label in variants}
    for seed in range(args.processes):
        for label, (env, prefix) in variants.items():
            found[label].append(one_process(args.workload, seed, args.calls, env, prefix))
    print(f"{args.workload}: {args.processes} fresh processes per variant, two blocks of {args.calls} calls each")
    print(f"{'variant':>14} {'median':>10} {'between processes':>18} {'inside a process':>17}  range")
    for label, blocks in found.items():
        first = [b[0] for b in blocks]
        between = statistics.stdev(math.log(v) for v in first)
        inside = statistics.stdev(math.log(b[1] / b[0]) for b in blocks) / math.sqrt(2)  # one block's own spread
        print(f"{label:>14} {statistics.median(first) * 1e3:8.3f} ms {between:17.2%} {inside:16.2%}  "
              f"{min(first) * 1e3:.3f}-{max(first) * 1e3:.3f} ms")


if __name__ == "__main__":
    main()
