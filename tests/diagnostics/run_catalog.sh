#!/usr/bin/env bash
# The diagnostics catalog, run through the tessera CLI (TAP). Every kernel runs
# in both DMA modes and with schedule seeds 0, 1 and 2:
#   ok/*   must run clean (exit 0, no diagnostics);
#   bugs/* listed in expected.txt must exit 1 with the expected diagnostic
#          (a verifier error is found by `run` too);
#   kernels listed in warnings.txt must exit 0 with the expected warning, and
#          exit 1 with it under --strict.
# Each kernel runs with its options from options.txt (--detect-races for the
# race kernels and every ok/ kernel: no false reports).
set -uo pipefail
root=${TSR_SOURCE_ROOT:?}
tessera=${TESSERA:?}
cd "$root/tests/diagnostics"
n=0
fails=0

declare -A opts
while read -r file rest; do
  [[ -z $file || $file == \#* ]] && continue
  opts[$file]=$rest
done < options.txt

check() { # name status
  n=$((n + 1))
  if [[ $2 == 0 ]]; then echo "ok $n - $1"; else echo "not ok $n - $1"; fails=$((fails + 1)); fi
}

# run_seeds FILE MODE RC TEXT [OPTIONS]: runs FILE with seeds 0, 1, 2 and
# OPTIONS (default: its line of options.txt); every run must exit RC with TEXT
# in its diagnostics (TEXT empty: no diagnostics at all). Prints the first
# mismatch on stdout.
run_seeds() {
  local file=$1 mode=$2 want_rc=$3 text=$4 options=${5-${opts[$1]:-}} seed err rc
  for seed in 0 1 2; do
    # shellcheck disable=SC2086
    err=$("$tessera" run "$file" --random-inputs 1 --quiet --dma-mode "$mode" \
            --schedule-seed "$seed" $options 2>&1 >/dev/null)
    rc=$?
    if [[ $rc != "$want_rc" ]] || { [[ -z $text ]] && [[ -n $err ]]; } ||
       [[ $err != *"$text"* ]]; then
      echo "seed $seed: exit $rc (expected $want_rc${text:+ and: $text}); got: $err"
      return
    fi
  done
}

for file in ok/*.tsr; do
  for mode in lazy eager; do
    bad=$(run_seeds "$file" "$mode" 0 "")
    [[ -n $bad ]] && printf '# %s\n' "$bad" | head -5
    check "$file ($mode) runs clean" "$([[ -z $bad ]] && echo 0 || echo 1)"
  done
done

while IFS='|' read -r file modes text; do
  [[ -z $file || $file == \#* ]] && continue
  for mode in lazy eager; do
    [[ $modes != both && $modes != "$mode" ]] && continue
    bad=$(run_seeds "$file" "$mode" 1 "$text")
    [[ -n $bad ]] && printf '# %s\n' "$bad" | head -8
    check "$file ($mode) reports the bug" "$([[ -z $bad ]] && echo 0 || echo 1)"
  done
done < expected.txt

while IFS='|' read -r file options text; do
  [[ -z $file || $file == \#* ]] && continue
  [[ -z $options ]] && options=${opts[$file]:-}
  for mode in lazy eager; do
    bad=$(run_seeds "$file" "$mode" 0 "warning: " "$options")
    [[ -z $bad ]] && bad=$(run_seeds "$file" "$mode" 0 "$text" "$options")
    [[ -n $bad ]] && printf '# %s\n' "$bad" | head -8
    check "$file ($mode${options:+ $options}) warns" "$([[ -z $bad ]] && echo 0 || echo 1)"
    bad=$(run_seeds "$file" "$mode" 1 "$text" "$options --strict")
    [[ -n $bad ]] && printf '# %s\n' "$bad" | head -8
    check "$file ($mode${options:+ $options}) fails with --strict" \
      "$([[ -z $bad ]] && echo 0 || echo 1)"
  done
done < warnings.txt
echo "1..$n"
[[ $fails == 0 ]]
