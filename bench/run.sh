#!/usr/bin/env bash
# Builds tessera optimised (buildtype=release) and runs the benchmarks in one
# go: bench_interp, bench_cache, then hyperfine on `tessera run` if it is
# installed, then the same trivial kernel in JAX's Pallas TPU interpret mode
# if $JAX_PYTHON (default python3) can import jax. docs/benchmarks.md reports
# what this prints.
# Usage: bench/run.sh [BUILD_DIR] [--quick]    (default BUILD_DIR: build-bench)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build="$root/build-bench"
quick=()
for arg in "$@"; do
  case "$arg" in
    --quick) quick=(--quick) ;;
    *) build=$arg ;;
  esac
done

if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" "$root" --buildtype=release >/dev/null
fi
ninja -C "$build" bench/bench_interp bench/bench_cache tools/tessera >/dev/null

echo "== machine"
lscpu | grep -E '^(Model name|CPU\(s\)|Thread\(s\) per core|L3 cache):' || true
echo "kernel: $(uname -sr)"
echo "compiler: $(cc --version | head -n 1)"
echo "compile command of interp/run.c:"
grep -o '"command": "[^"]*interp_run\.c\.o[^"]*"' "$build/compile_commands.json" \
  | sed 's/^"command": "//; s/"$//; s/ -MD .*//' || true
echo "commit: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
echo "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

export TSR_SOURCE_ROOT="$root"
"$build/bench/bench_interp" --tessera "$build/tools/tessera" "${quick[@]}"

echo
echo "== cache (bench_cache)"
"$build/bench/bench_cache" "${quick[@]}"

echo
if command -v hyperfine >/dev/null 2>&1; then
  runs=300
  [ ${#quick[@]} -gt 0 ] && runs=10
  echo "== hyperfine: whole process of tessera run on the 100-step kernel"
  hyperfine -N --warmup 20 --runs "$runs" --style basic \
    "$build/tools/tessera run $root/bench/kernels/steps_100.tsr --random-inputs 1" \
    "/bin/true"
  # The disk cache across processes: a warm run skips verification.
  cache_dir=$(mktemp -d)
  echo "== hyperfine: tessera run matmul, disk cache off vs warm"
  TESSERA_CACHE_DIR=$cache_dir "$build/tools/tessera" run "$root/kernels/examples/matmul.tsr" \
    --random-inputs 1 -q >/dev/null
  TESSERA_CACHE_DIR=$cache_dir hyperfine -N --warmup 20 --runs "$runs" --style basic \
    "env TESSERA_CACHE=off $build/tools/tessera run $root/kernels/examples/matmul.tsr --random-inputs 1 -q" \
    "env TESSERA_CACHE=on $build/tools/tessera run $root/kernels/examples/matmul.tsr --random-inputs 1 -q"
  rm -rf "$cache_dir"
else
  echo "hyperfine not installed: (b) above is the fork/exec figure"
fi

# JAX's TPU interpret mode on the kernel of bench/kernels/steps_*.tsr: one
# [8, 128] f32 block whose index never changes, body o[...] = x[...].
python=${JAX_PYTHON:-python3}
echo
if "$python" -c 'import jax' >/dev/null 2>&1; then
  echo "== JAX Pallas TPU interpret mode, same trivial kernel ($python)"
  steps="10 100"
  [ ${#quick[@]} -gt 0 ] && steps="10"
  # shellcheck disable=SC2086
  "$python" - $steps <<'PY'
import sys, time
import numpy as np
import jax, jax.numpy as jnp
from jax.experimental import pallas as pl
from jax.experimental.pallas import tpu as pltpu

def make(steps):
    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]
    return jax.jit(pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((8, 128), jnp.float32),
        grid=(steps,),
        in_specs=[pl.BlockSpec((8, 128), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
        interpret=pltpu.InterpretParams()))

x = jnp.asarray(np.random.default_rng(0).uniform(-1, 1, (8, 128)), jnp.float32)
for steps in map(int, sys.argv[1:]):
    f = make(steps)
    t0 = time.perf_counter()
    y = f(x).block_until_ready()
    first = time.perf_counter() - t0
    assert np.array_equal(np.asarray(y), np.asarray(x))
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        f(x).block_until_ready()
        times.append(time.perf_counter() - t0)
    print(f"jax {jax.__version__}: grid ({steps},): first call (trace, compile, "
          f"run) {first * 1e3:.0f} ms; then best {min(times) / steps * 1e3:.3f} "
          f"ms/step, mean {sum(times) / len(times) / steps * 1e3:.3f} ms/step "
          f"over {len(times)} runs")
PY
else
  echo "JAX comparison skipped: $python cannot import jax (set JAX_PYTHON)"
fi
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
