#!/usr/bin/env bash
# Bit-identical to before: tests/lower/test_differential.sh's corpus (every
# kernel of the tree it runs, with its options) and RANDOM_COUNT random
# kernels (some also on several cores and devices), on the interpreter and
# on the cpu backend, run with the before build and with the after build
# (DIFF_BEFORE: exit status and outputs bit for bit, any NaN equals any
# NaN); then, when the after build has `tessera run --threads`, with
# --threads 1 and --threads N (DIFF_THREADS). Prints every difference and
# "N identical / M different" per comparison and backend; exits 1 if
# anything differs.
#
# Not a test of the suite (it needs the before build): run by hand, see
# docs/benchmarks.md, "Faster than XLA: the table".
#
#   bench/same_results.sh [RANDOM_COUNT [SEED]]     (default 200 random kernels, seed 1)
#
# $BEFORE_TESSERA and $AFTER_TESSERA name the two tessera binaries; by
# default bench/table.py --prepare builds and names them (4e5cdf6's release
# build under ~/.cache/tessera-bench and this tree's build-bench). $SAME_THREADS
# is the N of the threads comparison (default 4).
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
random_count=${1:-200}
random_seed=${2:-1}
threads=${SAME_THREADS:-4}
py=python3
[[ -x $root/.venv/bin/python ]] && py=$root/.venv/bin/python

if [[ -z ${BEFORE_TESSERA:-} || -z ${AFTER_TESSERA:-} ]]; then
  paths=$("$py" "$root/bench/table.py" --prepare) || exit 2
  BEFORE_TESSERA=${BEFORE_TESSERA:-$(sed -n 's/^before=//p' <<<"$paths")}
  AFTER_TESSERA=${AFTER_TESSERA:-$(sed -n 's/^after=//p' <<<"$paths")}
fi
for t in "$BEFORE_TESSERA" "$AFTER_TESSERA"; do
  [[ -x $t ]] || { echo "same_results: $t is not an executable" >&2; exit 2; }
done
echo "before: $BEFORE_TESSERA ($("$BEFORE_TESSERA" --version 2>&1 | head -1))"
echo "after:  $AFTER_TESSERA ($("$AFTER_TESSERA" --version 2>&1 | head -1))"

status=0
# compare NAME VAR=VALUE: test_differential.sh in that mode; its failures,
# then a count per backend.
compare() {
  local name=$1 mode=$2 tap
  tap=$(env "$mode" TESSERA="$AFTER_TESSERA" TSR_SOURCE_ROOT="$root" \
    bash "$root/tests/lower/test_differential.sh" "$random_count" "$random_seed")
  grep -A3 '^not ok' <<<"$tap" && status=1
  local backend same diff
  for backend in interp cpu; do
    same=$(grep -c "^ok .* --backend $backend " <<<"$tap")
    diff=$(grep -c "^not ok .* --backend $backend " <<<"$tap")
    echo "$name $backend: $same identical / $diff different"
    ((diff == 0)) || status=1
  done
}
compare before-after "DIFF_BEFORE=$BEFORE_TESSERA"
if "$AFTER_TESSERA" run --help 2>&1 | grep -q -- '--threads'; then
  compare "threads-1-$threads" "DIFF_THREADS=$threads"
else
  echo "threads: skipped, this tessera has no 'run --threads' option (tessera run --help)"
fi
exit $status
