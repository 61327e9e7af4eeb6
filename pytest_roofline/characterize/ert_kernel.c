/* ERT-style roofline kernel for CPUs (C11 + OpenMP + GCC/Clang vector extensions).
 *
 * Per element: read x, apply ERT_FLOPS floating-point operations, write x back (1 read + 1 write).
 * Odd counts start with one multiply (1 FLOP); the rest are fused multiply-adds (2 FLOPs each).
 * alpha = beta = 0.5 and gamma = 1 keep x = 1 exactly forever: no overflow, no denormals, and the
 * compiler cannot fold the chain because the constants arrive at run time.
 *
 * Compute peaks need independent work: each block holds ERT_CHAINS vectors that are updated in lock-step,
 * so ERT_CHAINS dependency chains are in flight per core (one chain per element, as in ERT's plain kernel,
 * reaches well under half the FMA peak).
 *
 * Every trial is one full pass over the working set: an empty asm with a memory clobber between trials
 * stops the compiler from fusing trials (gcc's unroll-and-jam did, doubling low-intensity bandwidth).
 *
 * Exported per (precision, vector bytes, FLOPs):  double ert_<p>_v<bytes>_f<flops>(T *x, long n,
 * long trials, int threads, double *ran) -> seconds for all trials; n must be a multiple of
 * threads * block elements; *ran = smallest CPU-time share of any thread (1.0 = nobody was descheduled).
 *
 * A second streaming shape, the STREAM triad a = b + s*c (2 reads + 1 write, 2 FLOPs per element), is
 * swept too: on some cores it moves more bytes per cycle than the in-place update, and a roof must be the
 * best a streaming kernel reaches at that level.  double ert_triad_<p>_v<bytes>(T *a, const T *b,
 * const T *c, long n, long trials, int threads, double *ran) with n elements per array; and the STREAM
 * scale b = s*a (below).
 */
#define _POSIX_C_SOURCE 199309L
#include <omp.h>
#include <stddef.h>
#include <time.h>

/* CPU time of the calling thread: it stops while the thread is descheduled, wall time does not. */
static double ert_thread_seconds(void) {
  struct timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Every timed region records, per thread, CPU time / wall time over the same interval. A call where some
 * thread got less than the whole interval was disturbed by other work on the machine (the other threads
 * then wait for it at the closing barrier); the caller can discard it. *ran receives the smallest share. */
#define ERT_TIMED_BEGIN()                                                                    \
  _Pragma("omp barrier")                                                                     \
  const double my_wall_start = omp_get_wtime(), my_cpu_start = ert_thread_seconds();         \
  _Pragma("omp master") start = my_wall_start;

#define ERT_TIMED_END()                                                                      \
  _Pragma("omp barrier")                                                                     \
  {                                                                                          \
    const double my_wall = omp_get_wtime() - my_wall_start;                                  \
    const double my_share = my_wall > 0 ? (ert_thread_seconds() - my_cpu_start) / my_wall : 1.0; \
    _Pragma("omp critical(ert_share)") if (my_share < share) share = my_share;               \
  }                                                                                          \
  _Pragma("omp master") stop = omp_get_wtime();

#ifndef ERT_CHAINS
#define ERT_CHAINS 16
#endif

#define ERT_BARRIER() __asm__ __volatile__("" ::: "memory")

#define ERT_DEFINE_VECTOR(T, P, BYTES) \
  typedef T ert_##P##_v##BYTES __attribute__((vector_size(BYTES), aligned(BYTES)));

ERT_DEFINE_VECTOR(double, fp64, 16)
ERT_DEFINE_VECTOR(double, fp64, 32)
ERT_DEFINE_VECTOR(double, fp64, 64)
ERT_DEFINE_VECTOR(float, fp32, 16)
ERT_DEFINE_VECTOR(float, fp32, 32)
ERT_DEFINE_VECTOR(float, fp32, 64)

/* One kernel: precision P (element type T), vector width BYTES, FLOPS per element. */
#define ERT_DEFINE_KERNEL(T, P, BYTES, FLOPS)                                                        \
  double ert_##P##_v##BYTES##_f##FLOPS(T *data, long n, long trials, int threads, double *ran) {    \
    typedef ert_##P##_v##BYTES V;                                                                    \
    const long lanes = (long)(BYTES / sizeof(T));                                                    \
    const long block = lanes * ERT_CHAINS;                                                           \
    volatile T runtime_half = (T)0.5, runtime_one = (T)1.0;                                          \
    const T half = runtime_half, one = runtime_one;                                                  \
    double start = 0.0, stop = 0.0, share = 1.0;                                                     \
    _Pragma("omp parallel num_threads(threads)")                                                     \
    {                                                                                                \
      const int me = omp_get_thread_num(), count = omp_get_num_threads();                            \
      const long per_thread = n / count;                                                             \
      V *chunk = (V *)(data + (long)me * per_thread);                                                \
      const long blocks = per_thread / block;                                                        \
      /* Broadcast by scalar-vector arithmetic so the constants live in registers, not on the stack. */ \
      const V zero = {0}, alpha = zero + half, beta = zero + half, gamma = zero + one;               \
      ERT_TIMED_BEGIN()                                                                              \
      for (long t = 0; t < trials; ++t) {                                                            \
        for (long b = 0; b < blocks; ++b) {                                                          \
          V x[ERT_CHAINS];                                                                           \
          V *p = chunk + b * ERT_CHAINS;                                                             \
          for (int c = 0; c < ERT_CHAINS; ++c) x[c] = p[c];                                          \
          if (FLOPS & 1)                                                                             \
            for (int c = 0; c < ERT_CHAINS; ++c) x[c] = x[c] * gamma;                                \
          for (int k = 0; k < FLOPS / 2; ++k)                                                        \
            for (int c = 0; c < ERT_CHAINS; ++c) x[c] = x[c] * alpha + beta;                         \
          for (int c = 0; c < ERT_CHAINS; ++c) p[c] = x[c];                                          \
        }                                                                                            \
        ERT_BARRIER();                                                                               \
      }                                                                                              \
      ERT_TIMED_END()                                                                                \
    }                                                                                                \
    *ran = share;                                                                                    \
    return stop - start;                                                                             \
  }

#define ERT_DEFINE_FLOPS(T, P, BYTES) \
  ERT_DEFINE_KERNEL(T, P, BYTES, 1)   \
  ERT_DEFINE_KERNEL(T, P, BYTES, 2)   \
  ERT_DEFINE_KERNEL(T, P, BYTES, 4)   \
  ERT_DEFINE_KERNEL(T, P, BYTES, 8)   \
  ERT_DEFINE_KERNEL(T, P, BYTES, 16)  \
  ERT_DEFINE_KERNEL(T, P, BYTES, 32)  \
  ERT_DEFINE_KERNEL(T, P, BYTES, 64)  \
  ERT_DEFINE_KERNEL(T, P, BYTES, 128) \
  ERT_DEFINE_KERNEL(T, P, BYTES, 256) \
  ERT_DEFINE_KERNEL(T, P, BYTES, 512) \
  ERT_DEFINE_KERNEL(T, P, BYTES, 1024)

/* The narrower widths only set their ISA peak ceiling: a few FLOP values keep their build short. */
#define ERT_DEFINE_PEAK_FLOPS(T, P, BYTES) \
  ERT_DEFINE_KERNEL(T, P, BYTES, 1)        \
  ERT_DEFINE_KERNEL(T, P, BYTES, 2)        \
  ERT_DEFINE_KERNEL(T, P, BYTES, 256)      \
  ERT_DEFINE_KERNEL(T, P, BYTES, 512)

/* ERT_WIDTH selects one vector width per library so the widths compile in parallel; 0 builds all.
 * ERT_FULL_SWEEP = 0 builds only the peak FLOP values for it. */
#ifndef ERT_WIDTH
#define ERT_WIDTH 0
#endif
#ifndef ERT_FULL_SWEEP
#define ERT_FULL_SWEEP 1
#endif
#if ERT_FULL_SWEEP
#define ERT_DEFINE_SET ERT_DEFINE_FLOPS
#else
#define ERT_DEFINE_SET ERT_DEFINE_PEAK_FLOPS
#endif

#if ERT_WIDTH == 0 || ERT_WIDTH == 16
ERT_DEFINE_SET(double, fp64, 16)
ERT_DEFINE_SET(float, fp32, 16)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 32
ERT_DEFINE_SET(double, fp64, 32)
ERT_DEFINE_SET(float, fp32, 32)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 64
ERT_DEFINE_SET(double, fp64, 64)
ERT_DEFINE_SET(float, fp32, 64)
#endif

/* The body both STREAM kernels share: each thread streams its chunk of every array, trials times, timed.
 * SCALE is the runtime constant s; ARRAYS declares the thread's vector pointers from `offset`; STATEMENT is
 * the loop body over index i. */
#define ERT_STREAM_BODY(T, P, BYTES, SCALE, ARRAYS, STATEMENT)                                       \
    typedef ert_##P##_v##BYTES V;                                                                    \
    const long lanes = (long)(BYTES / sizeof(T));                                                    \
    const long block = lanes * ERT_CHAINS;                                                           \
    volatile T runtime_scale = (T)(SCALE);                                                           \
    const T scale = runtime_scale;                                                                   \
    double start = 0.0, stop = 0.0, share = 1.0;                                                     \
    _Pragma("omp parallel num_threads(threads)")                                                     \
    {                                                                                                \
      const int me = omp_get_thread_num(), count = omp_get_num_threads();                            \
      const long per_thread = n / count, offset = (long)me * per_thread;                             \
      ARRAYS                                                                                         \
      const long blocks = per_thread / block;                                                        \
      const V zero = {0}, s = zero + scale;                                                          \
      ERT_TIMED_BEGIN()                                                                              \
      for (long t = 0; t < trials; ++t) {                                                            \
        for (long i = 0; i < blocks * ERT_CHAINS; ++i) STATEMENT;                                    \
        ERT_BARRIER();                                                                               \
      }                                                                                              \
      ERT_TIMED_END()                                                                                \
    }                                                                                                \
    *ran = share;                                                                                    \
    return stop - start;

#define ERT_DEFINE_TRIAD(T, P, BYTES)                                                                \
  double ert_triad_##P##_v##BYTES(T *a, const T *b, const T *c, long n, long trials, int threads,    \
                                  double *ran) {                                                   \
    ERT_STREAM_BODY(T, P, BYTES, 0.5,                                                                \
                    V *out = (V *)(a + offset); const V *left = (const V *)(b + offset);             \
                    const V *right = (const V *)(c + offset);,                                       \
                    out[i] = left[i] + s * right[i])                                                 \
  }

#if ERT_WIDTH == 0 || ERT_WIDTH == 16
ERT_DEFINE_TRIAD(double, fp64, 16)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 32
ERT_DEFINE_TRIAD(double, fp64, 32)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 64
ERT_DEFINE_TRIAD(double, fp64, 64)
#endif

/* The STREAM scale b = s*a (1 read + 1 write stream, 1 FLOP per element): two arrays where the update kernel has
 * one. Where a core's prefetchers follow more streams than one, a copy-shaped kernel moves more bytes per second
 * from L2, L3 or DRAM than the in-place update (a plain copy loop would become a memcpy call: s = 1 at run time
 * keeps it a vector loop and every element at 1). double ert_scale_<p>_v<bytes>(T *b, const T *a, long n,
 * long trials, int threads, double *ran) with n elements per array. */
#define ERT_DEFINE_SCALE(T, P, BYTES)                                                                \
  double ert_scale_##P##_v##BYTES(T *b, const T *a, long n, long trials, int threads, double *ran) { \
    ERT_STREAM_BODY(T, P, BYTES, 1.0,                                                                \
                    V *out = (V *)(b + offset); const V *in = (const V *)(a + offset);,              \
                    out[i] = s * in[i])                                                              \
  }

#if ERT_WIDTH == 0 || ERT_WIDTH == 16
ERT_DEFINE_SCALE(double, fp64, 16)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 32
ERT_DEFINE_SCALE(double, fp64, 32)
#endif
#if ERT_WIDTH == 0 || ERT_WIDTH == 64
ERT_DEFINE_SCALE(double, fp64, 64)
#endif

/* First touch by the thread that will use each chunk, so pages land near it. */
void ert_fill_fp64(double *data, long n, double value, int threads) {
  _Pragma("omp parallel for num_threads(threads) schedule(static)")
  for (long i = 0; i < n; ++i) data[i] = value;
}
void ert_fill_fp32(float *data, long n, float value, int threads) {
  _Pragma("omp parallel for num_threads(threads) schedule(static)")
  for (long i = 0; i < n; ++i) data[i] = value;
}

int ert_chains(void) { return ERT_CHAINS; }
