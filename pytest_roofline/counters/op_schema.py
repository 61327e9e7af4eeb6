"""What the analytic counter reads from an aten op's schema: which arguments it reads and writes, how it
 is counted (a FLOP rule, pointwise, reduction, data movement, uncounted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from pytest_roofline.counters.op_rules import (
    _FORMULAS,
    _NO_TRAFFIC,
    _WRITE_ONLY,
    _ZERO_FLOP,
    Formula,
    _OpInfo,
    _packets,
)

if TYPE_CHECKING:
    from torch._ops import OpOverload

aten = torch.ops.aten

# ---- per-op schema info ----------------------------------------------------------------------------------
_READ, _WRITE, _READ_WRITE, _SHAPE_ONLY = 1, 2, 3, 0


def _has_tag(op: OpOverload, tag: torch.Tag) -> bool:
    return tag in op.tags


def _functional_twin(func: OpOverload) -> OpOverload | None:
    """``add_.Tensor`` -> ``add.Tensor``: in-place ops often lack the tags of their functional twin."""
    base = func._schema.name.split("::")[-1]
    if not base.endswith("_") or base.endswith("__") or not hasattr(aten, base[:-1]):
        return None
    packet = getattr(aten, base[:-1])
    overload = func._overloadname or "default"
    return getattr(packet, overload, None)


def _classify(func: OpOverload) -> tuple[str, Formula | None, int | str]:
    packet = func.overloadpacket
    if packet in _FORMULAS:
        formula, math_arg = _FORMULAS[packet]
        return "formula", formula, math_arg
    if packet in _ZERO_FLOP:
        return "zero", None, 0
    if packet in _UNTAGGED_POINTWISE:
        return "pointwise", None, 0
    if packet.__name__.startswith("_foreach_"):
        return "foreach", None, 0
    for op in (func, _functional_twin(func)):
        if op is None:
            continue
        if _has_tag(op, torch.Tag.pointwise):
            return "pointwise", None, 0
        if _is_reduction(op):
            return "reduction", None, 0
    return "uncounted", None, 0


# Elementwise by nature, but without torch's pointwise tag (torch 2.13): activations and their backward ops.
# leaky_relu and _conj_physical carry the tag in 2.13 but not in 2.11, where they would go uncounted.
_UNTAGGED_POINTWISE = set(_packets(
    "leaky_relu", "leaky_relu_", "_conj_physical",
    "hardswish", "hardswish_", "_prelu_kernel", "glu", "rrelu_with_noise", "log_sigmoid_forward",
    "hardswish_backward", "hardsigmoid_backward", "hardtanh_backward", "elu_backward", "leaky_relu_backward",
    "_prelu_kernel_backward", "glu_backward", "mish_backward", "softplus_backward", "log_sigmoid_backward",
    "hardshrink_backward", "softshrink_backward",
    # found by audit-ops: elementwise arithmetic and elementwise losses without the tag
    "rsub", "floor_divide", "polar", "linalg_cross", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "smooth_l1_loss", "huber_loss", "soft_margin_loss",
))

_REDUCTION_TAG = getattr(torch.Tag, "reduction", None)
# Older torch builds lack Tag.reduction; these are the common reductions then.
_REDUCTION_FALLBACK = set(_packets(
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "std_mean", "norm",
    "linalg_vector_norm", "argmax", "argmin", "logsumexp", "any", "all", "nansum", "aminmax",
))


def _is_reduction(op: OpOverload) -> bool:
    if _REDUCTION_TAG is not None:
        return _has_tag(op, _REDUCTION_TAG)
    return op.overloadpacket in _REDUCTION_FALLBACK and op._overloadname not in ("other", "binary_out")


def _is_tensor_type(type_str: str) -> bool:
    return "Tensor" in type_str


def _build_info(func: OpOverload) -> _OpInfo:
    schema = func._schema
    packet = func.overloadpacket
    name = str(func)
    skip = (
        func.namespace == "prim"
        or func.is_view
        or packet in _NO_TRAFFIC
        or _has_tag(func, torch.Tag.inplace_view)
    )
    kind, formula, math_arg = _classify(func)
    base = packet.__name__
    shape_only = base.endswith("_like") or base.startswith("new_")
    tensor_args: list[tuple[int, str, int]] = []
    names, defaults = [], []
    for i, arg in enumerate(schema.arguments):
        names.append(arg.name)
        defaults.append(arg.default_value if arg.has_default_value() else None)
        if not _is_tensor_type(str(arg.type)):
            continue
        written = arg.alias_info is not None and arg.alias_info.is_write
        if arg.is_out or (written and (packet in _WRITE_ONLY)):
            role = _WRITE
        elif written:
            role = _READ_WRITE
        elif shape_only:
            role = _SHAPE_ONLY
        else:
            role = _READ
        tensor_args.append((i, arg.name, role))
    fresh = [i for i, ret in enumerate(schema.returns) if ret.alias_info is None and _is_tensor_type(str(ret.type))]
    if not tensor_args and not fresh:
        skip = True  # metadata and scalar-only ops
    return _OpInfo(name, packet, skip, kind, formula, math_arg, names, {n: i for i, n in enumerate(names)},
                   defaults, tensor_args, fresh, len(schema.returns))


_INFO_CACHE: dict[OpOverload, _OpInfo] = {}


def _info(func: OpOverload) -> _OpInfo:
    info = _INFO_CACHE.get(func)
    if info is None:
        info = _INFO_CACHE[func] = _build_info(func)
    return info


