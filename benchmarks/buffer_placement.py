"""How much where a buffer lands moves a memory-bound call: two sets of buffers in one process, timed in turns.

Each round allocates two fresh sets (source and destination of a copy, ``--mib`` each), warms both, then times
them in alternating turns (order drawn per turn) and keeps the median log ratio of set A over set B. The code,
the process and the moment are shared, so the ratios' spread between rounds is what the buffers' placement
(physical pages, their host backing on a VM, cache-set conflicts) does to one call: the level of variance the A/B
gate's process pairs sample. ``--b-first`` allocates set B before set A (the first set allocated after the
previous round freed its buffers is the one that differs, if either does).

    python benchmarks/buffer_placement.py [--rounds 20] [--mib 64] [--turns 40] [--threads 2] [--b-first]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--mib", type=int, default=64, help="each buffer's size")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--b-first", action="store_true", help="allocate set B before set A")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    n = args.mib * 2 ** 20 // 4
    draw = random.Random(1)
    def one_round() -> float:
        """Both sets live only inside this call: every buffer of a round is freed before the next allocates."""
        sets = {}
        for name in ("b", "a") if args.b_first else ("a", "b"):
            sets[name] = (torch.ones(n), torch.empty(n))
        for src, dst in sets.values():
            for _ in range(5):
                dst.copy_(src)
        logs = []
        for _ in range(args.turns):
            took = {}
            for name in draw.sample(["a", "b"], 2):
                src, dst = sets[name]
                start = time.perf_counter()
                dst.copy_(src)
                took[name] = time.perf_counter() - start
            logs.append(math.log(took["a"] / took["b"]))
        return math.exp(statistics.median(logs))

    ratios = [one_round() for _ in range(args.rounds)]
    print(f"{args.rounds} rounds of two fresh {args.mib} MiB copy sets, {args.turns} turns each, "
          f"{'B' if args.b_first else 'A'} allocated first, {args.threads} threads")
    print("A/B per round:", " ".join(f"{r:.3f}" for r in ratios))
    logs = [math.log(r) for r in ratios]
    print(f"median {math.exp(statistics.median(logs)):.3f}, CV between rounds {statistics.stdev(logs):.2%}")


if __name__ == "__main__":
    main()
