"""DeepCAM building blocks (MLPerf HPC climate segmentation) as plain ``nn.Module``s.

Architecture after the MLPerf HPC reference, mlcommons/hpc ``deepcam/src/deepCam/architecture/
deeplab_xception.py``: DeepLabv3+ with a modified aligned Xception encoder (output stride 16), built by
``train.py`` as ``DeepLabv3_plus(n_input=16, n_classes=3, os=16)``. The data are 16-channel
768x1152 climate images with per-pixel labels of 3 classes.

Blocks (default channels are the benchmark's):

- :class:`XceptionBlock`: the middle flow runs 16 of these at 728 channels, 48x72 (os 16). Like the
  reference ``Block``: [separable conv -> BN -> ReLU] x (reps - 1), separable conv -> BN, plus the identity
  (or strided 1x1 conv + BN) shortcut, then ReLU. That is the same ops as the pre-activation description
  3 x [ReLU -> depthwise 3x3 -> pointwise 1x1 -> BN] + residual, with the ReLUs placed as the reference does;
- :class:`ASPP`: the "bottleneck": 1x1 and three atrous 3x3 (rates 6/12/18) convs, each + BN + ReLU; an
  image-pool branch (global average pool -> 1x1 -> per-channel affine -> ReLU -> tile); concat -> 1x1 ->
  BN -> ReLU;
- :class:`DecoderBlock`: the first part of the reference ``DeconvUpsampler``: 2 x [ConvTranspose2d 3x3 s2
  -> BN -> ReLU], concat with the 48-channel low-level features, 3x3 -> BN -> ReLU, 3x3 -> BN -> ReLU,
  1x1 (with bias);
- :class:`EntryFlow`: the high-resolution, memory-heavy start: 3x3 s2 and 3x3 convs (+ BN + ReLU), then the
  first Xception block (64 -> 128, 2 reps, stride 2, 1x1 strided shortcut).

:data:`REDUCED_CPU_SIZES` are sizes a 2-core CPU runs in tens to hundreds of milliseconds while keeping
each block's arithmetic intensity close to full size; :data:`FULL_SIZES` are N=1 at the benchmark
resolution. ASPP's reduced variant halves its channels (1024 -> 128) and keeps the full 48x72 map so that
the rate-18 taps still overlap the image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn


def _same_padding(kernel_size: int, dilation: int) -> int:
    """Padding that keeps the size at stride 1 (odd kernels), as the reference computes it."""
    return (kernel_size + (kernel_size - 1) * (dilation - 1) - 1) // 2


class SeparableConv2d(nn.Module):
    """Depthwise k x k (groups = in_channels) followed by a pointwise 1x1; no biases."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int = 3, stride: int = 1,
                 dilation: int = 1) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(in_channels, in_channels, kernel_size, stride,
                                   _same_padding(kernel_size, dilation), dilation, groups=in_channels, bias=False)
        self.pointwise = nn.Conv2d(in_channels, out_channels, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


class XceptionBlock(nn.Module):
    """Xception block; the default is the middle-flow block (728 channels, 3 reps, identity shortcut)."""

    def __init__(self, in_channels: int = 728, out_channels: int | None = None, reps: int = 3, stride: int = 1,
                 dilation: int = 1, end_with_relu: bool = True) -> None:
        super().__init__()
        out_channels = in_channels if out_channels is None else out_channels
        layers: list[nn.Module] = []
        channels = in_channels
        for _ in range(reps):  # grow first: the first separable conv changes the channel count
            layers += [SeparableConv2d(channels, out_channels, 3, 1, dilation), nn.BatchNorm2d(out_channels),
                       nn.ReLU(inplace=True)]
            channels = out_channels
        layers.pop()  # the reference drops the last ReLU of the stack
        if stride != 1:
            layers.append(SeparableConv2d(out_channels, out_channels, 3, stride))
        self.rep = nn.Sequential(*layers)
        self.skip: nn.Module | None = None
        if out_channels != in_channels or stride != 1:
            self.skip = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride, bias=False),
                                      nn.BatchNorm2d(out_channels))
        self.end_with_relu = end_with_relu

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.rep(x)
        y += x if self.skip is None else self.skip(x)
        return torch.relu_(y) if self.end_with_relu else y


class _AtrousBranch(nn.Sequential):
    def __init__(self, in_channels: int, out_channels: int, rate: int) -> None:
        kernel = 1 if rate == 1 else 3
        super().__init__(nn.Conv2d(in_channels, out_channels, kernel, padding=0 if rate == 1 else rate,
                                   dilation=rate, bias=False),
                         nn.BatchNorm2d(out_channels), nn.ReLU())


class _ChannelAffine(nn.Module):
    """Trainable per-channel scale and shift (the reference's image-pool branch has no BN)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(channels, 1, 1))
        self.bias = nn.Parameter(torch.zeros(channels, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.weight * x + self.bias


class ASPP(nn.Module):
    """Atrous spatial pyramid pooling, DeepCAM's bottleneck (2048 -> 256 channels at 48x72)."""

    def __init__(self, in_channels: int = 2048, out_channels: int = 256,
                 rates: tuple[int, int, int] = (6, 12, 18)) -> None:
        super().__init__()
        self.branches = nn.ModuleList(_AtrousBranch(in_channels, out_channels, r) for r in (1, *rates))
        self.image_pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(in_channels, out_channels, 1, bias=False),
                                        _ChannelAffine(out_channels), nn.ReLU())
        self.project = nn.Sequential(nn.Conv2d(out_channels * (len(rates) + 2), out_channels, 1, bias=False),
                                     nn.BatchNorm2d(out_channels), nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = torch.tile(self.image_pool(x), (1, 1, x.shape[2], x.shape[3]))
        return self.project(torch.cat([*(branch(x) for branch in self.branches), pooled], dim=1))


class DecoderBlock(nn.Module):
    """Decoder: two stride-2 transposed convs, concat low-level features, 3x3, 3x3, 1x1."""

    def __init__(self, in_channels: int = 256, low_level_channels: int = 48, channels: int = 256) -> None:
        super().__init__()

        def up(cin: int) -> list[nn.Module]:
            return [nn.ConvTranspose2d(cin, channels, 3, stride=2, padding=1, output_padding=1, bias=False),
                    nn.BatchNorm2d(channels), nn.ReLU()]

        def conv3(cin: int) -> list[nn.Module]:
            return [nn.Conv2d(cin, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels), nn.ReLU()]

        self.upsample = nn.Sequential(*up(in_channels), *up(channels))
        self.fuse = nn.Sequential(*conv3(channels + low_level_channels), *conv3(channels),
                                  nn.Conv2d(channels, channels, 1))

    def forward(self, x: torch.Tensor, low_level: torch.Tensor) -> torch.Tensor:
        return self.fuse(torch.cat([self.upsample(x), low_level], dim=1))


class EntryFlow(nn.Module):
    """Xception entry: 3x3 s2 and 3x3 convs (+BN+ReLU), then block1 (2 reps, stride 2, no end ReLU)."""

    def __init__(self, in_channels: int = 16, stem_channels: tuple[int, int] = (32, 64),
                 out_channels: int = 128) -> None:
        super().__init__()
        c1, c2 = stem_channels
        self.stem = nn.Sequential(nn.Conv2d(in_channels, c1, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c1),
                                  nn.ReLU(inplace=True), nn.Conv2d(c1, c2, 3, padding=1, bias=False),
                                  nn.BatchNorm2d(c2), nn.ReLU(inplace=True))
        self.block = XceptionBlock(c2, out_channels, reps=2, stride=2, end_with_relu=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.stem(x))


@dataclass(frozen=True)
class BlockSize:
    """Constructor arguments and input shapes (N, C, H, W) of one block at one size."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    inputs: tuple[tuple[int, ...], ...] = ()


BLOCKS: dict[str, type[nn.Module]] = {
    "xception_middle": XceptionBlock,
    "aspp": ASPP,
    "decoder": DecoderBlock,
    "entry_flow": EntryFlow,
}

# Reduced sizes timed on a 2-core CPU (fp32, training-mode BN); see the module docstring.
REDUCED_CPU_SIZES: dict[str, BlockSize] = {
    "xception_middle": BlockSize({"in_channels": 728}, ((1, 728, 24, 36),)),
    "aspp": BlockSize({"in_channels": 1024, "out_channels": 128}, ((1, 1024, 48, 72),)),
    "decoder": BlockSize({}, ((1, 256, 12, 18), (1, 48, 48, 72))),
    "entry_flow": BlockSize({"in_channels": 16}, ((1, 16, 192, 288),)),
}

# N=1 at the benchmark's resolution (768x1152 input, os 16): for fake-tensor counting, not for CPU runs.
FULL_SIZES: dict[str, BlockSize] = {
    "xception_middle": BlockSize({"in_channels": 728}, ((1, 728, 48, 72),)),
    "aspp": BlockSize({"in_channels": 2048, "out_channels": 256}, ((1, 2048, 48, 72),)),
    "decoder": BlockSize({}, ((1, 256, 48, 72), (1, 48, 192, 288))),
    "entry_flow": BlockSize({"in_channels": 16}, ((1, 16, 768, 1152),)),
}


# The benchmark's resolution at the batch a GPU runs the example suite with: batch 32, the decoder 16 (its
# 192x288 maps at up to 304 channels are 16x the others' per image). The largest fp32 feature map is then
# about 1 GB (decoder: 16 x 304 x 192 x 288 x 4 B; ASPP's input 32 x 2048 x 48 x 72 x 4 B = 0.9 GB).
CUDA_SIZES: dict[str, BlockSize] = {
    name: BlockSize(size.kwargs, tuple((16 if name == "decoder" else 32, *shape[1:]) for shape in size.inputs))
    for name, size in FULL_SIZES.items()
}


def make_block(name: str, sizes: Mapping[str, BlockSize] = REDUCED_CPU_SIZES, seed: int = 0,
               device: str | torch.device = "cpu") -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A block (training mode) and random inputs of the given size table.

    Under a ``FakeTensorMode`` (for full sizes) the inputs are fake and the parameters stay real.
    """
    size = sizes[name]
    torch.manual_seed(seed)
    module = BLOCKS[name](**size.kwargs)
    if torch.device(device) == torch.device("cpu"):
        return module, tuple(torch.randn(shape) for shape in size.inputs)
    # drawn where they are used: a GPU-sized input made on the host first would cost seconds to copy
    return module.to(device), tuple(torch.randn(shape, device=device) for shape in size.inputs)
