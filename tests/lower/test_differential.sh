#!/usr/bin/env bash
# Compiled vs interpreted, in TAP: every kernel of the tree (everything under
# kernels/, the diagnostics catalog's correct kernels with their options, the
# kernels of tests/lower/, and the random kernels of
# tests/lower/random_kernels.py when given a count; every other random kernel
# also on several cores and devices) runs with `tessera run --backend cpu` and
# with the interpreter on the same seeded inputs; the outputs must be equal:
# bitwise for integer and i1 outputs, for floats within the tolerance of
# docs/lowering.md (|a - b| <= atol + rtol |b|, rtol = 1e-5 and atol = 1e-5
# for f32, 1e-2 for bf16/f16 after rounding). Every op lowers: a kernel the
# CPU backend cannot lower is a failure. A random kernel the interpreter
# reports an error for is a SKIP (its outputs mean nothing); a kernel of the
# tree, a failure. Needs $TESSERA, $TSR_SOURCE_ROOT and python3 with numpy.
#
# With $DIFF_CPU_TARGET set (a level of TESSERA_CPU_TARGET, docs/lowering.md),
# the reference run is not the interpreter but the cpu backend with code for
# that level, and every output must equal the host level's bit for bit
# (floats too; any NaN equals any NaN): the generated code's results must not
# depend on the CPU features it may use.
#
# With $DIFF_THREADS set (a thread count), each backend in turn (the
# interpreter, then the cpu backend) runs every kernel with `--threads 1` and
# with `--threads $DIFF_THREADS`: outputs bit for bit (any NaN equals any NaN
# only when both are NaN with the same bits), exit status, printed text and
# diagnostics must be the same (docs/semantics.md, "Host threads").
#
# With $DIFF_BEFORE set (another build's tessera binary, of an earlier
# commit: bench/same_results.sh), each backend runs every kernel with that
# build and with $TESSERA, the disk cache off, and the exit status and the
# outputs must be the same bit for bit (any NaN equals any NaN): a change
# meant to leave results alone is checked against the build before it. The
# random kernels come from that build's op list. Not run by meson.
#
#   test_differential.sh [RANDOM_COUNT [SEED]]   (default 0 random kernels)
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
random_count=${1:-0}
random_seed=${2:-1}
# two builds that both call themselves one version must not share compiled code
[[ -n ${DIFF_BEFORE:-} ]] && export TESSERA_CACHE=off
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-diff-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

PY=
for cand in /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy, ml_dtypes' 2>/dev/null; then
    PY=$cand
    break
  fi
done
if [[ -z $PY ]]; then
  echo "1..0 # SKIP no python3 with numpy and ml_dtypes"
  exit 0
fi
if ! "$T" lower --help >/dev/null 2>&1 || "$T" lower --target cpu "$SRC/kernels/examples/add.tsr" 2>&1 | grep -q 'not built with\|without MLIR\|no cpu backend'; then
  echo "1..0 # SKIP this tessera has no CPU backend (built with -Dmlir=disabled or without LLVM)"
  exit 0
fi

# compare DIR_A DIR_B: python prints "ok" or what differs.
compare() {
  "$PY" - "$1" "$2" <<'PY'
import sys, os
import numpy as np, ml_dtypes
a_dir, b_dir = sys.argv[1:3]
exact = bool(os.environ.get("DIFF_CPU_TARGET") or os.environ.get("DIFF_THREADS")
             or os.environ.get("DIFF_BEFORE"))
same_nan_bits = bool(os.environ.get("DIFF_THREADS"))
bad = []
names = sorted(os.listdir(a_dir))
if names != sorted(os.listdir(b_dir)):
    print("different output files:", names, sorted(os.listdir(b_dir))); sys.exit(0)
for name in names:
    a = np.load(os.path.join(a_dir, name)); b = np.load(os.path.join(b_dir, name))
    if a.dtype.kind == "V":  # bf16 stored as <V2
        a = a.view(ml_dtypes.bfloat16); b = b.view(ml_dtypes.bfloat16)
    if a.shape != b.shape:
        bad.append(f"{name}: shape {a.shape} vs {b.shape}"); continue
    if exact:
        x = a.view(f"u{a.dtype.itemsize}") if a.dtype.kind in "fV" else a
        y = b.view(f"u{b.dtype.itemsize}") if b.dtype.kind in "fV" else b
        differ = x != y
        if a.dtype.kind in "fV" and not same_nan_bits:
            differ &= ~(np.isnan(a.astype(np.float32)) & np.isnan(b.astype(np.float32)))
        if differ.any():
            i = tuple(int(v) for v in np.argwhere(differ)[0])
            bad.append(f"{name}: {differ.sum()} elements differ, first at {i}: {a[i]!r} vs {b[i]!r}")
        continue
    if a.dtype.kind in "iub":
        if not np.array_equal(a, b):
            i = np.argwhere(a != b)[0]
            bad.append(f"{name}: integers differ at {tuple(i)}: {a[tuple(i)]} vs {b[tuple(i)]}")
        continue
    low = a.dtype.itemsize <= 2
    x = a.astype(np.float64); y = b.astype(np.float64)
    rtol, atol = (1e-2, 1e-2) if low else (1e-5, 1e-5)
    same_nan = np.isnan(x) == np.isnan(y)
    close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
    if not (same_nan.all() and close.all()):
        i = tuple(np.argwhere(~(close & same_nan))[0])
        bad.append(f"{name}: {x[i]} vs {y[i]} at {i} (max abs diff {np.nanmax(np.abs(x - y)):.3g})")
print("ok" if not bad else "; ".join(bad))
PY
}

# check_pair FILE KERNEL OPTIONS...: one TAP line per backend, run A
# against run B: with $DIFF_THREADS, one thread against $DIFF_THREADS (the
# same text and diagnostics too; the run's summary line, its timings, is no
# diagnostic); with $DIFF_BEFORE, that build against this one (exit status
# and outputs: a later commit may word a diagnostic otherwise).
summary='^tessera: @[A-Za-z0-9_.]+: (cpu code |[0-9]+ grid steps?, )'
check_pair() {
  local file=$1 kernel=$2
  shift 2
  local bin_a=$T label args_a=() args_b=() same_text=1
  if [[ -n ${DIFF_BEFORE:-} ]]; then
    bin_a=$DIFF_BEFORE
    label="before and after"
    same_text=0
  else
    label="--threads $DIFF_THREADS"
    args_a=(--threads 1)
    args_b=(--threads "$DIFF_THREADS")
  fi
  local backend
  for backend in interp cpu; do
    local desc="${file#"$SRC"/} @$kernel --backend $backend $label${*:+ $*}"
    local dir_1=$tmp/t1 dir_n=$tmp/tn
    rm -rf "$dir_1" "$dir_n"
    "$bin_a" run "$file" --kernel "$kernel" --backend $backend "${args_a[@]}" --random-inputs 5 \
      --out-dir "$dir_1" "$@" >"$tmp/out_1" 2>"$tmp/err_1"
    local rc_1=$?
    "$T" run "$file" --kernel "$kernel" --backend $backend "${args_b[@]}" --random-inputs 5 \
      --out-dir "$dir_n" "$@" >"$tmp/out_n" 2>"$tmp/err_n"
    local rc_n=$?
    # Several simulated cores print and report concurrently, in no fixed
    # order between them (as on a TPU), with any thread count: compare
    # their lines as a set then; one core's text, in order.
    local order=cat
    [[ " $* " == *" --cores "* || " $* " == *" --devices "* ]] && order=sort
    if [[ $rc_1 -ne $rc_n ]]; then
      fail "$desc" "exit status $rc_1, then $rc_n" "$(head -c 1500 "$tmp/err_1" "$tmp/err_n")"
    elif ((same_text)) && ! cmp -s <($order "$tmp/out_1") <($order "$tmp/out_n"); then
      fail "$desc" "stdout differs" "$(diff "$tmp/out_1" "$tmp/out_n" | head -c 1500)"
    elif ((same_text)) && ! cmp -s <(grep -vE "$summary" "$tmp/err_1" | $order) \
        <(grep -vE "$summary" "$tmp/err_n" | $order); then
      fail "$desc" "diagnostics differ" "$(diff "$tmp/err_1" "$tmp/err_n" | head -c 1500)"
    elif [[ ! -d $dir_1 && ! -d $dir_n ]]; then
      pass "$desc"
    else
      local verdict
      verdict=$(compare "$dir_1" "$dir_n")
      if [[ $verdict == ok ]]; then pass "$desc"; else fail "$desc" "$verdict"; fi
    fi
  done
}

# check_kernel FILE KERNEL OPTIONS...: one TAP line.
check_kernel() {
  if [[ -n ${DIFF_THREADS:-}${DIFF_BEFORE:-} ]]; then
    check_pair "$@"
    return
  fi
  local file=$1 kernel=$2
  shift 2
  local desc="${file#"$SRC"/} @$kernel${*:+ $*}"
  local dir_i=$tmp/i dir_c=$tmp/c
  rm -rf "$dir_i" "$dir_c"
  if [[ -n ${DIFF_CPU_TARGET:-} ]]; then
    TESSERA_CPU_TARGET=$DIFF_CPU_TARGET "$T" run "$file" --kernel "$kernel" --backend cpu \
      --random-inputs 5 --out-dir "$dir_i" -q "$@" >"$tmp/out_i" 2>"$tmp/err_i"
  else
    "$T" run "$file" --kernel "$kernel" --random-inputs 5 --out-dir "$dir_i" -q "$@" \
      >"$tmp/out_i" 2>"$tmp/err_i"
  fi
  local rc_i=$?
  "$T" run "$file" --kernel "$kernel" --backend cpu --random-inputs 5 --out-dir "$dir_c" -q "$@" \
    >"$tmp/out_c" 2>"$tmp/err_c"
  local rc_c=$?
  if grep -q 'cannot be lowered' "$tmp/err_c"; then
    fail "$desc" "$(grep -m1 'cannot be lowered' "$tmp/err_c")"
  elif [[ $rc_i -ne 0 && $fixed == 1 ]]; then
    # The tree's kernels are correct: each must run clean to cover its ops.
    fail "$desc" "the interpreter reports a kernel error" "$(head -c 1500 "$tmp/err_i")"
  elif [[ $rc_i -ne 0 ]]; then
    # The interpreter rejects the run (a kernel error): the compiled code
    # need not agree on diagnostics, only on results of correct kernels.
    skip "$desc" "the interpreter reports a kernel error: $(head -c 300 "$tmp/err_i")"
  elif [[ $rc_c -ne 0 ]]; then
    fail "$desc" "the compiled run failed (exit $rc_c)" "$(head -c 1500 "$tmp/err_c")"
  else
    local verdict
    verdict=$(compare "$dir_i" "$dir_c")
    if [[ $verdict == ok ]]; then pass "$desc"; else fail "$desc" "$verdict"; fi
  fi
}

# kernels FILE: the kernel names of a .tsr file.
kernels() { grep -oE '^kernel @[A-Za-z0-9_.]+' "$1" | sed 's/^kernel @//'; }

# The fixed kernels (DIFFERENTIAL_CORPUS of tests/oplist.py, whose ops the
# op coverage test checks) must run clean in the interpreter. Their run
# options: the diagnostics catalog's from its options.txt, others' from a
# "// differential: OPTIONS" line of the file.
declare -A opts
while read -r file rest; do
  [[ -z $file || $file == \#* ]] && continue
  opts[$file]=$rest
done <"$SRC/tests/diagnostics/options.txt"
fixed=1
while IFS= read -r f; do
  if [[ $f == "$SRC"/tests/diagnostics/ok/* ]]; then
    o=${opts[ok/$(basename "$f")]-}
  else
    o=$(sed -n 's|^// differential: ||p' "$f")
  fi
  # shellcheck disable=SC2086
  for k in $(kernels "$f"); do check_kernel "$f" "$k" $o; done
done < <("$PY" "$SRC/tests/oplist.py" corpus "$SRC")
fixed=0

if ((random_count > 0)); then
  mkdir -p "$tmp/random"
  if TESSERA=${DIFF_BEFORE:-$T} "$PY" "$SRC/tests/lower/random_kernels.py" --count "$random_count" \
       --seed "$random_seed" --out "$tmp/random" >"$tmp/gen.log" 2>&1; then
    i=0
    for f in "$tmp"/random/*.tsr; do
      for k in $(kernels "$f"); do
        check_kernel "$f" "$k"
        # Threads: parallel grid dims split over cores, slices over devices.
        case $((i++ % 4)) in
          1) check_kernel "$f" "$k" --cores 2 ;;
          3) check_kernel "$f" "$k" --devices 2 --cores 3 ;;
        esac
      done
    done
  else
    fail "random kernel generator" "$(head -c 1500 "$tmp/gen.log")"
  fi
fi

echo "1..$n"
