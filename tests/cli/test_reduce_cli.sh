#!/usr/bin/env bash
# `tessera reduce` and `tessera cumsum` (docs/cli.md) end to end, in TAP:
# results against numpy on .npy files (both backends when the build has the
# cpu one), keepdims and scalar shapes, argmax's NaN rule, integer
# wrapping, bf16 '<V2' input, and the usage errors. Needs $TESSERA and
# $TSR_SOURCE_ROOT, and a python3 with numpy.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-reduce-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "${TSR_SOURCE_ROOT:?}/tests/cli/tap.sh"

require_numpy_python
py() { (cd "$tmp" && "$PY" -c "import numpy as np, sys
$1"); }

# check DESC PYTHON: passes when the python check prints nothing and succeeds.
check() {
  local desc=$1 why
  if why=$(py "$2" 2>&1) && [[ -z $why ]]; then pass "$desc"; else fail "$desc" "$why"; fi
}

py "
rng = np.random.default_rng(7)
np.save('x.npy', rng.standard_normal((5, 300, 7)).astype(np.float32))
np.save('i8.npy', rng.integers(-128, 128, (40, 33)).astype(np.int8))
n = np.arange(1000, dtype=np.float32) % 13
n[700] = np.nan; n[900] = np.nan
np.save('nan.npy', n)
b = (np.arange(24, dtype=np.float32).reshape(4, 6) / 4).view(np.uint32) >> 16
np.save('b16.npy', b.astype('<u2').view('V2'))
np.save('empty.npy', np.zeros((0, 3), np.float32))
"

# ---- help -----------------------------------------------------------------
t reduce --help
if [[ $rc == 0 ]] && grep -q -- '--axes' "$tmp/out" && grep -q 'logsumexp' "$tmp/out"; then
  pass "reduce --help lists the options and ops"
else
  fail "reduce --help lists the options and ops" "$(head -c 600 "$tmp/out")"
fi
t help cumsum
if [[ $rc == 0 ]] && grep -q -- '--reverse' "$tmp/out"; then pass "help cumsum"; else
  fail "help cumsum" "$(head -c 600 "$tmp/out")"; fi

# ---- results ----------------------------------------------------------------
backends=(interp)
t reduce "$tmp/x.npy" --backend cpu -o "$tmp/probe.npy"
# Absent as tests/harness.h's tsr_test_cpu_absent says: not built, or its
# library not there (a partial build).
if [[ $rc == 0 ]]; then backends+=(cpu); elif grep -qE \
  'no cpu backend|cannot load the lowering library.*No such file' "$tmp/err"; then
  skip "the cpu backend" "not in this build"; else
  fail "reduce --backend cpu runs" "$(head -c 600 "$tmp/err")"; fi

for be in "${backends[@]}"; do
  t reduce "$tmp/x.npy" -o "$tmp/s.npy" --axes 0,2 --backend "$be"
  expect "$be: sum over axes 0,2 runs" 0
  check "$be: sum over axes 0,2 = numpy" "
x = np.load('x.npy'); y = np.load('s.npy')
if y.shape != (300,) or y.dtype != np.float32 or not np.allclose(y, x.sum((0, 2)), atol=1e-4): print(y.shape, y.dtype)"

  t reduce "$tmp/x.npy" -o "$tmp/m.npy" --op max --axes -1 --keepdims --backend "$be"
  check "$be: max --axes -1 --keepdims = numpy" "
x = np.load('x.npy'); y = np.load('m.npy')
if y.shape != (5, 300, 1) or not np.array_equal(y, x.max(-1, keepdims=True)): print(y.shape)"

  for op in mean var logsumexp prod min; do
    t reduce "$tmp/x.npy" -o "$tmp/o.npy" --op $op --axes 1 --backend "$be"
    check "$be: $op --axes 1 = numpy" "
x = np.load('x.npy').astype(np.float64); y = np.load('o.npy')
m = x.max(1, keepdims=True)
want = {'mean': x.mean(1), 'var': x.var(1), 'prod': x.prod(1), 'min': x.min(1),
        'logsumexp': (m + np.log(np.exp(x - m).sum(1, keepdims=True)))[:, 0]}['$op']
if y.shape != (5, 7) or not np.allclose(y, want, rtol=1e-4, atol=1e-4): print(y.shape, abs(y - want).max())"
  done

  t reduce "$tmp/x.npy" -o "$tmp/all.npy" --backend "$be"
  check "$be: sum of every axis is a 0-d array" "
y = np.load('all.npy')
if y.shape != () or not np.allclose(y, np.load('x.npy').sum(), atol=1e-2): print(y.shape, y)"

  t reduce "$tmp/nan.npy" -o "$tmp/am.npy" --op argmax --backend "$be"
  check "$be: argmax is the first NaN (jax.numpy's rule)" "
y = np.load('am.npy')
if y.shape != () or y.dtype != np.int32 or int(y) != 700: print(y.shape, y.dtype, y)"

  t reduce "$tmp/x.npy" -o "$tmp/ai.npy" --op argmin --axes 1 --backend "$be"
  check "$be: argmin --axes 1 = numpy" "
y = np.load('ai.npy')
if not np.array_equal(y, np.load('x.npy').argmin(1)): print(y)"

  t reduce "$tmp/i8.npy" -o "$tmp/is.npy" --axes 0 --backend "$be"
  check "$be: int8 sums wrap in int8" "
y = np.load('is.npy'); x = np.load('i8.npy')
if y.dtype != np.int8 or not np.array_equal(y, x.sum(0, dtype=np.int8)): print(y.dtype, y)"

  t cumsum "$tmp/x.npy" -o "$tmp/c.npy" --axis 1 --reverse --backend "$be"
  check "$be: cumsum --axis 1 --reverse = numpy" "
x = np.load('x.npy'); y = np.load('c.npy')
want = np.flip(np.cumsum(np.flip(x, 1), 1), 1)
if y.shape != x.shape or not np.allclose(y, want, atol=1e-3): print(abs(y - want).max())"

  t cumsum "$tmp/i8.npy" -o "$tmp/ci.npy" --op max --axis 0 --backend "$be"
  check "$be: cumsum --op max --axis 0 = numpy" "
y = np.load('ci.npy'); x = np.load('i8.npy')
if not np.array_equal(y, np.maximum.accumulate(x, 0)): print(y)"
done

t reduce "$tmp/b16.npy" -o "$tmp/bs.npy" --axes 1
check "bf16 ('<V2') input: row sums, bf16 out" "
y = np.load('bs.npy')
f = (y.view('<u2').astype(np.uint32) << 16).view(np.float32)
want = (np.arange(24, dtype=np.float32).reshape(4, 6) / 4).sum(1)
if y.dtype.str != '|V2' or not np.allclose(f, want, rtol=1e-2): print(y.dtype, f)"

t reduce "$tmp/x.npy" --op min
if [[ $rc == 0 ]] && grep -q '%y: f32' "$tmp/out"; then pass "without -o the result is printed"
else fail "without -o the result is printed" "$(head -c 600 "$tmp/out")"; fi

# ---- the generated kernel ------------------------------------------------------
t reduce "$tmp/x.npy" --op var --axes 1 --vmem-budget 20000 --print-kernel
cp "$tmp/out" "$tmp/var.tsr"
if [[ $rc == 0 ]] && grep -q '^kernel @reduce_var' "$tmp/var.tsr" && grep -q 'scratch %count' "$tmp/var.tsr"; then
  pass "--print-kernel prints the kernel (a multi-step var)"
else
  fail "--print-kernel prints the kernel (a multi-step var)" "$(head -c 600 "$tmp/out")" "$(head -c 600 "$tmp/err")"
fi
t check --target tpu "$tmp/var.tsr"
expect "the printed kernel passes check --target tpu" 0
t run "$tmp/var.tsr" --in x="$tmp/x.npy" --out y="$tmp/v2.npy"
check "the printed kernel runs to numpy's var (keepdims False)" "
y = np.load('v2.npy'); x = np.load('x.npy').astype(np.float64)
if y.shape != (5, 7) or not np.allclose(y, x.var(1), rtol=1e-4): print(y.shape)"
t cumsum "$tmp/x.npy" --axis 0 --reverse --print-kernel
if [[ $rc == 0 ]] && grep -q '^kernel @cumsum_reverse' "$tmp/out"; then pass "cumsum --print-kernel"
else fail "cumsum --print-kernel" "$(head -c 600 "$tmp/out")"; fi

# ---- errors -------------------------------------------------------------------
t reduce "$tmp/x.npy" --op median
expect "unknown op: usage error naming the ops" 2 "unknown op.*logsumexp"
t reduce "$tmp/x.npy" --axes 0,3
expect "axis out of range: usage error" 2 "axis 3 is out of range"
t reduce "$tmp/x.npy" --axes 1,1
expect "repeated axis: usage error" 2 "repeated"
t reduce "$tmp/x.npy" --axes a
expect "axes not integers: usage error" 2 "expected integers"
t reduce "$tmp/x.npy" --op argmax --axes 0,1
expect "argmax over two axes: usage error" 2 "takes one axis"
t reduce "$tmp/i8.npy" --op mean
expect "mean of integers: refused, naming the op and dtype" 2 "'mean' takes floats, not dtype i8"
t reduce "$tmp/empty.npy"
expect "empty array: usage error" 2 "empty"
t reduce "$tmp/missing.npy"
expect "missing input: usage error naming the file" 2 "missing.npy"
t reduce
expect "no input: usage error" 2 "no input file"
t reduce "$tmp/x.npy" --backend gpu
expect "unknown backend: usage error" 2 "expected interp or cpu"
t cumsum "$tmp/x.npy" --axis 3
expect "cumsum axis out of range: usage error" 2 "out of range"
t cumsum "$tmp/x.npy" --op argmax
expect "cumsum --op argmax: usage error" 2 "cumulative ops are sum, prod, max, min"
t cumsum "$tmp/x.npy" --keepdims
expect "cumsum --keepdims: usage error" 2 "only for 'tessera reduce'"
t reduce "$tmp/x.npy" -o "$tmp/no/such/dir/y.npy"
expect "unwritable output: exit 1 naming the file" 1 "y.npy"

echo "1..$n"
