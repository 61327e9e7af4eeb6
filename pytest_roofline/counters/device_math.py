"""Which roof the math of an op on a GPU runs on, as PyTorch decides it: CUDA cores or Tensor Cores.

On a CPU the precision key is the dtype doing the math (``flop_formulas.precision_of``). On CUDA, GEMM-like
ops (matrix products, convolutions, cuDNN RNNs) go to cuBLAS / cuDNN, which run them on Tensor Cores where
the GPU has them, and PyTorch's flags decide what fp32 math becomes:

- fp32 convolutions and cuDNN RNNs run as TF32 when ``torch.backends.cudnn.allow_tf32`` is true (the default);
- fp32 matrix products run as TF32 when ``torch.backends.cuda.matmul.allow_tf32`` is true, i.e. when
  ``torch.get_float32_matmul_precision()`` is not ``"highest"`` (the default is ``"highest"``).

Keys: such fp32 math counts as ``tf32_tensor``, the name the ncu counter and the CUDA record give it, so both
counters report one precision and one bound for the same kernel. fp16, bf16 and fp64 GEMM-like math counts as
``fp16_tensor`` / ``bf16_tensor`` / ``fp64_tensor``: a GPU record keeps the CUDA-core roofs of those
precisions (``fp16``, ...) apart from the Tensor Core ones, and the model falls back to the plain name where
a record has no Tensor Core roof (``Machine.peak_for``). fp32 without TF32 stays ``fp32`` (CUDA cores);
``fp8`` stays ``fp8``. Everything else (pointwise, reductions, normalization) runs on CUDA cores: its dtype.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING

import torch

from pytest_roofline.counters.flop_formulas import precision_of
from pytest_roofline.counters.op_rules import _packets
from pytest_roofline.model import TENSOR_SUFFIX

if TYPE_CHECKING:
    from torch._ops import OpOverloadPacket

# cuDNN's flag: convolutions (forward and backward, transposed, fused) and cuDNN RNNs
CUDNN_OPS = frozenset(_packets(
    "convolution", "_convolution", "convolution_overrideable", "cudnn_convolution", "cudnn_convolution_transpose",
    "cudnn_convolution_relu", "cudnn_convolution_add_relu", "convolution_backward",
    "convolution_backward_overrideable", "_cudnn_rnn", "_cudnn_rnn_backward",
))
# cuBLAS's flag: matrix products (GEMMs; matrix-vector products and dot products are not Tensor Core work)
CUBLAS_OPS = frozenset(_packets("mm", "addmm", "addmm_", "_addmm_activation", "bmm", "baddbmm", "baddbmm_",
                                "addbmm", "addbmm_"))
_TWO_ROOFS = ("fp16", "bf16", "fp64")  # precisions a GPU computes on CUDA cores and on Tensor Cores


def tf32_convolutions() -> bool:
    """``torch.backends.cudnn.allow_tf32``: fp32 convolutions run as TF32 on CUDA."""
    with warnings.catch_warnings():  # newer torch steers towards fp32_precision; the old flag still answers
        warnings.simplefilter("ignore")
        return bool(torch.backends.cudnn.allow_tf32)


def tf32_matmuls() -> bool:
    """``torch.backends.cuda.matmul.allow_tf32`` / ``torch.get_float32_matmul_precision() != "highest"``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bool(torch.backends.cuda.matmul.allow_tf32) or torch.get_float32_matmul_precision() != "highest"


def math_precision(packet: OpOverloadPacket, dtype: torch.dtype, device_type: str | None) -> str | None:
    """The precision key of an op's math: its dtype's, or on CUDA, the Tensor Core one PyTorch picks."""
    precision = precision_of(dtype)
    if device_type != "cuda" or precision is None:
        return precision
    cudnn, cublas = packet in CUDNN_OPS, packet in CUBLAS_OPS
    if not (cudnn or cublas):
        return precision
    if precision == "fp32":
        return "tf32" + TENSOR_SUFFIX if (tf32_convolutions() if cudnn else tf32_matmuls()) else "fp32"
    if precision in _TWO_ROOFS:
        return precision + TENSOR_SUFFIX
    return precision
