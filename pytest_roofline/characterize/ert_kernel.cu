// ERT-style roofline kernel for CUDA GPUs, compiled at run time by NVRTC (CuPy RawModule).
//
// Same contract as ert_kernel.c: per element, read x, apply ERT_FLOPS floating-point operations, write x back
// (1 read + 1 write per element). alpha = beta = 0.5 and gamma = 1 keep x = 1 forever, and they arrive as
// kernel parameters so nothing can be folded. Grid-stride loop over the working set, trials inside the
// kernel so one launch runs them all (one launch per timing, timed with CUDA events).
//
// Precisions and how FLOPs are counted per element:
//   fp64, fp32: odd ERT_FLOPS start with one multiply (1 FLOP), then ERT_FLOPS/2 fma (2 FLOPs each);
//   fp16, bf16: an element is a packed pair (half2 / bfloat162, 4 bytes) and one fma.rn.{f16,bf16}x2 does
//               2 lanes x 2 FLOPs = 4 FLOPs, so ERT_FLOPS is a multiple of 4 and there are ERT_FLOPS/4 of them.
// The packed FMAs are written as inline PTX, so the kernel needs no CUDA headers (NVRTC ships none) and the
// instruction the host counts is the instruction the GPU runs. fma.rn.bf16x2 needs sm_80 or newer.
//
// Kernels: ert_<precision>_f<ERT_FLOPS>(T *data, long long n, int trials, T alpha, T beta, T gamma)
// with T = double, float, or unsigned int (a packed pair) for fp16/bf16 (gamma unused there).

#define ERT_GRID_STRIDE_LOOP(BODY)                                                    \
  const long long stride = (long long)gridDim.x * blockDim.x;                         \
  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;           \
  _Pragma("unroll 1") for (int t = 0; t < trials; ++t) {                              \
    _Pragma("unroll 1") for (long long i = first; i < n; i += stride) { BODY }         \
  }

template <int FLOPS, typename T>
__device__ __forceinline__ T ert_scalar_chain(T x, T alpha, T beta, T gamma) {
  if (FLOPS & 1) x = x * gamma;
#pragma unroll
  for (int k = 0; k < FLOPS / 2; ++k) x = fma(x, alpha, beta);
  return x;
}

template <int FLOPS>
__device__ __forceinline__ unsigned int ert_f16x2_chain(unsigned int x, unsigned int alpha, unsigned int beta) {
#pragma unroll
  for (int k = 0; k < FLOPS / 4; ++k) asm("fma.rn.f16x2 %0, %0, %1, %2;" : "+r"(x) : "r"(alpha), "r"(beta));
  return x;
}

template <int FLOPS>
__device__ __forceinline__ unsigned int ert_bf16x2_chain(unsigned int x, unsigned int alpha, unsigned int beta) {
#pragma unroll
  for (int k = 0; k < FLOPS / 4; ++k) asm("fma.rn.bf16x2 %0, %0, %1, %2;" : "+r"(x) : "r"(alpha), "r"(beta));
  return x;
}

#define ERT_SCALAR_KERNEL(NAME, T, FLOPS)                                                               \
  extern "C" __global__ void ert_##NAME##_f##FLOPS(T *__restrict__ data, long long n, int trials, T alpha, \
                                                   T beta, T gamma) {                                   \
    ERT_GRID_STRIDE_LOOP(data[i] = ert_scalar_chain<FLOPS>(data[i], alpha, beta, gamma);)               \
  }

#define ERT_PAIR_KERNEL(NAME, CHAIN, FLOPS)                                                              \
  extern "C" __global__ void ert_##NAME##_f##FLOPS(unsigned int *__restrict__ data, long long n,         \
                                                   int trials, unsigned int alpha, unsigned int beta,    \
                                                   unsigned int gamma) {                                 \
    ERT_GRID_STRIDE_LOOP(data[i] = CHAIN<FLOPS>(data[i], alpha, beta);)                                  \
  }

#define ERT_SCALAR_FAMILY(NAME, T)                                                                     \
  ERT_SCALAR_KERNEL(NAME, T, 1) ERT_SCALAR_KERNEL(NAME, T, 2) ERT_SCALAR_KERNEL(NAME, T, 4)           \
  ERT_SCALAR_KERNEL(NAME, T, 8) ERT_SCALAR_KERNEL(NAME, T, 16) ERT_SCALAR_KERNEL(NAME, T, 32)         \
  ERT_SCALAR_KERNEL(NAME, T, 64) ERT_SCALAR_KERNEL(NAME, T, 128) ERT_SCALAR_KERNEL(NAME, T, 256)      \
  ERT_SCALAR_KERNEL(NAME, T, 512) ERT_SCALAR_KERNEL(NAME, T, 1024)

#define ERT_PAIR_FAMILY(NAME, CHAIN)                                                                   \
  ERT_PAIR_KERNEL(NAME, CHAIN, 4) ERT_PAIR_KERNEL(NAME, CHAIN, 8) ERT_PAIR_KERNEL(NAME, CHAIN, 16)      \
  ERT_PAIR_KERNEL(NAME, CHAIN, 32) ERT_PAIR_KERNEL(NAME, CHAIN, 64) ERT_PAIR_KERNEL(NAME, CHAIN, 128)   \
  ERT_PAIR_KERNEL(NAME, CHAIN, 256) ERT_PAIR_KERNEL(NAME, CHAIN, 512) ERT_PAIR_KERNEL(NAME, CHAIN, 1024)

// The host compiles one precision at a time by defining exactly one of these.
#if defined(ERT_FP64)
ERT_SCALAR_FAMILY(fp64, double)
#elif defined(ERT_FP32)
ERT_SCALAR_FAMILY(fp32, float)
#elif defined(ERT_FP16)
ERT_PAIR_FAMILY(fp16, ert_f16x2_chain)
#elif defined(ERT_BF16)
ERT_PAIR_FAMILY(bf16, ert_bf16x2_chain)
#endif
