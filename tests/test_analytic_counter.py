"""The analytic counter against closed forms written out by hand (exact integer equality).

FLOP conventions used below (see pytest_roofline.counters.analytic): 2 FLOPs per MAC, no bias epilogue;
pointwise 1 per output element; reductions 1 per input element; BN with batch statistics 5 forward / 7
backward per element, with running statistics 2 / 4; softmax 5 / 4; pooling = window per output element.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from example_suite.deepcam_blocks import (
    ASPP,
    FULL_SIZES,
    REDUCED_CPU_SIZES,
    DecoderBlock,
    EntryFlow,
    XceptionBlock,
    make_block,
)
from pytest_roofline.counters import Counter
from pytest_roofline.counters.analytic import (
    AnalyticCounter,
    attention_backward_flops,
    attention_flops,
    conv_backward_flops,
    conv_flops,
    conventions_markdown,
    op_flops,
)
from pytest_roofline.model import KernelSample

aten = torch.ops.aten
F32 = 4  # bytes per fp32 element


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def count(fn: Callable[[], Any]) -> tuple[AnalyticCounter, list[KernelSample]]:
    """The counter and its samples with compulsory bytes only: write-allocate reads (checked on their own in
    test_write_allocate_*) are taken out, so the expectations below are the textbook compulsory traffic."""
    counter = AnalyticCounter()
    _, samples = counter.count(fn, (), {})
    assert counter.errors == {}
    return counter, [compulsory(s, counter) for s in samples]


def compulsory(sample: KernelSample, counter: AnalyticCounter) -> KernelSample:
    extra = counter.write_allocate_bytes.get(sample.name, 0)
    assert 0 <= extra <= sample.bytes.get("DRAM", 0)
    return replace(sample, bytes={level: value - extra for level, value in sample.bytes.items()})


def flops(samples: Sequence[KernelSample], precision: str = "fp32") -> int:
    return sum(int(s.flops.get(precision, 0)) for s in samples)


def moved(samples: Sequence[KernelSample]) -> int:
    return sum(int(s.bytes.get("DRAM", 0)) for s in samples)


def of_op(samples: Sequence[KernelSample], *ops: str) -> list[KernelSample]:
    return [s for s in samples if s.name.split("[")[0] in ops]


def fwd_bwd(module: Callable[..., Any], *inputs: Any) -> Callable[[], None]:
    """Forward then backward from a fixed gradient (no loss ops in the count)."""
    def run() -> None:
        out = module(*inputs)
        out.backward(torch.ones_like(out))
    return run


# ---- protocol and API --------------------------------------------------------------------------------------
def test_satisfies_counter_protocol_and_returns_the_real_result() -> None:
    counter = AnalyticCounter()
    assert isinstance(counter, Counter) and counter.name == "analytic"
    a, b = torch.randn(4, 5), torch.randn(5, 3)
    result, samples = counter.count(torch.mm, (a, b), {})
    torch.testing.assert_close(result, a @ b)
    assert [s.name for s in samples] == ["aten.mm.default[4x5,5x3]"]
    assert samples[0].time_s is None and samples[0].launches == 1
    assert "| pointwise" in conventions_markdown()


# ---- GEMM ---------------------------------------------------------------------------------------------
def test_gemm_family_flops_and_bytes() -> None:
    M, K, N, B = 32, 48, 24, 3
    a, b, bias = torch.randn(M, K), torch.randn(K, N), torch.randn(N)
    ba, bb, bbias = torch.randn(B, M, K), torch.randn(B, K, N), torch.randn(B, M, N)
    _, mm = count(lambda: torch.mm(a, b))
    assert mm[0].flops == {"fp32": 2 * M * N * K}
    assert moved(mm) == (M * K + K * N + M * N) * F32
    _, addmm = count(lambda: torch.addmm(bias, a, b))
    assert flops(addmm) == 2 * M * N * K  # bias epilogue not counted
    assert moved(addmm) == (N + M * K + K * N + M * N) * F32
    _, bmm = count(lambda: torch.bmm(ba, bb))
    assert flops(bmm) == 2 * B * M * N * K
    _, baddbmm = count(lambda: torch.baddbmm(bbias, ba, bb))
    assert flops(baddbmm) == 2 * B * M * N * K
    _, mv = count(lambda: torch.mv(a, torch.randn(K)))
    assert flops(of_op(mv, "aten.mv.default")) == 2 * M * K
    _, addr = count(lambda: torch.addr(torch.randn(M, N), torch.randn(M), torch.randn(N)))
    assert flops(of_op(addr, "aten.addr.default")) == 2 * M * N


def test_precision_keys_follow_the_math_dtype() -> None:
    M, K, N = 8, 16, 4
    _, fp64 = count(lambda: torch.mm(torch.randn(M, K, dtype=torch.float64), torch.randn(K, N, dtype=torch.float64)))
    assert fp64[-1].flops == {"fp64": 2 * M * N * K}
    _, bf16 = count(lambda: torch.mm(torch.randn(M, K).bfloat16(), torch.randn(K, N).bfloat16()))
    assert of_op(bf16, "aten.mm.default")[0].flops == {"bf16": 2 * M * N * K}
    ia, ib = torch.randint(0, 9, (M, K)), torch.randint(0, 9, (K, N))
    _, ints = count(lambda: torch.mm(ia, ib))
    assert ints[0].flops == {}  # integer math counts no FLOPs, but its bytes do
    assert moved(ints) == (M * K + K * N + M * N) * 8


def test_linear_forward_and_backward() -> None:
    B, I, O = 16, 64, 32
    layer = nn.Linear(I, O)
    x = torch.randn(B, I, requires_grad=True)
    _, fwd = count(lambda: layer(x))
    assert flops(fwd) == 2 * B * O * I
    _, both = count(fwd_bwd(layer, x))
    # fwd addmm + dgrad mm + wgrad mm, each 2*B*O*I, + bias grad (sum over the batch: 1 per element)
    assert flops(both) == 3 * 2 * B * O * I + B * O
    assert [s.launches for s in of_op(both, "aten.mm.default")] == [1, 1]


# ---- convolution -------------------------------------------------------------------------------------
def test_conv2d_forward_flops_and_bytes() -> None:
    N, C, H, W, K, R, S = 2, 8, 10, 12, 16, 3, 3
    conv = nn.Conv2d(C, K, (R, S), padding=1)
    x = torch.randn(N, C, H, W)
    P, Q = H, W
    _, samples = count(lambda: conv(x))
    assert [s.name for s in samples] == ["aten.convolution.default[2x8x10x12,16x8x3x3,16]"]
    assert flops(samples) == 2 * N * K * C * R * S * P * Q
    assert moved(samples) == (N * C * H * W + K * C * R * S + K + N * K * P * Q) * F32


@pytest.mark.parametrize("groups", [1, 4, 8])  # 8 = depthwise (C = K = groups)
def test_conv2d_forward_backward_groups(groups: int) -> None:
    N, C, H, W, K, R, S, stride = 2, 8, 9, 11, 8, 3, 3, 2
    conv = nn.Conv2d(C, K, (R, S), stride=stride, padding=1, groups=groups)
    x = torch.randn(N, C, H, W, requires_grad=True)
    P, Q = (H + 2 - R) // stride + 1, (W + 2 - S) // stride + 1
    fwd = 2 * N * K * (C // groups) * R * S * P * Q
    _, samples = count(fwd_bwd(conv, x))
    # dgrad = fwd, wgrad = fwd (not groups x fwd), bias grad = numel(grad_output)
    assert flops(samples) == fwd + 2 * fwd + N * K * P * Q
    assert flops(of_op(samples, "aten.convolution_backward.default")) == 2 * fwd + N * K * P * Q


def test_conv2d_backward_without_input_grad_skips_dgrad() -> None:
    N, C, H, W, K = 2, 4, 6, 6, 6
    conv = nn.Conv2d(C, K, 3, padding=1, bias=False)
    x = torch.randn(N, C, H, W)
    fwd = 2 * N * K * C * 9 * H * W
    _, samples = count(fwd_bwd(conv, x))
    assert flops(samples) == fwd + fwd  # forward + wgrad only


def test_conv_transpose2d_forward_and_backward() -> None:
    N, C_in, C_out, H, W, R, S, g = 2, 8, 6, 5, 7, 3, 3, 2
    deconv = nn.ConvTranspose2d(C_in, C_out, (R, S), stride=2, padding=1, output_padding=1, groups=g, bias=False)
    x = torch.randn(N, C_in, H, W, requires_grad=True)
    fwd = 2 * N * C_in * (C_out // g) * R * S * H * W  # input spatial size for transposed convs
    _, f = count(lambda: deconv(x))
    assert flops(f) == fwd
    _, both = count(fwd_bwd(deconv, x))
    assert flops(both) == 3 * fwd


# ---- LSTM -------------------------------------------------------------------------------------------------
def test_lstm_onednn_forward_flops_and_bytes() -> None:
    I, H, B, T = 12, 16, 3, 5
    lstm = nn.LSTM(I, H)
    x, h0, c0 = torch.randn(T, B, I), torch.zeros(1, B, H), torch.zeros(1, B, H)
    with torch.no_grad():
        _, samples = count(lambda: lstm(x, (h0, c0)))
    layer = of_op(samples, "aten.mkldnn_rnn_layer.default")
    assert flops(layer) == 2 * 4 * H * (I + H) * B * T
    read = T * B * I + 4 * H * I + 4 * H * H + 4 * H + 4 * H + B * H + B * H  # x, weights, biases, h0, c0
    written = T * B * H + B * H + B * H  # y, hy, cy
    assert moved(layer) == (read + written) * F32


def test_lstm_onednn_bidirectional_two_layers() -> None:
    I, H, B, T = 12, 16, 3, 5
    lstm = nn.LSTM(I, H, num_layers=2, bidirectional=True)
    _, samples = count(lambda: lstm(torch.randn(T, B, I)))
    layers = of_op(samples, "aten.mkldnn_rnn_layer.default")
    assert [s.launches for s in layers] == [2, 2]  # one call per layer and direction
    assert flops(samples) == 2 * (2 * 4 * H * (I + H) * B * T) + 2 * (2 * 4 * H * (2 * H + H) * B * T)


def test_lstm_onednn_forward_backward_is_three_forwards() -> None:
    I, H, B, T = 12, 16, 3, 5
    lstm = nn.LSTM(I, H)
    x = torch.randn(T, B, I)
    fwd = 2 * 4 * H * (I + H) * B * T
    _, samples = count(lambda: lstm(x)[0].backward(torch.ones(T, B, H)))
    assert flops(of_op(samples, "aten.mkldnn_rnn_layer_backward.default")) == 2 * fwd
    assert flops(samples) == 3 * fwd


@pytest.mark.filterwarnings("ignore:TF32 acceleration")
def test_lstm_decomposed_path_is_exact() -> None:
    I, H, B, T = 12, 16, 3, 5
    lstm = nn.LSTM(I, H)
    x, h0, c0 = torch.randn(T, B, I), torch.zeros(1, B, H), torch.zeros(1, B, H)
    gemm = 2 * 4 * H * (I + H) * B * T
    with torch.backends.mkldnn.flags(enabled=False):
        _, fwd = count(lambda: lstm(x, (h0, c0)))
        _, both = count(lambda: lstm(x, (h0, c0))[0].backward(torch.ones(T, B, H)))
    assert "aten.mkldnn_rnn_layer.default" not in {s.name.split("[")[0] for s in fwd}
    assert flops(of_op(fwd, "aten.addmm.default", "aten.mm.default")) == gemm
    # per step: gates += x-projection (4HB), 3 sigmoid, tanh(g), f*c, i*g, c add, tanh(c), o*tanh(c): 13HB
    assert flops(fwd) == gemm + 13 * H * B * T
    # backward GEMMs: dW_ih over all steps, dW_hh every step, dh for steps 1..T-1 (h0 and x need no grad)
    bwd_gemm = 2 * 4 * H * I * B * T + 2 * 4 * H * H * B * T + 2 * 4 * H * H * B * (T - 1)
    assert flops(of_op(both, "aten.addmm.default", "aten.mm.default")) == gemm + bwd_gemm


# ---- attention ---------------------------------------------------------------------------------------------
def test_sdpa_cpu_forward_and_backward() -> None:
    B, Hd, L, S, D = 2, 3, 16, 24, 8
    q = torch.randn(B, Hd, L, D, requires_grad=True)
    k = torch.randn(B, Hd, S, D, requires_grad=True)
    v = torch.randn(B, Hd, S, D, requires_grad=True)
    _, fwd = count(lambda: F.scaled_dot_product_attention(q, k, v))
    assert flops(fwd) == 4 * B * Hd * L * S * D  # QK^T + PV
    _, both = count(fwd_bwd(F.scaled_dot_product_attention, q, k, v))
    bwd = of_op(both, "aten._scaled_dot_product_flash_attention_for_cpu_backward.default")
    assert flops(bwd) == 10 * B * Hd * L * S * D  # 2.5 x forward
    assert flops(both) == 14 * B * Hd * L * S * D


# ---- formulas of ops that cannot run here (CUDA), via op_flops on meta tensors -------------------------
def meta(*shape: int) -> Any:
    return torch.empty(shape, device="meta")


def _cudnn_lstm_weights(I: int, H: int, layers: int, directions: int) -> list[Any]:
    weights = []
    for layer in range(layers):
        width = I if layer == 0 else directions * H
        for _ in range(directions):
            weights += [meta(4 * H, width), meta(4 * H, H), meta(4 * H), meta(4 * H)]
    return weights


def test_cudnn_rnn_formulas() -> None:
    I, H, B, T, layers = 12, 16, 3, 5, 2
    weights = _cudnn_lstm_weights(I, H, layers, 2)
    x, hx = meta(T, B, I), meta(layers * 2, B, H)
    fwd_args: tuple[Any, ...] = (x, weights, 4, None, hx, hx, 2, H, 0, layers, False, 0.0, True, True, [], None)
    fwd = 2 * (2 * 4 * H * (I + H) * B * T) + 2 * (2 * 4 * H * (2 * H + H) * B * T)
    assert op_flops(aten._cudnn_rnn.default, fwd_args) == {"fp32": fwd}
    y = meta(T, B, 2 * H)

    def backward_args(mask: list[bool]) -> tuple[Any, ...]:
        return (x, weights, 4, meta(1), hx, hx, y, y, hx, hx, 2, H, 0, layers, False, 0.0, True, True, [], None,
                meta(1), mask)

    assert op_flops(aten._cudnn_rnn_backward.default, backward_args([True] * 4)) == {"fp32": 2 * fwd}
    assert op_flops(aten._cudnn_rnn_backward.default, backward_args([True, True, True, False])) == {"fp32": fwd}
    # packed input: [sum(batch_sizes), I] holds the same B*T tokens
    packed = (meta(B * T, I), *fwd_args[1:14], [B] * T, None)
    assert op_flops(aten._cudnn_rnn.default, packed) == {"fp32": fwd}
    # the fused CUDA LSTM cell of the non-cuDNN path: 13 elementwise FLOPs per cell element
    gates, cx = meta(B, 4 * H), meta(B, H)
    assert op_flops(aten._thnn_fused_lstm_cell.default, (gates, gates, cx)) == {"fp32": 13 * B * H}


def test_cuda_attention_formulas() -> None:
    B, Hd, L, S, D = 2, 3, 16, 24, 8
    q, k, v = meta(B, Hd, L, D), meta(B, Hd, S, D), meta(B, Hd, S, D)
    fwd, bwd = 4 * B * Hd * L * S * D, 10 * B * Hd * L * S * D
    assert attention_flops(q.shape, k.shape, v.shape) == fwd
    assert attention_backward_flops(q.shape, k.shape, v.shape) == bwd
    assert op_flops(aten._scaled_dot_product_flash_attention.default, (q, k, v)) == {"fp32": fwd}
    assert op_flops(aten._scaled_dot_product_efficient_attention.default, (q, k, v, None, False)) == {"fp32": fwd}
    assert op_flops(aten._scaled_dot_product_cudnn_attention.default, (q, k, v, None, False)) == {"fp32": fwd}
    lse, cum = meta(B, Hd, L), meta(B + 1)
    flash_bwd = (q, q, k, v, q, lse, cum, cum, L, S, 0.0, False, meta(2), meta(2))
    assert op_flops(aten._scaled_dot_product_flash_attention_backward.default, flash_bwd) == {"fp32": bwd}
    eff_bwd = (q, q, k, v, None, q, lse, meta(2), meta(2), 0.0, [True, True, True, False])
    assert op_flops(aten._scaled_dot_product_efficient_attention_backward.default, eff_bwd) == {"fp32": bwd}
    # the kernels under them take [B, L, H, D]
    ql, kl, vl = meta(B, L, Hd, D).half(), meta(B, S, Hd, D).half(), meta(B, S, Hd, D).half()
    flash = (ql, kl, vl, None, None, L, S, 0.0, False, False)
    assert op_flops(aten._flash_attention_forward.default, flash) == {"fp16": fwd}
    efficient = (ql, kl, vl, None, None, None, L, S, 0.0, 0)
    assert op_flops(aten._efficient_attention_forward.default, efficient) == {"fp16": fwd}
    flash_b = (ql, ql, kl, vl, ql, lse, None, None, L, S, 0.0, False, meta(2), meta(2))
    assert op_flops(aten._flash_attention_backward.default, flash_b) == {"fp16": bwd}


def test_cuda_conv_formulas_and_groups() -> None:
    N, C, H, W, K, g = 2, 8, 9, 9, 12, 4
    x, w, y = meta(N, C, H, W), meta(K, C // g, 3, 3), meta(N, K, H, W)
    fwd = 2 * N * K * (C // g) * 9 * H * W
    assert conv_flops(x.shape, w.shape, y.shape) == fwd
    cudnn = (x, w, [1, 1], [1, 1], [1, 1], g, False, False, True)
    assert op_flops(aten.cudnn_convolution.default, cudnn, out=y) == {"fp32": fwd}
    backward = (y, x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], g, [True, True, False])
    assert op_flops(aten.convolution_backward.default, backward) == {"fp32": 2 * fwd}
    assert conv_backward_flops(y.shape, x.shape, w.shape, False, [False, True, True]) == fwd + N * K * H * W


# ---- elementwise, bytes rules -------------------------------------------------------------------------------
def test_pointwise_and_broadcast() -> None:
    a, b = torch.randn(64, 32), torch.randn(32)
    n = 64 * 32
    _, relu = count(lambda: torch.relu(a))
    assert (flops(relu), moved(relu)) == (n, 2 * n * F32)
    _, add = count(lambda: a + b)
    assert (flops(add), moved(add)) == (n, (n + 32 + n) * F32)
    _, expanded = count(lambda: a + b.unsqueeze(0).expand(64, 32))  # stride-0 rows are read once
    assert moved(expanded) == (n + 32 + n) * F32
    _, compare = count(lambda: a > 0)
    assert (flops(compare), moved(compare)) == (n, n * F32 + n * 1)  # float compare, bool out
    ints = torch.arange(10)
    _, int_add = count(lambda: ints + 1)
    assert flops(int_add) == 0


def test_same_tensor_twice_is_read_once() -> None:
    x = torch.randn(128, 64)
    n = x.numel()
    _, square = count(lambda: x * x)
    assert (flops(square), moved(square)) == (n, 2 * n * F32)
    _, overlap = count(lambda: x + x.t().t())  # a different view of the same elements
    assert moved(overlap) == 2 * n * F32


def test_dense_views_of_one_storage_are_merged() -> None:
    x = torch.randn(100)
    _, samples = count(lambda: torch.cat([x[:60], x[40:]]))  # overlapping halves: 100 distinct elements
    assert moved(samples) == (100 + 120) * F32
    window = x.unfold(0, 4, 2)  # 49 overlapping windows of 4 over 100 elements
    _, unfold = count(lambda: window.sum())
    assert moved(unfold) == (100 + 1) * F32
    assert flops(unfold) == 49 * 4


def test_in_place_out_and_write_only_ops() -> None:
    x, y, out = torch.randn(256, 16), torch.randn(256, 16), torch.empty(256, 16)
    n = x.numel()
    _, relu_ = count(lambda: x.relu_())
    assert (flops(relu_), moved(relu_)) == (n, 2 * n * F32)  # read and written once
    _, add_ = count(lambda: x.add_(y))
    assert moved(add_) == 3 * n * F32
    _, add_out = count(lambda: torch.add(x, y, out=out))
    assert moved(add_out) == 3 * n * F32  # out= is written, not read
    _, copy = count(lambda: out.copy_(x))
    assert (flops(copy), moved(copy)) == (0, 2 * n * F32)
    _, fill = count(lambda: out.fill_(1.0))
    assert moved(fill) == n * F32
    _, zero = count(lambda: out.zero_())
    assert moved(zero) == n * F32
    _, like = count(lambda: torch.ones_like(x))
    assert moved(like) == n * F32  # *_like does not read its argument
    _, empty = count(lambda: torch.empty(1000))
    assert empty == []


def test_views_move_nothing() -> None:
    x = torch.randn(8, 16, 4)

    def views() -> None:
        x.view(-1)
        x.transpose(0, 1)
        x[1:, ::2]
        x.permute(2, 0, 1)
        x.unsqueeze(0).expand(3, 8, 16, 4)
        x.detach()
        x.reshape(8, 64)
        x.unbind(0)
        x.clone().unsqueeze_(0)

    _, samples = count(views)
    assert [s.name for s in samples] == ["aten.clone.default[8x16x4]"]
    assert moved(samples) == 2 * x.numel() * F32
    _, copy = count(lambda: x.permute(2, 0, 1).contiguous())
    assert (flops(copy), moved(copy)) == (0, 2 * x.numel() * F32)


def test_bf16_autocast_is_attributed_to_bf16() -> None:
    B, I, O = 8, 32, 16
    layer, conv = nn.Linear(I, O), nn.Conv2d(4, 8, 3, bias=False)
    x, img = torch.randn(B, I), torch.randn(2, 4, 6, 6)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, samples = count(lambda: (layer(x), conv(img)))
    assert of_op(samples, "aten.addmm.default")[0].flops == {"bf16": 2 * B * O * I}
    assert of_op(samples, "aten.convolution.default")[0].flops == {"bf16": 2 * 2 * 8 * 4 * 9 * 4 * 4}
    assert flops(samples, "fp32") == 0
    assert of_op(samples, "aten._to_copy.default")  # the casts move bytes


# ---- conventions for norms, softmax, pooling -----------------------------------------------------------
def test_norm_softmax_pool_conventions() -> None:
    N, C, H, W = 2, 4, 8, 8
    n = N * C * H * W

    def x() -> Any:  # a fresh leaf each time, so no gradient accumulation enters the counts
        return torch.randn(N, C, H, W, requires_grad=True)

    _, train = count(fwd_bwd(nn.BatchNorm2d(C), x()))
    assert flops(train) == 5 * n + 7 * n
    _, frozen = count(fwd_bwd(nn.BatchNorm2d(C).eval(), x()))
    assert flops(frozen) == 2 * n + 4 * n
    _, ln = count(fwd_bwd(nn.LayerNorm(W), x()))
    assert flops(ln) == 5 * n + 7 * n
    _, softmax = count(fwd_bwd(lambda t: F.softmax(t, -1), x()))
    assert flops(softmax) == 5 * n + 4 * n
    _, pool = count(fwd_bwd(lambda t: F.max_pool2d(t, 2), x()))
    assert flops(pool) == 4 * (n // 4) + (n // 4)  # window per output; backward 1 per grad element
    _, avg = count(lambda: F.avg_pool2d(x(), 2))
    assert flops(avg) == 4 * (n // 4)
    _, gap = count(lambda: F.adaptive_avg_pool2d(x(), 1))
    assert flops(gap) == n
    _, up = count(lambda: F.interpolate(x(), scale_factor=2, mode="bilinear"))
    assert flops(up) == 8 * 4 * n


def test_uncounted_heavy_ops_are_reported() -> None:
    x = torch.randn(100)
    counter, _ = count(lambda: (torch.sort(x), torch.relu(x), x.clone()))
    assert counter.uncounted_ops == {"aten.sort.default": 1}
    # read x, write values and indices, and read their lines first (write-allocate)
    assert counter.uncounted_bytes == {"aten.sort.default": 100 * F32 + 2 * (100 * F32 + 100 * 8)}
    assert counter.op_calls == {"aten.sort.default": 1, "aten.relu.default": 1, "aten.clone.default": 1}


def test_aggregation_by_op_and_shapes_in_first_appearance_order() -> None:
    a, b, c = torch.randn(4, 8), torch.randn(8, 2), torch.randn(2, 8)
    d = a.double()

    def run() -> None:
        for _ in range(3):
            torch.mm(a, b)
        torch.mm(c, a.t())
        torch.mm(d, b.double())

    _, samples = count(run)
    assert [(s.name, s.launches) for s in samples] == [
        ("aten.mm.default[4x8,8x2]", 3),
        ("aten.mm.default[2x8,8x4]", 1),
        ("aten._to_copy.default[8x2]", 1),
        ("aten.mm.default[4x8,8x2]#2", 1),  # same shapes, other dtype
    ]
    assert samples[0].flops == {"fp32": 3 * 2 * 4 * 2 * 8}
    assert samples[0].bytes == {"DRAM": 3 * (4 * 8 + 8 * 2 + 4 * 2) * F32}
    assert samples[3].flops == {"fp64": 2 * 4 * 2 * 8}


# ---- DeepCAM blocks: closed forms assembled layer by layer ---------------------------------------------
def conv(n: int, k: int, c_per_group: int, taps: int, out_pixels: int) -> int:
    """2 * N * K * (C/g) * R*S * P*Q."""
    return 2 * n * k * c_per_group * taps * out_pixels


def test_xception_middle_block() -> None:
    N, C, H, W = 2, 32, 8, 8
    E = N * C * H * W
    block = XceptionBlock(C)
    x = torch.randn(N, C, H, W, requires_grad=True)
    depthwise, pointwise = conv(N, C, 1, 9, H * W), conv(N, C, C, 1, H * W)
    # 3 x (depthwise, pointwise, BN), 2 inner ReLUs + final ReLU, residual add
    fwd = 3 * (depthwise + pointwise + 5 * E) + 3 * E + E
    _, f = count(lambda: block(x))
    assert flops(f) == fwd
    # 3 ReLU grads, 3 BN grads, dgrad + wgrad of every conv, and x's two gradients summed
    bwd = 3 * E + 3 * 7 * E + 3 * 2 * (depthwise + pointwise) + E
    _, both = count(fwd_bwd(block, x))
    assert flops(both) == fwd + bwd


def test_aspp_block() -> None:
    N, Ci, Co, H, W = 2, 16, 8, 12, 12
    Eo, Ei = N * Co * H * W, N * Ci * H * W
    aspp = ASPP(Ci, Co)
    x = torch.randn(N, Ci, H, W, requires_grad=True)
    branches = conv(N, Co, Ci, 1, H * W) + 3 * conv(N, Co, Ci, 9, H * W)
    pool = Ei + conv(N, Co, Ci, 1, 1) + 3 * N * Co  # mean, 1x1, affine mul + add, ReLU
    project = conv(N, Co, 5 * Co, 1, H * W)
    fwd = branches + pool + project + 5 * (5 * Eo + Eo)  # 5 x (BN + ReLU)
    _, f = count(lambda: aspp(x))
    assert flops(f) == fwd
    bwd = (
        5 * (Eo + 7 * Eo)  # ReLU and BN grads of the 4 branches and the projection
        + 2 * project + 2 * branches
        + Eo  # tile backward: sum over the tiled pixels
        + N * Co  # pool ReLU grad
        + 2 * N * Co + 2 * N * Co  # affine: x-grad mul, weight-grad mul, weight and bias sums over N
        + 2 * conv(N, Co, Ci, 1, 1)
        + Ei  # mean backward (divide)
        + 4 * Ei  # x feeds 5 branches: 4 gradient additions
    )
    _, both = count(fwd_bwd(aspp, x))
    assert flops(both) == fwd + bwd


def test_decoder_block() -> None:
    N, Cx, L, C, h, w = 2, 12, 6, 16, 3, 4
    decoder = DecoderBlock(Cx, L, C)
    x = torch.randn(N, Cx, h, w, requires_grad=True)
    low = torch.randn(N, L, 4 * h, 4 * w, requires_grad=True)
    up1 = 2 * N * Cx * C * 9 * h * w  # transposed: input spatial size
    up2 = 2 * N * C * C * 9 * (2 * h) * (2 * w)
    fuse3 = conv(N, C, C + L, 9, 16 * h * w)
    conv3 = conv(N, C, C, 9, 16 * h * w)
    conv1 = conv(N, C, C, 1, 16 * h * w)  # its bias is not counted
    E4, E16 = N * C * 4 * h * w, N * C * 16 * h * w
    fwd = up1 + up2 + fuse3 + conv3 + conv1 + 6 * E4 + 3 * 6 * E16  # BN (5) + ReLU (1) after each 3x3-ish conv
    _, f = count(lambda: decoder(x, low))
    assert flops(f) == fwd
    bwd = 2 * (up1 + up2 + fuse3 + conv3 + conv1) + E16 + 8 * E4 + 3 * 8 * E16  # + 1x1 bias grad
    _, both = count(fwd_bwd(decoder, x, low))
    assert flops(both) == fwd + bwd


def test_entry_flow() -> None:
    N, Cin, c1, c2, Co, H, W = 2, 3, 4, 8, 16, 16, 16
    entry = EntryFlow(Cin, (c1, c2), Co)
    x = torch.randn(N, Cin, H, W)  # network input: no gradient
    P1, P2 = (H // 2) * (W // 2), (H // 4) * (W // 4)
    E1, E2, Eo, Es = N * c1 * P1, N * c2 * P1, N * Co * P1, N * Co * P2
    stem1, stem2 = conv(N, c1, Cin, 9, P1), conv(N, c2, c1, 9, P1)
    sep1 = conv(N, c2, 1, 9, P1) + conv(N, Co, c2, 1, P1)
    sep2 = conv(N, Co, 1, 9, P1) + conv(N, Co, Co, 1, P1)
    sep3 = conv(N, Co, 1, 9, P2) + conv(N, Co, Co, 1, P2)  # depthwise stride 2
    skip = conv(N, Co, c2, 1, P2)
    fwd = stem1 + 6 * E1 + stem2 + 6 * E2 + sep1 + 6 * Eo + sep2 + 5 * Eo + sep3 + skip + 5 * Es + Es
    _, f = count(lambda: entry(x))
    assert flops(f) == fwd
    bwd = (
        7 * Es + 2 * skip  # shortcut: BN grad, 1x1 dgrad + wgrad
        + 2 * sep3 + 7 * Eo + 2 * sep2 + Eo + 7 * Eo + 2 * sep1  # rep: SC3, BN, SC2, ReLU, BN, SC1
        + E2  # block input grads from rep and shortcut summed
        + 8 * E2 + 2 * stem2 + 8 * E1 + stem1  # first conv: weight grad only
    )
    _, both = count(fwd_bwd(entry, x))
    assert flops(both) == fwd + bwd


def test_reduced_xception_block_on_fake_tensors() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    block, _ = make_block("xception_middle")
    N, C, H, W = REDUCED_CPU_SIZES["xception_middle"].inputs[0]
    E = N * C * H * W
    with FakeTensorMode(allow_non_fake_inputs=True):
        x = torch.randn(N, C, H, W)
        _, samples = count(lambda: block(x))
    expected = 3 * (conv(N, C, 1, 9, H * W) + conv(N, C, C, 1, H * W) + 5 * E) + 4 * E
    assert flops(samples) == expected == 2_793_353_472  # research note: 2.79 GFLOP
    assert set(FULL_SIZES) == set(REDUCED_CPU_SIZES)


def test_footprint_is_the_bytes_touched_per_storage() -> None:
    x = torch.randn(1000)
    counter = AnalyticCounter()
    counter.count(lambda: (x * 2).relu_(), (), {})
    assert counter.footprint_bytes == 2 * 1000 * 4  # x, and one temporary that relu_ updates in place
    big = torch.randn(64, 64)
    counter.count(lambda: big[:16].sum(), (), {})
    assert counter.footprint_bytes == 16 * 64 * 4 + 4  # only the rows the slice reads, plus the scalar


def test_compiled_function_is_compiled_before_counting() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(lambda x: torch.relu(x) * 2, backend="eager")
    x = torch.randn(1000)
    _, kernels = AnalyticCounter().count(compiled, (x,), {})
    compiled(x)
    assert counters["stats"]["unique_graphs"] == 1  # counting first would leave the frame never compiled
    assert sum(k.total_flops for k in kernels) == 2 * 1000  # the eager ops: relu and mul, 1 FLOP each


def test_the_compiled_check_does_not_import_dynamo() -> None:
    # torch._dynamo costs ~1.8 s to import; checking a plain callable must not pay it. (Entering any
    # TorchDispatchMode imports it anyway in torch 2.13, through torch._disable_dynamo, so counting still does.)
    code = (
        "import sys, torch\n"
        "from pytest_roofline.counters.analytic import _is_compiled\n"
        "print(_is_compiled(torch.mm), 'torch._dynamo' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


F64 = 8


def test_write_allocate_reads_of_cpu_stores() -> None:
    n, M, K, N = 1 << 16, 32, 48, 24
    src, dst = torch.ones(n), torch.empty(n)
    counter = AnalyticCounter()
    counter.count(lambda: dst.copy_(src), (), {})
    (copy,) = counter.count(lambda: dst.copy_(src), (), {})[1]
    assert copy.bytes == {"DRAM": 3 * n * F32}          # read src, read dst's lines, write dst
    assert counter.write_allocate_bytes == {copy.name: n * F32}
    (inplace,) = counter.count(lambda: dst.add_(src), (), {})[1]
    assert inplace.bytes == {"DRAM": 3 * n * F32}       # dst is read anyway: no extra read
    assert counter.write_allocate_bytes == {}
    out = torch.empty(n, dtype=torch.float64)
    (added,) = counter.count(lambda: torch.add(src.double(), 1.0, out=out), (), {})[1][-1:]
    assert added.bytes == {"DRAM": 3 * n * F64}         # read a, read out's lines, write out
    a, b = torch.randn(M, K), torch.randn(K, N)
    (mm,) = counter.count(lambda: torch.mm(a, b), (), {})[1]
    assert mm.bytes == {"DRAM": (M * K + K * N + 2 * M * N) * F32}
    assert counter.write_allocate_bytes == {mm.name: M * N * F32}
