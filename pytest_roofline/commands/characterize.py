"""``python -m pytest_roofline characterize``: measure (or show the cached) ceilings of this machine."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pytest_roofline.model import Machine


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="cpu", help="cpu, cuda or cuda:N (default: cpu)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument("--plot", metavar="FILE", type=Path, help="draw the hierarchical roofline into FILE")
    from pytest_roofline.commands import deprecated_alias

    parser.add_argument("--recharacterize", dest="fresh", action="store_true",
                        help="ignore and replace the cached characterization (as pytest --roofline-recharacterize)")
    deprecated_alias(parser, "--fresh", "--recharacterize", "fresh", flag=True)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="cache directory (default: $PYTEST_ROOFLINE_CACHE or ~/.cache/pytest-roofline)")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    parser.add_argument("--cores", type=int, default=None, metavar="N",
                        help="roofs of N cores (pinned to the N least loaded, N threads; default: all)")
    parser.add_argument("--fingerprint", action="store_true",
                        help="print this machine's fingerprint hash (the cache key) and measure nothing; with "
                             "--json also its fields and the cache file")


def summary(machine: Machine) -> dict[str, object]:
    """The --json document: SI units (bytes/s, FLOP/s)."""
    info = dict(machine.info)
    return {
        "device": info.get("device"),
        "name": machine.name,
        "fingerprint": info.get("fingerprint_hash"),
        "seconds": info.get("seconds"),
        "date": info.get("date"),
        "method": info.get("method"),
        "bandwidth": dict(machine.bandwidth),
        "compute": dict(machine.peak_flops),
        "sources": info.get("sources", {}),
        "threads": info.get("threads"),
        "kept": not _not_kept(machine),
        "not_kept": _not_kept(machine) or None,
    }


def _not_kept(machine: Machine) -> list[str]:
    """Why the record is used by this run only, never cached (characterize/clean.py); empty when it is kept."""
    from pytest_roofline.characterize.machine import FLAG_KEYS

    info = machine.info
    reasons = list(info.get("not_kept_reasons") or ())
    return reasons + [f"{key}: {info[key]}" for key in FLAG_KEYS if key != "not_kept" and info.get(key)]


def _table(machine: Machine) -> str:
    info = machine.info
    sources = info.get("sources", {})
    header = (f"{machine.name}  [{info.get('device')}, fingerprint {info.get('fingerprint_hash')}, "
              f"measured in {info.get('seconds', 0):.1f} s on {info.get('date')}]")
    lines = [header]
    for level, value in machine.bandwidth.items():
        lines.append(f"  {level:<12} {value / 1e9:10.1f} GB/s      ({sources.get(f'bandwidth.{level}', '?')})")
    for precision, value in machine.peak_flops.items():
        lines.append(f"  {precision:<12} {value / 1e9:10.1f} GFLOP/s   "
                     f"({sources.get(f'peak_flops.{precision}', '?')})")
    unkept = _not_kept(machine)
    if unkept:
        lines.append("  NOT KEPT (used by this run only, not cached; the next run measures again):")
        lines += [f"    - {reason}" for reason in unkept]
    return "\n".join(lines)


def cores_problem(cores: int | None) -> str | None:
    """``--cores N`` bounded as ``--roofline-cores N`` is: at least 1, at most the cores this process may run
    on (the same check, ``host.cores.choose``); None when it is fine."""
    if cores is None:
        return None
    if cores < 1:
        return f"--cores must be a number of cores >= 1, got {cores}"
    from pytest_roofline.host.cores import CoresSettingError, base_affinity, choose, parse_cores

    try:
        choose(parse_cores(str(cores), "--cores"), base_affinity(), None, where="--cores")
    except CoresSettingError as error:
        return str(error)
    return None


def fingerprint_only(args: argparse.Namespace) -> int:
    """The fingerprint without measuring: CI keys its cache of characterizations by it."""
    from pytest_roofline.characterize.machine import cache_file_for, fingerprint, fingerprint_hash

    try:
        fields = fingerprint(args.device)
        if args.cores is not None and args.device == "cpu":
            from pytest_roofline.host.cores import base_affinity, core_count_fingerprint

            fields = core_count_fingerprint(fields, args.cores, base_affinity())
    except (RuntimeError, ImportError, ValueError, OSError) as error:
        print(f"characterize: {error}", file=sys.stderr)
        return 2
    digest = fingerprint_hash(fields)
    if args.json:
        path = cache_file_for(args.device, args.cache_dir) if args.cores is None else None
        print(json.dumps({"fingerprint": digest, "fields": fields,
                          "cache_file": str(path) if path is not None else None}, indent=2, default=str))
    else:
        print(digest)
    return 0


def device_problem(device: str, error: BaseException, gpus: int | None = None) -> str:
    """The error, said plainly when a CUDA device was asked for on a machine with no usable NVIDIA GPU (the CUDA
    runtime's own words, such as cudaErrorInsufficientDriver, follow in brackets)."""
    if not str(device).startswith("cuda"):
        return str(error)
    if gpus is None:
        from pytest_roofline.host.gpus import count_gpus

        gpus = count_gpus()
    if gpus > 0:
        return str(error)
    return (f"--device {device}: there is no usable NVIDIA GPU on this machine (no GPU under /proc/driver/nvidia "
            f"and none from nvidia-smi); characterize the CPU with --device cpu [{error}]")


def run(args: argparse.Namespace) -> int:
    from pytest_roofline.characterize.machine import characterize

    problem = cores_problem(args.cores)
    if problem:
        print(f"characterize: {problem}", file=sys.stderr)
        return 2
    if args.fingerprint:
        return fingerprint_only(args)

    def progress(message: str) -> None:
        print(f"[characterize] {message}", file=sys.stderr, flush=True)

    try:
        machine = characterize(args.device, fresh=args.fresh, cache_dir=args.cache_dir,
                               progress=None if args.quiet else progress, cores=args.cores)
    except (RuntimeError, NotImplementedError, ImportError, ValueError) as error:
        print(f"characterize: {device_problem(args.device, error)}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(summary(machine), indent=2))
    else:
        print(_table(machine))
    if args.plot is not None:
        from pytest_roofline.output.chart import plot_machine

        print(f"roofline plot written to {plot_machine(machine, args.plot)}", file=sys.stderr)
    return 0
