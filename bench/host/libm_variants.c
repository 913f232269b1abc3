/* Does glibc's libm give the same float results on every x86-64 host? glibc
 * picks an implementation of some functions by the CPU (an FMA variant on
 * CPUs with FMA), and both of tessera's back ends call libm for exp, sin,
 * cos, pow and the other transcendental functions (docs/lowering.md,
 * "Correctness against the interpreter"). This hashes every result of each
 * function over all 2^32 float inputs, in blocks of 2^16, so that two runs
 * can be compared block by block, then the differing blocks listed input
 * by input:
 *
 *   cc -O2 bench/host/libm_variants.c -o /tmp/libm_variants -lm
 *   /tmp/libm_variants hash fma.blk          # this CPU's variants
 *   GLIBC_TUNABLES=glibc.cpu.hwcaps=-AVX2_Usable,-FMA_Usable \
 *     /tmp/libm_variants hash nofma.blk      # the variants of a CPU without FMA
 *   /tmp/libm_variants block F B             # inputs and results of block B of function F
 *
 * About 10 minutes per run on one core of the 2-core EPYC. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static float pow_x(float x) { return powf(x, 1.37f); }
static float pow_y(float x) { return powf(1.37f, x); }

static const struct {
  const char *name;
  float (*f)(float);
} functions[] = {{"expf", expf},       {"sinf", sinf},   {"cosf", cosf},
                 {"powf(x, 1.37)", pow_x}, {"powf(1.37, x)", pow_y}, {"exp2f", exp2f},
                 {"logf", logf},       {"tanhf", tanhf}, {"log1pf", log1pf}};
enum { NUM_FUNCTIONS = sizeof functions / sizeof functions[0] };

/* The result's bits, every NaN as one. */
static uint32_t result(int k, uint32_t bits) {
  float x, y;
  memcpy(&x, &bits, 4);
  y = functions[k].f(x);
  uint32_t r;
  memcpy(&r, &y, 4);
  return y != y ? 0x7fc00000u : r;
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "block") == 0) {
    int k = atoi(argv[2]);
    uint32_t block = (uint32_t)strtoul(argv[3], NULL, 10);
    if (k < 0 || k >= NUM_FUNCTIONS || block > 0xffff) return 2;
    for (uint32_t i = 0; i < 65536; i++) {
      uint32_t bits = block << 16 | i;
      printf("%s %08x %08x\n", functions[k].name, bits, result(k, bits));
    }
    return 0;
  }
  if (argc != 3 || strcmp(argv[1], "hash") != 0) {
    fprintf(stderr, "usage: %s hash FILE | block FUNCTION BLOCK\n", argv[0]);
    return 2;
  }
  FILE *f = fopen(argv[2], "wb");
  if (!f) return 1;
  for (int k = 0; k < NUM_FUNCTIONS; k++)
    for (uint32_t block = 0; block < 65536; block++) {
      uint64_t h = 1469598103934665603u; /* FNV-1a over the results */
      for (uint32_t i = 0; i < 65536; i++)
        h = (h ^ result(k, block << 16 | i)) * 1099511628211u;
      fwrite(&h, 8, 1, f);
    }
  return fclose(f) == 0 ? 0 : 1;
}
