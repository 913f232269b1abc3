/* Benchmark of the interpreter's block operations (interp/blockops.c) on
 * 64 MiB arrays, each next to memcpy on the same buffers in the same run,
 * plus dot 256x256x256. Not a test: prints a table, asserts nothing.
 * Usage: bench_blockops [reps]   (best of `reps` runs, default 7) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/base_internal.h"
#include "interp/blockops.h"

#define BENCH_NAME "bench_blockops"
#include "bench/bench_util.h"

static int reps = 7;

/* Best (smallest) time of `reps` runs of body. */
#define BEST_TIME(out, body)                                                   \
  do {                                                                         \
    double best_ = 1e30;                                                       \
    for (int r_ = 0; r_ < reps; r_++) {                                        \
      double t0_ = now_seconds();                                              \
      body;                                                                    \
      double t_ = now_seconds() - t0_;                                         \
      if (t_ < best_) best_ = t_;                                              \
    }                                                                          \
    (out) = best_;                                                             \
  } while (0)

static void report(const char *name, double bytes, double seconds,
                   double memcpy_gbs) {
  double gbs = bytes / seconds * 1e-9;
  printf("%-34s %8.2f GB/s  %5.0f%% of memcpy  (%.2f ms)\n", name, gbs,
         100.0 * gbs / memcpy_gbs, seconds * 1e3);
}

static void *alloc_or_die(size_t bytes) {
  void *p = tsr_aligned_alloc(64, bytes);
  if (!p) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  memset(p, 0, bytes); /* fault the pages in before timing */
  return p;
}

int main(int argc, char **argv) {
  if (argc > 1) reps = atoi(argv[1]) > 0 ? atoi(argv[1]) : reps;
  const size_t bytes = (size_t)64 << 20;
  unsigned char *a = alloc_or_die(bytes), *b = alloc_or_die(bytes),
                *c = alloc_or_die(bytes);
  const size_t nf = bytes / 4, nh = bytes / 2;
  float *af = (float *)a, *bf = (float *)b;
  for (size_t i = 0; i < nf; i++) {
    af[i] = (float)(i % 1000) * 0.25f;
    bf[i] = 1.5f - (float)(i % 7);
  }
  double t, t_memcpy;
  BEST_TIME(t_memcpy, memcpy(c, a, bytes));
  const double memcpy_gbs = 2.0 * (double)bytes / t_memcpy * 1e-9;
  printf("blockops benchmark: 64 MiB per array, best of %d; GB/s counts bytes "
         "read + written\n",
         reps);
  printf("%-34s %8.2f GB/s  (%.2f ms)\n", "memcpy 64 MiB", memcpy_gbs,
         t_memcpy * 1e3);

  tsr_binary_fn add_f32 = tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_F32);
  BEST_TIME(t, add_f32(c, a, b, nf, TSR_BCAST_NONE));
  report("add f32 [16M]", 3.0 * (double)bytes, t, memcpy_gbs);
  BEST_TIME(t, add_f32(c, c, b, nf, TSR_BCAST_NONE));
  report("add f32 in place (dst == a)", 3.0 * (double)bytes, t, memcpy_gbs);

  /* bf16 operands: reinterpret the f32 data as bf16 pairs (finite values). */
  tsr_blockops_convert(TSR_DTYPE_BF16, c, TSR_DTYPE_F32, a, nf);
  memcpy(a, c, bytes / 2);
  memcpy(a + bytes / 2, c, bytes / 2);
  tsr_blockops_convert(TSR_DTYPE_BF16, c, TSR_DTYPE_F32, b, nf);
  memcpy(b, c, bytes / 2);
  memcpy(b + bytes / 2, c, bytes / 2);
  tsr_binary_fn add_bf16 = tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_BF16);
  BEST_TIME(t, add_bf16(c, a, b, nh, TSR_BCAST_NONE));
  report("add bf16 [32M]", 3.0 * (double)bytes, t, memcpy_gbs);
  tsr_binary_fn add_f16 = tsr_blockops_binary(TSR_OP_ADD, TSR_DTYPE_F16);
  BEST_TIME(t, add_f16(c, a, b, nh, TSR_BCAST_NONE));
  report("add f16 [32M] (bf16 bits as f16)", 3.0 * (double)bytes, t, memcpy_gbs);

  for (size_t i = 0; i < nf; i++) af[i] = (float)(i % 1000) * 0.25f;
  const int64_t sq[2] = {4096, 4096};
  BEST_TIME(t, tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_F32, c, a, 2,
                                   sq, 2u));
  report("row-sum f32 [4096,4096] axis 1", (double)bytes, t, memcpy_gbs);
  const int64_t narrow[2] = {131072, 128};
  BEST_TIME(t, tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_F32, c, a, 2,
                                   narrow, 2u));
  report("row-sum f32 [131072,128] axis 1", (double)bytes, t, memcpy_gbs);
  BEST_TIME(t, tsr_blockops_reduce(TSR_OP_REDUCE_SUM, TSR_DTYPE_F32, c, a, 2,
                                   sq, 1u));
  report("column-sum f32 [4096,4096] axis 0", (double)bytes, t, memcpy_gbs);
  BEST_TIME(t, tsr_blockops_reduce(TSR_OP_REDUCE_MAX, TSR_DTYPE_F32, c, a, 2,
                                   sq, 2u));
  report("row-max f32 [4096,4096] axis 1", (double)bytes, t, memcpy_gbs);

  BEST_TIME(t, tsr_blockops_convert(TSR_DTYPE_BF16, c, TSR_DTYPE_F32, a, nf));
  report("convert f32 -> bf16 [16M]", 1.5 * (double)bytes, t, memcpy_gbs);
  const int64_t dstr[2] = {4096, 1}, tstr[2] = {1, 4096};
  BEST_TIME(t, tsr_blockops_copy(4, 2, sq, c, dstr, a, tstr));
  report("transpose copy f32 [4096,4096]", 2.0 * (double)bytes, t, memcpy_gbs);

  BEST_TIME(t, tsr_blockops_iota(TSR_DTYPE_F32, c, 2, sq, 1));
  report("iota f32 [4096,4096] dim 1", (double)bytes, t, memcpy_gbs);
  BEST_TIME(t, tsr_blockops_iota(TSR_DTYPE_F32, c, 2, sq, 0));
  report("iota f32 [4096,4096] dim 0", (double)bytes, t, memcpy_gbs);

  /* dot 256x256x256 f32, repeated so that one timing is ~10 ms. */
  const int64_t dm = 256;
  const int dot_iters = 20;
  BEST_TIME(t, for (int it = 0; it < dot_iters; it++) tsr_blockops_dot(
                   TSR_DTYPE_F32, c, TSR_DTYPE_F32, a, b, NULL, dm, dm, dm,
                   false));
  printf("%-34s %8.2f GFLOP/s\n", "dot f32 256x256x256",
         2.0 * (double)(dm * dm * dm) * dot_iters / t * 1e-9);
  BEST_TIME(t, for (int it = 0; it < dot_iters; it++) tsr_blockops_dot(
                   TSR_DTYPE_F32, c, TSR_DTYPE_BF16, a, b, NULL, dm, dm, dm,
                   false));
  printf("%-34s %8.2f GFLOP/s\n", "dot bf16->f32 256x256x256",
         2.0 * (double)(dm * dm * dm) * dot_iters / t * 1e-9);

  tsr_free(a);
  tsr_free(b);
  tsr_free(c);
  return 0;
}
