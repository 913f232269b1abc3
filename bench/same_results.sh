#!/usr/bin/env bash
# Bit-identical to before: the whole differential corpus (every kernel of the
# tree that tests/lower/test_differential.sh runs, with its options, plus
# RANDOM_COUNT random kernels of tests/lower/random_kernels.py, some of them
# also on several cores and devices) runs with the before build and with the
# after build, on the interpreter and on the cpu backend, on the same seeded
# inputs; every output must be equal bit for bit (any NaN equals any NaN),
# and the exit codes equal. Then, if the after build has `tessera run
# --threads`, the after build with --threads 1 against --threads N, both
# backends, the same way. Prints every difference and "N identical / M
# different" per comparison; exits 1 if anything differs.
#
# Not a test of the suite (it needs the before build): run by hand, see
# docs/benchmarks.md, "Faster than XLA: the table".
#
#   bench/same_results.sh [RANDOM_COUNT [SEED]]     (default 200 random kernels, seed 1)
#
# $BEFORE_TESSERA and $AFTER_TESSERA name the two tessera binaries; by
# default bench/table.py --prepare builds and names them (4e5cdf6's release
# build under ~/.cache/tessera-bench and this tree's build-bench). $SAME_THREADS
# is the N of the threads comparison (default 4). The disk cache is off, so
# each build compiles its own code.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
random_count=${1:-200}
random_seed=${2:-1}
threads=${SAME_THREADS:-4}

PY=
for cand in "$root/.venv/bin/python" /usr/bin/python3 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy, ml_dtypes' 2>/dev/null; then
    PY=$cand
    break
  fi
done
[[ -n $PY ]] || { echo "same_results: no python3 with numpy and ml_dtypes" >&2; exit 2; }

if [[ -z ${BEFORE_TESSERA:-} || -z ${AFTER_TESSERA:-} ]]; then
  paths=$("$PY" "$root/bench/table.py" --prepare) || exit 2
  BEFORE_TESSERA=${BEFORE_TESSERA:-$(sed -n 's/^before=//p' <<<"$paths")}
  AFTER_TESSERA=${AFTER_TESSERA:-$(sed -n 's/^after=//p' <<<"$paths")}
fi
B=$BEFORE_TESSERA
A=$AFTER_TESSERA
for t in "$B" "$A"; do
  [[ -x $t ]] || { echo "same_results: $t is not an executable" >&2; exit 2; }
done
echo "before: $B ($("$B" --version 2>&1 | head -1))"
echo "after:  $A ($("$A" --version 2>&1 | head -1))"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-same-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TESSERA_CACHE=off
manifest=$tmp/manifest
: >"$manifest"
has_threads=0
if "$A" run --help 2>&1 | grep -q -- '--threads'; then has_threads=1; fi

# run ID TESSERA BACKEND FILE KERNEL OPTIONS...: outputs in $tmp/o/ID, exit code in $tmp/o/ID.rc
run() {
  local id=$1 t=$2 backend=$3 file=$4 kernel=$5
  shift 5
  mkdir -p "$tmp/o"
  "$t" run "$file" --kernel "$kernel" --backend "$backend" --random-inputs 5 \
    --out-dir "$tmp/o/$id" -q "$@" >/dev/null 2>"$tmp/o/$id.err"
  echo $? >"$tmp/o/$id.rc"
}

n=0
# job FILE KERNEL OPTIONS...: before vs after on both backends, and 1 vs N threads.
job() {
  local file=$1 kernel=$2
  shift 2
  local desc="${file#"$root"/}"
  desc="${desc#"$tmp"/}"
  desc="$desc @$kernel${*:+ $*}"
  local backend
  for backend in interp cpu; do
    n=$((n + 1))
    run "$n.b" "$B" "$backend" "$file" "$kernel" "$@"
    run "$n.a" "$A" "$backend" "$file" "$kernel" "$@"
    printf '%s\t%s\t%s\t%s\n' "before-after" "$backend" "$n.b $n.a" "$desc" >>"$manifest"
    if ((has_threads)); then
      run "$n.t1" "$A" "$backend" "$file" "$kernel" "$@" --threads 1
      run "$n.tn" "$A" "$backend" "$file" "$kernel" "$@" --threads "$threads"
      printf '%s\t%s\t%s\t%s\n' "threads-1-$threads" "$backend" "$n.t1 $n.tn" "$desc" >>"$manifest"
    fi
  done
  if ((n % 40 == 0)); then echo "... $((n / 2)) kernels run" >&2; fi
}

kernels() { grep -oE '^kernel @[A-Za-z0-9_.]+' "$1" | sed 's/^kernel @//'; }

# The corpus of test_differential.sh, with the same options.
declare -A opts
while read -r file rest; do
  [[ -z $file || $file == \#* ]] && continue
  opts[$file]=$rest
done <"$root/tests/diagnostics/options.txt"
while IFS= read -r f; do
  if [[ $f == "$root"/tests/diagnostics/ok/* ]]; then
    o=${opts[ok/$(basename "$f")]-}
  else
    o=$(sed -n 's|^// differential: ||p' "$f")
  fi
  # shellcheck disable=SC2086
  for k in $(kernels "$f"); do job "$f" "$k" $o; done
done < <("$PY" "$root/tests/oplist.py" corpus "$root")

# Random kernels, from the before build's op list (both builds run them).
if ((random_count > 0)); then
  mkdir -p "$tmp/random"
  if TESSERA=$B "$PY" "$root/tests/lower/random_kernels.py" --count "$random_count" \
       --seed "$random_seed" --out "$tmp/random" >"$tmp/gen.log" 2>&1; then
    i=0
    for f in "$tmp"/random/*.tsr; do
      for k in $(kernels "$f"); do
        job "$f" "$k"
        case $((i++ % 4)) in
          1) job "$f" "$k" --cores 2 ;;
          3) job "$f" "$k" --devices 2 --cores 3 ;;
        esac
      done
    done
  else
    echo "same_results: the random kernel generator failed:" >&2
    head -c 1500 "$tmp/gen.log" >&2
    exit 2
  fi
fi
if ((!has_threads)); then
  echo "threads: skipped, this tessera has no 'run --threads' option (tessera run --help)"
fi

"$PY" - "$tmp/o" "$manifest" <<'PY'
import os, sys
import numpy as np, ml_dtypes

out, manifest = sys.argv[1:3]

def read(d):
    if not os.path.isdir(d):
        return {}
    return {n: np.load(os.path.join(d, n)) for n in sorted(os.listdir(d))}

def bits(x):
    if x.dtype.kind == "V":  # bf16 stored as <V2
        x = x.view(ml_dtypes.bfloat16)
    return x

arrays = 0

def differs(a, b):
    """None if equal bit for bit (any NaN equals any NaN), else why."""
    global arrays
    if a.keys() != b.keys():
        return f"output files {sorted(a)} vs {sorted(b)}"
    for name in a:
        arrays += 1
        x, y = bits(a[name]), bits(b[name])
        if x.dtype != y.dtype or x.shape != y.shape:
            return f"{name}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        if x.dtype.kind in "fV" or x.dtype == ml_dtypes.bfloat16:
            u = f"u{x.dtype.itemsize}"
            d = x.view(u) != y.view(u)
            d &= ~(np.isnan(x.astype(np.float32)) & np.isnan(y.astype(np.float32)))
        else:
            d = x != y
        if np.any(d):
            i = tuple(int(v) for v in np.argwhere(d)[0]) if d.ndim else ()
            return f"{name}: {int(np.sum(d))} elements differ, first at {i}: {x[i]!r} vs {y[i]!r}"
    return None

counts = {}
bad = []
for line in open(manifest):
    kind, backend, ids, desc = line.rstrip("\n").split("\t")
    p, q = ids.split()
    rc = [open(os.path.join(out, i + ".rc")).read().strip() for i in (p, q)]
    why = None
    if rc[0] != rc[1]:
        err = [open(os.path.join(out, i + ".err"), errors="replace").read().strip()[:200]
               for i in (p, q)]
        why = f"exit {rc[0]} vs {rc[1]} ({err[0]!r} / {err[1]!r})"
    elif rc[0] == "0":
        why = differs(read(os.path.join(out, p)), read(os.path.join(out, q)))
    key = (kind, backend)
    c = counts.setdefault(key, [0, 0, 0])
    if why:
        c[1] += 1
        bad.append(f"DIFFERENT {kind} {backend}: {desc}: {why}")
    else:
        c[0] += 1
        c[2] += rc[0] != "0"
for b in bad:
    print(b)
for (kind, backend), (same, diff, failed) in counts.items():
    print(f"{kind} {backend}: {same} identical / {diff} different"
          f" ({failed} of the identical end in the same kernel error)")
print(f"{arrays} output arrays compared")
sys.exit(1 if bad else 0)
PY
