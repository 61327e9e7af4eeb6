"""Write a synthetic roofline history in the documented format (docs/history-format.md), for the site.

    python benchmarks/make_history.py OUT_DIR [--sessions 1000] [--tests 50] [--machines 2] [--seed 1]
                                      [--step-at 0.66] [--artifacts]

Sessions run nightly, round-robin over the machines (the same commit on every machine of a night). Each
test has a base fraction, a threshold and lognormal noise (2-6 % per test); from ``--step-at`` (a share of
the nights) every fifth test loses 15 % of its fraction, one test gains 10 %, and ``test_attention``'s drop
takes it under its threshold, so its sessions fail. ``test_matmul[batch=...]`` is parametrized over batch
sizes whose arithmetic intensity grows with the batch, for the roofline trajectories. Numbers are made up:
this feeds the site's tests and its scale target, it measures nothing.

``--artifacts`` also writes a small PNG and kernel table for each failing test of the last 3 failing
sessions, under ``OUT_DIR/../sessions/<id>/`` and recorded as ``.roofline/sessions/<id>/...`` (the layout
of ``--roofline-dir .roofline`` with the history at ``.roofline/history``), as a real run keeps artifacts only
for its newest sessions.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

MACHINES: list[dict[str, Any]] = [
    {"key": "intel-xeon-2c-5be0a41c", "name": "Intel Xeon (2 cores)",
     "peak_flops": {"fp32": 1.9e11, "fp64": 9.6e10, "bf16": 3.8e11},
     "bandwidth": {"L1": 1.1e12, "L2": 4.2e11, "DRAM": 1.6e10}},
    {"key": "nvidia-h100-80gb-9c2e11f0", "name": "NVIDIA H100 80GB HBM3",
     "peak_flops": {"fp32": 6.0e13, "tf32": 4.9e14, "fp16": 9.9e14},
     "bandwidth": {"L1": 3.3e13, "L2": 1.1e13, "DRAM": 3.3e12}},
    {"key": "amd-epyc-4c-71d3e802", "name": "AMD EPYC (4 cores)",
     "peak_flops": {"fp32": 4.1e11, "fp64": 2.0e11},
     "bandwidth": {"L1": 2.3e12, "L2": 9.0e11, "L3": 3.1e11, "DRAM": 2.4e10}},
]
OPS = ["conv2d", "attention", "softmax", "layernorm", "gelu", "embedding", "lstm", "batchnorm", "linear",
       "adamw_step", "cross_entropy", "pool", "transpose", "gather", "scatter_add", "cumsum", "topk"]
BATCHES = [1, 2, 4, 8, 16, 32, 64]
START = datetime(2025, 1, 6, 2, 0, tzinfo=timezone.utc)
# A 1x1 grey PNG: the artifact links need a file that exists, not a real chart.
TINY_PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108000000003a7e9b55"
                         "0000000a49444154789c63680000008200814d4a4ba70000000049454e44ae426082")


def _sig(x: float, digits: int = 6) -> float:
    return float(f"{x:.{digits}g}")


def _t_min(flops: dict[str, float], nbytes: dict[str, float], machine: dict[str, Any]) -> tuple[float, str]:
    terms = {f"memory:{level}": b / machine["bandwidth"][level] for level, b in nbytes.items()}
    compute = sum(f / machine["peak_flops"][p] for p, f in flops.items())
    if compute > 0:
        terms["compute:" + max(flops, key=lambda p: flops[p] / machine["peak_flops"][p])] = compute
    bound = max(terms, key=lambda k: terms[k])
    return terms[bound], bound


def _workloads(tests: int, machine: dict[str, Any]) -> list[dict[str, Any]]:
    """Per test: node id, params, FLOPs and bytes per level, base fraction, threshold, noise, step."""
    out: list[dict[str, Any]] = []
    precision = "fp32"
    levels = list(machine["bandwidth"])
    for batch in BATCHES[: min(len(BATCHES), max(2, tests // 2), tests)]:
        flops = 2.0 * batch * 1024 * 1024 * 64
        dram = 4.0 * (1024 * 1024 + 2 * batch * 1024 * 64)
        nbytes = {level: dram * (1 + 2 * i) for i, level in enumerate(reversed(levels))}
        # Small batches are memory bound and reach less of their roof; big ones get close to the top.
        out.append({"nodeid": f"tests/test_models.py::test_matmul[batch={batch}]", "params": {"batch": batch},
                    "function": "tests/test_models.py::test_matmul", "flops": {precision: flops},
                    "bytes": nbytes, "fraction": 0.18 + 0.1 * math.log2(batch), "noise": 0.03, "step": 0.0})
    index = 0
    while len(out) < tests:
        op = OPS[index % len(OPS)]
        name = op if index < len(OPS) else f"{op}_{index // len(OPS)}"
        rng = random.Random(zlib.crc32(name.encode()))
        ai = 10 ** rng.uniform(-1.5, 2.5)
        dram = 10 ** rng.uniform(6, 9)
        nbytes = {level: dram * (1 + 1.5 * i) for i, level in enumerate(reversed(levels))}
        step = -0.15 if index % 5 == 0 else (0.10 if index % 7 == 3 else 0.0)
        fraction = rng.uniform(0.1, 0.8)
        threshold = 0.7 * fraction
        if op == "attention" and index < len(OPS):
            threshold = 0.9 * fraction  # its step takes it under the threshold: failing sessions
            step = -0.2
        out.append({"nodeid": f"tests/test_ops.py::test_{name}", "params": {},
                    "function": f"tests/test_ops.py::test_{name}",
                    "flops": {precision: ai * dram} if op not in ("transpose", "gather") else {},
                    "bytes": nbytes, "fraction": fraction, "threshold": threshold,
                    "noise": rng.uniform(0.02, 0.06), "step": step})
        index += 1
    for w in out:
        w.setdefault("threshold", 0.7 * w["fraction"])
        w["threshold"] = round(w["threshold"], 2)
    return out


def _record(w: dict[str, Any], machine: dict[str, Any], fraction: float, rng: random.Random,
            artifacts: list[str]) -> dict[str, Any]:
    t_min, bound = _t_min(w["flops"], w["bytes"], machine)
    time_s = t_min / fraction
    samples = [_sig(time_s * math.exp(rng.gauss(0, w["noise"] / 2))) for _ in range(10)]
    flops = sum(w["flops"].values())
    nbytes = {level: _sig(b) for level, b in w["bytes"].items()}
    ai = {level: _sig(flops / b) for level, b in nbytes.items()} if flops else {}
    verdict = {"time_s": _sig(time_s), "t_min_s": _sig(t_min), "fraction": _sig(fraction),
               "headroom": _sig(1 / fraction), "bound": bound, "bound_shares": {bound: 1.0},
               "flops": flops, "flops_by_precision": dict(w["flops"]), "bytes": nbytes, "ai": ai}
    kernels = [{"name": f"{w['function'].rsplit('::', 1)[1]}_kernel{k}", "launches": 1, "time_s": None,
                "flops": {p: f * share for p, f in w["flops"].items()},
                "bytes": {level: b * share for level, b in nbytes.items()}}
               for k, share in enumerate((0.7, 0.3))]
    outcome = "failed" if fraction < w["threshold"] else "passed"
    return {"nodeid": w["nodeid"], "outcome": outcome, "min_fraction": w["threshold"],
            "artifacts": artifacts if outcome == "failed" else [], "counter": "analytic", **verdict,
            "kernels": kernels,
            "regions": [{"label": w["function"].rsplit("::", 1)[1], "counter": "analytic",
                         "timing": {"median_s": _sig(time_s), "rounds": len(samples), "samples_s": samples},
                         **verdict, "kernels": kernels, "notes": []}],
            "params": dict(w["params"]), "function": w["function"]}


def write_history(directory: Path, sessions: int = 1000, tests: int = 50, machines: int = 2, seed: int = 1,
                  step_at: float = 0.66, artifacts: bool = False) -> list[Path]:
    """Write ``sessions`` history files under ``directory``; returns their paths in session order."""
    rng = random.Random(seed)
    chosen = MACHINES[: max(1, min(machines, len(MACHINES)))]
    workloads = {m["key"]: _workloads(tests, m) for m in chosen}
    nights = math.ceil(sessions / len(chosen))
    commits = [hashlib.sha1(f"{seed}-{n}".encode()).hexdigest() for n in range(nights)]
    paths: list[Path] = []
    failing: list[tuple[Path, dict[str, Any]]] = []
    for i in range(sessions):
        night, machine = divmod(i, len(chosen))[0], chosen[i % len(chosen)]
        start = START + timedelta(days=night, minutes=rng.uniform(0, 50) + 60 * (i % len(chosen)))
        session_id = start.strftime("%Y%m%dT%H%M%S") + f".{start.microsecond // 1000:03d}Z-{1000 + i}"
        drift = {"peak_flops": {p: _sig(v * (1 + rng.gauss(0, 0.01))) for p, v in machine["peak_flops"].items()},
                 "bandwidth": {lv: _sig(v * (1 + rng.gauss(0, 0.015))) for lv, v in machine["bandwidth"].items()}}
        roofs = {**machine, **drift}
        stepped = night >= step_at * nights
        records = []
        for w in workloads[machine["key"]]:
            fraction = w["fraction"] * (1 + w["step"] if stepped else 1.0) * math.exp(rng.gauss(0, w["noise"]))
            slug = w["nodeid"].replace("/", "_").replace("::", "__").replace("[", "_").replace("]", "")
            names = [f".roofline/sessions/{session_id}/{slug}-{k}"
                     for k in ("0a1b2c3d4e.png", "0a1b2c3d4e.kernels.csv")]
            records.append(_record(w, roofs, min(fraction, 0.98), rng, names))
        exit_status = 1 if any(r["outcome"] == "failed" for r in records) else 0
        document = {
            "format": "pytest-roofline-history", "schema": 1,
            "session": {"id": session_id, "start": start.isoformat(),
                        "end": (start + timedelta(minutes=12)).isoformat(), "exit_status": exit_status,
                        "git": {"commit": commits[night], "branch": "main", "dirty": False},
                        "versions": {"python": "3.11.7", "pytest": "8.3.3", "pytest_roofline": "0.1.0",
                                     "torch": "2.13.0", "cuda": None, "driver": None},
                        "pytest_args": ["--roofline", "tests"], "counter": "analytic"},
            "machine": {"key": machine["key"], "fingerprint": machine["key"].rsplit("-", 1)[1] * 8,
                        "name": machine["name"], **drift, "info": {"source": "synthetic"}},
            "tests": records,
        }
        name = f"{start.strftime('%Y%m%dT%H%M%SZ')}-{commits[night][:12]}-{rng.getrandbits(16):04x}.json"
        path = directory / machine["key"] / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, separators=(",", ":")))
        paths.append(path)
        if exit_status:
            failing.append((path, document))
    if artifacts:
        for _path, document in failing[-3:]:
            for record in document["tests"]:
                for artifact in record["artifacts"]:
                    target = directory.parent / artifact.removeprefix(".roofline/")
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(TINY_PNG if artifact.endswith(".png") else b"kernel,flops,bytes\nk0,1,1\n")
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=50)
    parser.add_argument("--machines", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--step-at", type=float, default=0.66, help="share of the nights before the step")
    parser.add_argument("--artifacts", action="store_true")
    args = parser.parse_args(argv)
    began = time.perf_counter()
    paths = write_history(args.out, args.sessions, args.tests, args.machines, args.seed, args.step_at,
                          args.artifacts)
    size = sum(p.stat().st_size for p in paths)
    print(f"wrote {len(paths)} sessions x {args.tests} tests to {args.out} "
          f"({size / 1e6:.1f} MB) in {time.perf_counter() - began:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
