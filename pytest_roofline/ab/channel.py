"""One JSON message per line over a socket between the two sides of a comparison."""

from __future__ import annotations

import json
import socket
from typing import Any

from pytest_roofline.errors import ChannelClosed


class Channel:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = sock.makefile("r", encoding="utf-8", newline="\n")

    def send(self, **message: object) -> None:
        try:
            self.sock.sendall((json.dumps(message) + "\n").encode("utf-8"))
        except OSError as exc:
            raise ChannelClosed(str(exc)) from None

    def receive(self) -> dict[str, Any]:
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
        return message

    def close(self) -> None:
        for closing in (self._reader.close, self.sock.close):
            try:
                closing()
            except OSError:
                pass
