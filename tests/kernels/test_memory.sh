#!/usr/bin/env bash
# Memory semantics of the interpreter (docs/semantics.md, docs/dma.md), in
# TAP: self-checking kernels of tests/kernels/memory/ (their asserts fail on
# a wrong result) run with `tessera run` in both DMA modes, with race
# detection, on one and two cores; the ones the CPU backend implements run
# with `--backend cpu` too when this tessera has it. Then the kernel errors
# that must be one diagnostic each. Needs $TESSERA and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
K=$SRC/tests/kernels/memory
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-memory-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

context() { printf '%s\n' "exit status $rc" "stderr: $(head -c 1500 "$tmp/err")"; }

have_cpu=1
if ! "$T" lower --target cpu "$SRC/kernels/examples/add.tsr" >/dev/null 2>&1; then
  have_cpu=0
fi

# clean DESC ARGS...: `tessera run ARGS` exits 0 and prints no diagnostic.
clean() {
  local desc=$1
  shift
  t run "$@" --random-inputs 3 -q
  if [[ $rc -eq 0 && ! -s $tmp/err ]]; then pass "$desc"; else fail "$desc" "$(context)"; fi
}

# both_backends KERNEL OPTIONS...: clean in the interpreter (both DMA modes,
# with race detection) and, when available, on the CPU backend.
both_backends() {
  local file=$1
  shift
  for mode in lazy eager; do
    clean "$file${*:+ $*} ($mode, --detect-races)" "$K/$file" --dma-mode "$mode" --detect-races "$@"
  done
  if ((have_cpu)); then
    clean "$file${*:+ $*} (--backend cpu)" "$K/$file" --backend cpu "$@"
  else
    skip "$file${*:+ $*} (--backend cpu)" "this tessera has no CPU backend"
  fi
}

# Item: a DMA (copy or add) into a ref changes it; values loaded before stay.
both_backends dma_refill_scratch.tsr
# Item: stores into an input block stay in the core's copy of the block.
both_backends store_into_input_block.tsr
both_backends store_into_input_block.tsr --cores 2
both_backends smem_input_counter_per_core.tsr
both_backends smem_input_counter_per_core.tsr --cores 2
# Item: a masked window past the end of a ref writes its masked-on lanes.
both_backends masked_window_past_end.tsr

# one_error DESC TEXT ARGS...: exit 1 with exactly one diagnostic, holding TEXT.
one_error() {
  local desc=$1 text=$2
  shift 2
  t run "$@" --random-inputs 3 -q
  local errors
  errors=$(grep -c 'error:' "$tmp/err")
  if [[ $rc -eq 1 && $errors -eq 1 ]] && grep -qF -- "$text" "$tmp/err"; then
    pass "$desc"
  else
    fail "$desc" "expected exit 1 and one error with: $text" "$(context)"
  fi
}

one_error "a masked-on lane out of bounds is an error naming the element" \
  "'store': element [8, 130] of %o (shape [10, 130]) is out of bounds and its mask lane is on" \
  "$K/masked_lane_out_of_bounds.tsr"
for mode in lazy eager; do
  one_error "an out-of-bounds DMA is one diagnostic, no follow-on deadlock ($mode)" \
    "'dma_start': slice 32:40:1 out of bounds for dimension 0 of %x" \
    "$SRC/tests/diagnostics/bugs/dma_out_of_bounds.tsr" --dma-mode "$mode"
done

# A remote DMA into the right neighbour's VMEM output after a barrier
# handshake lands, whichever device the scheduler starts first: the output
# equals the CPU backend's (device d receives device d - 1's shard).
ring=$SRC/tests/diagnostics/ok/barrier_ring_vmem_output.tsr
if ((have_cpu)); then
  t run "$ring" --devices 4 --random-inputs 3 -q --backend cpu --out o="$tmp/o_cpu.npy"
  [[ $rc -eq 0 ]] || fail "barrier ring on the CPU backend" "$(context)"
fi
for mode in lazy eager; do
  for seed in 0 1 2 3 4; do
    desc="barrier ring into VMEM outputs, --devices 4 ($mode, --schedule-seed $seed)"
    t run "$ring" --devices 4 --random-inputs 3 -q --dma-mode "$mode" --schedule-seed "$seed" \
      --detect-races --out o="$tmp/o.npy"
    if [[ $rc -ne 0 || -s $tmp/err ]]; then
      fail "$desc" "$(context)"
    elif ((have_cpu)) && ! cmp -s "$tmp/o.npy" "$tmp/o_cpu.npy"; then
      fail "$desc" "the output differs from the CPU backend's"
    else
      pass "$desc"
    fi
  done
done

echo "1..$n"
