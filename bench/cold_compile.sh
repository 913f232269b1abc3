#!/usr/bin/env bash
# The cold compile of a small kernel, whole process (the target: "sort of 128
# f32, CPU backend cold <= 100 ms"): `tessera sort x.npy -o OUT --backend cpu`
# with an empty disk cache, for each build directory given (default: build),
# one after the other in the same run, so that builds can be compared under
# the same machine load. docs/benchmarks.md, "Cold cpu compile of a small kernel".
#
#   bench/cold_compile.sh [BUILD_DIR ...]     RUNS=30 by default
#
# Per build it prints:
#   - hyperfine -N figures (min, median, mean) of the whole process:
#       cold     TESSERA_CACHE_DIR an empty directory (emptied before each run),
#                so the compile and the write of the cache entry are in;
#       off      TESSERA_CACHE=off (compile, no cache);
#       hit      the entry on disk (no LLVM loaded);
#   - dlopen of the build's libtessera-lower.so alone in a fresh process,
#     RTLD_NOW (as the runtime once did) and RTLD_LAZY (as it does now);
#   - the median of each phase over RUNS cold runs with TESSERA_LOWER_TIMING=1
#     (docs/lowering.md): loading the lowering library (with libMLIR and
#     libLLVM), then the compile's phases.
# Requires hyperfine, cc and python3 (no numpy: the input .npy is written by
# hand).
set -euo pipefail
runs=${RUNS:-30}
[[ $# -eq 0 ]] && set -- build
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=/dev/shm/tessera-cold-compile-$$.npy
[[ -d /dev/shm ]] || out=$tmp/out.npy

# 128 f32 normal numbers, as numpy.save writes them.
python3 - "$tmp/x.npy" <<'EOF'
import random, struct, sys
random.seed(1)
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (128,), }"
header += " " * (118 - len(header)) + "\n"
with open(sys.argv[1], "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
    f.write(struct.pack("<128f", *[random.gauss(0, 1) for _ in range(128)]))
EOF

# A process that only dlopens the lowering library (with libLLVM, and libMLIR
# where it is not linked in), RTLD_NOW or RTLD_LAZY as the mode says.
cat >"$tmp/dlopen_time.c" <<'EOF'
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
  struct timespec a, b;
  if (argc != 3) return 2;
  clock_gettime(CLOCK_MONOTONIC, &a);
  void *h = dlopen(argv[1], (strcmp(argv[2], "lazy") ? RTLD_NOW : RTLD_LAZY) | RTLD_LOCAL);
  clock_gettime(CLOCK_MONOTONIC, &b);
  if (!h) return 1;
  printf("%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) * 1e-6);
  return 0;
}
EOF
cc -O2 -o "$tmp/dlopen_time" "$tmp/dlopen_time.c" -ldl

summary() { # hyperfine JSON -> "min median mean" in ms
  python3 -c '
import json, statistics, sys
t = json.load(open(sys.argv[1]))["results"][0]["times"]
print("min %.1f  median %.1f  mean %.1f ms (%d runs)" % (min(t) * 1e3, statistics.median(t) * 1e3,
      statistics.mean(t) * 1e3, len(t)))' "$1"
}

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for build in "$@"; do
  t=$build/tools/tessera
  echo "## $build ($(git -C "$(dirname "$build")" log --oneline -1 2>/dev/null | cut -c1-60 || echo '?'))"
  cache=$tmp/cache
  hyperfine -N -w 3 -r "$runs" --prepare "rm -rf $cache" --export-json "$tmp/cold.json" \
    "env TESSERA_CACHE_DIR=$cache $t sort $tmp/x.npy -o $out --backend cpu" >/dev/null 2>&1
  echo "cold (empty cache dir): $(summary "$tmp/cold.json")"
  hyperfine -N -w 3 -r "$runs" --export-json "$tmp/off.json" \
    "env TESSERA_CACHE=off $t sort $tmp/x.npy -o $out --backend cpu" >/dev/null 2>&1
  echo "off (TESSERA_CACHE=off): $(summary "$tmp/off.json")"
  hyperfine -N -w 3 -r "$runs" --export-json "$tmp/hit.json" \
    "env TESSERA_CACHE_DIR=$cache $t sort $tmp/x.npy -o $out --backend cpu" >/dev/null 2>&1
  echo "hit (entry on disk): $(summary "$tmp/hit.json")"
  for mode in now lazy; do
    for ((i = 0; i < runs; i++)); do "$tmp/dlopen_time" "$build/libtessera-lower.so" $mode; done |
      python3 -c 'import statistics, sys; t = [float(l) for l in sys.stdin]
print("dlopen of libtessera-lower.so alone, RTLD_%s: min %.1f  median %.1f ms" % (sys.argv[1].upper(), min(t), statistics.median(t)))' $mode
  done
  : >"$tmp/phases"
  for ((i = 0; i < runs; i++)); do
    rm -rf "$cache"
    TESSERA_CACHE_DIR=$cache TESSERA_LOWER_TIMING=1 "$t" sort "$tmp/x.npy" -o "$out" \
      --backend cpu 2>>"$tmp/phases" >/dev/null
  done
  python3 - "$tmp/phases" <<'EOF'
import re, statistics, sys
phases = {}
for line in open(sys.argv[1]):
    m = re.match(r"tessera: load .*: ([0-9.]+) ms", line)
    if m:
        phases.setdefault("load library", []).append(float(m.group(1)))
    for name, ms in re.findall(r"(\w+) ([0-9.]+) ms", line.split(";")[0] + ";" + "".join(
            p for p in line.split(";")[1:2] if "total" in p)):
        if "lower @" in line:
            phases.setdefault(name, []).append(float(ms))
print("phases, median (min) ms: " + ", ".join(
    "%s %.1f (%.1f)" % (k, statistics.median(v), min(v)) for k, v in phases.items()))
EOF
done
rm -f "$out"
