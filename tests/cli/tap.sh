# TAP helpers for the bash tests of tests/cli (sourced; needs $T, the tessera
# binary, and $tmp, a scratch directory).
#   pass DESC / fail DESC [CONTEXT LINE]... / skip DESC WHY: one TAP result
#   t ARGS...: runs tessera; stdout in $tmp/out, stderr in $tmp/err, status $rc
#   expect DESC STATUS [PATTERN]: the last t exited with STATUS and, given a
#     PATTERN, its stderr matches it (scripts checking more define their own)
#   find_numpy_python: PY is a python3 that imports numpy, or empty
#   require_numpy_python: the same; without one, a failure, the plan, exit 1
#   context: the last t's exit status, stdout and stderr, one per line
#   check_npy DESC PYTHON-EXPR: the last t exited 0 and the expression is
#     true, run by $PY in $tmp with numpy as np, L = np.load and the Python
#     definitions in $NPY_CHECK_DEFS (a script's own helpers, if any)
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

require_numpy_python() {
  find_numpy_python
  if [[ -z $PY ]]; then
    fail "python3 with numpy" "no python3 can import numpy: the CLI tests need it"
    echo "1..$n"
    exit 1
  fi
}

context() {
  printf '%s\n' "exit status $rc" "stdout: $(head -c 800 "$tmp/out")" \
    "stderr: $(head -c 800 "$tmp/err")"
}

check_npy() {
  local desc=$1 expr=$2
  if [[ $rc != 0 ]]; then
    fail "$desc" "$(context)"
  elif ! (cd "$tmp" && "$PY" -c "import numpy as np, sys; L = np.load
${NPY_CHECK_DEFS-}
sys.exit(0 if ($expr) else 1)"); then
    fail "$desc" "the result does not satisfy: $expr" "$(context)"
  else
    pass "$desc"
  fi
}
