#!/usr/bin/env bash
# A long kernel's objects compiled on several threads (lower/compile.c,
# docs/lowering.md "Code generation on the host's cores"), in TAP: the
# 3000-op straight-line sort cut into 3 objects (TESSERA_LOWER_OBJECTS) and
# compiled on 1 and 3 threads gives the interpreter's outputs both times.
# In suite 'cache' so that it also runs under ThreadSanitizer (build-tsan,
# scripts/test.sh): the threads' only shared state is the job counter and
# the optimized module's bitcode, read by all. Needs $TESSERA,
# $TSR_SOURCE_ROOT and python3.
set -u
T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-objects-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
export TESSERA_CACHE=off TESSERA_LOWER_OBJECTS=3
unset TESSERA_LOWER_SPLIT
source "$SRC/tests/cli/tap.sh"

python3 "$SRC/bench/gen_straightline.py" 3000 >sort.tsr
"$T" run sort.tsr --random-inputs 2 --out-dir i -q 2>err_i
for threads in 1 3; do
  rm -rf c
  TESSERA_LOWER_THREADS=$threads TESSERA_LOWER_TIMING=1 "$T" run sort.tsr --backend cpu \
    --random-inputs 2 --out-dir c -q 2>err
  rc=$?
  bad=
  for f in i/*.npy; do cmp -s "$f" "c/$(basename "$f")" || bad="$bad $(basename "$f")"; done
  if [[ $rc -eq 0 && -z $bad && -n $(ls i) ]] && grep -q "; 3 objects on $threads threads" err; then
    pass "sort of 3000 ops as 3 objects on $threads threads: the interpreter's outputs"
  else
    fail "sort of 3000 ops as 3 objects on $threads threads: the interpreter's outputs" \
      "exit status $rc, outputs that differ:${bad:- none}" "stderr: $(head -c 1500 err)"
  fi
done
echo "1..$n"
