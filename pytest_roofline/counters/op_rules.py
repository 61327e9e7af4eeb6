"""The analytic counter's per-op FLOP rules over one dispatched call, and the op sets that move no FLOPs."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from pytest_roofline.counters.flop_formulas import (
    DROPOUT,
    LSTM_CELL,
    MSE_BWD,
    MSE_FWD,
    NORM_RUNNING_BWD,
    NORM_RUNNING_FWD,
    NORM_STATS_BWD,
    NORM_STATS_FWD,
    POINTWISE,
    REDUCTION,
    SOFTMAX_BWD,
    SOFTMAX_FWD,
    UPSAMPLE_TAPS,
    Shape,
    attention_backward_flops,
    attention_flops,
    conv_backward_flops,
    conv_flops,
    cudnn_rnn_backward_flops,
    gemm_flops,
    rnn_layer_flops,
)

if TYPE_CHECKING:
    from torch._ops import OpOverloadPacket

aten = torch.ops.aten


@dataclass
class _OpInfo:
    """What the schema says of one aten op (built by op_schema; here so _Call and the rules can name it)."""

    name: str
    packet: OpOverloadPacket
    skip: bool
    kind: str  # "formula", "pointwise", "reduction", "foreach", "zero", "uncounted"
    formula: Formula | None
    math_arg: int | str
    arg_names: list[str]
    arg_index: dict[str, int]
    arg_defaults: list[object]
    tensor_args: list[tuple[int, str, int]]  # (position, name, role)
    fresh_returns: list[int]
    n_returns: int


# ---- per-op formulas over a dispatched call ---------------------------------------------------------------
class _Call:
    """Arguments of one dispatched op, readable by schema name or position (defaults filled in)."""

    __slots__ = ("args", "info", "kwargs", "out")

    def __init__(self, info: _OpInfo, args: Sequence[object], kwargs: Mapping[str, object], out: object) -> None:
        self.info, self.args, self.kwargs, self.out = info, args, kwargs, out

    # Loosely typed: a dispatched argument is what its schema says (Tensor, int, list, None); each rule reads it so.
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

    def output(self, index: int = 0) -> Any:  # as __getitem__: a Tensor, or a Tensor[] return's list
        """The ``index``-th return (a single ``Tensor[]`` return is the whole list)."""
        if self.info.n_returns == 1 or not isinstance(self.out, (tuple, list)):
            return self.out
        return self.out[index]


def _shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def _numel(t: torch.Tensor) -> int:
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


def _lengths(t: torch.Tensor) -> list[int]:
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


def _packets(*names: str) -> list[OpOverloadPacket]:
    """The aten packets of this build among ``names`` (CUDA-only ops exist in CPU builds too)."""
    return [getattr(aten, n) for n in names if hasattr(aten, n)]


_BN_EVAL_PACKETS = set(_packets("_native_batch_norm_legit_no_training"))
_BN_UPDATE_PACKETS = set(_packets("_batch_norm_with_update", "_batch_norm_with_update_functional"))


def _build_formulas() -> dict[OpOverloadPacket, tuple[Formula, int | str]]:
    """Packet -> (formula, argument whose dtype is the precision)."""
    table: dict[OpOverloadPacket, tuple[Formula, int | str]] = {}

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


