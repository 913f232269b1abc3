#!/usr/bin/env bash
# The in-process linker (lower/link.c, docs/lowering.md "From object to
# shared object"), in TAP: every kernel of tests/lower/*.tsr is compiled
# with TESSERA_LOWER_LINK=internal (the in-process linker only: an object it
# does not handle fails the run) and with TESSERA_LOWER_LINK=cc (the C
# compiler driver, as before), and the outputs of both are byte-identical;
# by default (no TESSERA_LOWER_LINK) no kernel of the corpus falls back to cc.
# Needs $TESSERA and $TSR_SOURCE_ROOT.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-link-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
export TESSERA_CACHE=off
unset TESSERA_LOWER_LINK TESSERA_LOWER_SPLIT
source "$SRC/tests/cli/tap.sh"

# run_with MODE FILE KERNEL DIR: compiles and runs KERNEL with
# TESSERA_LOWER_LINK=MODE (empty: unset), outputs in DIR, stderr in $tmp/err.
run_with() {
  rm -rf "$4"
  if [[ -n $1 ]]; then
    TESSERA_LOWER_LINK=$1 TESSERA_LOWER_TIMING=1 "$T" run "$2" --kernel "$3" --backend cpu \
      --random-inputs 5 --out-dir "$4" -q >/dev/null 2>"$tmp/err"
  else
    TESSERA_LOWER_TIMING=1 "$T" run "$2" --kernel "$3" --backend cpu --random-inputs 5 \
      --out-dir "$4" -q >/dev/null 2>"$tmp/err"
  fi
}

fallbacks=
for f in "$SRC"/tests/lower/*.tsr; do
  name=$(basename "$f")
  for k in $(grep -oE '^kernel @[A-Za-z0-9_]+' "$f" | sed 's/^kernel @//'); do
    run_with internal "$f" "$k" "$tmp/internal"
    rc_internal=$?
    err_internal=$(head -c 1500 "$tmp/err")
    run_with cc "$f" "$k" "$tmp/cc"
    rc_cc=$?
    if [[ $rc_cc -ne 0 ]]; then
      # A kernel that fails at run time fails the same way with either linker.
      if [[ $rc_internal -eq $rc_cc ]]; then
        pass "$name @$k: exit status $rc_cc with either linker"
      else
        fail "$name @$k: exit status" "cc: $rc_cc, internal: $rc_internal" "$err_internal"
      fi
      continue
    fi
    bad=
    for out in "$tmp"/cc/*.npy; do
      cmp -s "$out" "$tmp/internal/$(basename "$out")" || bad="$bad $(basename "$out")"
    done
    if [[ $rc_internal -eq 0 && -z $bad ]]; then
      pass "$name @$k: linked in process, the same outputs as linked by cc"
    else
      fail "$name @$k: linked in process" "exit status $rc_internal" \
        "outputs that differ:${bad:- none}" "stderr: $err_internal"
    fi
    run_with "" "$f" "$k" "$tmp/default"
    grep -q 'linked by cc' "$tmp/err" && fallbacks="$fallbacks $name@$k"
  done
done
if [[ -z $fallbacks ]]; then
  pass "no kernel of tests/lower falls back to cc by default"
else
  fail "no kernel of tests/lower falls back to cc by default" "fell back:$fallbacks"
fi

# TESSERA_LOWER_TIMING says when cc linked: forced here.
f=$SRC/tests/lower/lower_elementwise.tsr
k=$(grep -oE '^kernel @[A-Za-z0-9_]+' "$f" | head -1 | sed 's/^kernel @//')
TESSERA_LOWER_LINK=cc TESSERA_LOWER_TIMING=1 "$T" run "$f" --kernel "$k" --backend cpu \
  --random-inputs 1 -q >/dev/null 2>"$tmp/err"
rc=$?
if [[ $rc -eq 0 ]] && grep -q '; linked by cc' "$tmp/err"; then
  pass "TESSERA_LOWER_LINK=cc: the timing line says linked by cc"
else
  fail "TESSERA_LOWER_LINK=cc: the timing line says linked by cc" "exit status $rc" \
    "stderr: $(head -c 800 "$tmp/err")"
fi

echo "1..$n"
