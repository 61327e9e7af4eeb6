"""A headless Chromium driven over the DevTools protocol on a pipe (``--remote-debugging-pipe``): no
selenium, no driver binary, no network. Opens pages, collects script errors, console errors and failed
loads, evaluates expressions and takes screenshots."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


class Browser:
    def __init__(self, binary: str, width: int = 1280, height: int = 900) -> None:
        self._profile = tempfile.mkdtemp(prefix="site-chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The protocol reads commands on fd 3 and writes replies on fd 4: bash moves the pipe ends there,
        # from copies at 10 or above so that neither end can sit on 3 or 4 and be overwritten.
        read_end, write_end = (fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w))
        for fd in (to_browser_r, from_browser_w):
            os.close(fd)
        arguments = ["--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                     f"--user-data-dir={self._profile}", f"--window-size={width},{height}", "--no-first-run",
                     "--disable-extensions", "--disable-background-networking", "--disable-sync",
                     # any host name fails to resolve: a page that reaches for the network logs an error
                     "--host-resolver-rules=MAP * ~NOTFOUND", "about:blank"]
        self._process = subprocess.Popen(
            ["bash", "-c", f'exec "$0" "$@" 3<&{read_end} 4>&{write_end} {read_end}<&- {write_end}>&-',
             binary, *arguments], pass_fds=(read_end, write_end), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(read_end)
        os.close(write_end)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable", session=True)
        self.call("Emulation.setDeviceMetricsOverride", {"width": width, "height": height,
                                                         "deviceScaleFactor": 1, "mobile": False}, session=True)

    def _read(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no message from the browser")
            chunk = os.read(self._from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, params: dict[str, Any] | None = None, session: bool = False,
             timeout: float = 30.0) -> dict[str, Any]:
        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = self._session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self._read(timeout)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True}, session=True)
        return result.get("result", {}).get("value")

    def open(self, url: str, ready: str = "true", timeout: float = 20.0) -> list[str]:
        """Load ``url``, wait until ``ready`` (a JS expression) is true; return the problems it logged."""
        self.events.clear()
        self.call("Page.navigate", {"url": url}, session=True)
        deadline = time.monotonic() + timeout
        while not self.evaluate(f"document.readyState === 'complete' && Boolean({ready})"):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} not ready: {ready}")
            time.sleep(0.05)
        self.call("Runtime.evaluate", {"expression": "1"}, session=True)  # drain pending events
        return self.problems()

    def problems(self) -> list[str]:
        out = []
        for event in self.events:
            method, params = event["method"], event.get("params", {})
            if method == "Runtime.exceptionThrown":
                details = params.get("exceptionDetails", {})
                out.append(f"exception: {details.get('exception', {}).get('description') or details.get('text')}")
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description")))
                                                         for a in params.get("args", [])))
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                entry = params["entry"]
                out.append(f"log: {entry.get('text')} {entry.get('url', '')}")
        return out

    def screenshot(self, path: Path, full_page: bool = False) -> None:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params.update(captureBeyondViewport=True,
                          clip={"x": 0, "y": 0, "width": size[0], "height": min(size[1], 4000), "scale": 1})
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", params, session=True)["data"]))

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        shutil.rmtree(self._profile, ignore_errors=True)
