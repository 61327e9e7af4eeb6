"""Two counters, one verdict: a test's analytic record against its ncu record (results.json test records of
the same node id). They should name the same precision and bound, and their FLOPs agree within a few percent
where the kernels run the nominal algorithm (implicit-GEMM convolutions, GEMMs, cuDNN RNNs); where they do not
(Winograd or FFT convolutions, fused kernels, extra reductions), the kernels that differ are named.

Precisions are compared by family: the analytic counter's ``tf32`` is ncu's ``tf32_tensor``, ``fp16_tensor``
is ``fp16`` computed on Tensor Cores. Plain Python over the records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pytest_roofline.counters.ncu.diagnostics import kernel_name
from pytest_roofline.model import TENSOR_SUFFIX
from pytest_roofline.record.tests import TestRecord

TOLERANCE = 0.05


def family(precision: str | None) -> str | None:
    """``tf32_tensor`` -> ``tf32``; ``fp16_tensor`` -> ``fp16``; others as they are."""
    return None if precision is None else precision.removesuffix(TENSOR_SUFFIX)


def main_precision(flops: Mapping[str, float] | None) -> str | None:
    """The precision doing most of the FLOPs."""
    counted = {str(p): float(v) for p, v in (flops or {}).items() if isinstance(v, (int, float)) and v > 0}
    return max(counted, key=lambda p: counted[p]) if counted else None


@dataclass(frozen=True)
class Agreement:
    nodeid: str
    analytic_flops: float
    ncu_flops: float
    analytic_precision: str | None
    ncu_precision: str | None
    analytic_bound: str | None
    ncu_bound: str | None
    # ncu kernels with FLOPs in a precision family the analytic counter did not count: (name, those FLOPs)
    extra_kernels: list[tuple[str, float]] = field(default_factory=list)

    @property
    def ratio(self) -> float | None:
        return self.ncu_flops / self.analytic_flops if self.analytic_flops > 0 else None

    @property
    def same_precision(self) -> bool:
        return family(self.analytic_precision) == family(self.ncu_precision)

    @property
    def same_bound(self) -> bool:
        return self.analytic_bound is not None and self.analytic_bound == self.ncu_bound

    def flops_agree(self, tolerance: float = TOLERANCE) -> bool:
        return self.ratio is not None and abs(self.ratio - 1) <= tolerance

    def agrees(self, tolerance: float = TOLERANCE) -> bool:
        return self.same_precision and self.same_bound and self.flops_agree(tolerance)

    def describe(self, tolerance: float = TOLERANCE) -> str:
        """One line: agreement, or each way the counters differ."""
        if self.agrees(tolerance):
            return (f"the counters agree: {self.ncu_precision}, {self.ncu_bound}, ncu/analytic FLOPs "
                    f"{self.ratio:.3f}")
        parts = []
        if not self.same_precision:
            parts.append(f"precision: analytic {self.analytic_precision}, ncu {self.ncu_precision}")
        if not self.same_bound:
            parts.append(f"bound: analytic {self.analytic_bound}, ncu {self.ncu_bound}")
        if not self.flops_agree(tolerance):
            ratio = "—" if self.ratio is None else f"{self.ratio:.3f}"
            parts.append(f"FLOPs: ncu/analytic {ratio} ({self.ncu_flops:.4g} against {self.analytic_flops:.4g})")
        extra = "; ".join(f"{kernel_name(name)} {flops:.3g}" for name, flops in self.extra_kernels[:3])
        return "; ".join(parts) + (f"; ncu kernels in a precision the analytic counter did not count: {extra}"
                                   if extra else "")


def agreement(analytic: TestRecord, ncu: TestRecord) -> Agreement:
    """Compare two results.json test records of one test (``flops_by_precision``, ``bound``, ``kernels``)."""
    a_flops = dict(analytic.flops_by_precision or {})
    n_flops = dict(ncu.flops_by_precision or {})
    counted = {family(p) for p, v in a_flops.items() if v > 0}
    extra = []
    for kernel in ncu.kernels:
        by_family: dict[str, float] = {}
        for precision, value in (kernel.get("flops") or {}).items():
            if isinstance(value, (int, float)) and value > 0 and family(str(precision)) not in counted:
                by_family[str(family(str(precision)))] = by_family.get(str(family(str(precision))), 0.0) + value
        if by_family:
            extra.append((str(kernel.get("name")), sum(by_family.values())))
    return Agreement(ncu.nodeid, _total(a_flops), _total(n_flops),
                     main_precision(a_flops), main_precision(n_flops), analytic.bound, ncu.bound,
                     sorted(extra, key=lambda e: -e[1]))


def _total(flops: Mapping[str, float]) -> float:
    return float(sum(v for v in flops.values() if isinstance(v, (int, float)) and not isinstance(v, bool)))


def agreements(analytic: Sequence[TestRecord], ncu: Sequence[TestRecord]) -> list[Agreement]:
    """Every test both lists hold (by node id), in the ncu list's order."""
    by_id = {t.nodeid: t for t in analytic}
    return [agreement(by_id[t.nodeid], t) for t in ncu if t.nodeid in by_id]


def markdown(found: Sequence[Agreement], tolerance: float = TOLERANCE) -> str:
    """The counter-agreement table of docs/gpu.md."""
    lines = ["| test | precision (analytic / ncu) | bound (analytic / ncu) | FLOPs ncu / analytic | verdict |",
             "| --- | --- | --- | --- | --- |"]
    for a in found:
        ratio = "—" if a.ratio is None else f"{a.ratio:.3f}"
        verdict = "agree" if a.agrees(tolerance) else a.describe(tolerance)
        lines.append(f"| `{a.nodeid.split('::')[-1]}` | {a.analytic_precision} / {a.ncu_precision} | "
                     f"{a.analytic_bound} / {a.ncu_bound} | {ratio} | {verdict} |")
    return "\n".join(lines)
