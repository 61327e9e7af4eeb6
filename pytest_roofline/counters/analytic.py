"""Analytic counter: FLOPs and compulsory bytes of every aten op, counted under a TorchDispatchMode.

The callable runs once, for real, under a dispatch mode that sees every aten op that reaches the Python
dispatch key (forward and autograd's backward alike). Each op is treated as one kernel.

FLOPs
    FLOPs = 2 x multiply-accumulates for GEMM-like ops. Bias epilogues of mm/addmm/conv are *not* counted
    (the bias *gradient* of ``convolution_backward`` is). The precision key is the dtype doing the math:
    ``fp64``, ``fp32``, ``fp16``, ``bf16`` (``fp8`` for float8 inputs; complex counts as its real
    precision). GEMMs and convolutions take the input's dtype, so bf16 autocast GEMMs count as ``bf16``;
    TF32 math on fp32 tensors is reported as ``fp32``. Integer and bool math counts no FLOPs.

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
    :func:`conventions_markdown` renders it for the README):

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

Bytes (level ``"DRAM"`` by default): compulsory traffic of each op on its own, i.e. *no reuse between
ops*: every input read once, every output written once, as if nothing stayed in cache from one op to the
next. Rules:

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

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from pytest_roofline.model import KernelSample

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

# ---- per-element conventions (the table in the module docstring) -----------------------------------------
POINTWISE = 1
REDUCTION = 1
SOFTMAX_FWD = 5
SOFTMAX_BWD = 4
NORM_STATS_FWD = 5  # sum x, sum x^2 (mul + add), fused scale-and-shift (mul + add)
NORM_STATS_BWD = 7  # sum dy, sum dy*x (mul + add), dx = a*dy + b*x + c (2 mul + 2 add)
NORM_RUNNING_FWD = 2  # scale-and-shift with precomputed per-channel coefficients
NORM_RUNNING_BWD = 4  # dx = k*dy; sum dy, sum dy*x for the affine grads
DROPOUT = 1
LSTM_CELL = 13
MSE_FWD = 3
MSE_BWD = 2
UPSAMPLE_TAPS = {"linear1d": 2, "bilinear2d": 4, "trilinear3d": 8, "bicubic2d": 16}

FLOP_CONVENTIONS: tuple[tuple[str, str], ...] = (
    ("mm / addmm / bmm / baddbmm", "2*M*N*K (bias epilogue not counted)"),
    ("convolution", "2*N*K*(C/g)*R*S*P*Q; transposed 2*N*C_in*(C_out/g)*R*S*H_in*W_in (no bias)"),
    ("convolution_backward", "dgrad = fwd, wgrad = fwd (per output_mask), bias grad = numel(grad_output)"),
    ("RNN layers (oneDNN, cuDNN, MIOpen)", "2*T*B*sum(2-D weight numel); backward 2x forward"),
    ("scaled dot-product attention", "2*B*H*L*S*(E+Ev) forward, 2*B*H*L*S*(3E+2Ev) backward"),
    ("fused multi-head attention (_native_multi_head_attention)",
     ("as its decomposed ops: Q/K/V/out projections + bias adds + QK^T + PV; with need_weights also the query "
     "scaling, softmax and head average")),
    ("fused encoder layer (_transformer_encoder_layer_fwd)",
     "self-attention as above + 2 layer norms + FFN matmuls + activation + 2 residual adds"),
    (("pointwise (torch.Tag.pointwise, and untagged activations such as hardswish, prelu, glu and their "
     "backward ops)"), f"{POINTWISE} per output element"),
    ("embedding_bag", "1 per gathered element (2 with per_sample_weights), + 1 per output element for mean"),
    ("reductions (torch.Tag.reduction), scans (cumsum, cummax, logcumsumexp), trace, dist, renorm",
     f"{REDUCTION} per input element"),
    ("elementwise losses (binary cross entropy, smooth L1, Huber, soft margin)", f"{POINTWISE} per output element"),
    ("_foreach_* ops", "1 per element of the first tensor list"),
    ("softmax / log_softmax", f"{SOFTMAX_FWD} per element forward, {SOFTMAX_BWD} backward"),
    ("batch norm with batch statistics, layer/group/RMS norm",
     f"{NORM_STATS_FWD} per element forward, {NORM_STATS_BWD} backward"),
    ("batch norm with running statistics (eval)",
     f"{NORM_RUNNING_FWD} per element forward, {NORM_RUNNING_BWD} backward"),
    ("max / avg pool", "window per output element; max-pool backward 1, avg-pool backward window per grad"),
    ("adaptive avg / max pool", "1 per input element; backward 1 per grad element"),
    ("upsample linear / bilinear / trilinear / bicubic", "4 / 8 / 16 / 32 per output element (and backward)"),
    ("upsample nearest", "0 forward, 1 per grad_output element backward"),
    ("native_dropout", f"{DROPOUT} per element"),
    ("nll_loss / mse_loss", f"1 per target element / {MSE_FWD} per element ({MSE_BWD} backward)"),
    ("index_add, scatter_add, embedding_dense_backward, index_put(accumulate)", "1 per source element"),
    ("_thnn_fused_lstm_cell (+ backward)", f"{LSTM_CELL} per cell element"),
    ("copies, casts, cat, repeat, pad, gathers, factories, RNG", "0 (bytes only)"),
    ("views, aliases, metadata", "0 FLOPs, 0 bytes (not recorded)"),
)


def conventions_markdown() -> str:
    """The FLOP convention table as Markdown, for the README and reports."""
    rows = ["| ops | FLOPs |", "|---|---|"]
    rows += [f"| {ops} | {rule} |" for ops, rule in FLOP_CONVENTIONS]
    return "\n".join(rows)


# ---- precision ---------------------------------------------------------------------------------------------
_PRECISION: dict[torch.dtype, str] = {
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.complex128: "fp64",
    torch.complex64: "fp32",
    torch.complex32: "fp16",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu"):
    if hasattr(torch, _name):
        _PRECISION[getattr(torch, _name)] = "fp8"


def precision_of(dtype: torch.dtype) -> str | None:
    """The precision key FLOPs in ``dtype`` count under; None for integer and bool dtypes."""
    return _PRECISION.get(dtype)


# ---- closed-form FLOP formulas (pure functions of shapes) -----------------------------------------------
def gemm_flops(m: int, n: int, k: int, batch: int = 1) -> int:
    """2*M*N*K per matrix product (one multiply and one add per MAC)."""
    return 2 * batch * m * n * k


def conv_flops(x_shape: Shape, w_shape: Shape, out_shape: Shape, transposed: bool = False) -> int:
    """Convolution FLOPs without bias: 2 * N * numel(weight) * (spatial size of the smaller side).

    The weight is [K, C/g, R, S] (or [C_in, C_out/g, R, S] transposed), so numel(weight) already holds the
    per-group channel product; each weight tap meets every output position (input position when
    transposed) once per batch element.
    """
    batched = len(x_shape) == len(w_shape)
    n = x_shape[0] if batched else 1
    spatial = (x_shape if transposed else out_shape)[(2 if batched else 1):]
    return 2 * n * math.prod(w_shape) * math.prod(spatial)


def conv_backward_flops(
    grad_out_shape: Shape, x_shape: Shape, w_shape: Shape, transposed: bool, output_mask: Sequence[bool]
) -> int:
    """dgrad and wgrad each cost one forward (groups included); the bias grad sums grad_output."""
    fwd = conv_flops(x_shape, w_shape, grad_out_shape, transposed)
    flops = fwd * bool(output_mask[0]) + fwd * bool(output_mask[1])
    if len(output_mask) > 2 and output_mask[2]:
        flops += math.prod(grad_out_shape)
    return flops


def rnn_layer_flops(input_shape: Shape, weight_shapes: Sequence[Shape]) -> int:
    """GEMM FLOPs of a fused RNN: 2 * tokens * (numel of every weight matrix); biases (1-D) are epilogues.

    tokens = T*B whatever the layout (seq-first, batch-first or packed [sum(batch_sizes), I]), and every
    layer and direction sees all tokens, so an LSTM layer gives 2*4H*(I+H)*B*T.
    """
    tokens = math.prod(input_shape[:-1])
    return 2 * tokens * sum(math.prod(s) for s in weight_shapes if len(s) == 2)


def cudnn_rnn_backward_flops(
    input_shape: Shape, weight_shapes: Sequence[Shape], output_mask: Sequence[bool] | None = None
) -> int:
    """cuDNN/MIOpen RNN backward: backward-data always (one forward), backward-weights if requested."""
    fwd = rnn_layer_flops(input_shape, weight_shapes)
    wants_weights = True if output_mask is None else bool(output_mask[3])
    return fwd * (1 + wants_weights)


def attention_flops(q_shape: Shape, k_shape: Shape, v_shape: Shape) -> int:
    """SDPA forward on [B, H, L, E] layouts: QK^T (2*B*Hq*L*S*E) plus PV (2*B*Hq*L*S*Ev).

    GQA is covered (key/value heads broadcast to the query heads). Causal masks are not discounted.
    """
    b, h, seq_q, e = q_shape[0], q_shape[1], q_shape[-2], q_shape[-1]
    seq_k, ev = k_shape[-2], v_shape[-1]
    return 2 * b * h * seq_q * seq_k * (e + ev)


def attention_backward_flops(q_shape: Shape, k_shape: Shape, v_shape: Shape) -> int:
    """SDPA backward: recompute QK^T, then dV, dP, dQ, dK: 2*B*Hq*L*S*(3E + 2Ev) = 2.5 x forward."""
    b, h, seq_q, e = q_shape[0], q_shape[1], q_shape[-2], q_shape[-1]
    seq_k, ev = k_shape[-2], v_shape[-1]
    return 2 * b * h * seq_q * seq_k * (3 * e + 2 * ev)


# ---- per-op formulas over a dispatched call ---------------------------------------------------------------
class _Call:
    """Arguments of one dispatched op, readable by schema name or position (defaults filled in)."""

    __slots__ = ("args", "info", "kwargs", "out")

    def __init__(self, info: _OpInfo, args: Sequence[Any], kwargs: Mapping[str, Any], out: Any) -> None:
        self.info, self.args, self.kwargs, self.out = info, args, kwargs, out

    def __getitem__(self, key: int | str) -> Any:
        index = key if isinstance(key, int) else self.info.arg_index[key]
        if index < len(self.args):
            return self.args[index]
        name = self.info.arg_names[index]
        if name in self.kwargs:
            return self.kwargs[name]
        return self.info.arg_defaults[index]

    def has(self, name: str) -> bool:
        return name in self.info.arg_index

    def output(self, index: int = 0) -> Any:
        """The ``index``-th return (a single ``Tensor[]`` return is the whole list)."""
        if self.info.n_returns == 1 or not isinstance(self.out, (tuple, list)):
            return self.out
        return self.out[index]


def _shape(t: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _numel(t: Any) -> int:
    return math.prod(_shape(t))


# A formula returns the FLOP count; the tensor whose dtype is the precision is named separately.
Formula = Callable[[_Call], int]


def _f_mm(c: _Call) -> int:
    (m, k), n = _shape(c[0]), _shape(c[1])[1]
    return gemm_flops(m, n, k)


def _f_addmm(c: _Call) -> int:
    (m, k), n = _shape(c[1]), _shape(c[2])[1]
    return gemm_flops(m, n, k)


def _f_bmm(c: _Call, first: int = 0) -> int:
    (b, m, k), n = _shape(c[first]), _shape(c[first + 1])[2]
    return gemm_flops(m, n, k, batch=b)


def _f_mv(c: _Call, first: int = 0) -> int:
    m, k = _shape(c[first])
    return gemm_flops(m, 1, k)


def _f_dot(c: _Call) -> int:
    return 2 * _numel(c[0])


def _f_addr(c: _Call) -> int:
    """Rank-1 update self + vec1 vec2^T: one MAC per element of the M x N result."""
    return 2 * _numel(c["vec1"]) * _numel(c["vec2"])


def _f_conv(c: _Call) -> int:
    transposed = bool(c["transposed"]) if c.has("transposed") else False
    return conv_flops(_shape(c[0]), _shape(c[1]), _shape(c.output()), transposed)


def _f_conv_transposed(c: _Call) -> int:
    return conv_flops(_shape(c[0]), _shape(c[1]), _shape(c.output()), True)


def _f_conv_backward(c: _Call) -> int:
    transposed = bool(c["transposed"]) if c.has("transposed") else False
    # _slow_conv2d_backward.grad_input has no mask: it always writes all three gradients.
    mask = list(c["output_mask"]) if c.has("output_mask") else [True, True, True]
    return conv_backward_flops(_shape(c[0]), _shape(c[1]), _shape(c[2]), transposed, mask)


def _f_mkldnn_rnn(c: _Call) -> int:
    return rnn_layer_flops(_shape(c[0]), [_shape(c[1]), _shape(c[2])])


def _f_mkldnn_rnn_backward(c: _Call) -> int:
    return 2 * rnn_layer_flops(_shape(c[0]), [_shape(c[1]), _shape(c[2])])


def _f_cudnn_rnn(c: _Call) -> int:
    return rnn_layer_flops(_shape(c[0]), [_shape(w) for w in c["weight"]])


def _f_cudnn_rnn_backward(c: _Call) -> int:
    return cudnn_rnn_backward_flops(_shape(c[0]), [_shape(w) for w in c["weight"]], list(c["output_mask"]))


def _f_lstm_cell(c: _Call) -> int:
    return LSTM_CELL * _numel(c["cx"])


def _f_sdpa(c: _Call, first: int = 0) -> int:
    return attention_flops(_shape(c[first]), _shape(c[first + 1]), _shape(c[first + 2]))


def _f_sdpa_backward(c: _Call) -> int:
    return attention_backward_flops(_shape(c[1]), _shape(c[2]), _shape(c[3]))


def _bhsd_pieces(c: _Call, first: int, cum_q: str, cum_k: str) -> list[tuple[Shape, Shape, Shape]]:
    """[B, L, H, D] flash/efficient kernels to [B, H, L, D] shapes; varlen batches split per sequence."""
    q, k, v = _shape(c[first]), _shape(c[first + 1]), _shape(c[first + 2])
    seqs_q, seqs_k = c[cum_q], c[cum_k]
    if seqs_q is None or seqs_k is None:
        return [((q[0], q[2], q[1], q[3]), (k[0], k[2], k[1], k[3]), (v[0], v[2], v[1], v[3]))]
    # Packed [total, H, D] with cumulative offsets; reading them syncs, which the counting pass can afford.
    bounds_q, bounds_k = [int(x) for x in seqs_q.tolist()], [int(x) for x in seqs_k.tolist()]
    pieces: list[tuple[Shape, Shape, Shape]] = []
    for i in range(len(bounds_q) - 1):
        lq, lk = bounds_q[i + 1] - bounds_q[i], bounds_k[i + 1] - bounds_k[i]
        pieces.append(((1, q[-2], lq, q[-1]), (1, k[-2], lk, k[-1]), (1, v[-2], lk, v[-1])))
    return pieces


def _f_flash_fwd(c: _Call) -> int:
    return sum(attention_flops(*p) for p in _bhsd_pieces(c, 0, "cum_seq_q", "cum_seq_k"))


def _f_flash_bwd(c: _Call) -> int:
    return sum(attention_backward_flops(*p) for p in _bhsd_pieces(c, 1, "cum_seq_q", "cum_seq_k"))


def _f_efficient_fwd(c: _Call) -> int:
    return sum(attention_flops(*p) for p in _bhsd_pieces(c, 0, "cu_seqlens_q", "cu_seqlens_k"))


def _f_efficient_bwd(c: _Call) -> int:
    return sum(attention_backward_flops(*p) for p in _bhsd_pieces(c, 1, "cu_seqlens_q", "cu_seqlens_k"))


def _lengths(t: Any) -> list[int]:
    """Sequence length of each batch element of a [B, L, E] (or unbatched [L, E]) activation; a nested tensor
    (the padding-mask fast path) has one length per sequence."""
    if getattr(t, "is_nested", False):
        return [int(row[0]) for row in t._nested_tensor_size().tolist()]
    shape = _shape(t)
    return [shape[1]] * shape[0] if len(shape) == 3 else [shape[0]]


def _attention_block_flops(lq: Sequence[int], lk: Sequence[int], e: int, heads: int, *, bias: bool,
                           weights: bool, average: bool) -> int:
    """Multi-head attention over sequences of lengths ``lq`` (queries) and ``lk`` (keys), counted as its
    decomposed ops count it (so a fused call and the same module with grad on agree): Q, K, V and output
    projections (2*tokens*E*E each), the in-projection bias adds, QK^T and PV per sequence; with explicit
    weights (``need_weights``) also the query scaling, the softmax and the head average."""
    d, tq, tk = e // heads, sum(lq), sum(lk)
    scores = sum(q * k for q, k in zip(lq, lk, strict=True))  # per head
    flops = 2 * gemm_flops(tq, e, e) + 2 * gemm_flops(tk, e, e)
    flops += (tq * e + 2 * tk * e) * POINTWISE if bias else 0
    flops += 2 * heads * scores * 2 * d  # QK^T and PV: attention_flops summed over the sequences
    if weights:
        flops += POINTWISE * tq * e + SOFTMAX_FWD * heads * scores
        flops += REDUCTION * heads * scores if average else 0
    return flops


def _f_native_mha(c: _Call) -> int:
    """``nn.MultiheadAttention``'s inference fast path (eval, no grad) as one op."""
    return _attention_block_flops(_lengths(c["query"]), _lengths(c["key"]), int(c["embed_dim"]), int(c["num_head"]),
                                  bias=c["qkv_bias"] is not None, weights=bool(c["need_weights"]),
                                  average=bool(c["average_attn_weights"]))


def _f_encoder_layer(c: _Call) -> int:
    """``nn.TransformerEncoderLayer``'s inference fast path: self-attention (no weights), two layer norms,
    the feed-forward matmuls, its activation and the two residual adds."""
    lengths = _lengths(c["src"])
    e, ffn = int(c["embed_dim"]), _shape(c["ffn_weight_1"])[0]
    tokens = sum(lengths)
    attention = _attention_block_flops(lengths, lengths, e, int(c["num_heads"]), bias=c["qkv_bias"] is not None,
                                       weights=False, average=False)
    feed_forward = gemm_flops(tokens, ffn, e) + gemm_flops(tokens, e, ffn) + POINTWISE * tokens * ffn
    return attention + feed_forward + 2 * NORM_STATS_FWD * tokens * e + 2 * POINTWISE * tokens * e


def _f_embedding_bag(c: _Call) -> int:
    """One add (sum, mean) or compare (max) per gathered element, a multiply more with per-sample weights,
    and the mean's divide per output element."""
    gathered = _numel(c["indices"]) * _shape(c["weight"])[-1]
    flops = gathered * (2 if c["per_sample_weights"] is not None else 1)
    return flops + (_numel(c.output()) if int(c["mode"]) == 1 else 0)


def _per_element(per: int, arg: int | str = 0) -> Formula:
    def formula(c: _Call) -> int:
        return per * _numel(c[arg])

    return formula


def _per_output(per: int) -> Formula:
    def formula(c: _Call) -> int:
        return per * _numel(c.output())

    return formula


def _f_bn_fwd(c: _Call) -> int:
    """Batch statistics in training, or when there are no running stats to use."""
    if c.has("training"):
        batch_stats = bool(c["training"])
    elif c.info.packet in _BN_EVAL_PACKETS:
        batch_stats = False
    elif c.info.packet in _BN_UPDATE_PACKETS:
        batch_stats = True
    else:  # _batch_norm_no_update: batch statistics only without running stats
        batch_stats = c["running_mean"] is None
    return (NORM_STATS_FWD if batch_stats else NORM_RUNNING_FWD) * _numel(c[0])


def _f_bn_bwd(c: _Call) -> int:
    if c.has("train"):
        batch_stats = bool(c["train"])
    elif c.has("update"):
        batch_stats = bool(c["update"]) or c["running_mean"] is None
    else:  # cudnn / miopen backward kernels only serve training
        batch_stats = True
    return (NORM_STATS_BWD if batch_stats else NORM_RUNNING_BWD) * _numel(c[0])


def _window(c: _Call, dims: int) -> int:
    kernel = [int(k) for k in c["kernel_size"]]
    return math.prod(kernel * dims if len(kernel) == 1 else kernel)


def _f_pool(dims: int) -> Formula:
    def formula(c: _Call) -> int:
        return _window(c, dims) * _numel(c.output())

    return formula


def _f_avg_pool_backward(dims: int) -> Formula:
    def formula(c: _Call) -> int:
        return _window(c, dims) * _numel(c[0])

    return formula


def _f_index_put(c: _Call) -> int:
    return _numel(c["values"]) if bool(c["accumulate"]) else 0


def _f_scatter_add(c: _Call) -> int:
    return _numel(c["index"])


def _packets(*names: str) -> list[Any]:
    """The aten packets of this build among ``names`` (CUDA-only ops exist in CPU builds too)."""
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


_BN_EVAL_PACKETS = set(_packets("_native_batch_norm_legit_no_training"))
_BN_UPDATE_PACKETS = set(_packets("_batch_norm_with_update", "_batch_norm_with_update_functional"))


def _build_formulas() -> dict[Any, tuple[Formula, int | str]]:
    """Packet -> (formula, argument whose dtype is the precision)."""
    table: dict[Any, tuple[Formula, int | str]] = {}

    def add(names: Sequence[str], formula: Formula, math_arg: int | str = 0) -> None:
        for packet in _packets(*names):
            table[packet] = (formula, math_arg)

    add(["mm", "_scaled_mm"], _f_mm)
    add(["addmm", "addmm_", "_addmm_activation"], _f_addmm, 1)
    add(["bmm"], _f_bmm)
    add(["baddbmm", "baddbmm_", "addbmm", "addbmm_"], lambda c: _f_bmm(c, 1), 1)
    add(["mv"], _f_mv)
    add(["addmv", "addmv_"], lambda c: _f_mv(c, 1), 1)
    add(["dot", "vdot"], _f_dot)
    add(["addr", "addr_"], _f_addr, "vec1")
    add(["convolution", "_convolution", "convolution_overrideable", "cudnn_convolution",
         "mkldnn_convolution", "_slow_conv2d_forward", "slow_conv3d_forward", "miopen_convolution",
         "miopen_depthwise_convolution", "_conv_depthwise2d", "conv_depthwise3d", "slow_conv_dilated2d",
         "slow_conv_dilated3d", "_nnpack_spatial_convolution", "cudnn_convolution_relu",
         "cudnn_convolution_add_relu"], _f_conv)
    add(["cudnn_convolution_transpose", "miopen_convolution_transpose", "slow_conv_transpose2d",
         "slow_conv_transpose3d"], _f_conv_transposed)
    add(["convolution_backward", "convolution_backward_overrideable", "_slow_conv2d_backward"],
        _f_conv_backward)
    add(["mkldnn_rnn_layer"], _f_mkldnn_rnn)
    add(["mkldnn_rnn_layer_backward"], _f_mkldnn_rnn_backward)
    add(["_cudnn_rnn", "miopen_rnn"], _f_cudnn_rnn)
    add(["_cudnn_rnn_backward", "miopen_rnn_backward"], _f_cudnn_rnn_backward)
    add(["_thnn_fused_lstm_cell"], _f_lstm_cell, "cx")
    add(["_thnn_fused_lstm_cell_backward_impl"], _f_lstm_cell, "cx")
    add(["_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_flash_attention",
         "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
         "_scaled_dot_product_fused_attention_overrideable"], _f_sdpa)
    add(["_scaled_dot_product_flash_attention_for_cpu_backward",
         "_scaled_dot_product_flash_attention_backward", "_scaled_dot_product_efficient_attention_backward",
         "_scaled_dot_product_cudnn_attention_backward",
         "_scaled_dot_product_fused_attention_overrideable_backward"], _f_sdpa_backward, 1)
    add(["_flash_attention_forward"], _f_flash_fwd)
    add(["_flash_attention_backward"], _f_flash_bwd, 1)
    add(["_efficient_attention_forward"], _f_efficient_fwd)
    add(["_efficient_attention_backward"], _f_efficient_bwd, 1)
    add(["_embedding_bag", "_embedding_bag_forward_only"], _f_embedding_bag, "weight")
    add(["_native_multi_head_attention"], _f_native_mha, "query")
    add(["_transformer_encoder_layer_fwd"], _f_encoder_layer, "src")
    # softmax and normalization
    add(["_softmax", "_log_softmax", "_safe_softmax"], _per_element(SOFTMAX_FWD))
    add(["_softmax_backward_data", "_log_softmax_backward_data"], _per_element(SOFTMAX_BWD))
    add(["native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training",
         "_native_batch_norm_legit_functional", "_batch_norm_with_update",
         "_batch_norm_with_update_functional", "_batch_norm_no_update", "cudnn_batch_norm",
         "miopen_batch_norm"], _f_bn_fwd)
    add(["native_batch_norm_backward", "batch_norm_backward", "cudnn_batch_norm_backward",
         "miopen_batch_norm_backward"], _f_bn_bwd)
    add(["native_layer_norm", "native_group_norm", "_fused_rms_norm"], _per_element(NORM_STATS_FWD))
    add(["native_layer_norm_backward", "native_group_norm_backward", "_fused_rms_norm_backward"],
        _per_element(NORM_STATS_BWD, 1), 1)
    # pooling and resampling
    add(["max_pool1d", "avg_pool1d"], _f_pool(1))
    add(["max_pool2d", "max_pool2d_with_indices", "avg_pool2d", "mkldnn_max_pool2d"], _f_pool(2))
    add(["max_pool3d", "max_pool3d_with_indices", "avg_pool3d", "mkldnn_max_pool3d"], _f_pool(3))
    add(["max_pool2d_with_indices_backward", "max_pool3d_with_indices_backward", "adaptive_max_pool2d_backward",
         "adaptive_max_pool3d_backward"], _per_element(1))
    add(["avg_pool2d_backward"], _f_avg_pool_backward(2))
    add(["avg_pool3d_backward"], _f_avg_pool_backward(3))
    add(["_adaptive_avg_pool2d", "_adaptive_avg_pool3d", "adaptive_max_pool2d", "adaptive_max_pool3d",
         "adaptive_avg_pool1d"], _per_element(1))
    add(["_adaptive_avg_pool2d_backward", "_adaptive_avg_pool3d_backward"], _per_element(1, 1), 1)
    for kind, taps in UPSAMPLE_TAPS.items():
        add([f"upsample_{kind}", f"_upsample_{kind}_aa"], _per_output(2 * taps))
        add([f"upsample_{kind}_backward", f"_upsample_{kind}_aa_backward"], _per_element(2 * taps))
    add(["upsample_nearest1d_backward", "upsample_nearest2d_backward", "upsample_nearest3d_backward",
         "_upsample_nearest_exact1d_backward", "_upsample_nearest_exact2d_backward",
         "_upsample_nearest_exact3d_backward"], _per_element(1))
    # losses, dropout, scans, index accumulation
    add(["native_dropout"], lambda c: DROPOUT * _numel(c[0]) if c["train"] is not False else 0)
    add(["nll_loss_forward", "nll_loss2d_forward"], _per_element(1, "target"))
    add(["nll_loss_backward", "nll_loss2d_backward"], _per_element(1, "target"), 1)
    add(["mse_loss"], _per_element(MSE_FWD))
    add(["mse_loss_backward"], _per_element(MSE_BWD, 1), 1)
    add(["cumsum", "cumsum_", "cumprod", "cumprod_", "logcumsumexp", "cummax", "cummin"], _per_element(REDUCTION))
    add(["trace", "dist", "renorm"], _per_element(REDUCTION))
    add(["embedding_dense_backward"], _per_element(1))
    add(["index_add", "index_add_"], _per_element(1, "source"), "source")
    add(["scatter_add", "scatter_add_"], _f_scatter_add, "src")
    add(["index_put", "index_put_", "_index_put_impl_"], _f_index_put, "values")
    return table


_FORMULAS = _build_formulas()

# Zero-FLOP ops: pure data movement, factories and RNG. Bytes are counted; they are never blind spots.
_ZERO_FLOP = set(_packets(
    "_to_copy", "copy_", "copy", "clone", "contiguous", "cat", "stack", "hstack", "vstack", "repeat",
    "constant_pad_nd", "reflection_pad1d", "reflection_pad2d", "reflection_pad3d", "replication_pad1d",
    "replication_pad2d", "replication_pad3d", "index_select", "gather", "index", "_unsafe_index", "take",
    "masked_select", "nonzero", "nonzero_static", "slice_scatter", "select_scatter", "diagonal_scatter",
    "as_strided_scatter", "slice_backward", "select_backward", "diagonal_backward", "expand_copy",
    "permute_copy", "view_copy", "t_copy", "transpose_copy", "slice_copy", "select_copy", "unsqueeze_copy",
    "squeeze_copy", "alias_copy", "detach_copy", "unfold_copy", "split_copy", "split_with_sizes_copy",
    "unbind_copy", "narrow_copy", "diagonal_copy", "as_strided_copy", "_reshape_copy", "lift_fresh_copy",
    "flip", "roll", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle",
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "_upsample_nearest_exact1d",
    "_upsample_nearest_exact2d", "_upsample_nearest_exact3d", "im2col", "scatter", "scatter_",
    "index_copy", "index_copy_", "index_fill", "index_fill_", "masked_scatter", "masked_scatter_", "tril",
    "tril_", "triu", "triu_", "embedding", "fill", "fill_", "zero_", "zeros", "ones", "full", "zeros_like",
    "ones_like", "full_like", "new_zeros", "new_ones", "new_full", "scalar_tensor", "arange", "linspace",
    "logspace", "eye", "rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like",
    "uniform_", "normal_", "normal", "normal_functional", "bernoulli", "bernoulli_", "random_",
    "exponential_", "geometric_", "cauchy_", "log_normal_", "_local_scalar_dense", "equal", "_copy_from",
    "_copy_from_and_resize", "_pin_memory", "_foreach_copy_", "_foreach_zero_", "alias", "_to_dense",
    "to_padded_tensor", "_fused_dropout",
    # found by audit-ops: rearrangements, selections and sparse conversions without arithmetic
    "rot90", "diag_embed", "block_diag", "_to_sparse", "repeat_interleave", "_chunk_cat", "_unsafe_masked_index",
    "put", "lu_unpack", "masked_fill", "masked_fill_", "complex", "hash_tensor",
    "_nested_tensor_from_mask", "_nested_tensor_from_mask_left_aligned",
))

# Ops that write their destination without reading it.
_WRITE_ONLY = set(_packets(
    "copy_", "fill_", "zero_", "uniform_", "normal_", "random_", "bernoulli_", "exponential_", "geometric_",
    "cauchy_", "log_normal_", "_foreach_copy_", "_foreach_zero_", "_copy_from", "_copy_from_and_resize",
))

# Fresh-looking returns that are really views, and ops that touch no data at all.
_NO_TRAFFIC = set(_packets(
    "_unsafe_view", "unsafe_split", "unsafe_split_with_sizes", "unsafe_chunk", "empty", "empty_like",
    "empty_strided", "empty_permuted", "new_empty", "new_empty_strided", "_empty_affine_quantized",
    "_empty_per_channel_affine_quantized", "resize_", "resize_as_", "_resize_output_", "set_",
    "record_stream", "_assert_async", "_assert_scalar", "_functional_assert_async", "_assert_tensor_metadata",
    "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size", "stride", "numel", "dim",
    "is_contiguous", "is_non_overlapping_and_dense", "is_same_size", "is_nonzero", "_nested_tensor_size",
    "_nested_tensor_strides", "_nested_tensor_storage_offsets", "_has_compatible_shallow_copy_type",
    "_version", "is_strides_like_format", "_make_dep_token", "_print",
))


# ---- per-op schema info ----------------------------------------------------------------------------------
_READ, _WRITE, _READ_WRITE, _SHAPE_ONLY = 1, 2, 3, 0


@dataclass
class _OpInfo:
    name: str
    packet: Any
    skip: bool
    kind: str  # "formula", "pointwise", "reduction", "foreach", "zero", "uncounted"
    formula: Formula | None
    math_arg: int | str
    arg_names: list[str]
    arg_index: dict[str, int]
    arg_defaults: list[Any]
    tensor_args: list[tuple[int, str, int]]  # (position, name, role)
    fresh_returns: list[int]
    n_returns: int


def _has_tag(op: Any, tag: Any) -> bool:
    return tag in op.tags


def _functional_twin(func: Any) -> Any | None:
    """``add_.Tensor`` -> ``add.Tensor``: in-place ops often lack the tags of their functional twin."""
    base = func._schema.name.split("::")[-1]
    if not base.endswith("_") or base.endswith("__") or not hasattr(aten, base[:-1]):
        return None
    packet = getattr(aten, base[:-1])
    overload = func._overloadname or "default"
    return getattr(packet, overload, None)


def _classify(func: Any) -> tuple[str, Formula | None, int | str]:
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
_UNTAGGED_POINTWISE = set(_packets(
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


def _is_reduction(op: Any) -> bool:
    if _REDUCTION_TAG is not None:
        return _has_tag(op, _REDUCTION_TAG)
    return op.overloadpacket in _REDUCTION_FALLBACK and op._overloadname not in ("other", "binary_out")


def _is_tensor_type(type_str: str) -> bool:
    return "Tensor" in type_str


def _build_info(func: Any) -> _OpInfo:
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


_INFO_CACHE: dict[Any, _OpInfo] = {}


def _info(func: Any) -> _OpInfo:
    info = _INFO_CACHE.get(func)
    if info is None:
        info = _INFO_CACHE[func] = _build_info(func)
    return info


# ---- bytes ----------------------------------------------------------------------------------------------
def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, torch.Tensor):
                yield item


@dataclass
class _Footprint:
    """Where a tensor's elements lie: distinct elements addressed and its byte range in its storage."""

    storage: int
    key: tuple[Any, ...]
    nbytes: int
    start: int
    span: int  # bytes from the first to one past the last element addressed
    dense: bool  # the distinct elements fill [start, start + span) with no holes


def _footprint(t: torch.Tensor) -> _Footprint:
    size = t.element_size()
    try:
        shape, strides, offset = _shape(t), tuple(int(s) for s in t.stride()), int(t.storage_offset())
        storage = t.untyped_storage()._cdata  # StorageWeakRef's identity; all storages outlive the op
    except (RuntimeError, NotImplementedError, AttributeError):  # sparse, nested, storage-less subclasses
        numel = t.numel() * size
        return _Footprint(id(t), (id(t),), numel, 0, numel, False)
    if 0 in shape:
        return _Footprint(storage, (storage, offset, shape, strides), 0, offset * size, 0, True)
    elements, span = 1, 1
    for extent, stride in zip(shape, strides):
        if stride != 0:  # broadcast dims address one element
            elements *= extent
            span += (extent - 1) * abs(stride)
    distinct = min(elements, span)  # overlapping windows (unfold, as_strided) address at most the span
    low = offset + sum((e - 1) * s for e, s in zip(shape, strides) if s < 0)
    return _Footprint(storage, (storage, offset, shape, strides), distinct * size, low * size, span * size,
                      distinct == span)


def _unique_bytes(tensors: Sequence[torch.Tensor]) -> int:
    """Bytes of the distinct elements of ``tensors``; views of one storage count once where they overlap."""
    by_storage: dict[int, dict[tuple[Any, ...], _Footprint]] = {}
    for t in tensors:
        fp = _footprint(t)
        by_storage.setdefault(fp.storage, {})[fp.key] = fp
    total = 0
    for prints in by_storage.values():
        if len(prints) == 1 or not all(fp.dense for fp in prints.values()):
            total += sum(fp.nbytes for fp in prints.values())
            continue
        end = -1
        for fp in sorted(prints.values(), key=lambda p: p.start):  # merge byte ranges
            lo, hi = max(fp.start, end), fp.start + fp.span
            if hi > lo:
                total += hi - lo
                end = hi
    return total


def _write_allocate_bytes(read: Sequence[torch.Tensor], written: Sequence[torch.Tensor]) -> int:
    """Bytes of the CPU tensors in ``written`` that the op does not also read: each such line is read into the
    cache before the store completes (write-allocate). Outputs on one storage count once, as in the bytes."""
    cpu_written = [t for t in written if t.device.type == "cpu"]
    if not cpu_written:
        return 0
    both = _unique_bytes([*read, *cpu_written])
    return max(0, both - _unique_bytes(read))


# ---- the counter -----------------------------------------------------------------------------------------
@dataclass
class _Accumulator:
    name: str
    flops: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    launches: int = 0
    write_allocate: int = 0  # of ``bytes``: reads of written CPU lines the op does not read itself


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


def op_flops(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None = None,
             out: Any = None) -> dict[str, int]:
    """FLOPs by precision of one aten op call, from shapes only (nothing runs).

    ``out`` is needed only by ops whose count depends on the output (conv forward, pooling, pointwise).
    Tensors may be meta or fake tensors.
    """
    info = _info(func)
    call = _Call(info, args, kwargs or {}, out)
    read = [t for i, _, role in info.tensor_args if role & _READ for t in _tensors(call[i])]
    flops = _flop_count(info, call, read)
    dtype = _math_dtype(info, call, read)
    precision = precision_of(dtype) if dtype is not None else None
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

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
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


def _is_compiled(fn: Any) -> bool:
    """A ``torch.compile``d function or module (only these, not callables that call one inside)."""
    # torch imports _dynamo lazily on first attribute access (~1.8 s); if nothing imported it yet, nothing
    # can have been compiled, so look in sys.modules instead of touching torch._dynamo.
    optimized = getattr(sys.modules.get("torch._dynamo"), "OptimizedModule", None)
    return hasattr(fn, "_torchdynamo_orig_callable") or (optimized is not None and isinstance(fn, optimized))


class AnalyticCounter:
    """Counts FLOPs by precision and compulsory per-op bytes of one call, op by op (see module docs).

    After :meth:`count`, :attr:`uncounted_ops` maps every op with no FLOP rule that is not pure data
    movement to its number of calls (``uncounted_bytes``: the bytes those calls moved),
    :attr:`op_calls` maps every recorded op to its number of calls, and :attr:`errors` maps ops whose
    counting raised (they are also listed as uncounted) to the error. :attr:`footprint_bytes` is the
    region's working set: the byte ranges its ops touched, summed over storages.
    :attr:`write_allocate_bytes` maps kernel names to the write-allocate reads included in their bytes.
    """

    name = "analytic"

    def __init__(self, level: str = "DRAM") -> None:
        self.level = level
        self.uncounted_ops: dict[str, int] = {}
        self.uncounted_bytes: dict[str, int] = {}
        self.op_calls: dict[str, int] = {}
        self.errors: dict[str, str] = {}
        self.footprint_bytes = 0
        self.write_allocate_bytes: dict[str, int] = {}
        self._extents: dict[int, tuple[int, int]] = {}
        self._kernels: dict[tuple[Any, ...], _Accumulator] = {}
        self._names: dict[str, int] = {}

    def count(
        self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
    ) -> tuple[Any, list[KernelSample]]:
        """Run ``fn(*args, **kwargs)`` once under the counting mode; return its result and the kernels."""
        self.uncounted_ops, self.uncounted_bytes, self.op_calls, self.errors = {}, {}, {}, {}
        self._kernels, self._names, self._extents = {}, {}, {}
        if _is_compiled(fn):
            # Dynamo never compiles a frame whose first call ran under a dispatch mode, so the timed loop
            # would run eager code: compile it with one call outside the mode first.
            fn(*args, **kwargs)
        with _CountingMode(self):
            result = fn(*args, **kwargs)
        self.footprint_bytes = sum(high - low for low, high in self._extents.values())
        self.write_allocate_bytes = {acc.name: acc.write_allocate for acc in self._kernels.values()
                                     if acc.write_allocate}
        samples = [
            KernelSample(name=acc.name, flops=dict(acc.flops), bytes={self.level: acc.bytes} if acc.bytes else {},
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
        precision = precision_of(dtype) if dtype is not None else None
        shapes, dtypes = _signature(info, call)

        self.op_calls[info.name] = self.op_calls.get(info.name, 0) + 1
        if info.kind == "uncounted":
            self.uncounted_ops[info.name] = self.uncounted_ops.get(info.name, 0) + 1
            self.uncounted_bytes[info.name] = self.uncounted_bytes.get(info.name, 0) + moved
        key = (info.name, shapes, dtypes)
        acc = self._kernels.get(key)
        if acc is None:
            acc = self._kernels[key] = _Accumulator(self._unique_name(_display(info.name, shapes)))
        acc.launches += 1
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
