#!/usr/bin/env bash
# Runs JAX's own Pallas test files, unchanged, from a checkout of jax-ml/jax
# that you provide, once per mode:
#   jax       the files as JAX runs them on a CPU (their interpret mode)
#   tessera   pytest --tessera (the interpreter, every check)
#   cpu       pytest --tessera --tessera-backend cpu (compiled kernels)
# and prints, per file and mode, how many tests pass under both JAX and that
# mode, under JAX only, under that mode only, and how many are skipped.
#
# usage: scripts/jax-conformance.sh [options] JAX_SOURCE_DIR [TEST_FILE ...]
#   JAX_SOURCE_DIR  a checkout of jax-ml/jax (the tag of the installed jax, or
#                   the newest at hand); nothing of it is copied anywhere
#   TEST_FILE       files under tests/pallas/ (default: the target set below)
# options:
#   --modes LIST    comma-separated subset of jax,tessera,cpu (default: all)
#   --out DIR       where outcomes are kept (default: build/jax-conformance);
#                   JAX's outcomes are reused while the checkout's commit and
#                   the installed jax are unchanged (--rerun-jax redoes them)
#   --rerun-jax     run the jax mode even when its outcomes are kept
#   --list MODE     also list the tests that pass under JAX but not MODE
#   -k EXPR         passed to pytest (select tests by name)
# JAX_COMMIT names the checkout's commit when it is not a git work tree.
# Needs .venv (scripts/setup.sh) with absl-py and hypothesis, which JAX's test
# utilities import (installed on first use) and a built build/libtessera.so
# (or TESSERA_LIBRARY naming another build's).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
modes=jax,tessera,cpu
out=$root/build/jax-conformance
rerun_jax=0
list=
kexpr=()
default_files=(tpu_pallas_interpret_test.py pallas_test.py indexing_test.py ops_test.py
               tpu_pallas_test.py tpu_pallas_interpret_distributed_test.py)

usage() { sed -n '2,24p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --modes) modes=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --rerun-jax) rerun_jax=1; shift ;;
    --list) list=$2; shift 2 ;;
    -k) kexpr=(-k "$2"); shift 2 ;;
    -*) echo "jax-conformance.sh: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -lt 1 ]; then usage >&2; exit 2; fi
src=$(cd "$1" && pwd); shift
files=("$@"); [ ${#files[@]} -gt 0 ] || files=("${default_files[@]}")
[ -d "$src/tests/pallas" ] || { echo "jax-conformance.sh: $src/tests/pallas: no such directory (a jax-ml/jax checkout?)" >&2; exit 2; }

py=$root/.venv/bin/python
lib=${TESSERA_LIBRARY:-$root/build/libtessera.so}
[ -x "$py" ] || { echo "jax-conformance.sh: $py missing: run scripts/setup.sh" >&2; exit 2; }
[ -f "$lib" ] || { echo "jax-conformance.sh: $lib missing: run scripts/setup.sh" >&2; exit 2; }
"$py" -c "import absl, hypothesis" 2>/dev/null || "$py" -m pip install -q absl-py hypothesis

commit=$(git -C "$src" rev-parse HEAD 2>/dev/null || echo "${JAX_COMMIT:-unknown}")
jaxver=$("$py" -c "import jax; print(jax.__version__)")
mkdir -p "$out"
stamp="$commit jax-$jaxver"

export JAX_PLATFORMS=cpu TESSERA_JAX_SOURCE_DIR=$src TESSERA_LIBRARY=$lib
export PYTHONPATH=$root/scripts/conformance:$root/python${PYTHONPATH:+:$PYTHONPATH}

echo "jax-conformance: JAX checkout $src at $commit; installed jax $jaxver; tessera $(git -C "$root" rev-parse --short HEAD)"
IFS=, read -r -a mode_list <<<"$modes"
for f in "${files[@]}"; do
  base=${f%.py}
  for m in "${mode_list[@]}"; do
    result=$out/$base.$m
    case $m in
      jax) flags=()
           if [ $rerun_jax = 0 ] && [ -f "$result" ] && [ "$(cat "$result.stamp" 2>/dev/null)" = "$stamp" ] &&
              [ ${#kexpr[@]} = 0 ]; then continue; fi ;;
      tessera) flags=(--tessera) ;;
      cpu) flags=(--tessera --tessera-backend cpu) ;;
      *) echo "jax-conformance.sh: unknown mode $m" >&2; exit 2 ;;
    esac
    # The distributed files need several devices; the others skip unless there
    # is exactly one (as JAX's own CPU test configurations run them).
    devices=1; case $f in *distributed*) devices=8 ;; esac
    start=$(date +%s)
    (cd "$src/tests/pallas" && JAX_NUM_CPU_DEVICES=$devices \
     TESSERA_CONFORMANCE_OUT=$result "$py" -m pytest -q -p no:cacheprovider -p tessera_conformance \
       "${flags[@]}" "${kexpr[@]}" "$f" >"$result.log" 2>&1) || true
    echo "$stamp" >"$result.stamp"
    echo "  $f [$m]: $(tail -n1 "$result.log") ($(( $(date +%s) - start )) s)"
  done
done
"$py" "$root/scripts/conformance/table.py" "$out" "$commit" "$jaxver" "$modes" ${list:+--list "$list"} "${files[@]}"
