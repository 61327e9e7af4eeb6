"""One JSON message per line over a socket between the two sides of a comparison."""

from __future__ import annotations

import json
import socket
from typing import TypedDict, cast

from pytest_roofline.errors import ChannelClosed
from pytest_roofline.model.roofline import MachineDict
from pytest_roofline.record.region_record import RegionRecord


class Message(TypedDict, total=False):
    """Any message of either side; ``op`` says which, and which fields it has. The twin sends ``collected``
    (``nodeids``, ``rootdir``, ``errors``), ``ready`` (``site``, ``label``), ``t`` (``s``, ``faults``), ``site``
    (``region``) and ``test_done`` (``nodeid``, ``outcome``); the comparing side sends ``run`` (``nodeid``),
    ``begin`` (``cores``, ``roofs``), the turns ``warm``, ``discard`` and ``call`` (``batch``, ``rewarm``),
    ``site_end`` (``count``), ``end_test`` and ``exit``."""

    op: str
    nodeids: list[str]
    rootdir: str
    errors: list[object]  # each read with ab.parity.CollectError.of
    nodeid: str
    outcome: str | None  # REF's outcome of the test: passed, failed, "failed in setup" ...
    site: int
    label: str
    cores: list[int] | None
    roofs: MachineDict | None  # the roofs this side judged the call site on, for REF's region
    batch: int
    rewarm: bool
    s: float  # seconds per call of the turn
    faults: int  # page faults per call of the turn
    count: bool  # site_end: whether the twin counts its call and sends its region back
    region: RegionRecord | None


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = sock.makefile("r", encoding="utf-8", newline="\n")

    def send(self, **message: object) -> None:
        try:
            self.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
        except OSError as exc:
            raise ChannelClosed(str(exc)) from None

    def receive(self) -> Message:
        try:
            line = self._reader.readline()
        except OSError as exc:
            raise ChannelClosed(str(exc)) from None
        if not line:
            raise ChannelClosed("the other side closed the connection")
        try:
            message = json.loads(line)
        except ValueError:  # a line cut short: the other side died while it wrote
            raise ChannelClosed(f"not a message: {line[:200]!r}") from None
        if not isinstance(message, dict) or "op" not in message:
            raise ChannelClosed(f"not a message: {line[:200]!r}")
        return cast(Message, message)  # its fields are checked where they are read, as each op needs

    def close(self) -> None:
        for closing in (self._reader.close, self.sock.close):
            try:
                closing()
            except OSError:
                pass
