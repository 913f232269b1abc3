#!/usr/bin/env bash
# The cache through the CLI, across processes, in TAP: `tessera hash` (what
# changes a key and what does not), `tessera run` with the disk cache (a
# second process skips verification; a corrupted entry is a miss, is removed
# and rebuilt with a correct result; TESSERA_CACHE=off; an unusable directory
# and a full disk leave the run working and are reported once), and
# `tessera cache stats|verify|clear` on what the runs stored.
# Needs $TESSERA and $TSR_SOURCE_ROOT (set by meson).
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
EX=$SRC/kernels/examples
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-cache-XXXXXX")
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
unset TESSERA_CACHE XDG_CACHE_HOME

source "${TSR_SOURCE_ROOT:?}/tests/cli/tap.sh"

context() { printf '%s\n' "exit status $rc" "stdout: $(head -c 1200 "$tmp/out")" "stderr: $(head -c 1200 "$tmp/err")"; }
check() { # check DESC CONDITION-COMMAND...
  local desc=$1
  shift
  if "$@"; then pass "$desc"; else fail "$desc" "$(context)"; fi
}
key_of() { "$T" hash "$@" 2>/dev/null | head -n 1 | cut -d' ' -f1; }
entries() { find "$1" -type f -name '*.tsc' 2>/dev/null | wc -l; }
temps() { find "$1" -name '.tmp-*' 2>/dev/null | wc -l; }

# ---- tessera hash ------------------------------------------------------------

k_add=$(key_of "$EX/add.tsr")
check "hash prints 32 hex digits" test "${#k_add}" -eq 32
# the same kernel renamed, commented and reformatted, in another file
sed -e 's/%a/%left/g; s/%b/%right/g; s/%c/%sum/g; s/%x/%p/g; s/%y/%q/g; s/%z/%r/g' \
    -e 's/@add/@renamed/' -e 's/^{$/{  \/\/ body/' "$EX/add.tsr" | awk '{print; print ""}' >renamed.tsr
t check renamed.tsr
check "the renamed copy is a valid kernel" test "$rc" -eq 0
k_renamed=$(key_of renamed.tsr)
check "names, comments, blank lines and the file do not change the key" \
  test "$k_add" = "$k_renamed"
sed 's/block\[128, 512\]/block[64, 512]/; s/grid(8)/grid(16)/; s/f32\[128, 512\]/f32[64, 512]/g' \
  "$EX/add.tsr" >mutated.tsr
t check mutated.tsr
check "the mutated copy is a valid kernel" test "$rc" -eq 0
check "a different block spec and grid change the key" test "$k_add" != "$(key_of mutated.tsr)"
check "--uninit zero changes the key" test "$k_add" != "$(key_of "$EX/add.tsr" --uninit zero)"
check "--detect-races changes the key" test "$k_add" != "$(key_of "$EX/add.tsr" --detect-races)"
check "--uninit nan (the default) does not" test "$k_add" = "$(key_of "$EX/add.tsr" --uninit nan)"
t hash "$EX/add.tsr" --explain
check "--explain prints the four components" \
  test "$(grep -cE '^  (kernel|target|options|tessera) +[0-9a-f]{32} ' out)" -eq 4
check "--explain shows the options in words" grep -q 'uninit=nan check=1' out
t hash "$EX/add.tsr" --target tpu
check "--target tpu without the backend is a usage error" \
  test "$rc" -eq 2 -a -s err
t hash "$EX/add.tsr" --in a=x.npy
check "hash rejects run's data options" test "$rc" -eq 2
printf 'kernel @k\n  out %%o: f32[8] vmem\n{\n  %%x = no_such_op : f32[8]\n}\n' >unparsable.tsr
t hash unparsable.tsr
check "hash of an unparsable file exits 1 with the diagnostic" \
  sh -c "test $rc -eq 1 && grep -q 'unparsable.tsr:4:' '$tmp/err'"

# ---- tessera run with the disk cache --------------------------------------------

export TESSERA_CACHE_DIR=$tmp/cache
run_add() { t run "$EX/add.tsr" --random-inputs 3 --out c=c.npy --cache-stats -q "$@"; }

run_add
cp c.npy c_first.npy 2>/dev/null
check "first run: a disk miss and a put, verified" \
  grep -q 'disk on, 0 hits, 1 miss, 1 put, 0 bad entries; 0 verifications skipped' err
check "first run stored one entry" test "$(entries "$tmp/cache")" -eq 1
run_add
check "second process: a disk hit, verification skipped" \
  grep -q 'disk on, 1 hit, 0 misses, 0 puts, 0 bad entries; 1 verification skipped' err
check "second run: the same output" cmp -s c.npy c_first.npy

t run renamed.tsr --random-inputs 3 --out sum=c_renamed.npy --cache-stats -q
check "the renamed kernel hits the same entry" grep -q 'disk on, 1 hit' err
# (random inputs are seeded by operand name: compare with an uncached run)
TESSERA_CACHE=off t run renamed.tsr --random-inputs 3 --out sum=c_renamed_off.npy -q
check "and gives the output it gives uncached" cmp -s c_renamed.npy c_renamed_off.npy

# Corruption: flip one byte at each of several offsets, truncate, empty.
entry=$(find "$tmp/cache" -type f -name '*.tsc' | head -n 1)
size=$(stat -c %s "$entry")
corrupt_case() { # DESC COMMAND...: corrupts $entry, runs, expects miss + rebuild
  local desc=$1
  shift
  cp "$entry" "$tmp/entry.good"
  "$@"
  run_add
  if [[ $rc -ne 0 ]]; then
    fail "$desc: the run succeeds" "$(context)"
  elif ! grep -q 'disk on, 0 hits, 1 miss, 1 put, 1 bad entry; 0 verifications skipped' err; then
    fail "$desc: a bad entry, a miss and a rebuild" "$(context)"
  elif [[ $(grep -c '^tessera: cache:' err) -ne 1 ]]; then
    fail "$desc: exactly one warning" "$(context)"
  elif ! cmp -s c.npy c_first.npy; then
    fail "$desc: the output is correct" "$(context)"
  elif ! cmp -s "$entry" "$tmp/entry.good"; then
    fail "$desc: the rebuilt entry is the same as before" "$(context)"
  else
    pass "$desc: miss, warning, rebuild, correct result"
  fi
}
flip() { # flip OFFSET
  local off=$1 byte
  byte=$(od -An -tu1 -j "$off" -N1 "$entry" | tr -d ' ')
  printf "$(printf '\\%03o' $(((byte ^ 0x5a) & 255)))" |
    dd of="$entry" bs=1 seek="$off" conv=notrunc status=none
}
for off in 0 9 20 50 70 100 125 130 $((size / 2)) $((size - 1)); do
  corrupt_case "byte flipped at offset $off" flip "$off"
done
corrupt_case "truncated to half" truncate -s $((size / 2)) "$entry"
corrupt_case "truncated inside the header" truncate -s 40 "$entry"
corrupt_case "empty file" truncate -s 0 "$entry"
corrupt_case "garbage" sh -c "head -c $size /dev/urandom >'$entry'"

# Two entries' files swapped: each is the other's key, so each is a miss.
t run "$EX/matmul.tsr" --random-inputs 3 -q
second=$(find "$tmp/cache" -type f -name '*.tsc' ! -path "$entry" | head -n 1)
mv "$entry" "$tmp/swap" && mv "$second" "$entry" && mv "$tmp/swap" "$second"
run_add
check "swapped entries: a bad entry, a miss, a correct result" \
  sh -c "grep -q '1 miss, 1 put, 1 bad entry' '$tmp/err' && cmp -s c.npy c_first.npy"

t cache verify
check "cache verify after the swaps finds the remaining swapped entry" test "$rc" -eq 1
t cache verify --remove-bad
check "verify --remove-bad removes it" test "$rc" -eq 1
t cache verify
check "and a second verify finds nothing bad" test "$rc" -eq 0
t cache stats
check "cache stats counts the entries" grep -qE 'entries: *[12]\b' out
check "no temporary files are left" test "$(temps "$tmp/cache")" -eq 0
t cache clear
check "cache clear empties the cache" test "$rc" -eq 0 -a "$(entries "$tmp/cache")" -eq 0

# ---- the disk cache off, or unusable ------------------------------------------------

TESSERA_CACHE=off TESSERA_CACHE_DIR=$tmp/off \
  t run "$EX/add.tsr" --random-inputs 3 --cache-stats -q
check "TESSERA_CACHE=off: disk off, nothing created" \
  sh -c "grep -q 'disk off' '$tmp/err' && test ! -e '$tmp/off' && test $rc -eq 0"

: >"$tmp/a_file"
TESSERA_CACHE_DIR=$tmp/a_file/cache t run "$EX/add.tsr" --random-inputs 3 --out c=c_nodir.npy -q
check "an unusable cache directory: the run succeeds" test "$rc" -eq 0
check "and says so once" test "$(grep -c '^tessera: cache:' err)" -eq 1
check "with the correct result" cmp -s c_nodir.npy c_first.npy

# Disk full: writes beyond 1 KiB fail (EFBIG, SIGXFSZ ignored), and the entry
# (key material alone is over 1 KiB) cannot be written.
(
  trap '' XFSZ
  ulimit -f 1
  TESSERA_CACHE_DIR=$tmp/full "$T" run "$EX/add.tsr" --random-inputs 3 --cache-stats -q \
    >"$tmp/out" 2>"$tmp/err" </dev/null
  echo $? >"$tmp/rc"
)
rc=$(cat "$tmp/rc")
check "disk full: the run succeeds" test "$rc" -eq 0
check "and says so once" test "$(grep -c '^tessera: cache:' err)" -eq 1
check "and leaves no temporary file" test "$(temps "$tmp/full")" -eq 0
check "and no entry" test "$(entries "$tmp/full")" -eq 0

if [[ $(id -u) -ne 0 ]]; then
  mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
  TESSERA_CACHE_DIR=$tmp/ro t run "$EX/add.tsr" --random-inputs 3 -q
  check "read-only directory: the run succeeds and says so once" \
    sh -c "test $rc -eq 0 && test \$(grep -c '^tessera: cache:' '$tmp/err') -eq 1"
else
  skip "read-only directory" "running as root, which writes anyway (covered by the unusable directory and disk-full cases)"
fi

echo "1..$n"
