#!/usr/bin/env bash
# The TPU target of the CLI (docs/tpu.md), in TAP: `tessera lower --target
# tpu` prints a Mosaic module laid out as Pallas's (checked by shape here;
# jaxlib and libtpu check the text in the Python suite), `--target cpu`
# keeps its options, `tessera check --target tpu` reports Pallas's layout
# rules located, and usage errors. Needs $TESSERA and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-tpu-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

E=$SRC/kernels/examples

# Two block specs that Pallas's TPU lowering rejects (docs/tpu.md, "Layout
# rules"): a last block dim neither a multiple of 128 nor the array's, a
# second-to-last neither a multiple of 8 nor the array's. Valid tessera.
L=$tmp/tpu_layout.tsr
cat >"$L" <<'TSR'
kernel @bad_blocks
  grid(4) semantics(arbitrary)
  in %x: f32[64, 512] vmem block[16, 100] map(%i) -> (%i, 0)
  out %y: f32[64, 512] vmem block[12, 128] map(%i) -> (%i, 0)
{
  %v = const 1.0 : f32[12, 128]
  store %y[:, :], %v
}
TSR

# expect DESC STATUS FILE PATTERN: exit status and an extended regex in FILE.
expect() {
  local desc=$1 want=$2 file=$3 pattern=$4
  if [[ $rc != "$want" ]]; then
    fail "$desc" "expected exit status $want, got $rc" "stdout: $(head -c 800 "$tmp/out")" \
      "stderr: $(head -c 800 "$tmp/err")"
  elif ! grep -qE -- "$pattern" "$tmp/$file"; then
    fail "$desc" "$file does not match /$pattern/" "$file: $(head -c 800 "$tmp/$file")"
  else
    pass "$desc"
  fi
}

t lower --target tpu "$E/add.tsr"
expect "lower --target tpu prints the kernel function" 0 out \
  '^  func.func @add\(%\$g0: i32, %a: memref<128x512xf32, #tpu.memory_space<vmem>>'
expect "the module has one transform function per windowed operand" 0 out \
  '^  func.func @transform_2\(%i: i32\) -> \(i32, i32\) \{'
t lower --target tpu --chip v6e "$E/reduce.tsr" --kernel colsum
expect "--kernel and --chip" 0 out 'func.func @colsum\(%\$g0: i32, %\$g1: i32'
expect "reductions as vector.multi_reduction" 0 out 'vector.multi_reduction <add>, %v'
t lower --target tpu "$E/matmul.tsr"
expect "matmul as tpu.matmul, control flow as scf.if" 0 out 'tpu.matmul %x, %y'
t lower --target tpu --chip v9 "$E/add.tsr"
expect "an unknown chip is a usage error" 2 err "unknown TPU chip 'v9'"
t lower --target tpu --stage llvm "$E/add.tsr"
expect "--stage is for the cpu target" 2 err 'cpu only'
t lower --chip v5e "$E/add.tsr"
expect "--chip is for the tpu target" 2 err 'tpu only'
t lower --target gpu "$E/add.tsr"
expect "--target expects cpu or tpu" 2 err "expects cpu or tpu, got 'gpu'"
t lower --target tpu "$SRC/tests/diagnostics/ok/dma_add_accumulate.tsr"
expect "an op with no TPU form is a located error naming it" 1 err \
  'dma_add_accumulate.tsr:14:5: error: op .dma_start. cannot be emitted for TPU \(v5e\)'
t lower --target tpu "$L"
expect "lower applies the layout rules" 1 err 'tpu_layout.tsr:3:6: error: in .%x.'
t lower --help
expect "lower --help names the tpu target" 0 out '--target cpu\|tpu'

emittable=()
for f in "$E"/*.tsr "$SRC"/tests/diagnostics/ok/*.tsr; do
  case $f in
    */dma_add_accumulate.tsr|*/disjoint_strided_dmas.tsr|*/dma_regular_semaphore.tsr) ;;
    */scoped_hbm_handoff.tsr) ;;
    *) emittable+=("$f") ;;
  esac
done
t check --target tpu "${emittable[@]}"
expect "every example and catalog kernel Mosaic can take passes check --target tpu" 0 out 'add.tsr: ok'
t check --target tpu "$SRC/tests/diagnostics/ok/dma_add_accumulate.tsr"
expect "check --target tpu refuses what lower --target tpu cannot emit, located" 1 err \
  'dma_add_accumulate.tsr:14:5: error: op .dma_start. cannot be emitted for TPU \(v5e\)'
t check --target tpu --chip v5p "$SRC/tests/diagnostics/ok/scoped_hbm_handoff.tsr"
expect "check --target tpu refuses a device-wide scoped buffer, located" 1 err \
  'scoped_hbm_handoff.tsr:12:3: error: op .scoped. cannot be emitted for TPU \(v5p\): %shared is a device-wide hbm buffer'
t check --target tpu --chip v6e "$SRC/tests/diagnostics/ok/dma_regular_semaphore.tsr"
expect "check --target tpu: a DMA signalling a regular semaphore on v6e" 0 out 'ok \(1 kernel\)'
t check --target tpu "$SRC/tests/diagnostics/ok/dma_regular_semaphore.tsr"
expect "check --target tpu: a DMA signalling a regular semaphore is refused on v5e, located" 1 err \
  'dma_regular_semaphore.tsr:15:3: error: op .dma_start. cannot be emitted for TPU \(v5e\): a DMA signalling a regular semaphore is not supported on v5e'
t check "$L"
expect "without --target tpu the kernel is valid" 0 out 'ok \(1 kernel\)'
t check --target tpu --chip v6e "$L"
expect "check --target tpu: the last block dim" 1 err \
  'tpu_layout.tsr:3:6: error: in .%x.: block dim 1 is 100, which TPUs cannot tile: the last block dim must be a multiple of 128'
expect "check --target tpu: the second-to-last block dim" 1 err \
  'tpu_layout.tsr:4:7: error: out .%y.: block dim 0 is 12, .*multiple of 8'
t check --target tpu --chip v9 "$E/add.tsr"
expect "check: an unknown chip is a usage error" 2 err "unknown TPU chip 'v9'"
t check --target cpu "$E/add.tsr"
expect "check --target expects tpu" 2 err "expects tpu"
t check --help
expect "check --help names --target tpu" 0 out '--target tpu'

# run --target tpu: the chip's refusals before the run, located, as check's
t run "$L" --random-inputs 1 -q
expect "run without --target tpu runs the kernel" 0 out '%y: f32\[64, 512\]'
t run "$L" --random-inputs 1 --target tpu --chip v6e
expect "run --target tpu refuses the block the chip cannot tile, located" 1 err \
  'tpu_layout.tsr:3:6: error: in .%x.: block dim 1 is 100, which TPUs cannot tile'
[[ ! -s $tmp/out ]] && pass "run --target tpu does not run a refused kernel" \
  || fail "run --target tpu does not run a refused kernel" "stdout: $(head -c 300 "$tmp/out")"
t run "$SRC/tests/diagnostics/ok/dma_regular_semaphore.tsr" --random-inputs 1 --target tpu
expect "run --target tpu: no Mosaic form on v5e, located" 1 err \
  'dma_regular_semaphore.tsr:15:3: error: op .dma_start. cannot be emitted for TPU \(v5e\)'
t run "$E/add.tsr" --random-inputs 1 --target tpu --chip v7x -q
expect "run --target tpu runs a kernel the chip takes" 0 out '%c: f32'
t run "$E/add.tsr" --target gpu
expect "run --target expects tpu" 2 err "--target expects tpu, got 'gpu'"
t run "$E/add.tsr" --random-inputs 1 --chip tpu8i --target tpu
expect "run --target tpu: a chip the emitter does not target is a usage error" 2 err \
  "unknown TPU chip 'tpu8i'"
t run "$E/add.tsr" --random-inputs 1 --tpu-compile-check
expect "--tpu-compile-check needs --target tpu" 2 err 'applies to --target tpu only'
# The compile check runs the package's Python (libtpu's compile itself is
# tested in python/tests/tpu): its exit status decides; a stand-in shows
# the protocol without libtpu.
fake=$tmp/fake_python
printf '#!/bin/sh\n[ "$2" = tessera.jax._tpu_target ] || exit 9\necho "$3 @$4: error: refused on $5" >&2\nexit 1\n' >"$fake"
chmod +x "$fake"
TESSERA_PYTHON=$fake t run "$E/add.tsr" --random-inputs 1 --target tpu --chip v6e --tpu-compile-check
expect "--tpu-compile-check: libtpu's refusal fails the run" 1 err 'add.tsr @add: error: refused on v6e'
printf '#!/bin/sh\nexit 0\n' >"$fake"
TESSERA_PYTHON=$fake t run "$E/add.tsr" --random-inputs 1 --target tpu --tpu-compile-check -q
expect "--tpu-compile-check: a kernel that compiles runs" 0 out '%c: f32'
TESSERA_PYTHON=$tmp/no_such_python t run "$E/add.tsr" --random-inputs 1 --target tpu --tpu-compile-check
expect "--tpu-compile-check without a Python says how to get one" 2 err 'set TESSERA_PYTHON'
t run --help
expect "run --help names --target tpu" 0 out '--target tpu'

echo "1..$n"
