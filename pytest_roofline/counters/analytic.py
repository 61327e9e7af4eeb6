"""Analytic counter: FLOPs and compulsory bytes of every aten op, counted under a TorchDispatchMode.

The callable runs once, for real, under a dispatch mode that sees every aten op that reaches the Python
dispatch key (forward and autograd's backward alike). Each op is treated as one kernel.

FLOPs
    FLOPs = 2 x multiply-accumulates for GEMM-like ops. Bias epilogues of mm/addmm/conv are *not* counted
    (the bias *gradient* of ``convolution_backward`` is). The precision key is the dtype doing the math:
    ``fp64``, ``fp32``, ``fp16``, ``bf16`` (``fp8`` for float8 inputs; complex counts as its real
    precision). GEMMs and convolutions take the input's dtype, so bf16 autocast GEMMs count as ``bf16``.
    On CUDA, GEMM-like ops count as PyTorch runs them (:mod:`~pytest_roofline.counters.device_math`): fp32
    convolutions as ``tf32`` while ``torch.backends.cudnn.allow_tf32`` is on (the default), fp32 matrix
    products as ``tf32`` while ``torch.get_float32_matmul_precision() != "highest"``, fp16/bf16/fp64 ones as
    ``fp16_tensor``/``bf16_tensor``/``fp64_tensor`` (Tensor Core roofs). Integer and bool math counts no FLOPs.

    Closed forms (exact):

    ====================================  =================================================================
    op                                    FLOPs
    ====================================  =================================================================
    mm / addmm / bmm / baddbmm / addbmm   2*M*N*K (x batch); mv / addmv 2*M*K; dot 2*K; addr 2*M*N;
    _scaled_mm                            2*M*N*K
    convolution (and backend variants)    2*N*K*(C/g)*R*S*P*Q; transposed: 2*N*C_in*(C_out/g)*R*S*H_in*W_in
    convolution_backward                  fwd if output_mask[0] + fwd if output_mask[1]
                                          + numel(grad_output) if output_mask[2] (bias grad)
    mkldnn_rnn_layer, _cudnn_rnn,         2*T*B*sum(numel of 2-D weights), e.g. LSTM 2*4H*(I+H)*B*T per
    miopen_rnn                            layer and direction (gate pointwise work not counted)
    mkldnn_rnn_layer_backward             2 x forward; _cudnn_rnn_backward / miopen_rnn_backward: forward
                                          x (1 + output_mask[3]) (data grad always, weight grad if asked)
    SDPA forward (CPU flash, flash,       2*B*Hq*L*S*(E + Ev)   (= 4*B*H*L*S*D: QK^T and PV)
    efficient, cudnn, overrideable)
    SDPA backward                         2*B*Hq*L*S*(3*E + 2*Ev) (= 2.5 x forward); causal not discounted
    ====================================  =================================================================

    Conventions for everything else (one table; :data:`FLOP_CONVENTIONS` holds it, and
    :func:`conventions_markdown` renders it for docs/counters.md):

    ====================================  =================================================================
    ops                                   FLOPs
    ====================================  =================================================================
    pointwise (``torch.Tag.pointwise``)   1 per output element (relu, add, mul, where, *_backward, ...)
    reductions (``torch.Tag.reduction``)  1 per input element (sum, mean, amax, var, argmax, ...)
    cumsum / cumprod                      1 per input element
    _foreach_* (optimizers)               1 per element of the first tensor list
    softmax / log_softmax                 5 per element forward (max, sub, exp, sum, div); 4 backward
    batch norm, batch statistics          5 per element forward (sum x, sum x^2, fused scale-shift);
                                          7 per element backward (2 sums, fused 4-op gradient)
    batch norm, running statistics        2 per element forward (scale-shift); 4 backward
    layer / group / RMS norm              5 per element forward; 7 backward (always batch statistics)
    max / avg pool                        window per output element; max-pool backward 1 per grad element,
                                          avg-pool backward window per grad element
    adaptive avg / max pool               1 per input element; backward 1 per grad_input element (avg)
                                          or per grad_output element (max)
    upsample linear/bilinear/trilinear,   2 * taps per output element: 4 / 8 / 16 / 32; backward the same
    bicubic                               per grad_output element. Nearest: 0 (backward 1 per grad elem)
    native_dropout                        1 per element (training)
    nll_loss fwd / bwd                    1 per target element; mse_loss 3 / mse_loss_backward 2 per elem
    index accumulation (index_add,        1 per source element
    scatter_add, embedding_dense_backward,
    index_put with accumulate=True)
    _thnn_fused_lstm_cell (+backward)     13 per cell element (4 gate adds, 3 sigmoid, 2 tanh, 3 mul, add)
    copies, casts, cat/stack, repeat,     0 FLOPs (bytes only)
    padding, gathers, factories, RNG
    views, aliases, metadata queries      0 FLOPs and 0 bytes, not recorded
    ====================================  =================================================================

Bytes (level ``"DRAM"`` for host tensors, ``"HBM"`` for CUDA tensors, the levels of the CPU and GPU records;
the plugin moves them to a cache level, ``L3`` or ``L2``, where the working set fits): compulsory traffic of each
op on its own, i.e. *no reuse between ops*: every input read once, every output written once, as if nothing stayed
in cache from one op to the next. Rules:

- views and aliases (``func.is_view``, ``_unsafe_view``, ``unsafe_split``, in-place view ops) move nothing;
- mutated arguments are read and written once; ``out=`` arguments and the destination of ``copy_``,
  ``fill_``, ``zero_`` and in-place RNG are written only; fresh (un-aliased) returns are written;
- ``empty*`` factories write nothing; ``*_like`` / ``new_*`` ops do not read their tensor argument;
- within one op, tensors on the same storage are counted once: identical (storage, offset, shape, stride)
  are deduplicated, and dense views of one storage are merged by byte range;
- a tensor's size is the number of distinct elements it addresses: stride-0 (broadcast) dims count once;
- **write-allocate** (CPU tensors only): a CPU cache reads a line before a store to it can complete, so
  every written byte that the op does not also read is charged once more as a read (a copy of N bytes moves
  3N: read the source, read the destination line, write it back). The characterized roofs count their
  streaming kernels the same way, so a large ``copy_`` reads close to 1 of the DRAM roof. The extra bytes
  are kept apart (:attr:`AnalyticCounter.write_allocate_bytes`, per kernel) because a working set that stays
  in L1 between calls takes no such reads there (``placement.place_working_set`` removes them). GPU L2
  caches do not fetch lines that a store overwrites whole, so CUDA tensors get none;
- bytes = elements x element size. ``native_batch_norm``'s running-stat update is not in its schema and so
  not counted (C elements). Scatter-style in-place ops (index_put_, scatter_) are charged their whole
  destination and gathers (embedding, index_select, gather) their whole source: upper bounds.

Ops that have no FLOP formula and are not pure data movement (``sort``, ``_fused_adam_``, linear algebra,
...) are recorded in :attr:`AnalyticCounter.uncounted_ops` so the plugin can warn about blind spots.

Notes: count on tensors of the target device (fake tensors work); meta tensors change the decomposition
(an LSTM on meta goes through ``addmm`` per step). A ``torch.compile``-d callable must not make its first
call under the mode, and is counted as the eager ops it runs.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_roofline.counters import CounterBase
from pytest_roofline.counters.device_math import math_precision
from pytest_roofline.counters.flop_formulas import (
    FLOP_CONVENTIONS,
    POINTWISE,
    REDUCTION,
    attention_backward_flops,
    attention_flops,
    conv_backward_flops,
    conv_flops,
    conventions_markdown,
    cudnn_rnn_backward_flops,
    gemm_flops,
    precision_of,
    rnn_layer_flops,
)
from pytest_roofline.counters.op_bytes import _footprint, _tensors, _unique_bytes, _write_allocate_bytes
from pytest_roofline.counters.op_rules import _Call, _shape
from pytest_roofline.counters.op_schema import _READ, _SHAPE_ONLY, _WRITE, _info, _OpInfo
from pytest_roofline.model import KernelSample
from pytest_roofline.model.op_trace import TracedOp, profiler_op_name

if TYPE_CHECKING:
    from torch._ops import OpOverload

__all__ = [
    "FLOP_CONVENTIONS",
    "AnalyticCounter",
    "attention_backward_flops",
    "attention_flops",
    "conv_backward_flops",
    "conv_flops",
    "conventions_markdown",
    "cudnn_rnn_backward_flops",
    "gemm_flops",
    "op_flops",
    "precision_of",
    "rnn_layer_flops",
]

aten = torch.ops.aten

Shape = Sequence[int]
T = TypeVar("T")


# ---- the counter -----------------------------------------------------------------------------------------
@dataclass
class _Accumulator:
    name: str
    flops: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    launches: int = 0
    write_allocate: int = 0  # of ``bytes``: reads of written CPU lines the op does not read itself
    level: str = "DRAM"  # where its bytes are counted: the main memory of the device it ran on


def _device_type(*groups: Sequence[torch.Tensor]) -> str | None:
    """The device an op ran on: ``cuda`` if any of its tensors is a CUDA tensor, else the first one's type."""
    types = [t.device.type for tensors in groups for t in tensors]
    return "cuda" if "cuda" in types else (types[0] if types else None)


def _math_dtype(info: _OpInfo, call: _Call, read: Sequence[torch.Tensor]) -> torch.dtype | None:
    if info.kind == "formula":
        source = call[info.math_arg]
        tensor = next(_tensors(source), None)
        return tensor.dtype if tensor is not None else None
    if info.kind == "pointwise":  # the result type, except for comparisons (bool out, float math)
        for t in _tensors(call.output()):
            if t.dtype.is_floating_point or t.dtype.is_complex:
                return t.dtype
    for t in read:
        if t.dtype.is_floating_point or t.dtype.is_complex:
            return t.dtype
    return None


def _flop_count(info: _OpInfo, call: _Call, read: Sequence[torch.Tensor]) -> int:
    if info.kind == "formula":
        assert info.formula is not None
        return info.formula(call)
    if info.kind == "pointwise":
        out = next(_tensors(call.output()), None)
        return POINTWISE * out.numel() if out is not None else 0
    if info.kind == "reduction":
        return REDUCTION * read[0].numel() if read else 0
    if info.kind == "foreach":
        return POINTWISE * sum(t.numel() for t in _tensors(call[0]))
    return 0


def op_flops(func: OpOverload, args: Sequence[object], kwargs: Mapping[str, object] | None = None,
             out: object = None) -> dict[str, int]:
    """FLOPs by precision of one aten op call, from shapes only (nothing runs).

    ``out`` is needed only by ops whose count depends on the output (conv forward, pooling, pointwise).
    Tensors may be meta or fake tensors.
    """
    info = _info(func)
    call = _Call(info, args, kwargs or {}, out)
    read = [t for i, _, role in info.tensor_args if role & _READ for t in _tensors(call[i])]
    flops = _flop_count(info, call, read)
    dtype = _math_dtype(info, call, read)
    written = [t for i, _, role in info.tensor_args if role & _WRITE for t in _tensors(call[i])]
    device = _device_type(read, written, list(_tensors(out)))
    precision = math_precision(func.overloadpacket, dtype, device) if dtype is not None else None
    return {precision: flops} if precision is not None and flops > 0 else {}


def _signature(info: _OpInfo, call: _Call) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Input shapes and dtypes; ops without tensor inputs (factories) are named by their outputs."""
    tensors = [t for i, _, _ in info.tensor_args for t in _tensors(call[i])]
    prefix = ""
    if not tensors:
        prefix = "->"
        tensors = [t for i in info.fresh_returns for t in _tensors(call.output(i))]
    shapes = tuple(prefix + _shape_text(t) for t in tensors)
    return shapes, tuple(str(t.dtype).removeprefix("torch.") for t in tensors)


def _input_shapes(info: _OpInfo, call: _Call) -> tuple[tuple[int, ...], ...]:
    """Shapes of the single-tensor arguments in schema order, as the profiler records an op's inputs (it
    records no shapes for tensor lists, so those are left out here too)."""
    return tuple(tuple(int(s) for s in call[i].shape) for i, _, _ in info.tensor_args
                 if isinstance(call[i], torch.Tensor) and not call[i].is_nested)


def _shape_text(t: torch.Tensor) -> str:
    if t.is_nested:  # ragged: the sequence lengths, then the fixed dims
        sizes = t._nested_tensor_size().tolist()
        return f"nested({','.join(str(int(r[0])) for r in sizes)})" + "".join(f"x{d}" for d in sizes[0][1:])
    return "x".join(str(s) for s in _shape(t)) or "()"


def _display(op: str, shapes: Sequence[str], limit: int = 4) -> str:
    shown = list(shapes[:limit])
    if len(shapes) > limit:
        shown.append(f"+{len(shapes) - limit}")
    return f"{op}[{','.join(shown)}]"


class _CountingMode(TorchDispatchMode):
    def __init__(self, counter: AnalyticCounter) -> None:
        super().__init__()
        self.counter = counter

    def __torch_dispatch__(self, func: Callable[..., object], types: Sequence[type], args: Sequence[object] = (),
                           kwargs: Mapping[str, object] | None = None) -> object:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not isinstance(func, torch._ops.OpOverload):  # higher-order ops carry no schema to count by
            self.counter._unsupported(str(func))
            return out
        info = _info(func)
        if not info.skip:
            try:
                self.counter._record(info, _Call(info, args, kwargs, out))
            except Exception as error:  # noqa: BLE001 - a counting bug must not break the call; report it
                self.counter._failed(info, error)
        return out


def _is_compiled(fn: object) -> bool:
    """A ``torch.compile``d function or module (only these, not callables that call one inside)."""
    # torch imports _dynamo lazily on first attribute access (~1.8 s); if nothing imported it yet, nothing
    # can have been compiled, so look in sys.modules instead of touching torch._dynamo.
    optimized = getattr(sys.modules.get("torch._dynamo"), "OptimizedModule", None)
    return hasattr(fn, "_torchdynamo_orig_callable") or (optimized is not None and isinstance(fn, optimized))


class AnalyticCounter(CounterBase):
    """Counts FLOPs by precision and compulsory per-op bytes of one call, op by op (see module docs).

    After :meth:`count`, :attr:`uncounted_ops` maps every op with no FLOP rule that is not pure data
    movement to its number of calls (``uncounted_bytes``: the bytes those calls moved),
    :attr:`op_calls` maps every recorded op to its number of calls, and :attr:`errors` maps ops whose
    counting raised (they are also listed as uncounted) to the error. :attr:`footprint_bytes` is the
    region's working set: the byte ranges its ops touched, summed over storages.
    :attr:`write_allocate_bytes` maps kernel names to the write-allocate reads included in their bytes.
    """

    name = "analytic"

    def __init__(self, level: str = "DRAM", cuda_level: str = "HBM") -> None:
        self.level = level
        self.cuda_level = cuda_level  # the GPU record's main memory (the ncu counter's level too)
        self.device: str | None = None  # after count: "cuda" if any op ran on a GPU, "cpu" if on the host
        self._devices: set[str] = set()
        self.uncounted_ops: dict[str, int] = {}
        self.uncounted_bytes: dict[str, int] = {}
        self.op_calls: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        self.footprint_bytes = 0
        self.write_allocate_bytes: dict[str, int] = {}
        self._extents: dict[int, tuple[int, int]] = {}
        # (op, shapes, dtypes, device) -> its kernel
        self._kernels: dict[tuple[str, tuple[str, ...], tuple[str, ...], str | None], _Accumulator] = {}
        self._names: dict[str, int] = {}
        self.trace: list[TracedOp] = []  # every recorded op call in order (the per-op timing pass joins to it)

    def count(
        self, fn: Callable[..., T], args: tuple[object, ...], kwargs: Mapping[str, object]
    ) -> tuple[T, list[KernelSample]]:
        """Run ``fn(*args, **kwargs)`` once under the counting mode; return its result and the kernels."""
        self.uncounted_ops, self.uncounted_bytes, self.op_calls, self.errors = {}, {}, {}, {}
        self._kernels, self._names, self._extents = {}, {}, {}
        self.trace = []
        self._devices = set()
        if _is_compiled(fn):
            # Dynamo never compiles a frame whose first call ran under a dispatch mode, so the timed loop
            # would run eager code: compile it with one call outside the mode first.
            fn(*args, **kwargs)
        with _CountingMode(self):
            result = fn(*args, **kwargs)
        self.device = "cuda" if "cuda" in self._devices else ("cpu" if "cpu" in self._devices else None)
        self.footprint_bytes = sum(high - low for low, high in self._extents.values())
        self.write_allocate_bytes = {acc.name: acc.write_allocate for acc in self._kernels.values()
                                     if acc.write_allocate}
        kept = {acc.name for acc in self._kernels.values() if acc.bytes or any(acc.flops.values())}
        self.trace = [op if op.kernel in kept else TracedOp(op.op, op.shapes, None) for op in self.trace]
        samples = [
            KernelSample(name=acc.name, flops=dict(acc.flops), bytes={acc.level: acc.bytes} if acc.bytes else {},
                         time_s=None, launches=acc.launches)
            for acc in self._kernels.values()
            if acc.bytes or any(acc.flops.values())
        ]
        return result, samples

    def _record(self, info: _OpInfo, call: _Call) -> None:
        read: list[torch.Tensor] = []
        written: list[torch.Tensor] = []
        for i, _, role in info.tensor_args:
            if role == _SHAPE_ONLY:
                continue
            tensors = list(_tensors(call[i]))
            if role & _READ:
                read.extend(tensors)
            if role & _WRITE:
                written.extend(tensors)
        for i in info.fresh_returns:
            written.extend(_tensors(call.output(i)))
        allocated = _write_allocate_bytes(read, written)
        moved = _unique_bytes(read) + _unique_bytes(written) + allocated
        self._touch(read, written)
        flops = _flop_count(info, call, read)
        dtype = _math_dtype(info, call, read)
        device = _device_type(read, written)
        if device is not None:
            self._devices.add(device)
        precision = math_precision(info.packet, dtype, device) if dtype is not None else None
        shapes, dtypes = _signature(info, call)

        self.op_calls[info.name] = self.op_calls.get(info.name, 0) + 1
        if info.kind == "uncounted":
            self.uncounted_ops[info.name] = self.uncounted_ops.get(info.name, 0) + 1
            self.uncounted_bytes[info.name] = self.uncounted_bytes.get(info.name, 0) + moved
        key = (info.name, shapes, dtypes, device)
        acc = self._kernels.get(key)
        if acc is None:
            acc = self._kernels[key] = _Accumulator(self._unique_name(_display(info.name, shapes)),
                                                    level=self.cuda_level if device == "cuda" else self.level)
        acc.launches += 1
        self.trace.append(TracedOp(profiler_op_name(info.name), _input_shapes(info, call), acc.name))
        acc.bytes += moved
        acc.write_allocate += allocated
        if precision is not None and flops > 0:
            acc.flops[precision] = acc.flops.get(precision, 0) + flops

    def _touch(self, *groups: Sequence[torch.Tensor]) -> None:
        """Grow each storage's touched byte range: the region's working set is their sum."""
        for tensors in groups:
            for t in tensors:
                fp = _footprint(t)
                low, high = self._extents.get(fp.storage, (fp.start, fp.start + fp.span))
                self._extents[fp.storage] = (min(low, fp.start), max(high, fp.start + fp.span))

    def _failed(self, info: _OpInfo, error: Exception) -> None:
        self.errors[info.name] = f"{type(error).__name__}: {error}"
        self._unsupported(info.name)

    def _unsupported(self, name: str) -> None:
        self.uncounted_ops[name] = self.uncounted_ops.get(name, 0) + 1
        self.op_calls[name] = self.op_calls.get(name, 0) + 1

    def _unique_name(self, name: str) -> str:
        """Same shapes in another dtype (or beyond the shown shapes) get a ``#n`` suffix."""
        seen = self._names.get(name, 0)
        self._names[name] = seen + 1
        return name if seen == 0 else f"{name}#{seen + 1}"
