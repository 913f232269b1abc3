#!/usr/bin/env bash
# The cache through the CLI, across processes, in TAP: `tessera hash` (what
# changes a key and what does not), `tessera run` with the disk cache (the
# interpreter keeps nothing there; a compiled kernel's second process loads
# it; a corrupted entry, a FIFO or a symbolic link in its place is a miss,
# is removed and rebuilt with a correct result; TESSERA_CACHE=off; an
# unusable directory and a full disk leave the run working and are reported
# once), `tessera cache stats|verify|clear` on what the runs stored, and an
# attacker who can write the cache: a planted object never loaded, a forged
# verdict never believed, other users' and group-writable directories and
# loose key files refused, the shared-cache opt-in.
# Needs $TESSERA and $TSR_SOURCE_ROOT (set by meson); the arguments are the
# cache_plant helper and the plant_object shared object.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
PLANT=${1:?the cache_plant helper is the first argument}
OBJECT=${2:?the plant_object shared object is the second argument}
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

export TESSERA_CACHE_DIR=$tmp/cache TESSERA_CACHE_KEY_FILE=$tmp/cache.key

# The interpreter keeps nothing on disk and verifies every kernel.
t run "$EX/add.tsr" --random-inputs 3 --out c=c_interp.npy --cache-stats -q
check "interpreter: memory only, disk not used" \
  sh -c "test $rc -eq 0 && grep -q 'disk not used by the interpreter' '$tmp/err'"
check "interpreter: one memory miss and one build (the context's cache)" \
  grep -q 'memory 0 hits, 1 miss, 1 build;' err
check "interpreter: no entry stored" test "$(entries "$tmp/cache")" -eq 0

# Compiled kernels: the disk cache holds their shared objects.
TESSERA_CACHE=off "$T" run "$EX/add.tsr" --backend cpu --random-inputs 1 -q \
  >/dev/null 2>&1 </dev/null
have_cpu=$?
run_add() { t run "$EX/add.tsr" --backend cpu --random-inputs 3 --out c=c.npy --cache-stats -q "$@"; }

if [[ $have_cpu -eq 0 ]]; then
run_add
cp c.npy c_first.npy 2>/dev/null
check "first run: a memory miss, a disk miss, a put, a compile" \
  grep -q 'memory 0 hits, 1 miss; disk on, 0 hits, 1 miss, 1 put, 0 bad entries; 1 compile,' err
check "first run stored one entry" test "$(entries "$tmp/cache")" -eq 1
check "the compiled result equals the interpreter's" cmp -s c.npy c_interp.npy
run_add
check "second process: a disk hit, no compile" \
  grep -q 'disk on, 1 hit, 0 misses, 0 puts, 0 bad entries; 0 compiles,' err
check "second run: the same output" cmp -s c.npy c_first.npy

t run renamed.tsr --backend cpu --random-inputs 3 --out sum=c_renamed.npy --cache-stats -q
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
  "$@"
  run_add
  if [[ $rc -ne 0 ]]; then
    fail "$desc: the run succeeds" "$(context)"
  elif ! grep -q 'disk on, 0 hits, 1 miss, 1 put, 1 bad entry; 1 compile,' err; then
    fail "$desc: a bad entry, a miss and a rebuild" "$(context)"
  elif [[ $(grep -c '^tessera: cache:' err) -ne 1 ]]; then
    fail "$desc: exactly one warning" "$(context)"
  elif ! cmp -s c.npy c_first.npy; then
    fail "$desc: the output is correct" "$(context)"
  elif [[ ! -f $entry ]]; then
    fail "$desc: the entry is rebuilt" "$(context)"
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
for off in 0 9 20 50 70 90 100 125 130 $((size / 2)) $((size - 1)); do
  corrupt_case "byte flipped at offset $off" flip "$off"
done
corrupt_case "truncated to half" truncate -s $((size / 2)) "$entry"
corrupt_case "truncated inside the header" truncate -s 40 "$entry"
corrupt_case "empty file" truncate -s 0 "$entry"
corrupt_case "garbage" sh -c "head -c $size /dev/urandom >'$entry'"
# A FIFO in place of the entry: opened without waiting, removed, rebuilt.
corrupt_case "a FIFO in place of the entry" sh -c "rm -f '$entry' && mkfifo '$entry'"
corrupt_case "a symbolic link in place of the entry" \
  sh -c "cp '$entry' '$tmp/elsewhere.tsc' && rm -f '$entry' && ln -s '$tmp/elsewhere.tsc' '$entry'"

# Two entries' files swapped: each is the other's key, so each is a miss.
t run "$EX/matmul.tsr" --backend cpu --random-inputs 3 -q
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

# A FIFO in place of an entry: verify reports it and clear removes it,
# neither waits on it.
fifo=$(find "$tmp/cache" -type f -name '*.tsc' | head -n 1)
rm -f "$fifo" && mkfifo "$fifo"
t cache verify
check "verify reports a FIFO in place of an entry (and does not hang)" \
  sh -c "test $rc -eq 1 && grep -q 'bad: .*: a FIFO, not a regular file' '$tmp/out'"
t cache clear
check "cache clear empties the cache, the FIFO included" \
  sh -c "test $rc -eq 0 && test ! -e '$fifo' && test \$(find '$tmp/cache/v2' -name '*.tsc' | wc -l) -eq 0"

# A bucket that is a symbolic link to a directory elsewhere: never written
# through, reported by verify, removed by a run and by clear.
run_add
bucket=$(dirname "$(find "$tmp/cache" -type f -name '*.tsc' | head -n 1)")
rm -rf "$bucket" && mkdir "$tmp/outside" && ln -s "$tmp/outside" "$bucket"
t cache verify
check "verify reports a bucket that is a symbolic link" \
  sh -c "test $rc -eq 1 && grep -q 'bad: $bucket: a symbolic link, not a bucket directory' '$tmp/out'"
run_add
check "a run with a symlinked bucket: a bad entry, a rebuild, a correct result" \
  sh -c "test $rc -eq 0 && grep -q '1 put, 1 bad entry' '$tmp/err' && cmp -s c.npy c_first.npy"
check "nothing was written through the link" test -z "$(ls -A "$tmp/outside")"
check "the bucket is a directory again" sh -c "test -d '$bucket' && test ! -L '$bucket'"
# (an existing bucket 00 goes first: ln would put the link inside it)
rm -rf "$tmp/cache/v2/00" && ln -s "$tmp/outside" "$tmp/cache/v2/00"
t cache clear
check "cache clear removes a symlinked bucket, not what it points to" \
  sh -c "test $rc -eq 0 && test ! -e '$tmp/cache/v2/00' && test -d '$tmp/outside'"
else
  skip "tessera run with the disk cache (--backend cpu)" "no cpu backend in this build"
fi

# ---- an attacker who can write the cache directory ---------------------------------

# The attacker: a new non-root user when running as root; otherwise this
# user writing through a directory that anyone may write (what another user
# could do there).
attacker=
as_attacker() { "$@"; }
if [[ $(id -u) -eq 0 ]] && command -v useradd >/dev/null && command -v runuser >/dev/null; then
  attacker=tsrplant$$
  if useradd --no-create-home --shell /usr/sbin/nologin "$attacker" 2>/dev/null; then
    trap 'userdel "$attacker" 2>/dev/null; chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
    as_attacker() { runuser -u "$attacker" -- "$@"; }
  else
    attacker=
  fi
fi
chmod 755 "$tmp"
mkdir -p "$tmp/evil" "$tmp/shared"
if [[ -n $attacker ]]; then
  chown "$attacker" "$tmp/evil" "$tmp/shared"
else
  chmod 777 "$tmp/shared"
fi
plant() { # plant KEY-SOURCE PAYLOAD: as the attacker, with the attacker's key
  as_attacker env TESSERA_CACHE_DIR="$tmp/shared" TESSERA_CACHE_KEY_FILE="$tmp/evil/key" \
    TESSERA_CACHE_SHARED=1 "$PLANT" "$@"
}
marker=$tmp/planted-object-ran
export TSR_PLANT_MARKER=$marker

# A forged "verified" verdict for a kernel that does not verify: the
# interpreter reads nothing from disk (checked above: no entry stored), so
# what this shows is that the kernel is still verified and rejected.
cp "$SRC/tests/cli/verify_error.tsr" "$tmp/evil/bad.tsr"
printf 'tessera interp: verified\n' >"$tmp/evil/verdict"
chmod 644 "$tmp/evil/bad.tsr" "$tmp/evil/verdict"
plant "$tmp/evil/bad.tsr" "$tmp/evil/verdict"
check "the attacker planted a verdict" test "$(entries "$tmp/shared")" -ge 1
TESSERA_CACHE_DIR=$tmp/shared TESSERA_CACHE_SHARED=1 t run "$tmp/evil/bad.tsr" --random-inputs 1 -q
check "a forged verdict: the kernel is still verified and rejected" \
  sh -c "test $rc -eq 1 && grep -q 'bad.tsr:[0-9]*:[0-9]*: error' '$tmp/err'"

if [[ $have_cpu -eq 0 ]]; then
  # The attacker takes the key material of a genuine entry and plants an
  # object whose constructor would write $marker.
  TESSERA_CACHE_DIR=$tmp/genuine t run "$EX/add.tsr" --backend cpu --random-inputs 1 -q
  cp "$(find "$tmp/genuine" -type f -name '*.tsc' | head -n 1)" "$tmp/evil/genuine.tsc"
  cp "$OBJECT" "$tmp/evil/object.so"
  chmod 644 "$tmp/evil/genuine.tsc" "$tmp/evil/object.so"
  plant "$tmp/evil/genuine.tsc" "$tmp/evil/object.so"
  check "the attacker planted an object${attacker:+ as user $attacker}" \
    test "$(entries "$tmp/shared")" -ge 2

  TESSERA_CACHE_DIR=$tmp/shared run_add
  check "another user's (or a world-writable) cache directory is not used" \
    sh -c "test $rc -eq 0 && grep -q 'disk off' '$tmp/err' && \
           test \$(grep -c '^tessera: cache:.*not using the cache directory' '$tmp/err') -eq 1"
  check "so the planted object is not loaded" test ! -e "$marker"
  check "and the output is correct" cmp -s c.npy c_first.npy

  TESSERA_CACHE_DIR=$tmp/shared TESSERA_CACHE_SHARED=1 run_add
  check "a shared cache: the planted object is a bad entry, compiled again" \
    sh -c "test $rc -eq 0 && grep -q 'disk on, 0 hits, 1 miss, 1 put, 1 bad entry; 1 compile' '$tmp/err' && \
           grep -q 'authentication failed' '$tmp/err'"
  check "the planted object was never loaded" test ! -e "$marker"
  check "and the output is correct" cmp -s c.npy c_first.npy
  TESSERA_CACHE_DIR=$tmp/shared TESSERA_CACHE_SHARED=1 run_add
  check "the shared cache opt-in works: the next run hits" \
    grep -q 'disk on, 1 hit, 0 misses, 0 puts, 0 bad entries; 0 compiles' err

  plant "$tmp/evil/genuine.tsc" "$tmp/evil/object.so"
  TESSERA_CACHE_DIR=$tmp/shared TESSERA_CACHE_SHARED=1 t cache verify
  check "cache verify reports the planted object and the verdict as bad" \
    sh -c "test $rc -eq 1 && test \$(grep -c '^bad: .*authentication failed' '$tmp/out') -eq 2"
  check "verify did not load it either" test ! -e "$marker"
  TESSERA_CACHE_DIR=$tmp/shared t cache verify
  check "without TESSERA_CACHE_SHARED, cache verify refuses the directory" \
    sh -c "test $rc -eq 2 && grep -q 'not using the cache directory' '$tmp/err'"
else
  skip "a planted object" "no cpu backend in this build"
fi

# A group- or world-writable cache directory of this user: a warning, no
# disk cache; the shared opt-in uses it.
mkdir -m 700 "$tmp/loose"
chmod g+w "$tmp/loose"
if [[ $have_cpu -eq 0 ]]; then # the interpreter does not use the disk cache
  TESSERA_CACHE_DIR=$tmp/loose t run "$EX/add.tsr" --random-inputs 1 -q --backend cpu
  check "a group-writable cache directory: one warning, the run succeeds" \
    sh -c "test $rc -eq 0 && test \$(grep -c '^tessera: cache:' '$tmp/err') -eq 1 && \
           grep -q 'mode 0720, writable by its group' '$tmp/err'"
  check "and nothing stored in it" test "$(entries "$tmp/loose")" -eq 0
else
  skip "a group-writable cache directory on a run" "no cpu backend in this build"
fi
TESSERA_CACHE_DIR=$tmp/loose t cache stats
check "cache stats refuses it (exit 2)" test "$rc" -eq 2
TESSERA_CACHE_DIR=$tmp/loose TESSERA_CACHE_SHARED=1 t cache stats
check "TESSERA_CACHE_SHARED=1 uses it" sh -c "test $rc -eq 0 && grep -q '^entries: *0' '$tmp/out'"

# The key file must be this user's alone.
chmod 644 "$TESSERA_CACHE_KEY_FILE"
t cache stats
check "a key file others may read: refused (exit 2), naming the file" \
  sh -c "test $rc -eq 2 && grep -q 'the cache key $TESSERA_CACHE_KEY_FILE has mode 0644' '$tmp/err'"
TESSERA_CACHE_SHARED=1 t cache stats
check "also in a shared cache" test "$rc" -eq 2
chmod 600 "$TESSERA_CACHE_KEY_FILE"
t cache stats
check "the key file at 0600 is used" test "$rc" -eq 0

# ---- the disk cache off, or unusable ------------------------------------------------

if [[ $have_cpu -eq 0 ]]; then
TESSERA_CACHE=off TESSERA_CACHE_DIR=$tmp/off \
  t run "$EX/add.tsr" --backend cpu --random-inputs 3 --cache-stats -q
check "TESSERA_CACHE=off: disk off, nothing created" \
  sh -c "grep -q 'disk off' '$tmp/err' && test ! -e '$tmp/off' && test $rc -eq 0"

: >"$tmp/a_file"
TESSERA_CACHE_DIR=$tmp/a_file/cache t run "$EX/add.tsr" --backend cpu --random-inputs 3 \
  --out c=c_nodir.npy -q
check "an unusable cache directory: the run succeeds" test "$rc" -eq 0
check "and says so once" test "$(grep -c '^tessera: cache:' err)" -eq 1
check "with the correct result" cmp -s c_nodir.npy c_first.npy

# A put that fails: the entry's name is held by a directory that is not
# empty (the compile's own files rule out RLIMIT_FSIZE as a full disk here;
# test_disk_cache covers a full disk).
TESSERA_CACHE_DIR=$tmp/full run_add
entry_full=$(find "$tmp/full" -type f -name '*.tsc' | head -n 1)
rm -f "$entry_full" && mkdir -p "$entry_full/x"
TESSERA_CACHE_DIR=$tmp/full run_add
check "a failing put: the run succeeds with the correct result" \
  sh -c "test $rc -eq 0 && cmp -s c.npy c_first.npy"
check "and says so: the bad entry it cannot remove, the failed write" \
  sh -c "grep -q 'bad entry $entry_full: a directory, not a regular file; cannot remove it' '$tmp/err' && \
         test \$(grep -c '^tessera: cache:' '$tmp/err') -eq 2"
check "and leaves no temporary file" test "$(temps "$tmp/full")" -eq 0

if [[ $(id -u) -ne 0 ]]; then
  mkdir -p "$tmp/ro" && chmod 555 "$tmp/ro"
  TESSERA_CACHE_DIR=$tmp/ro t run "$EX/add.tsr" --backend cpu --random-inputs 3 -q
  check "read-only directory: the run succeeds and says so once" \
    sh -c "test $rc -eq 0 && test \$(grep -c '^tessera: cache:' '$tmp/err') -eq 1"
else
  skip "read-only directory" "running as root, which writes anyway (covered by the unusable directory and disk-full cases)"
fi
else
  skip "the disk cache off, or unusable" "no cpu backend in this build"
fi

echo "1..$n"
