"""Fused inference fast paths and ops without torch's pointwise tag: counted, against closed forms and
against the same module run with grad on (which decomposes into ops counted one by one)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch

from pytest_roofline.counters.analytic import AnalyticCounter

B, L, E, H, FFN = 4, 128, 256, 8, 1024
TOKENS = B * L


def total(fn: Callable[[], Any], grad: bool) -> tuple[int, dict[str, int]]:
    counter = AnalyticCounter()
    with torch.set_grad_enabled(grad):
        _, samples = counter.count(fn, (), {})
    assert counter.errors == {} and counter.uncounted_ops == {}
    return sum(int(s.flops.get("fp32", 0)) for s in samples), counter.op_calls


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def test_encoder_layer_fast_path_counts_its_closed_form_and_agrees_with_grad_on() -> None:
    layer = torch.nn.TransformerEncoderLayer(E, H, FFN, batch_first=True).eval()
    x = torch.randn(B, L, E)
    fused, ops = total(lambda: layer(x), grad=False)
    assert "aten._transformer_encoder_layer_fwd.default" in ops  # the fast path really ran
    projections = 2 * TOKENS * E * 3 * E + 2 * TOKENS * E * E  # QKV in, output out
    attention = 2 * B * H * L * L * (E // H) * 2  # QK^T and PV
    feed_forward = 2 * TOKENS * E * FFN * 2
    elementwise = TOKENS * 3 * E + 2 * 5 * TOKENS * E + TOKENS * FFN + 2 * TOKENS * E  # bias, 2 norms, relu, adds
    assert fused == projections + attention + feed_forward + elementwise == 874_905_600
    decomposed, ops = total(lambda: layer(x), grad=True)
    assert "aten._transformer_encoder_layer_fwd.default" not in ops
    assert decomposed == fused


@pytest.mark.parametrize("need_weights", [True, False])
def test_multi_head_attention_fast_path(need_weights: bool) -> None:
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    q = torch.randn(B, L, E)
    fused, ops = total(lambda: mha(q, q, q, need_weights=need_weights), grad=False)
    assert "aten._native_multi_head_attention.default" in ops
    base = 2 * TOKENS * E * 4 * E + TOKENS * 3 * E + 2 * B * H * L * L * (E // H) * 2
    # Explicit weights: the query scaling, the softmax (5 per score) and the mean over heads (1 per score).
    weights = TOKENS * E + 5 * B * H * L * L + B * H * L * L if need_weights else 0
    assert fused == base + weights
    decomposed, _ = total(lambda: mha(q, q, q, need_weights=need_weights), grad=True)
    assert decomposed == fused


def test_cross_attention_fast_path_counts_each_side_by_its_length() -> None:
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True).eval()
    q, kv = torch.randn(B, L, E), torch.randn(B, 96, E)
    fused, _ = total(lambda: mha(q, kv, kv, need_weights=False), grad=False)
    expected = (2 * B * L * E * E * 2 + 2 * B * 96 * E * E * 2  # q and out; k and v
                + B * L * E + 2 * B * 96 * E  # bias adds
                + 2 * B * H * L * 96 * (E // H) * 2)
    assert fused == expected
    assert total(lambda: mha(q, kv, kv, need_weights=False), grad=True)[0] == fused


@pytest.mark.parametrize(("module", "shape"), [
    (torch.nn.Hardswish(), (1000,)), (torch.nn.PReLU(), (4, 250)), (torch.nn.GLU(), (4, 500)),
    (torch.nn.Hardsigmoid(), (1000,)), (torch.nn.ReLU6(), (1000,)), (torch.nn.ELU(), (1000,)),
    (torch.nn.LeakyReLU(), (1000,)), (torch.nn.Mish(), (1000,)), (torch.nn.Softplus(), (1000,)),
    (torch.nn.LogSigmoid(), (1000,)), (torch.nn.Hardshrink(), (1000,)), (torch.nn.Softshrink(), (1000,)),
])
def test_untagged_activations_count_one_flop_per_output_forward_and_backward(module: torch.nn.Module,
                                                                            shape: tuple[int, ...]) -> None:
    x = torch.randn(*shape, requires_grad=True)
    forward, _ = total(lambda: module(x), grad=False)
    assert forward == 1000  # every shape has 1000 outputs (GLU halves its 4 x 500 input)

    def step() -> None:
        module(x).sum().backward()

    counter = AnalyticCounter()
    counter.count(step, (), {})
    assert counter.uncounted_ops == {} and counter.errors == {}


def test_embedding_bag_sum_mean_and_weighted() -> None:
    bag = torch.nn.EmbeddingBag(100, 16, mode="mean")
    indices, offsets = torch.tensor([1, 2, 3, 4, 5, 6]), torch.tensor([0, 3])
    assert total(lambda: bag(indices, offsets), grad=False)[0] == 6 * 16 + 2 * 16  # adds, then the mean
    bag_sum = torch.nn.EmbeddingBag(100, 16, mode="sum")
    weights = torch.rand(6)
    assert total(lambda: bag_sum(indices, offsets), grad=False)[0] == 6 * 16
    assert total(lambda: bag_sum(indices, offsets, per_sample_weights=weights), grad=False)[0] == 2 * 6 * 16


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_padding_mask_fast_path_counts_each_sequence_by_its_own_length() -> None:
    # With a key padding mask the encoder packs the sequences into a nested tensor (4 x 100 real tokens here):
    # projections and feed-forward scale with the 400 tokens, attention with 4 x 100^2 scores per head.
    layer = torch.nn.TransformerEncoderLayer(E, H, FFN, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    x, mask = torch.randn(B, L, E), torch.zeros(B, L, dtype=torch.bool)
    mask[:, 100:] = True
    fused, ops = total(lambda: encoder(x, src_key_padding_mask=mask), grad=False)
    assert ops["aten._transformer_encoder_layer_fwd.default"] == 2
    tokens, d = 4 * 100, E // H
    per_layer = (2 * tokens * E * 3 * E + 2 * tokens * E * E + tokens * 3 * E  # projections, bias adds
                 + 2 * H * 4 * 100 * 100 * 2 * d  # QK^T and PV per sequence
                 + 2 * tokens * E * FFN * 2 + 2 * 5 * tokens * E + tokens * FFN + 2 * tokens * E)
    mask_ops = 2 * B * L  # logical_not of the float mask, once per layer
    assert fused == 2 * per_layer + mask_ops == 1_344_103_424
