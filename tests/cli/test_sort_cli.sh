#!/usr/bin/env bash
# `tessera sort` and `tessera topk` (docs/cli.md), in TAP: sorted outputs,
# several inputs with --keys, --argsort and --indices, --descending,
# --stable, --axis, --target host and tpu, top-k with --smallest, the cpu
# backend when built, and
# the usage errors (missing file, wrong dtype, k out of range, output
# counts). .npy files are made and checked with python3 + numpy. Needs
# $TESSERA and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-sort-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

require_numpy_python

(cd "$tmp" && "$PY" -c '
import numpy as np
rng = np.random.default_rng(1)
np.save("x.npy", rng.standard_normal((4, 300)).astype(np.float32))
np.save("k.npy", rng.integers(0, 5, (4, 300)).astype(np.int32))
np.save("v.npy", np.arange(1200, dtype=np.float32).reshape(4, 300))
np.save("u8.npy", rng.integers(0, 256, 1000).astype(np.uint8))
np.save("nan.npy", np.array([np.nan, 1, -0.0, -np.nan, 0.0, -np.inf], np.float32))
np.save("f64.npy", np.zeros(5))
')

t sort "$tmp/x.npy" -o "$tmp/s.npy"
check_npy "sort f32 rows" 'np.array_equal(L("s.npy"), np.sort(L("x.npy"), -1))'

t sort "$tmp/x.npy" -o "$tmp/s.npy" --descending --axis 0
check_npy "sort --descending --axis 0" 'np.array_equal(L("s.npy"), np.flip(np.sort(L("x.npy"), 0), 0))'

t sort "$tmp/k.npy" "$tmp/v.npy" -o "$tmp/sk.npy" -o "$tmp/sv.npy" --stable --indices "$tmp/i.npy"
check_npy "sort two inputs --stable --indices" \
  'np.array_equal(L("i.npy"), np.argsort(L("k.npy"), -1, kind="stable")) and np.array_equal(L("sv.npy"), np.take_along_axis(L("v.npy"), L("i.npy"), -1)) and np.array_equal(L("sk.npy"), np.sort(L("k.npy"), -1))'

t sort "$tmp/k.npy" "$tmp/v.npy" --keys 2 --argsort -o "$tmp/a.npy" --stable
check_npy "sort --keys 2 --argsort" \
  'np.array_equal(L("a.npy"), np.lexsort((L("v.npy"), L("k.npy")), -1))'

t sort "$tmp/nan.npy" -o "$tmp/sn.npy" --stable
check_npy "NaNs last, -0.0 and +0.0 in input order" \
  'np.array_equal(L("sn.npy")[:4].view(np.uint32), np.array([-np.inf, 1, -0.0, 0.0], np.float32)[[0,2,3,1]].view(np.uint32)) and np.isnan(L("sn.npy")[4:]).all()'

t sort "$tmp/u8.npy" -o "$tmp/su8.npy" --vmem-budget 8192 --target tpu
check_npy "sort u8 over several blocks (--target tpu --vmem-budget)" 'np.array_equal(L("su8.npy"), np.sort(L("u8.npy")))'

t sort "$tmp/u8.npy" -o "$tmp/su8.npy" --vmem-budget 8192 --stable --descending --target tpu
check_npy "stable descending over several blocks" 'np.array_equal(L("su8.npy"), np.sort(L("u8.npy"))[::-1])'

for target in host tpu; do
  t sort "$tmp/k.npy" "$tmp/v.npy" -o "$tmp/sk.npy" -o "$tmp/sv.npy" --stable --descending --target $target
  check_npy "sort two inputs --stable --descending --target $target" \
    'np.array_equal(L("sv.npy"), np.take_along_axis(L("v.npy"), np.argsort(-L("k.npy"), -1, kind="stable"), -1))'
done

t sort "$tmp/x.npy" -o "$tmp/m.npy" --target gpu
expect "--target takes host or tpu" 2 "--target takes host or tpu"
t sort "$tmp/x.npy" -o "$tmp/m.npy" --vmem-budget 8192
expect "--vmem-budget without --target tpu" 2 "sizes the blocks of --target tpu"

t sort "$tmp/x.npy"
if [[ $rc == 0 ]] && grep -q '%sorted0: f32\[4, 300\]' "$tmp/out"; then pass "sort prints without -o"; else fail "sort prints without -o" "$(context)"; fi

t topk "$tmp/x.npy" -k 5 -o "$tmp/tv.npy" --indices "$tmp/ti.npy"
check_npy "topk values and indices" \
  'np.array_equal(L("ti.npy"), np.argsort(-L("x.npy"), -1, kind="stable")[:, :5]) and np.array_equal(L("tv.npy"), np.take_along_axis(L("x.npy"), L("ti.npy"), -1))'

t topk "$tmp/u8.npy" -k 3 --smallest -o "$tmp/tv.npy"
check_npy "topk --smallest" 'np.array_equal(L("tv.npy"), np.sort(L("u8.npy"))[:3])'

t sort "$tmp/x.npy" -o "$tmp/c.npy" --backend cpu
if [[ $rc == 1 ]] && grep -q "no cpu backend" "$tmp/err"; then
  skip "sort --backend cpu" "no cpu backend in this build"
else
  check_npy "sort --backend cpu" 'np.array_equal(L("c.npy"), np.sort(L("x.npy"), -1))'
fi

t sort "$tmp/missing.npy" -o "$tmp/m.npy"
expect "a missing file is a usage error" 2 "missing.npy"
t sort "$tmp/f64.npy" -o "$tmp/m.npy"
expect "an unsupported dtype is a usage error" 2 "f64|float64|<f8|dtype"
t topk "$tmp/x.npy" -k 301
expect "k out of range" 2 "k must be 1..300"
t topk "$tmp/x.npy"
expect "topk needs -k" 2 "-k K is required"
t sort "$tmp/k.npy" "$tmp/v.npy" -o "$tmp/only.npy"
expect "one -o per input" 2 "one output per input"
t sort "$tmp/x.npy" --keys 2
expect "--keys beyond the inputs" 2 "--keys 2 but 1 input"
t sort "$tmp/x.npy" --axis 7
expect "--axis out of range" 2 "axis"
t sort "$tmp/x.npy" "$tmp/u8.npy"
expect "inputs of different shapes" 2 "share one shape"
t sort --help
if [[ $rc == 0 ]] && grep -q -- "--argsort" "$tmp/out" && grep -q -- "--keys" "$tmp/out"; then pass "sort --help"; else fail "sort --help" "$(context)"; fi

echo "1..$n"
