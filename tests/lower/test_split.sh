#!/usr/bin/env bash
# Long kernels split into parts (lower/split.c, docs/lowering.md "Long
# kernels"), in TAP: the straight-line bitonic kernels of
# bench/gen_straightline.py (2000 and 3000 ops) are split with the default
# sizes, equal parts are merged, and the outputs are byte-identical to the
# interpreter's; TESSERA_LOWER_SPLIT=N splits small kernels (parts in `lower
# --stage llvm`, a loop and an if inside split bodies, values crossing the
# cuts) with the interpreter's results; TESSERA_LOWER_SPLIT=0 splits nothing.
# The whole differential corpus with small parts is test_differential_split
# (tests/meson.build). Needs $TESSERA, $TSR_SOURCE_ROOT and python3.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-split-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
export TESSERA_CACHE=off
unset TESSERA_LOWER_SPLIT
source "$SRC/tests/cli/tap.sh"

context() { printf '%s\n' "exit status $rc" "stderr: $(head -c 1500 "$tmp/err")"; }

# same_as_interp DESC FILE [KERNEL]: cpu outputs byte-identical to the interpreter's.
same_as_interp() {
  local desc=$1 file=$2 kopt=()
  [[ $# -gt 2 ]] && kopt=(--kernel "$3")
  rm -rf "$tmp/i" "$tmp/c"
  "$T" run "$file" "${kopt[@]}" --random-inputs 3 --out-dir "$tmp/i" -q 2>"$tmp/err_i"
  TESSERA_LOWER_TIMING=1 "$T" run "$file" "${kopt[@]}" --backend cpu --random-inputs 3 \
    --out-dir "$tmp/c" -q 2>"$tmp/err"
  rc=$?
  local f bad=
  for f in "$tmp"/i/*.npy; do
    cmp -s "$f" "$tmp/c/$(basename "$f")" || bad="$bad $(basename "$f")"
  done
  if [[ $rc -eq 0 && -z $bad && -n $(ls "$tmp/i") ]]; then pass "$desc"
  else fail "$desc" "outputs that differ:${bad:- none}" "$(context)"; fi
}

parts() { sed -n 's/.*; \([0-9]*\) parts, \([0-9]*\) of them merged.*/\1 \2/p' "$tmp/err"; }

for size in 2000 3000; do
  python3 "$SRC/bench/gen_straightline.py" "$size" >"sort_$size.tsr"
  same_as_interp "sort of $size ops: split, same outputs as the interpreter" "sort_$size.tsr"
  read -r made merged <<<"$(parts)"
  if [[ ${made:-0} -gt 10 && ${merged:-0} -gt $((made / 2)) ]]; then
    pass "sort of $size ops: $made parts, $merged of them merged"
  else
    fail "sort of $size ops: parts made and merged" "parts: ${made:-none}, merged: ${merged:-none}" "$(context)"
  fi
done

# A long kernel as several objects compiled on several threads (lower/compile.c,
# TESSERA_LOWER_OBJECTS forces the cut): the outputs are the interpreter's,
# and the shared object is the same bytes with 1 and 4 threads (the cache
# holds it: compare the cache directories' files).
export TESSERA_LOWER_OBJECTS=3
for threads in 1 4; do
  TESSERA_LOWER_THREADS=$threads same_as_interp \
    "sort of 3000 ops as 3 objects on $threads threads: same outputs as the interpreter" sort_3000.tsr
  if grep -q '; 3 objects on' "$tmp/err"; then pass "sort of 3000 ops: 3 objects ($threads threads)"
  else fail "sort of 3000 ops: 3 objects ($threads threads)" "$(context)"; fi
  rm -rf "$tmp/cache$threads"
  TESSERA_CACHE=on TESSERA_CACHE_DIR="$tmp/cache$threads" TESSERA_LOWER_THREADS=$threads \
    "$T" run sort_3000.tsr --backend cpu --random-inputs 1 --out-dir "$tmp/o$threads" -q 2>"$tmp/err"
done
same=yes
n1=$(find "$tmp/cache1" -type f | wc -l)
while IFS= read -r f; do
  cmp -s "$f" "$tmp/cache4/${f#"$tmp/cache1/"}" || same="no: ${f#"$tmp/cache1/"}"
done < <(find "$tmp/cache1" -type f)
if [[ $n1 -gt 0 && $same == yes ]]; then pass "3 objects: the same cached bytes with 1 and 4 threads ($n1 files)"
else fail "3 objects: the same cached bytes with 1 and 4 threads" "files: $n1, same: $same"; fi
TESSERA_LOWER_THREADS=4 TESSERA_LOWER_SPLIT=12 same_as_interp \
  "lower_control @loops, parts of 12 ops as 3 objects on 4 threads: same outputs as the interpreter" \
  "$SRC/tests/lower/lower_control.tsr" loops
unset TESSERA_LOWER_OBJECTS

export TESSERA_LOWER_SPLIT=12
for f in lower_control lower_small_blocks lower_memory; do
  for k in $(grep -oE '^kernel @[A-Za-z0-9_]+' "$SRC/tests/lower/$f.tsr" | sed 's/^kernel @//'); do
    same_as_interp "$f @$k, parts of 12 ops: same outputs as the interpreter" \
      "$SRC/tests/lower/$f.tsr" "$k"
  done
done
t lower --stage llvm "$SRC/tests/lower/lower_control.tsr" --kernel loops
if [[ $rc -eq 0 ]] && grep -q 'llvm.func internal @tsr_part_\|llvm.func @tsr_part_' "$tmp/out" &&
   grep -q 'llvm.call @tsr_part_' "$tmp/out"; then
  pass "lower --stage llvm with TESSERA_LOWER_SPLIT=12: parts and their calls"
else
  fail "lower --stage llvm with TESSERA_LOWER_SPLIT=12: parts and their calls" "$(context)"
fi
export TESSERA_LOWER_SPLIT=0
t lower --stage llvm "sort_2000.tsr"
if [[ $rc -eq 0 ]] && ! grep -q 'tsr_part_' "$tmp/out"; then
  pass "TESSERA_LOWER_SPLIT=0: no parts"
else
  fail "TESSERA_LOWER_SPLIT=0: no parts" "$(context)"
fi

echo "1..$n"
