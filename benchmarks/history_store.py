"""A shared history at fleet size, on an S3-compatible server started on localhost (moto), and many runners
writing to it at once.

    python benchmarks/history_store.py [--sessions 10000] [--machines 20] [--tests 20] [--writers 8 --rounds 3]

1. Fills a bucket with ``--sessions`` history objects spread over ``--machines`` machine keys (each session
   ``--tests`` test records, about the size a real one has), then times what the gate reads before its first
   test (``history.baseline.load_baseline`` for one machine: its folder listed, its newest 200 sessions read)
   and what ``thresholds --machine-key`` reads, each 5 times; prints the median and the worst.
2. Runs ``--writers`` real ``pytest --roofline`` sessions at once (pinned ceilings, declared work), ``--rounds``
   times, all writing to one ``s3://`` history, and counts the sessions read back.
Exits 1 when a read finds no session or a session written is not read back: it never reports an empty read
as fast.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

TEST = """
import pytest, time

@pytest.mark.roofline
def test_step(roofline):
    roofline.declare(flops=1e8).measure(time.sleep, 0.002)
"""
MACHINE = {"name": "pinned-bench-machine", "peak_flops": {"fp32": 100e9}, "bandwidth": {"DRAM": 10e9}}


def session_document(key: str, index: int, tests: int) -> dict[str, Any]:
    day, second = divmod(index, 86400)
    start = f"2026-{1 + day // 28 % 12:02d}-{1 + day % 28:02d}T{second // 3600:02d}:{second // 60 % 60:02d}:" \
            f"{second % 60:02d}+00:00"
    records = [{"nodeid": f"tests/test_model.py::test_step[{t}]", "fraction": 0.5 + 0.01 * (t % 10),
                "params": {"n": t}, "counter": "analytic",
                "regions": [{"t_min_s": 1e-3, "timing": {"samples_s": [2e-3 + 1e-6 * k for k in range(20)]},
                             "flops": {"fp32": 1e8}, "bytes": {"DRAM": 4e6}}]} for t in range(tests)]
    return {"format": "pytest-roofline-history", "schema": 1,
            "session": {"id": f"{key}-{index}", "start": start,
                        "git": {"commit": f"{index:040x}", "branch": "main", "dirty": False}},
            "machine": {"key": key, "name": key, "peak_flops": {"fp32": 1e11}, "bandwidth": {"DRAM": 1e10}},
            "tests": records}


def fill(url: str, sessions: int, machines: int, tests: int) -> list[str]:
    from concurrent.futures import ThreadPoolExecutor

    from pytest_roofline.history.location import open_store
    from pytest_roofline.history.writer import write_history
    from pytest_roofline.record.sessions import SessionRecord

    store = open_store(url)
    keys = [f"runner-{m:02d}-{m:08x}" for m in range(machines)]
    documents = [SessionRecord.from_dict(session_document(keys[i % machines], i // machines, tests))
                 for i in range(sessions)]
    with ThreadPoolExecutor(max_workers=16) as pool:
        written = list(pool.map(lambda d: write_history(store, d), documents))
    if len(set(map(str, written))) != sessions:
        raise SystemExit(f"history_store: wrote {len(set(map(str, written)))} distinct objects of {sessions}")
    return keys


def time_reads(url: str, key: str, repeats: int = 5) -> dict[str, list[float]]:
    from pytest_roofline.history.baseline import load_baseline
    from pytest_roofline.history.location import open_store
    from pytest_roofline.history.reader import load

    times: dict[str, list[float]] = {"gate (load_baseline)": [], "thresholds --machine-key": []}
    for _ in range(repeats):
        began = time.perf_counter()
        baseline = load_baseline(open_store(url), key=key, branch="main", count=5, any_machine=False)
        times["gate (load_baseline)"].append(time.perf_counter() - began)
        if not baseline.sessions:
            raise SystemExit(f"history_store: the gate read no session of {key}: nothing was measured")
        began = time.perf_counter()
        loaded = load(open_store(url), key=key)
        times["thresholds --machine-key"].append(time.perf_counter() - began)
        if not loaded.sessions:
            raise SystemExit(f"history_store: thresholds read no session of {key}")
    return times


def concurrent_sessions(url: str, writers: int, rounds: int, env: dict[str, str]) -> tuple[int, int, float]:
    from pytest_roofline.history.location import open_store
    from pytest_roofline.history.reader import load

    with tempfile.TemporaryDirectory(prefix="roofline-fleet-") as work:
        folders = []
        for index in range(writers):
            folder = Path(work) / f"runner{index}"
            folder.mkdir()
            (folder / "test_step.py").write_text(TEST)
            (folder / "machine.json").write_text(json.dumps(MACHINE))
            folders.append(folder)
        began = time.perf_counter()
        failed = 0
        for _ in range(rounds):
            runs = [subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--roofline",
                                      "--roofline-machine=machine.json", "--roofline-max-time=0.05",
                                      "--roofline-history", url, "test_step.py"], cwd=folder, env=env,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                    for folder in folders]
            for run in runs:
                out = run.communicate(timeout=600)[0]
                if run.returncode != 0:
                    failed += 1
                    print(out[-2000:], file=sys.stderr)
        seconds = time.perf_counter() - began
    read_back = len(load(open_store(url)).sessions)
    return read_back, failed, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    import logging

    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    env = {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    os.environ.update(env)
    try:
        s3 = boto3.client("s3")
        if args.sessions:
            bucket = f"fleet-{uuid.uuid4().hex[:8]}"
            s3.create_bucket(Bucket=bucket)
            url = f"s3://{bucket}/history"
            began = time.perf_counter()
            keys = fill(url, args.sessions, args.machines, args.tests)
            print(f"filled {url}: {args.sessions} sessions × {args.tests} tests over {args.machines} machine keys "
                  f"in {time.perf_counter() - began:.1f} s")
            for what, seconds in time_reads(url, keys[len(keys) // 2]).items():
                print(f"  {what}: median {statistics.median(seconds):.3f} s, worst {max(seconds):.3f} s (5 reads)")
        if args.writers:
            bucket = f"fleet-{uuid.uuid4().hex[:8]}"
            s3.create_bucket(Bucket=bucket)
            url = f"s3://{bucket}/history"
            read_back, failed, seconds = concurrent_sessions(url, args.writers, args.rounds, {**os.environ, **env})
            expected = args.writers * args.rounds
            print(f"{args.writers} concurrent pytest --roofline sessions × {args.rounds} rounds: {read_back} of "
                  f"{expected} sessions read back, {failed} session(s) failed, {seconds:.1f} s")
            if read_back != expected or failed:
                return 1
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
