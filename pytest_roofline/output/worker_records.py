"""Under pytest-xdist: what a worker sends its controller, and how the controller joins the workers' records.

Plain Python. A worker's payload travels through execnet (``config.workeroutput``), which carries only plain
values, so it is made of ``results.json`` records passed once through JSON: dicts, lists, strings, numbers,
booleans and None. The controller then writes one ``results.json`` for the session from all of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pytest_roofline.record.json_values import JsonObject
from pytest_roofline.record.tests import TestRecord

OUTPUT_KEY = "pytest_roofline"  # the worker's entry in config.workeroutput
SESSION_KEY = "pytest_roofline_session_id"  # the controller's session id in each worker's workerinput


def plain(value: object) -> object:
    """``value`` as JSON would read it back: the only kinds execnet is sure to carry."""
    return json.loads(json.dumps(value, allow_nan=False))


def worker_payload(worker: str, tests: Sequence[Mapping[str, object]], machine: Mapping[str, object] | None,
                   failed_late: bool, **extra: object) -> dict[str, object]:
    """One worker's records: its test records (each tagged with the worker), its machine, and whether a test
    failed only when re-measured at the end of its session (pytest already reported it passed)."""
    payload = plain({"worker": worker, "tests": [{**test, "worker": worker} for test in tests], "machine": machine,
                     "failed_late": failed_late, **extra})
    assert isinstance(payload, dict)  # a dict reads back as one
    return payload


@dataclass(frozen=True)
class WorkerSummary:
    """What the session's history block says of one worker: how many tests it sent, its GPU (the worker's
    ``host.gpus.assignment_note``, as sent), and the fingerprint of the machine it measured on."""

    tests: int
    gpu: JsonObject | None
    machine: str | None

    def to_dict(self) -> dict[str, object]:
        return {"tests": self.tests, "gpu": None if self.gpu is None else dict(self.gpu), "machine": self.machine}


@dataclass(frozen=True)
class MergedSession:
    """The session the controller writes, joined from its workers' payloads (:func:`merge_payloads`)."""

    tests: tuple[TestRecord, ...]
    machines: tuple[JsonObject, ...]  # every distinct one (GPUs of different models), by worker number
    workers: Mapping[str, WorkerSummary]
    failed_late: bool  # a test failed only when measured again at the end of its worker's session

    @property
    def machine(self) -> JsonObject | None:
        """The first worker's machine, by worker number."""
        return self.machines[0] if self.machines else None


# The payloads as execnet delivered them are JSON, read by key.
def merge_payloads(payloads: Iterable[JsonObject], order: Sequence[str] = ()) -> MergedSession:
    """The session from its workers' payloads: every test record (by node id; a test run twice, as xdist does
    when a worker crashed and its test was rescheduled, keeps its last record) in the collection ``order``
    (ids not in it last, by worker), the machine of the first worker
    in id order, every distinct machine when workers saw different ones (GPUs of different models), each
    worker's summary, and whether any test failed late."""
    ordered = sorted(payloads, key=lambda p: _worker_order(str(p.get("worker", ""))))
    tests: dict[str, JsonObject] = {}
    machines: dict[str, JsonObject] = {}
    workers: dict[str, WorkerSummary] = {}
    for payload in ordered:
        machine = payload.get("machine")
        key = ""
        if isinstance(machine, Mapping):
            key = str((machine.get("info") or {}).get("fingerprint_hash") or json.dumps(machine, sort_keys=True))
            machines.setdefault(key, dict(machine))
        for test in payload.get("tests") or []:
            tests[str(test.get("nodeid"))] = dict(test)
        name = str(payload.get("worker", "?"))
        gpu = payload.get("gpu")
        workers[name] = WorkerSummary(len(payload.get("tests") or []), gpu if isinstance(gpu, Mapping) else None,
                                      (machine.get("info") or {}).get("fingerprint_hash")
                                      if isinstance(machine, Mapping) else None)
    position = {nodeid: index for index, nodeid in enumerate(order)}
    ranked = sorted(tests.values(), key=lambda t: position.get(str(t.get("nodeid")), len(position)))
    return MergedSession(tuple(TestRecord.from_dict(t) for t in ranked), tuple(machines.values()), workers,
                         any(bool(p.get("failed_late")) for p in ordered))


def _worker_order(name: str) -> tuple[int, str]:
    digits = name[2:] if name.startswith("gw") else ""
    return (int(digits), name) if digits.isdigit() else (1 << 30, name)
