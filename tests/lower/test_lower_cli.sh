#!/usr/bin/env bash
# The cpu backend through the CLI, in TAP (docs/lowering.md, docs/cli.md):
# `tessera lower` and its stages and errors, `tessera run --backend cpu`
# compiling in a first process and loading from the disk cache in a second
# one that does not load the lowering library, the same outputs as the
# interpreter, `hash --target cpu`, usage errors, and a missing lowering
# library. Registered only in builds with MLIR.
# Needs $TESSERA and $TSR_SOURCE_ROOT (set by meson).
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
EX=$SRC/kernels/examples
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-lower-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
unset TESSERA_CACHE XDG_CACHE_HOME TESSERA_LOWER_LIBRARY
export TESSERA_CACHE_DIR=$tmp/cache

source "$SRC/tests/cli/tap.sh"

context() { printf '%s\n' "exit status $rc" "stdout: $(head -c 1200 "$tmp/out")" "stderr: $(head -c 1200 "$tmp/err")"; }
check() { # check DESC CONDITION-COMMAND...
  local desc=$1
  shift
  if "$@"; then pass "$desc"; else fail "$desc" "$(context)"; fi
}

cat >barrier.tsr <<'EOF'
kernel @meet
  grid(2) semantics(parallel)
  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  scratch %bar: sem
{
  %v = load %x[:, :] : f32[8, 128]
  core_barrier %bar
  store %y[:, :], %v
}
EOF

# ---- tessera lower -------------------------------------------------------------

t lower --help
check "lower --help" grep -q -- '--stage mlir|llvm' out
t lower "$EX/add.tsr"
check "lower prints the generated MLIR" \
  grep -q 'func.func @tsr_kernel(.*attributes {llvm.emit_c_interface}' out
check "... in the upstream dialects" grep -q 'vector.transfer_read\|vector.load' out
t lower "$EX/add.tsr" --stage llvm
check "--stage llvm prints the LLVM dialect" grep -q 'llvm.func @_mlir_ciface_tsr_kernel' out
check "... and nothing else" test "$(grep -c 'vector\.\|scf\.\|memref\.\|arith\.' out)" -eq 0
t lower "$EX/add.tsr" --stage asm
check "--stage asm is a usage error" test "$rc" -eq 2
t lower "$EX/add.tsr" --target tpu
check "--target tpu is a usage error" test "$rc" -eq 2
t lower "$EX/reduce.tsr"
check "several kernels need --kernel" test "$rc" -eq 2 -a -s err
t lower "$EX/reduce.tsr" --kernel colmax
check "--kernel picks one" grep -q 'func.func @tsr_kernel' out
t lower barrier.tsr
check "an op that cannot be lowered: status 1, named with its location" \
  test "$rc" -eq 1 -a "$(grep -c "barrier.tsr:8:3: error: op 'core_barrier' cannot be lowered" err)" -eq 1
t lower "$SRC/kernels/examples/README.md"
check "a file that does not parse: status 1" test "$rc" -eq 1

# ---- tessera run --backend cpu ---------------------------------------------------

t run "$EX/int_hash.tsr" --random-inputs 3 --out-dir interp -q
check "int_hash in the interpreter" test "$rc" -eq 0
t run "$EX/int_hash.tsr" --random-inputs 3 --out-dir cpu --backend cpu --cache-stats
check "first cpu run compiles" grep -q '1 compile,.*lowering library loaded' err
check "... and puts the object on disk" grep -q 'disk on, 0 hits, 1 miss, 1 put' err
check "... summary says so" grep -q '^tessera: @int_hash: cpu code compiled in' err
same=1
for f in interp/*.npy; do cmp -s "$f" "cpu/$(basename "$f")" || same=0; done
check "integer outputs equal the interpreter's, bit for bit" test "$same" -eq 1 -a -n "$(ls interp)"
rm -rf cpu
t run "$EX/int_hash.tsr" --random-inputs 3 --out-dir cpu --backend cpu --cache-stats
check "a second process loads from disk" grep -q 'disk on, 1 hit, 0 misses, 0 puts' err
check "... compiles nothing and does not load the lowering library (nor LLVM)" \
  grep -q '0 compiles, 0 load failures; lowering library not loaded' err
check "... summary says so" grep -q 'cpu code loaded from the disk cache in' err
same=1
for f in interp/*.npy; do cmp -s "$f" "cpu/$(basename "$f")" || same=0; done
check "... same outputs" test "$same" -eq 1
t run "$EX/int_hash.tsr" --random-inputs 3 --backend cpu --cores 2 --detect-races --no-check -q
check "interpreter options are accepted and ignored" test "$rc" -eq 0 -a -s out
t run "$EX/add.tsr" --random-inputs 1 --backend cpu --trace t.json
check "--trace with --backend cpu is a usage error" test "$rc" -eq 2 -a ! -e t.json
t run "$EX/add.tsr" --random-inputs 1 --backend cpu --devices 2
check "--devices 2 with --backend cpu is a usage error" \
  test "$rc" -eq 2 -a "$(grep -c 'cannot be lowered' err)" -eq 1
t run "$EX/add.tsr" --random-inputs 1 --backend gpu
check "--backend gpu is a usage error" test "$rc" -eq 2
t run barrier.tsr --random-inputs 1 --backend cpu
check "run of a kernel that cannot be lowered: status 1" \
  test "$rc" -eq 1 -a "$(grep -c "cannot be lowered" err)" -eq 1

# ---- keys ------------------------------------------------------------------------

t hash "$EX/add.tsr" --target cpu --explain
check "hash --target cpu has six components" \
  test "$(grep -cE '^  (kernel|target|compile|tessera|llvm|cpu) +[0-9a-f]{32} ' out)" -eq 6
check "... naming LLVM 22 and the pipeline" grep -q 'llvm .*LLVM 22\..* pipeline builtin.module(' out
k_interp=$("$T" hash "$EX/add.tsr" | cut -d' ' -f1)
k_cpu=$("$T" hash "$EX/add.tsr" --target cpu | cut -d' ' -f1)
check "the cpu key differs from the interpreter's" test "$k_interp" != "$k_cpu"
k_cpu2=$("$T" hash "$EX/add.tsr" --target cpu --uninit zero --detect-races | cut -d' ' -f1)
check "interpreter options do not change the cpu key" test "$k_cpu" = "$k_cpu2"

# ---- no lowering library ---------------------------------------------------------

TESSERA_LOWER_LIBRARY=$tmp/missing.so TESSERA_CACHE=off t run "$EX/add.tsr" --random-inputs 1 --backend cpu
check "a missing lowering library: status 1, saying where and how to point elsewhere" \
  test "$rc" -eq 1 -a "$(grep -c "cannot load the lowering library (set TESSERA_LOWER_LIBRARY" err)" -eq 1

echo "1..$n"
