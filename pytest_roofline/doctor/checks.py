"""One doctor check's result, shared by the CPU and the GPU checks (``pytest-roofline doctor``)."""

from __future__ import annotations

from dataclasses import dataclass

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str | None = None

    def line(self) -> str:
        text = f"[{self.status:<4}] {self.name}: {self.detail}"
        return text + (f" -- fix: {self.fix}" if self.fix and self.status in (FAIL, WARN) else "")
