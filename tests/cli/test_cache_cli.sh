#!/usr/bin/env bash
# `tessera cache stats|clear|verify` end to end, in TAP: help and usage
# errors, stats of empty and filled caches, verify finding damaged entries
# (and --remove-bad removing them), clear, TESSERA_CACHE=off and unusable
# directories. Needs $TESSERA; the first argument is the cache_fill helper
# (tests/cli/cache_fill.c), which writes entries.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
FILL=${1:?the cache_fill helper is the first argument}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-cache-cli-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
unset TESSERA_CACHE TESSERA_CACHE_DIR TESSERA_CACHE_MAX_SIZE

source "${TSR_SOURCE_ROOT:?}/tests/cli/tap.sh"


# expect DESC STATUS [pattern for stdout] [pattern for stderr]
expect() {
  local desc=$1 want=$2 out=${3-} err=${4-}
  if [[ $rc != "$want" ]]; then
    fail "$desc" "expected exit status $want, got $rc" "stdout: $(head -c 1500 "$tmp/out")" \
      "stderr: $(head -c 1500 "$tmp/err")"
  elif [[ -n $out ]] && ! grep -qE -- "$out" "$tmp/out"; then
    fail "$desc" "stdout does not match /$out/" "stdout: $(head -c 1500 "$tmp/out")"
  elif [[ -n $err ]] && ! grep -qE -- "$err" "$tmp/err"; then
    fail "$desc" "stderr does not match /$err/" "stderr: $(head -c 1500 "$tmp/err")"
  else
    pass "$desc"
  fi
}

# check DESC COMMAND...: passes if the command succeeds.
check() {
  local desc=$1
  shift
  if "$@"; then pass "$desc"; else fail "$desc" "failed: $*"; fi
}

entries() { find "$1/v2" -name '*.tsc' | sort; }

# ---- help and usage ---------------------------------------------------------
t cache --help
expect "cache --help exits 0" 0 '^Usage: tessera cache stats\|clear\|verify'
t cache
expect "no subcommand is a usage error" 2 '' 'a subcommand is needed'
t cache frob
expect "an unknown subcommand is a usage error" 2 '' "unknown subcommand 'frob'"
t cache stats clear
expect "two subcommands are a usage error" 2 '' 'one subcommand expected'
t cache stats --bogus
expect "an unknown option is a usage error" 2 '' "unknown option '--bogus'"
t cache stats --dir
expect "--dir without a value is a usage error" 2 '' '--dir expects a directory'
t cache stats --remove-bad --dir "$tmp/c"
expect "--remove-bad outside verify is a usage error" 2 '' "applies to 'verify' only"

# ---- stats --------------------------------------------------------------------
c=$tmp/c
t cache stats --dir "$c"
expect "stats of a new cache" 0 '^entries: +0$'
check "stats names the directory" grep -qF "directory:   $c" "$tmp/out"
check "stats shows the default limit" grep -qE '^limit: +1\.00 GiB \(1073741824 bytes\)$' "$tmp/out"

"$FILL" "$c" 6 || fail "cache_fill" "exit status $?"
t cache stats --dir="$c"
expect "stats counts the entries (--dir=DIR)" 0 '^entries: +6$'
bytes=$(entries "$c" | xargs stat -c %s | awk '{s += $1} END {print s}')
check "stats sums their sizes" grep -qE "^size: .*\($bytes bytes\)$" "$tmp/out"
check "stats shows no temp files" grep -qE '^temp files: +0$' "$tmp/out"

TESSERA_CACHE_DIR=$c TESSERA_CACHE_MAX_SIZE=64M t cache stats
expect "stats reads TESSERA_CACHE_DIR and TESSERA_CACHE_MAX_SIZE" 0 '^limit: +64\.0 MiB \(67108864 bytes\)$'
check "... and shows that directory" grep -qE '^entries: +6$' "$tmp/out"

# ---- verify ------------------------------------------------------------------
t cache verify --dir "$c"
expect "verify of a sound cache exits 0" 0 '^6 entries checked in .*: 6 good, 0 bad$'

mapfile -t files < <(entries "$c")
# One byte flipped in the middle of the payload, one entry truncated.
size=$(stat -c %s "${files[0]}")
printf '\xff' | dd of="${files[0]}" bs=1 seek=$((size - 5)) conv=notrunc status=none
truncate -s 60 "${files[1]}"
t cache verify --dir "$c"
expect "verify finds the damaged entries, exit 1" 1 '^6 entries checked in .*: 4 good, 2 bad \(remove them'
check "verify names the flipped entry" grep -qF "bad: ${files[0]}: authentication failed" "$tmp/out"
check "verify names the truncated entry" grep -qF "bad: ${files[1]}: truncated" "$tmp/out"
check "verify alone removes nothing" test -e "${files[0]}" -a -e "${files[1]}"

t cache verify --remove-bad --dir "$c"
expect "verify --remove-bad exits 1 too" 1 '4 good, 2 bad \(removed\)$'
check "verify --remove-bad removed them" test ! -e "${files[0]}" -a ! -e "${files[1]}"
t cache verify --dir "$c"
expect "verify afterwards exits 0" 0 '^4 entries checked in .*: 4 good, 0 bad$'

# ---- clear -------------------------------------------------------------------
touch "${files[2]%/*}/.tmp-1-inflight"
t cache clear --dir "$c"
expect "clear reports what it removed" 0 "^removed 4 entries from $c\$"
t cache stats --dir "$c"
expect "stats after clear" 0 '^entries: +0$'
check "clear leaves a fresh temp file (a put in flight)" grep -qE '^temp files: +1$' "$tmp/out"
t cache clear --dir "$c"
expect "clear of an empty cache" 0 '^removed 0 entries'

# ---- disabled, unusable ------------------------------------------------------
TESSERA_CACHE=off t cache stats --dir "$tmp/never"
expect "TESSERA_CACHE=off: stats says the cache is disabled" 0 'disabled \(TESSERA_CACHE=off\)'
check "TESSERA_CACHE=off: no directory is made" test ! -e "$tmp/never"
TESSERA_CACHE=No t cache clear --dir "$c"
expect "TESSERA_CACHE=No: clear does nothing" 0 'disabled'

echo x >"$tmp/file"
t cache stats --dir "$tmp/file/cache"
expect "a cache path through a file exits 2" 2 '' "I/O error: .*$tmp/file.*Not a directory"

echo "1..$n"
