"""Which aten ops the analytic counter counts: PyTorch's own OpInfo samples, sorted by how each op is counted.

    python -m pytest_roofline audit-ops [--markdown FILE] [--max-samples N] [--budget S]

Every OpInfo of ``torch.testing._internal.common_methods_invocations.op_db`` that runs in fp32 on the CPU
runs its sample inputs under a recording mode; every aten overload they dispatch is sorted into

- **counted**: a FLOP rule (closed form, pointwise, reduction, foreach);
- **no FLOPs by nature**: data movement, views, factories, RNG, metadata (bytes only, or nothing);
- **without a rule**: ops that may do arithmetic but have no rule; their FLOPs are missing from a fraction.

It needs the ``audit`` extra (``expecttest``, ``hypothesis``), which PyTorch's test helpers import.
"""

from __future__ import annotations

import textwrap
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_roofline.counters.analytic import _info

if TYPE_CHECKING:
    from torch._ops import OpOverload
    from torch.testing._internal.opinfo.core import OpInfo

COUNTED_KINDS = ("formula", "pointwise", "reduction", "foreach")
GROUPS = ("counted", "no FLOPs by nature", "without a rule")


def group_of(func: OpOverload) -> str:
    """Which of :data:`GROUPS` an aten overload belongs to, as the analytic counter would treat it."""
    info = _info(func)
    if info.skip or info.kind == "zero":
        return "no FLOPs by nature"
    return "counted" if info.kind in COUNTED_KINDS else "without a rule"


class _Recorder(TorchDispatchMode):
    def __init__(self, seen: set[OpOverload]) -> None:
        super().__init__()
        self.seen = seen

    def __torch_dispatch__(self, func: Callable[..., object], types: Sequence[type], args: Sequence[object] = (),
                           kwargs: Mapping[str, object] | None = None) -> object:
        if isinstance(func, torch._ops.OpOverload):
            self.seen.add(func)
        return func(*args, **(kwargs or {}))


@dataclass
class Audit:
    ops: dict[str, str] = field(default_factory=dict)  # overload name -> group
    samples: int = 0
    failed_samples: int = 0
    opinfos: int = 0
    seconds: float = 0.0
    torch_version: str = torch.__version__

    def shares(self) -> dict[str, float]:
        total = len(self.ops) or 1
        return {group: sum(g == group for g in self.ops.values()) / total for group in GROUPS}

    def markdown(self) -> str:
        shares = self.shares()
        lines = [
            f"# Analytic counter op coverage (torch {self.torch_version}, CPU, fp32)",
            "",
            *textwrap.wrap(
                "Made by `python -m pytest_roofline audit-ops --markdown docs/op-coverage.md`: the sample inputs of "
                f"{self.opinfos} OpInfos of PyTorch's `op_db` ({self.samples} samples run, {self.failed_samples} "
                f"raised) dispatched {len(self.ops)} distinct aten overloads.",
                width=120,
                break_on_hyphens=False,
            ),
            "",
            "| group | overloads | share |",
            "|---|---|---|",
            *(f"| {g} | {sum(v == g for v in self.ops.values())} | {shares[g]:.1%} |" for g in GROUPS),
        ]
        for group in GROUPS:
            names = sorted(name for name, g in self.ops.items() if g == group)
            lines += ["", f"## {group} ({len(names)})", "", *_wrapped([f"`{name}`" for name in names])]
        return "\n".join(lines) + "\n"


def _wrapped(words: list[str], width: int = 110) -> list[str]:
    """``words`` joined by commas into lines of at most ``width`` characters (a long list stays readable)."""
    lines: list[str] = []
    line = ""
    for index, word in enumerate(words):
        piece = word + ("," if index < len(words) - 1 else "")
        if line and len(line) + 1 + len(piece) > width:
            lines.append(line)
            line = piece
        else:
            line = f"{line} {piece}" if line else piece
    return [*lines, line] if line else lines


def _sample_calls(opinfo: OpInfo, max_samples: int,
                  ) -> Iterable[tuple[Callable[..., object], tuple[object, ...], dict[str, object]]]:
    samples = opinfo.sample_inputs("cpu", torch.float32, requires_grad=False)
    for index, sample in enumerate(samples):
        if index >= max_samples:
            return
        yield opinfo.op, (sample.input, *sample.args), dict(sample.kwargs)


def audit_ops(max_samples: int = 4, budget_s: float = 240.0) -> Audit:
    """Run OpInfo samples (at most ``max_samples`` per OpInfo, ``budget_s`` in all) and sort the ops seen."""
    with warnings.catch_warnings():
        return _audit(max_samples, budget_s)


def _audit(max_samples: int, budget_s: float) -> Audit:
    from torch.testing._internal.common_methods_invocations import op_db

    audit = Audit()
    seen: set[OpOverload] = set()
    start = time.perf_counter()
    warnings.simplefilter("ignore")  # deprecation chatter of the samples; the caller restores the filters
    for opinfo in op_db:
        if time.perf_counter() - start > budget_s:
            break
        if torch.float32 not in opinfo.supported_dtypes("cpu"):
            continue
        audit.opinfos += 1
        try:
            calls = list(_sample_calls(opinfo, max_samples))
        except Exception:  # noqa: BLE001 - a broken sample generator skips that OpInfo
            audit.failed_samples += 1
            continue
        for op, args, kwargs in calls:
            audit.samples += 1
            try:
                with _Recorder(seen):
                    op(*args, **kwargs)
            except Exception:  # noqa: BLE001 - error-input samples and unsupported cases are expected
                audit.failed_samples += 1
    audit.ops = {str(func): group_of(func) for func in seen}
    audit.seconds = time.perf_counter() - start
    return audit
