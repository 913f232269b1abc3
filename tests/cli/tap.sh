# TAP helpers for the bash tests of tests/cli (sourced; needs $T, the tessera
# binary, and $tmp, a scratch directory).
#   pass DESC / fail DESC [CONTEXT LINE]... / skip DESC WHY: one TAP result
#   t ARGS...: runs tessera; stdout in $tmp/out, stderr in $tmp/err, status $rc
#   expect DESC STATUS [PATTERN]: the last t exited with STATUS and, given a
#     PATTERN, its stderr matches it (scripts checking more define their own)
#   find_numpy_python: PY is a python3 that imports numpy, or empty
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

expect() {
  local desc=$1 want=$2 pattern=${3-}
  if [[ $rc != "$want" ]]; then
    fail "$desc" "expected exit status $want, got $rc" "stdout: $(head -c 1500 "$tmp/out")" \
      "stderr: $(head -c 1500 "$tmp/err")"
  elif [[ -n $pattern ]] && ! grep -qE -- "$pattern" "$tmp/err"; then
    fail "$desc" "stderr does not match /$pattern/" "stderr: $(head -c 1500 "$tmp/err")"
  else
    pass "$desc"
  fi
}

# Debian's python3-numpy lives in /usr/bin/python3, which may not be the
# first python3 on PATH.
find_numpy_python() {
  PY=
  local cand
  for cand in python3 /usr/bin/python3; do
    if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import numpy' 2>/dev/null; then
      PY=$cand
      return
    fi
  done
}
