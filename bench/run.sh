#!/usr/bin/env bash
# Builds tessera optimised (buildtype=release) and runs the interpreter
# benchmarks in one go: bench_interp, then hyperfine on `tessera run` if it is
# installed. docs/benchmarks.md reports what this prints.
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
ninja -C "$build" bench/bench_interp tools/tessera >/dev/null

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
if command -v hyperfine >/dev/null 2>&1; then
  runs=300
  [ ${#quick[@]} -gt 0 ] && runs=10
  echo "== hyperfine: whole process of tessera run on the 100-step kernel"
  hyperfine -N --warmup 20 --runs "$runs" --style basic \
    "$build/tools/tessera run $root/bench/kernels/steps_100.tsr --random-inputs 1" \
    "/bin/true"
else
  echo "hyperfine not installed: (b) above is the fork/exec figure"
fi
echo "load average after the run: $(cut -d' ' -f1-3 /proc/loadavg)"
