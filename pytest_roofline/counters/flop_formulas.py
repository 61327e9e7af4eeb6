"""FLOP conventions of the analytic counter and its closed-form formulas (pure functions of shapes).

See :mod:`pytest_roofline.counters.analytic` for what is counted and why.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

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
    """The FLOP convention table as Markdown, for docs/counters.md and reports."""
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

