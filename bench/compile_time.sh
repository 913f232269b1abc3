#!/usr/bin/env bash
# Cold CPU-backend compile time against kernel size, per
# phase. Generates straight-line bitonic-sort kernels of N ops
# (bench/gen_straightline.py), compiles each once with the disk cache off and
# prints the phase line of $TESSERA_LOWER_TIMING (docs/lowering.md) and the
# wall time of `tessera lower --stage mlir|llvm`. A size whose compile takes
# more than $LIMIT seconds (default 120) is stopped and ends the run.
# Usage: bench/compile_time.sh [BUILD_DIR] [N ...]  (default: build, 1000 2000 5000 10000 20000 30000)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-"$root/build"}
shift || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(1000 2000 5000 10000 20000 30000)
limit=${LIMIT:-120}
tessera="$build/tools/tessera"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TESSERA_CACHE=off
for n in "${sizes[@]}"; do
  k="$tmp/sort_$n.tsr"
  python3 "$root/bench/gen_straightline.py" "$n" >"$k"
  "$tessera" check "$k" >/dev/null || exit 1
  t0=$(date +%s.%N)
  "$tessera" lower --stage mlir "$k" >"$tmp/mlir" || exit 1
  t1=$(date +%s.%N)
  "$tessera" lower --stage llvm "$k" >"$tmp/llvm" || exit 1
  t2=$(date +%s.%N)
  printf 'N=%s lower --stage mlir %.2f s (%s lines), --stage llvm %.2f s (%s lines)\n' "$n" \
    "$(echo "$t1 - $t0" | bc)" "$(wc -l <"$tmp/mlir")" "$(echo "$t2 - $t1" | bc)" "$(wc -l <"$tmp/llvm")"
  t0=$(date +%s.%N)
  if ! TESSERA_LOWER_TIMING=1 timeout "$limit" "$tessera" run "$k" --random-inputs 1 \
      --backend cpu --out-dir "$tmp/out" 2>&1 | grep -E 'lower|compiled'; then
    echo "N=$n: stopped after $limit s"
    break
  fi
  t1=$(date +%s.%N)
  printf 'N=%s whole process %.2f s\n' "$n" "$(echo "$t1 - $t0" | bc)"
done
