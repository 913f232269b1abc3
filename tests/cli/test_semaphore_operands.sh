#!/usr/bin/env bash
# Semaphore operands through the CLI (docs/semantics.md, "Semaphores between
# kernels"): a DMA started in one kernel and waited for in the next, its
# semaphore's count carried in an i32 .npy from the first run's output to the
# second's input, on the interpreter (both DMA modes) and, when built, the
# cpu backend; and the wrong uses still caught: a second wait deadlocks, an
# input semaphore never waited for is left non-zero, a DMA signalling a
# scratch semaphore is still in flight at the kernel's end. Needs $TESSERA
# and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
K=$SRC/tests/cli/sem_chain.tsr
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-sem-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"
require_numpy_python

have_cpu=1
"$T" lower --target cpu "$SRC/kernels/examples/add.tsr" >/dev/null 2>&1 || have_cpu=0

# chain NAME OPTIONS...: copy_start then copy_done, outputs in $tmp/NAME1 and
# NAME2 (the same random inputs in every run: NAME2's output equals the first
# chain's, interp-lazy2's)
chain() {
  local name=$1
  shift
  t run "$K" --kernel copy_start --random-inputs 5 -q --out-dir "$tmp/${name}1" "$@"
  check_npy "$name: the first kernel's semaphore output holds the DMA's 4096 bytes" \
    "int(L('${name}1/sem.npy')) == 4096 and L('${name}1/sem.npy').dtype == np.int32 and (L('${name}1/o.npy') == L('${name}1/xo.npy')).all()"
  t run "$K" --kernel copy_done -q --in "x=$tmp/${name}1/xo.npy" --in "o=$tmp/${name}1/o.npy" \
    --in "sem=$tmp/${name}1/sem.npy" --out-dir "$tmp/${name}2" "$@"
  check_npy "$name: the second kernel's wait takes it; the copy arrived" \
    "(L('${name}2/oo.npy') == L('${name}1/xo.npy')).all() and (L('${name}2/oo.npy') == L('interp-lazy2/oo.npy')).all()"
  t run "$K" --kernel start_vmem -q --in "x=$tmp/${name}1/xo.npy" --out-dir "$tmp/${name}v" "$@"
  check_npy "$name: a DMA into a vmem output's one block lands there at the kernel's end" \
    "(L('${name}v/o.npy') == L('${name}1/xo.npy')).all() and int(L('${name}v/sem.npy')) == 4096"
  t run "$K" --kernel done_twice -q --in "x=$tmp/${name}1/xo.npy" --in "o=$tmp/${name}1/o.npy" \
    --in "sem=$tmp/${name}1/sem.npy" "$@"
  expect "$name: waiting twice for the one DMA deadlocks" 1 \
    "sem_chain.tsr:[0-9]+:3: error: kernel @done_twice, grid point \(\): 'dma_wait': deadlock: .* waits for %sem to reach 4096 bytes, it holds 0"
  "$PY" -c "import numpy as np; np.save('$tmp/neg.npy', np.int32(-1))"
  t run "$K" --kernel copy_done -q --in "x=$tmp/${name}1/xo.npy" --in "o=$tmp/${name}1/o.npy" \
    --in "sem=$tmp/neg.npy" "$@"
  expect "$name: a semaphore input's count below 0 is refused" 1 \
    "operand %sem: a semaphore's count is -1 \(element 0\); a semaphore input holds counts >= 0"
}

for mode in lazy eager; do
  chain "interp-$mode" --dma-mode "$mode"
done
t run "$K" --kernel done_never -q --in "x=$tmp/interp-lazy1/xo.npy" \
  --in "o=$tmp/interp-lazy1/o.npy" --in "sem=$tmp/interp-lazy1/sem.npy"
expect "an input semaphore never waited for is left non-zero at the kernel's end" 1 \
  "semaphore %sem holds 4096 at kernel end: a signal or DMA was never waited for"
t run "$K" --kernel start_scratch -q --random-inputs 5
expect "a DMA signalling a scratch semaphore is still in flight at the kernel's end" 1 \
  "'dma_start': DMA of 4096 bytes to %o is still in flight at kernel end"
if ((have_cpu)); then
  chain cpu --backend cpu
else
  skip "the cpu backend" "this tessera has no CPU backend"
fi
echo "1..$n"
