# TAP helpers for the bash tests of tests/cli (sourced; needs $T, the tessera
# binary, and $tmp, a scratch directory).
#   pass DESC / fail DESC [CONTEXT LINE]... / skip DESC WHY: one TAP result
#   t ARGS...: runs tessera; stdout in $tmp/out, stderr in $tmp/err, status $rc
# The script prints the plan ("1..$n") at its end.
n=0
pass() { n=$((n + 1)); echo "ok $n - $1"; }
fail() {
  n=$((n + 1))
  echo "not ok $n - $1"
  shift
  local line
  for line in "$@"; do printf '%s\n' "$line" | sed 's/^/# /'; done
}
skip() { n=$((n + 1)); echo "ok $n - $1 # SKIP $2"; }
t() { "$T" "$@" >"$tmp/out" 2>"$tmp/err" </dev/null; rc=$?; }
