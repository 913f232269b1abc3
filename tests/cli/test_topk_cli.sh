#!/usr/bin/env bash
# `tessera topk` (docs/cli.md) on rows longer than a block, in TAP: a row
# of 100000 and 3 rows of 70001 (over the default VMEM budget: the grid
# over the row's blocks), --vmem-budget forcing many blocks, k larger than
# a block, --smallest, NaN and ties, on the interpreter and the cpu
# backend when built; checked against numpy's stable argsort (jax.lax.top_k's
# order for these finite or +NaN values). Needs $TESSERA and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-topk-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

require_numpy_python

# top(x, k, smallest) for check_npy: the reference indices
NPY_CHECK_DEFS='def top(x, k, smallest=False):
    key = np.where(np.isnan(x), np.inf, x).astype(np.float64)  # +NaN above +inf
    return np.argsort(key if smallest else -key, -1, kind="stable")[..., :k]'

(cd "$tmp" && "$PY" -c '
import numpy as np
rng = np.random.default_rng(7)
np.save("row.npy", rng.standard_normal((1, 100000)).astype(np.float32))
x = rng.integers(-50, 50, (3, 70001)).astype(np.float32)
x[1, 60000] = np.nan
np.save("rows.npy", x)
np.save("i32.npy", rng.integers(-1000, 1000, 20000).astype(np.int32))
np.save("tall.npy", rng.standard_normal((5000, 2)).astype(np.float32))
')

for backend in interp cpu; do
  t topk "$tmp/row.npy" -k 16 -o "$tmp/v.npy" --indices "$tmp/i.npy" --backend $backend
  if [[ $backend == cpu && $rc == 1 ]] && grep -q "no cpu backend" "$tmp/err"; then
    skip "topk --backend cpu" "no cpu backend in this build"
    continue
  fi
  check_npy "topk of a row of 100000 ($backend)" \
    'np.array_equal(L("i.npy"), top(L("row.npy"), 16)) and np.array_equal(L("v.npy"), np.take_along_axis(L("row.npy"), L("i.npy"), -1))'
  t topk "$tmp/rows.npy" -k 40 -o "$tmp/v.npy" --indices "$tmp/i.npy" --backend $backend
  check_npy "topk of 3 rows of 70001, ties and a NaN ($backend)" \
    'np.array_equal(L("i.npy"), top(L("rows.npy"), 40)) and L("i.npy")[1, 0] == 60000'
done

t topk "$tmp/i32.npy" -k 300 --smallest -o "$tmp/v.npy" --indices "$tmp/i.npy" --vmem-budget 8192
check_npy "topk --smallest, k larger than a block (--vmem-budget 8192)" \
  'np.array_equal(L("i.npy"), np.argsort(L("i32.npy"), kind="stable")[:300])'

t topk "$tmp/i32.npy" -k 1 -o "$tmp/v.npy" --indices "$tmp/i.npy" --vmem-budget 8192
check_npy "topk -k 1 over many blocks" 'L("i.npy")[0] == np.argmax(L("i32.npy"))'

t topk "$tmp/tall.npy" -k 3 --axis 0 --vmem-budget 8192
expect "another axis than the last over the budget" 2 "only the last axis is cut into blocks"

echo "1..$n"
