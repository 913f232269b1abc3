#!/usr/bin/env bash
# Stores of 8- and 16-bit elements in compiled code, in TAP (docs/lowering.md,
# "Narrow stores"). LLVM 22's x86 back end, on AVX-512 hosts, compiles a
# vector of narrow elements truncated from 32 bits and stored under a
# constant one-lane mask (the tail of a row of 16n + 1 elements) into a
# 32-bit store: 2 or 3 bytes past the row. So for every narrow dtype, kernels
# with such tails (a whole row, a converted row, blocks along a padded row,
# a masked store) must lower to MLIR without vector.maskedstore of i8/i16
# vectors, whatever the host; and, where LLVM 22's tools are found
# ($LLVM_BINDIR), their LLVM IR optimized for an AVX-512 CPU
# (skylake-avx512) must hold no masked store of i8/i16 vectors either (none
# comes back through LLVM's optimizations). Needs $TESSERA and
# $TSR_SOURCE_ROOT; registered only in builds with MLIR.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-narrow-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
source "$SRC/tests/cli/tap.sh"

B=${LLVM_BINDIR:-}
tools=1
for tool in mlir-translate opt; do [[ -x $B/$tool ]] || tools=0; done

# kernel DTYPE LEN: the file of four kernels over DTYPE[2, LEN].
kernel() {
  local dt=$1 len=$2
  local nb=$(((len + 127) / 128)) t="$dt[2, $len]" b="$dt[2, 128]"
  cat <<EOF
kernel @row
  grid(1)
  in %x: $t vmem
  out %y: $t vmem
{
  %v = load %x[:, :] : $t
  store %y[:, :], %v
}

kernel @converted
  grid(1)
  in %x: $t vmem
  out %y: $t vmem
{
  %v = load %x[:, :] : $t
  %w = convert %v : i32[2, $len]
  %s = add %w, %w : i32[2, $len]
  %r = convert %s : $t
  store %y[:, :], %r
}

kernel @padded_blocks
  grid($nb) semantics(parallel)
  in %x: $t vmem block[2, 128] map(%i) -> (0, %i)
  out %y: $t vmem block[2, 128] map(%i) -> (0, %i)
{
  %v = load %x[:, :] : $b
  %w = convert %v : i32[2, 128]
  %s = add %w, %w : i32[2, 128]
  %r = convert %s : $b
  store %y[:, :], %r
}

kernel @masked
  grid(1)
  in %x: $t vmem
  in %k: i32[2, $len] vmem
  out %y: $t vmem
{
  %v = load %x[:, :] : $t
  %kk = load %k[:, :] : i32[2, $len]
  %z = const 0 : i32[2, $len]
  %m = gt %kk, %z : i1[2, $len]
  store %y[:, :], %v
  %w = convert %v : i32[2, $len]
  %s = add %w, %w : i32[2, $len]
  %r = convert %s : $t
  store %y[:, :], %r mask %m
}
EOF
}

narrow_masked_store='vector\.maskedstore .*vector<[0-9]+xi(8|16)>$'
for dt in bf16 f16 i16 u16 i8 u8 i1; do
  for len in 129 17 1 33; do
    f=$tmp/${dt}_$len.tsr
    kernel "$dt" "$len" >"$f"
    [[ $dt == i1 ]] && sed -i '/^kernel @converted/,$d' "$f" # i1 has no add
    for k in $(grep -oE '^kernel @[a-z_]+' "$f" | sed 's/^kernel @//'); do
      desc="$dt[2, $len] @$k"
      if ! "$T" lower "$f" -k "$k" --stage mlir >"$tmp/mlir" 2>"$tmp/err"; then
        fail "$desc: lowers" "$(head -c 1500 "$tmp/err")"
        continue
      fi
      if grep -qE "$narrow_masked_store" "$tmp/mlir"; then
        fail "$desc: no masked vector store of narrow elements" \
          "$(grep -m2 -E "$narrow_masked_store" "$tmp/mlir")"
      else
        pass "$desc: no masked vector store of narrow elements"
      fi
      ((tools)) || continue
      if ! "$T" lower "$f" -k "$k" --stage llvm >"$tmp/llvm.mlir" 2>"$tmp/err" ||
        ! "$B/mlir-translate" --mlir-to-llvmir "$tmp/llvm.mlir" -o "$tmp/k.ll" 2>"$tmp/err" ||
        ! "$B/opt" -O2 -mtriple=x86_64-pc-linux-gnu -mcpu=skylake-avx512 -S "$tmp/k.ll" \
          -o "$tmp/opt.ll" 2>"$tmp/err"; then
        fail "$desc: LLVM IR for AVX-512" "$(head -c 1500 "$tmp/err")"
      elif grep -qE 'call void @llvm\.masked\.store\.v[0-9]+i(8|16)' "$tmp/opt.ll"; then
        fail "$desc: no masked store of narrow elements in LLVM IR for AVX-512" \
          "$(grep -m2 -E 'call void @llvm\.masked\.store\.v[0-9]+i(8|16)' "$tmp/opt.ll")"
      else
        pass "$desc: no masked store of narrow elements in LLVM IR for AVX-512"
      fi
    done
  done
done
((tools)) || skip "LLVM IR for AVX-512" "no mlir-translate and opt of LLVM 22 in \$LLVM_BINDIR ('$B')"

echo "1..$n"
