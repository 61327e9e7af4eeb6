// Roof kernels for CUDA GPUs beside the ERT sweep (ert_kernel.cu), compiled at run time by NVRTC.
//
// The ERT update sweep reads L2 and HBM well, but on an H100 it read L1 no faster than L2 (its small working
// sets are launch-bound) and its fp16/bf16 FMA, one chain per element, stays under the packed-FMA peak. Each
// kernel here targets one roof; no CUDA headers are needed (NVRTC ships none), so the loads and packed FMAs
// are inline PTX: the instruction the host counts is the one the GPU runs.
//
//   l1_read_v<N>(const uint4 *data, int iterations, unsigned *out)
//       Each block reads its own region of N x blockDim.x 16-byte vectors (256 threads: N=2,4,8 -> 8, 16, 32
//       KiB) `iterations` times with ld.global.nc (the read-only path through L1, what __ldg emits). Each pass
//       starts at another vector ((k + it) mod N): read-only loads of fixed addresses were hoisted out of the
//       loop by ptxas (volatile asm does not stop it), and the H100 "read" 118 TB/s. Bytes = blocks x
//       iterations x N x blockDim.x x 16. With 2-4 blocks per SM the regions stay resident in L1.
//   hbm_triad(float4 *a, const float4 *b, const float4 *c, float s, long long n)
//       STREAM triad a = b + s*c over n float4, grid-stride: 2 reads + 1 write of 16 bytes per element.
//   peak_<p>(T *out, int iterations, T alpha, T beta)
//       Register-only FMA: PEAK_CHAINS independent chains x PEAK_UNROLL steps per iteration per thread; fp16x2
//       and bf16x2 are packed pairs (fma.rn.f16x2 / fma.rn.bf16x2, what __hfma2 emits on half2 and
//       __nv_bfloat162), 4 FLOPs each; f32/f64 2 FLOPs per FMA. One store per thread at the end keeps the
//       chains alive. alpha = beta = 0.5 and x = 1 keep every value at 1.

#define PEAK_CHAINS 8
#define PEAK_UNROLL 8

#define L1_READ_KERNEL(N)                                                                                  \
  extern "C" __global__ void l1_read_v##N(const uint4 *__restrict__ data, int iterations,                 \
                                          unsigned int *__restrict__ out) {                               \
    const uint4 *mine = data + (long long)blockIdx.x * (N * blockDim.x) + threadIdx.x;                     \
    unsigned int acc = 0;                                                                                  \
    _Pragma("unroll 1") for (int it = 0; it < iterations; ++it) {                                          \
      _Pragma("unroll") for (int k = 0; k < N; ++k) {                                                      \
        const unsigned int slot = (unsigned int)(k + it) & (N - 1); /* moves with it: never hoisted */       \
        unsigned int x, y, z, w;                                                                           \
        asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"                                         \
                     : "=r"(x), "=r"(y), "=r"(z), "=r"(w) : "l"(mine + slot * blockDim.x));                \
        acc ^= x ^ y ^ z ^ w;                                                                              \
      }                                                                                                    \
    }                                                                                                      \
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = acc;                                           \
  }

L1_READ_KERNEL(2)
L1_READ_KERNEL(4)
L1_READ_KERNEL(8)

extern "C" __global__ void hbm_triad(float4 *__restrict__ a, const float4 *__restrict__ b,
                                     const float4 *__restrict__ c, float s, long long n) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float4 x = b[i];
    const float4 y = c[i];
    float4 r;
    r.x = x.x + s * y.x;
    r.y = x.y + s * y.y;
    r.z = x.z + s * y.z;
    r.w = x.w + s * y.w;
    a[i] = r;
  }
}

template <typename T>
__device__ __forceinline__ void peak_step(T &x, T alpha, T beta) { x = fma(x, alpha, beta); }

#define PEAK_SCALAR_KERNEL(NAME, T)                                                                        \
  extern "C" __global__ void peak_##NAME(T *__restrict__ out, int iterations, T alpha, T beta) {          \
    T x[PEAK_CHAINS];                                                                                      \
    _Pragma("unroll") for (int k = 0; k < PEAK_CHAINS; ++k) x[k] = (T)1;                                   \
    _Pragma("unroll 1") for (int it = 0; it < iterations; ++it) {                                          \
      _Pragma("unroll") for (int u = 0; u < PEAK_UNROLL; ++u) {                                            \
        _Pragma("unroll") for (int k = 0; k < PEAK_CHAINS; ++k) peak_step<T>(x[k], alpha, beta);           \
      }                                                                                                    \
    }                                                                                                      \
    T sum = x[0];                                                                                          \
    _Pragma("unroll") for (int k = 1; k < PEAK_CHAINS; ++k) sum = sum + x[k];                              \
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = sum;                                           \
  }

#define PEAK_PAIR_KERNEL(NAME, OPCODE)                                                                     \
  extern "C" __global__ void peak_##NAME(unsigned int *__restrict__ out, int iterations,                  \
                                         unsigned int alpha, unsigned int beta) {                         \
    unsigned int x[PEAK_CHAINS];                                                                           \
    _Pragma("unroll") for (int k = 0; k < PEAK_CHAINS; ++k) x[k] = beta;                                    \
    _Pragma("unroll 1") for (int it = 0; it < iterations; ++it) {                                          \
      _Pragma("unroll") for (int u = 0; u < PEAK_UNROLL; ++u) {                                            \
        _Pragma("unroll") for (int k = 0; k < PEAK_CHAINS; ++k)                                            \
          asm(OPCODE " %0, %0, %1, %2;" : "+r"(x[k]) : "r"(alpha), "r"(beta));                            \
      }                                                                                                    \
    }                                                                                                      \
    unsigned int sum = x[0];                                                                               \
    _Pragma("unroll") for (int k = 1; k < PEAK_CHAINS; ++k) sum ^= x[k];                                   \
    out[(long long)blockIdx.x * blockDim.x + threadIdx.x] = sum;                                           \
  }

PEAK_SCALAR_KERNEL(fp64, double)
PEAK_SCALAR_KERNEL(fp32, float)
PEAK_PAIR_KERNEL(fp16x2, "fma.rn.f16x2")
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
PEAK_PAIR_KERNEL(bf16x2, "fma.rn.bf16x2")
#endif
