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
check "... each op's lines under a comment with its location" \
  grep -q "^ *// $EX/add.tsr:[0-9]*:[0-9]*: add$" out
# The text is a function of the kernel alone: two processes (other stack
# and heap addresses) print the same bytes, for every op of the sort family
# too (whose runtime descriptor once took a constant from stack bytes).
for f in lower_sort lower_sort_dest; do
  "$T" lower "$SRC/tests/lower/$f.tsr" >first.mlir 2>&1
  "$T" lower "$SRC/tests/lower/$f.tsr" >second.mlir 2>&1
  check "two processes print the same MLIR for $f.tsr" cmp -s first.mlir second.mlir
done
t lower "$EX/add.tsr" --stage llvm
check "--stage llvm prints the LLVM dialect" grep -q 'llvm.func @_mlir_ciface_tsr_kernel' out
check "... and nothing else" test "$(grep -c 'vector\.\|scf\.\|memref\.\|arith\.' out)" -eq 0
t lower "$EX/add.tsr" --stage asm
check "--stage asm is a usage error" test "$rc" -eq 2
t lower "$EX/add.tsr" --target gpu
check "--target gpu is a usage error" test "$rc" -eq 2
t lower "$EX/reduce.tsr"
check "several kernels need --kernel" test "$rc" -eq 2 -a -s err
t lower "$EX/reduce.tsr" --kernel colmax
check "--kernel picks one" grep -q 'func.func @tsr_kernel' out
t lower barrier.tsr
check "core_barrier lowers to a call into the runtime (the other call counts grid steps)" \
  test "$rc" -eq 0 -a "$(grep -c 'llvm.call %rt_fnp' out)" -eq 2
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
t run "$EX/add.tsr" --random-inputs 1 --backend gpu
check "--backend gpu is a usage error" test "$rc" -eq 2

# ---- cores, devices, print, assert, deadlocks --------------------------------------

same_outputs() { # same_outputs DIR1 DIR2: the same .npy files, bit for bit
  local f
  [ -n "$(ls "$1")" ] || return 1
  for f in "$1"/*.npy; do cmp -s "$f" "$2/$(basename "$f")" || return 1; done
}
t run barrier.tsr --random-inputs 1 --cores 2 --out-dir b_interp -q
t run barrier.tsr --random-inputs 1 --cores 2 --out-dir b_cpu --backend cpu -q
check "a core_barrier kernel on 2 cores (2 threads) gives the interpreter's outputs" \
  same_outputs b_interp b_cpu
t run "$EX/add.tsr" --random-inputs 1 --devices 2 --out-dir d_interp -q
t run "$EX/add.tsr" --random-inputs 1 --devices 2 --out-dir d_cpu --backend cpu -q
check "--devices 2: every device runs its slice, as in the interpreter" \
  same_outputs d_interp d_cpu

# Blocks larger than their arrays: both backends pad them
# like edge blocks and give the same bits.
for k in short_array gmm_small_k narrow_output; do
  t run "$SRC/tests/lower/big_blocks.tsr" --kernel $k --random-inputs 2 --out-dir "big_i_$k" -q
  check "a block larger than its array (@$k) runs in the interpreter" test "$rc" = 0
  t run "$SRC/tests/lower/big_blocks.tsr" --kernel $k --random-inputs 2 --out-dir "big_c_$k" \
    --backend cpu -q
  check "a block larger than its array (@$k) runs compiled, with the interpreter's outputs" \
    same_outputs "big_i_$k" "big_c_$k"
done

# core_parallel dims are split across cores: each kernel
# asserts that core c runs index c of its core_parallel dim, so both backends
# must run it clean on 2 and 3 cores, with the same outputs; on one core the
# asserts fail (the checks can fail).
CP=$SRC/tests/lower/core_parallel.tsr
for k in leading middle over_parallel; do
  for c in 2 3; do
    t run "$CP" --kernel $k --random-inputs 1 --cores $c --out-dir "cp_i_${k}_$c" -q
    check "@$k on $c cores: core c runs core_parallel index c (interpreter)" test "$rc" = 0
    t run "$CP" --kernel $k --random-inputs 1 --cores $c --out-dir "cp_c_${k}_$c" --backend cpu -q
    check "@$k on $c cores: core c runs core_parallel index c (cpu), the interpreter's outputs" \
      same_outputs "cp_i_${k}_$c" "cp_c_${k}_$c"
  done
  t run "$CP" --kernel $k --random-inputs 1 --backend cpu -q
  check "@$k on one core: the asserts fail (cpu)" grep -q 'assertion failed' err
done

cat >debug.tsr <<'EOF'
kernel @debug
  grid(2, 3) semantics(parallel, arbitrary)
  in %x: f32[16, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)
  out %y: f32[16, 8] vmem block[8, 8] map(%i, %j) -> (%i, 0)
{
  %i = program_id 0 : i32
  %j = program_id 1 : i32
  %v = load %x[:, :] : f32[8, 8]
  %c = load %x[:, 1] : f32[8]
  %s = reduce_sum %v axes [0] : f32[8]
  %h = convert %s : bf16[8]
  print "step ({}, {}): col sums {} as bf16 {}, column 1 {}", %i, %j, %s, %h, %c
  %two = const 2 : i32
  %ok = lt %j, %two : i1
  assert %ok, "j must stay below 2"
  store %y[:, :], %v
}
EOF
t run debug.tsr --random-inputs 5 -q
sort err >p_interp
t run debug.tsr --random-inputs 5 -q --backend cpu
sort err >p_cpu
check "print and a failed assert on the cpu backend" \
  test "$rc" -eq 1 -a "$(grep -c '^step (1, 2): col sums \[' p_cpu)" -eq 1 -a \
  "$(grep -c "debug.tsr:15:3: error: kernel @debug, grid point (0, 2): 'assert': assertion failed: j must stay below 2" p_cpu)" -eq 1
check "... the interpreter's lines, word for word" diff p_interp p_cpu

cat >splat_point.tsr <<'EOF'
kernel @splat_point
  out %o: f32[4] smem
{
  %c = const 2.0 : f32[4, 4]
  %s = slice %c[1, 2] : f32
  %t = add %s, %s : f32
  store %o[0], %t
  store %o[1], %s
  store %o[2], %s
  store %o[3], %t
}
EOF
t run splat_point.tsr --out-dir sp_interp -q
t run splat_point.tsr --out-dir sp_cpu -q --backend cpu
check "a scalar slice of a constant block lowers and gives the interpreter's outputs" \
  same_outputs sp_interp sp_cpu

# The catalog's bugs that the cpu backend reports (deadlocks, cores and
# devices that do not exist): the interpreter's message, and never a hang.
catalog_checked=0
while IFS='|' read -r file mode text; do
  case "$file" in '#'*|'') continue ;; esac
  case "$text" in
    *semaphore*) continue ;;
    *deadlock*|*'out of range: the run has'*|*'out of range: a device has'*|*'waits for'*) ;;
    *'out of bounds for dimension'*|*'index map gives block index'*) ;; # run-time bounds checks
    *) continue ;;
  esac
  catalog_checked=$((catalog_checked + 1))
  opts=$(grep "^$file" "$SRC/tests/diagnostics/options.txt" | cut -d' ' -f2- -s | sed 's/--detect-races//')
  # shellcheck disable=SC2086
  timeout 120 "$T" run "$SRC/tests/diagnostics/$file" --random-inputs 1 --backend cpu -q $opts \
    >"$tmp/out" 2>"$tmp/err" </dev/null
  rc=$? # 124: it hung
  check "cpu backend: $file $opts: status 1 and \"$text\"" \
    test "$rc" -eq 1 -a "$(grep -cF -- "$text" err)" -ge 1
done <"$SRC/tests/diagnostics/expected.txt"
check "... all 12 of the catalog's deadlock, nonexistent-core and bounds bugs were run" \
  test "$catalog_checked" -ge 12

# ---- run-time bounds checks (docs/lowering.md, "Checks") ---------------------------
# Dynamic indices of a load, a store and a DMA's source, read from a
# prefetch table, leave their refs at some grid steps and not at others, and
# a constant one leaves its ref too (as the JAX bridge gives a static index
# outside: an index operand): the cpu backend reports each as the
# interpreter does, word for word; in bounds, both give the same outputs.
cat >oob.tsr <<'EOF'
kernel @oob
  grid(4) semantics(arbitrary)
  prefetch %t: i32[4]
  in %x: f32[8, 128] vmem block[8, 128] map(%i) -> (0, 0)
  out %y: f32[32, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  scratch %s: vmem f32[10, 128]
  scratch %sem: dma_sem
{
  %i = program_id 0 : i32
  %k = load %t[%i] : i32
  %r = load %x[%k, :] : f32[128]
  %v = load %x[:, :] : f32[8, 128]
  store %y[:, :], %v
  store %y[%k, :], %r
  dma_start %x[ds(%k, 1), :] -> %s[ds(%k, 1), :], %sem
  dma_wait %x[ds(%k, 1), :] -> %s[ds(%k, 1), :], %sem
  %ten = const 10 : i32
  %w = load %s[%ten, :] : f32[128]
}
EOF
grep -v '%ten\|%w' oob.tsr >inb.tsr
cat >mk.py <<'EOF'
import struct
def save(name, descr, shape, fmt, values):  # .npy version 1.0, no numpy needed
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    with open(name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
save("t_ok.npy", "<i4", [4], "i", [0, 3, 7, 1])
save("t_bad.npy", "<i4", [4], "i", [0, 9, -1, 8])
save("x.npy", "<f4", [8, 128], "f", [float(i) for i in range(1024)])
EOF
if python3 mk.py; then
  for b in interp cpu; do
    t run oob.tsr --in t=t_bad.npy --in x=x.npy --out-dir "oob_$b" -q --backend "$b"
    grep 'error:' err | sort >"oob_err_$b"
    echo "$rc" >"oob_rc_$b"
  done
  check "bounds: the cpu backend fails a kernel whose indices leave their refs (status 1)" \
    test "$(cat oob_rc_cpu)" -eq 1 -a "$(cat oob_rc_interp)" -eq 1
  check "... naming the load, the store, the DMA's source and the constant index" \
    test "$(grep -c "'load': index 9 out of bounds for dimension 0 of %x (shape \[8, 128\])" oob_err_cpu)" -eq 1 -a \
    "$(grep -c "'store': index 9 out of bounds for dimension 0 of %y (shape \[8, 128\])" oob_err_cpu)" -eq 1 -a \
    "$(grep -c "'dma_start': slice 9:10:1 out of bounds for dimension 0 of %x (the DMA's source)" oob_err_cpu)" -eq 1 -a \
    "$(grep -c "'load': index 10 out of bounds for dimension 0 of %s (shape \[10, 128\])" oob_err_cpu)" -eq 1
  check "... the interpreter's lines, word for word" diff oob_err_interp oob_err_cpu
  for b in interp cpu; do
    t run inb.tsr --in t=t_ok.npy --in x=x.npy --out-dir "ok_$b" -q --backend "$b"
    echo "$rc" >"ok_rc_$b"
  done
  check "bounds: in bounds, both backends succeed with the same outputs" \
    test "$(cat ok_rc_cpu)" -eq 0 -a "$(cat ok_rc_interp)" -eq 0
  check "... bit for bit" same_outputs ok_interp ok_cpu
else
  skip "bounds: the inputs" "no python3"
fi

# ---- --oob-reads uninit and --buffer-bounds padded (docs/semantics.md) -----------
# Rows [4, 12) of a (10, 128) scratch buffer, padded to (16, 128): stored
# (the padding's rows dropped), copied in by a DMA, read back (the padding
# gives the uninitialized value), and rows [4, 12) of an 8-row input read
# by a load and a DMA. Both backends give the same outputs, bit for bit,
# and the same warnings, word for word; the options are part of the cpu
# key (hash), and without them the compiled code reports the errors.
cat >soft.tsr <<'EOF'
kernel @soft
  in %x: f32[8, 128] vmem
  out %o: f32[8, 128] vmem
  out %p: f32[8, 128] vmem
  out %r: f32[8, 128] vmem
  scratch %s: vmem f32[10, 128]
  scratch %u: vmem f32[10, 128]
  scratch %sem: dma_sem
{
  %four = const 4 : i32
  %v = load %x[:, :] : f32[8, 128]
  store %s[ds(%four, 8), :], %v
  %w = load %s[ds(%four, 8), :] : f32[8, 128]
  store %o[:, :], %w
  dma_start %x[ds(%four, 8), :] -> %u[ds(%four, 8), :], %sem
  dma_wait %x[ds(%four, 8), :] -> %u[ds(%four, 8), :], %sem
  %y = load %u[ds(%four, 8), :] : f32[8, 128]
  store %p[:, :], %y
  %z = load %x[ds(%four, 8), :] : f32[8, 128]
  store %r[:, :], %z
}
EOF
for uninit in nan zero; do
  for b in interp cpu; do
    t run soft.tsr --random-inputs 1 --oob-reads uninit --buffer-bounds padded \
      --uninit "$uninit" --out-dir "soft_${uninit}_$b" --backend "$b"
    echo "$rc" >"soft_rc_$b"
    grep 'warning:' err >"soft_warn_$b"
  done
  check "bounds options, --uninit $uninit: both backends succeed" \
    test "$(cat soft_rc_interp)" -eq 0 -a "$(cat soft_rc_cpu)" -eq 0
  check "... with the same outputs, bit for bit" same_outputs "soft_${uninit}_interp" "soft_${uninit}_cpu"
  check "... and the interpreter's five warnings (one per op), word for word" \
    test "$(wc -l <soft_warn_cpu)" -eq 5 -a -z "$(diff soft_warn_interp soft_warn_cpu)"
done
check "... the store into the padding warns with the padded shape" \
  grep -q "'store': write reaches outside %s (shape \[10, 128\]) into its padding (to \[16, 128\])" soft_warn_cpu
t hash soft.tsr --target cpu
h0=$(cat out)
t hash soft.tsr --target cpu --oob-reads uninit
h1=$(cat out)
t hash soft.tsr --target cpu --buffer-bounds padded
h2=$(cat out)
check "bounds options: each gives the cpu backend another key" \
  test -n "$h0" -a "$h0" != "$h1" -a "$h0" != "$h2" -a "$h1" != "$h2"
t run soft.tsr --random-inputs 1 --backend cpu -q
check "... and without them the compiled code reports the store outside %s" \
  test "$rc" -eq 1 -a "$(grep -c "'store': slice 4:12:1 out of bounds for dimension 0 of %s" err)" -eq 1

# ---- DMA views of dynamic size outside their refs ---------------------------------
# The sizes a run reads: one that takes the view past the end of an HBM
# output (guarded: a byte written past it fails the run), a negative one,
# and one in bounds. The cpu backend reports the first two as the
# interpreter does, word for word, and copies only what lies inside.
cat >dsz.tsr <<'EOF'
kernel @dsz
  grid(3) semantics(arbitrary)
  prefetch %n: i32[3]
  in %x: f32[16, 128] any
  out %y: f32[16, 128] any
  scratch %sem: dma_sem
{
  %i = program_id 0 : i32
  %k = load %n[%i] : i32
  %four = const 4 : i32
  %s = mul %i, %four : i32
  dma_start %x[ds(%s, %k), :] -> %y[ds(%s, %k), :], %sem
  dma_wait %x[ds(%s, %k), :] -> %y[ds(%s, %k), :], %sem
}
EOF
cat >mk2.py <<'EOF'
import struct
def save(name, descr, shape, fmt, values):
    head = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        descr, "".join("%d, " % d for d in shape))
    head += " " * (63 - (10 + len(head)) % 64) + "\n"
    with open(name, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))
save("n_bad.npy", "<i4", [3], "i", [4, 20, -3])
save("x16.npy", "<f4", [16, 128], "f", [float(i) for i in range(2048)])
EOF
if python3 mk2.py; then
  for b in interp cpu; do
    t run dsz.tsr --in n=n_bad.npy --in x=x16.npy --out-dir "dsz_$b" -q --backend "$b"
    grep 'error:' err | sort >"dsz_err_$b"
    echo "$rc" >"dsz_rc_$b"
  done
  check "dynamic DMA sizes: the cpu backend fails a view that leaves its ref (status 1, no guard fault)" \
    test "$(cat dsz_rc_cpu)" -eq 1 -a "$(cat dsz_rc_interp)" -eq 1
  check "... naming the slice past the end and the negative size" \
    test "$(grep -c "'dma_start': slice 4:24:1 out of bounds for dimension 0 of %x (the DMA's source)" dsz_err_cpu)" -eq 1 -a \
    "$(grep -c "has the negative size -3" dsz_err_cpu)" -ge 1
  check "... the interpreter's lines, word for word" diff dsz_err_interp dsz_err_cpu
else
  skip "dynamic DMA sizes: the inputs" "no python3"
fi

# ---- masked windows past the array's end -------------------------------------------
# A masked store or load whose dynamic window reaches past the ref's end (the
# lanes outside masked off, as Pallas allows) touches the masked-on lanes at
# their true positions: o[8 + i, 128 + j]. The compiled code used to clamp
# the window's start (writing at o[0, 0]). The reference kernel computes the
# same outputs with static in-range windows, in the interpreter.
cat >edge.tsr <<'EOF'
kernel @edge
  in %x: i32[16, 256] vmem
  out %o: i32[16, 256] vmem
  out %p: i32[16, 256] vmem
{
  %zero = const 0 : i32
  store %o[:, :], %zero
  %r = const 8 : i32
  %c = const 128 : i32
  %i0 = iota 0 : i32[16, 256]
  %i1 = iota 1 : i32[16, 256]
  %k = const 1000 : i32
  %a = mul %i0, %k : i32[16, 256]
  %val = add %a, %i1 : i32[16, 256]
  %m0 = lt %i0, %r : i1[16, 256]
  %m1 = lt %i1, %c : i1[16, 256]
  %five = const 5 : i32
  %m2 = ne %i1, %five : i1[16, 256]
  %m01 = and %m0, %m1 : i1[16, 256]
  %m = and %m01, %m2 : i1[16, 256]
  store %o[ds(%r, 16), ds(%c, 256)], %val mask %m
  %ld = load %x[ds(%r, 16), ds(%c, 256)] mask %m : i32[16, 256]
  %neg = const -1 : i32
  %negs = broadcast %neg : i32[16, 256]
  %sel = select %m, %ld, %negs : i32[16, 256]
  store %p[:, :], %sel
}
EOF
cat >edge_ref.tsr <<'EOF'
kernel @edge_ref
  in %x: i32[16, 256] vmem
  out %o: i32[16, 256] vmem
  out %p: i32[16, 256] vmem
{
  %zero = const 0 : i32
  store %o[:, :], %zero
  %neg = const -1 : i32
  store %p[:, :], %neg
  %i0 = iota 0 : i32[8, 128]
  %i1 = iota 1 : i32[8, 128]
  %k = const 1000 : i32
  %a = mul %i0, %k : i32[8, 128]
  %val = add %a, %i1 : i32[8, 128]
  %five = const 5 : i32
  %m = ne %i1, %five : i1[8, 128]
  %zeros = broadcast %zero : i32[8, 128]
  %ov = select %m, %val, %zeros : i32[8, 128]
  store %o[8:16, 128:256], %ov
  %ld = load %x[8:16, 128:256] : i32[8, 128]
  %negs = broadcast %neg : i32[8, 128]
  %pv = select %m, %ld, %negs : i32[8, 128]
  store %p[0:8, 0:128], %pv
}
EOF
t run edge_ref.tsr --random-inputs 5 --out-dir edge_ref -q
check "the reference of the masked edge windows runs in the interpreter" test "$rc" -eq 0
t run edge.tsr --random-inputs 5 --out-dir edge_cpu -q --backend cpu
check "cpu backend: masked store and load reaching past the array's end run" test "$rc" -eq 0
check "... the store writes the masked-on lanes at their true positions, nothing else" \
  cmp -s edge_ref/o.npy edge_cpu/o.npy
check "... the load reads them from their true positions" cmp -s edge_ref/p.npy edge_cpu/p.npy

# ---- new memory: --uninit nan and zero ------------------------------------------------
# Scratch, scoped buffers, an output block's unwritten rows and the padding
# of an edge block hold the run's uninitialized value, as in the interpreter:
# NaN / integer max (--uninit nan) or zero (--uninit zero). The compiled code
# takes the mode at run time: one object serves both (the key does not change,
# below). The cpu backend used to ignore --uninit zero and leave garbage.
cat >fresh.tsr <<'EOF'
kernel @fresh
  grid(2) semantics(arbitrary)
  in %x: f32[12, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %o: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %q: i32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %e: f32[12, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  scratch %t: vmem f32[8, 128]
  scratch %n: smem i32[4]
{
  %v = load %x[:, :] : f32[8, 128]
  %w = load %t[:, :] : f32[8, 128]
  %a = add %v, %w : f32[8, 128]
  %a4 = slice %a[4:8, :] : f32[4, 128]
  store %o[0:4, :], %a4
  store %t[:, :], %v
  %k = load %n[1] : i32
  %kb = broadcast %k : i32[4, 128]
  store %q[4:8, :], %kb
  %s = scoped(%buf: vmem i32[8, 128]) : i32[8, 128] {
    %one = const 1 : i32
    store %buf[2, :], %one
    %b = load %buf[:, :] : i32[8, 128]
    yield %b
  }
  %h = slice %s[0:4, :] : i32[4, 128]
  store %q[0:4, :], %h
  store %e[:, :], %v
}
EOF
for u in nan zero; do
  t run fresh.tsr --random-inputs 2 --uninit $u --no-check --out-dir "fresh_i_$u" -q
  check "--uninit $u: the interpreter's outputs" test "$rc" -eq 0
  t run fresh.tsr --random-inputs 2 --uninit $u --out-dir "fresh_c_$u" -q --backend cpu
  check "--uninit $u: the cpu backend runs" test "$rc" -eq 0
  for f in o q e; do
    check "... output $f equals the interpreter's, bit for bit" \
      cmp -s "fresh_i_$u/$f.npy" "fresh_c_$u/$f.npy"
  done
done
check "the two modes' outputs differ (the test reads new memory)" \
  bash -c '! cmp -s fresh_c_nan/q.npy fresh_c_zero/q.npy'

# ---- output blocks copied in (--out-blocks copied-in) ------------------------------
# As JAX's generic interpret=True runs them: an output aliased to an input
# accumulates onto the input's values (a block buffer copied in), a fresh
# i32 output read before it is written holds JAX's uninitialized value, the
# integer minimum (in place: the array is prefilled), and so does the
# padding of an input's and an output's edge blocks. Both backends give the
# same bits; the default (blocks uninitialized) gives others.
cat >copyin.tsr <<'EOF'
kernel @copyin
  grid(2, 2) semantics(parallel, arbitrary)
  in %acc: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
  in %x: f32[16, 256] vmem block[8, 128] map(%i, %j) -> (%i, %j)
  in %n: i32[12, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0) alias %acc
  out %q: i32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
  out %m: i32[12, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
{
  %v = load %x[:, :] : f32[8, 128]
  %a = load %o[:, :] : f32[8, 128]
  %s = add %a, %v : f32[8, 128]
  store %o[:, :], %s
  %r = load %q[4:8, :] : i32[4, 128]
  store %q[0:4, :], %r
  %k = load %n[:, :] : i32[8, 128]
  %c = load %m[:, :] : i32[8, 128]
  %k4 = slice %k[4:8, :] : i32[4, 128]
  %c4 = slice %c[4:8, :] : i32[4, 128]
  store %m[0:4, :], %k4
  store %m[4:8, :], %c4
}
EOF
for mode in uninit copied-in; do
  for b in interp cpu; do
    t run copyin.tsr --random-inputs 3 --out-blocks $mode --out-dir "ci_${b}_$mode" -q --backend $b
    check "--out-blocks $mode: --backend $b runs" test "$rc" -eq 0
  done
done
check "--out-blocks copied-in: the cpu backend's outputs are the interpreter's, bit for bit" \
  same_outputs ci_interp_copied-in ci_cpu_copied-in
for f in o q m; do
  check "... output $f differs from the default's (the test reads output blocks)" \
    bash -c "! cmp -s ci_interp_copied-in/$f.npy ci_interp_uninit/$f.npy"
done
last_int() { tail -c 4 "$1" | od -An -tx1 | tr -d ' \n'; }
check "... an input's padding reads as the integer minimum (m[11, 127], both backends)" \
  test "$(last_int ci_interp_copied-in/m.npy)" = 00000080 -a \
  "$(last_int ci_cpu_copied-in/m.npy)" = 00000080
check "... the integer maximum by default" test "$(last_int ci_cpu_uninit/m.npy)" = ffffff7f
check "... a fresh output read before it is written holds the minimum (q[15, 127])" \
  test "$(last_int ci_interp_copied-in/q.npy)" = 00000080 -a \
  "$(last_int ci_cpu_copied-in/q.npy)" = 00000080
k_cpu_ci=$("$T" hash copyin.tsr --target cpu --out-blocks copied-in | cut -d' ' -f1)
k_cpu_un=$("$T" hash copyin.tsr --target cpu | cut -d' ' -f1)
k_int_ci=$("$T" hash copyin.tsr --out-blocks copied-in | cut -d' ' -f1)
k_int_un=$("$T" hash copyin.tsr --out-blocks uninit | cut -d' ' -f1)
check "--out-blocks copied-in has keys of its own (cpu, interp)" \
  test -n "$k_cpu_ci" -a "$k_cpu_ci" != "$k_cpu_un" -a "$k_int_ci" != "$k_int_un"
"$T" hash copyin.tsr --target cpu --explain >explain 2>&1
check "... the default's cpu compile component is as before the option" \
  grep -qE '^  compile .*opt_level=2$' explain

# ---- run bounds ------------------------------------------------------------------

source "$SRC/tests/cli/bounds.sh"
bounds_tests cpu

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

# The code target: a fixed feature level, not the host's own list.
if [[ $(uname -m) == x86_64 ]]; then
  t hash "$EX/add.tsr" --target cpu --explain
  check "the cpu component names an x86-64 level" grep -qE '^  cpu +[0-9a-f]{32} +[0-9]+ bytes  x86-64(-v3)?$' out
  k_base=$(TESSERA_CPU_TARGET=x86-64 "$T" hash "$EX/add.tsr" --target cpu | cut -d' ' -f1)
  k_native=$(TESSERA_CPU_TARGET=native "$T" hash "$EX/add.tsr" --target cpu | cut -d' ' -f1)
  check "each level has its own key" \
    test "$k_base" != "$k_native" -a "$k_cpu" != "$k_native"
  TESSERA_CPU_TARGET=x86-64 t run "$EX/add.tsr" --backend cpu --random-inputs 1 --out-dir base -q
  check "code for the x86-64 baseline runs" test "$rc" -eq 0 -a -s base/c.npy
  TESSERA_CPU_TARGET=x86-64-v4 t run "$EX/add.tsr" --backend cpu --random-inputs 1 -q
  check "an unknown level is refused, naming the known ones" \
    grep -q 'TESSERA_CPU_TARGET=x86-64-v4: expected auto, native, x86-64, x86-64-v2 or x86-64-v3' err
fi

# ---- device-wide scoped buffers -----------------------------------------------------

# Not yet in a kernel whose DMAs the runtime copies (a remote one here): a
# located "cannot be lowered", the interpreter runs it.
cat >wide_remote.tsr <<'EOF'
kernel @wide_remote
  in %x: f32[8, 128] hbm
  out %y: f32[8, 128] hbm
  scratch %sem: dma_sem
{
  %d = device_id : i32
  scoped(%buf: hbm f32[8, 128]) {
    dma_start %x[:, :] -> %buf[:, :], %sem device %d
    dma_wait %x[:, :] -> %buf[:, :], %sem
    dma_start %buf[:, :] -> %y[:, :], %sem
    dma_wait %buf[:, :] -> %y[:, :], %sem
  }
}
EOF
t run wide_remote.tsr --backend cpu --random-inputs 1 -q
check "an hbm scoped buffer in a kernel with remote DMAs is a located refusal of the cpu backend" \
  grep -q "wide_remote.tsr:7:3: error: op 'scoped' cannot be lowered.*remote DMAs" err
t run wide_remote.tsr --random-inputs 1 -q
check "... which the interpreter runs" test "$rc" -eq 0

# ---- no lowering library ---------------------------------------------------------

TESSERA_LOWER_LIBRARY=$tmp/missing.so TESSERA_CACHE=off t run "$EX/add.tsr" --random-inputs 1 --backend cpu
check "a missing lowering library: status 1, saying where and how to point elsewhere" \
  test "$rc" -eq 1 -a "$(grep -c "cannot load the lowering library (set TESSERA_LOWER_LIBRARY" err)" -eq 1

echo "1..$n"
