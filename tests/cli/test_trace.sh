#!/usr/bin/env bash
# `tessera run --trace`: the file is valid Chrome trace JSON with the events
# docs/dma.md promises (grid steps per core, DMAs with bytes on the DMA
# engine tracks, waits), also after a deadlock; an unwritable path fails;
# the file is written as --out writes one (a temporary file renamed into
# place, no link or FIFO another user planted in a sticky directory, no
# wait for a FIFO's reader).
set -uo pipefail
root=${TSR_SOURCE_ROOT:?}
tessera=${TESSERA:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
fails=0
check() { # description, then a command that must succeed
  local what=$1
  shift
  n=$((n + 1))
  if out=$("$@" 2>&1); then
    echo "ok $n - $what"
  else
    echo "not ok $n - $what"
    printf '# %s\n' "$out" | head -10
    fails=$((fails + 1))
  fi
}

cd "$root/tests/diagnostics"
"$tessera" run ok/ring_all_gather.tsr --devices 4 --random-inputs 1 -q \
  --trace "$tmp/ring.json" >/dev/null 2>"$tmp/ring.err"
check "ring all-gather with --trace exits 0" test $? -eq 0 -a ! -s "$tmp/ring.err"
check "the trace is Chrome trace JSON with steps, DMAs and waits" python3 - "$tmp/ring.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
events = doc["traceEvents"]
names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "thread_name"}
assert len({pid for pid, _ in names}) == 4, names
assert all(names[(d, 1000)] == "core 0 DMA engine" for d in range(4)), names
timed = [e for e in events if e["ph"] == "X"]
assert all(e["dur"] >= 1 and e["ts"] >= 0 for e in timed)
steps = [e for e in timed if e["name"].startswith("step ")]
assert sorted(e["pid"] for e in steps) == [0, 1, 2, 3], steps
dmas = [e for e in timed if e["name"].startswith("DMA -> %")]
assert dmas and all(e["tid"] == 1000 and e["args"]["bytes"] > 0 for e in dmas), dmas
waits = [e for e in timed if e["name"].startswith("wait %")]
assert waits and all(e["tid"] == 0 for e in waits)
PY

"$tessera" run bugs/deadlock_never_signalled.tsr --cores 2 --random-inputs 1 -q \
  --trace "$tmp/dead.json" >/dev/null 2>&1
check "a deadlocked run exits 1" test $? -eq 1
check "and still writes a valid trace with both cores" python3 - "$tmp/dead.json" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
cores = {e["tid"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
assert cores == {0, 1, 1000, 1001}, cores
PY

"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q \
  --trace "$tmp/no/such/dir/t.json" >/dev/null 2>"$tmp/bad.err"
check "an unwritable trace path exits 1" test $? -eq 1
check "and says which path" grep -q "cannot write the trace to $tmp/no/such/dir/t.json" "$tmp/bad.err"
skip() { # description, reason
  n=$((n + 1))
  echo "ok $n - $1 # SKIP $2"
}
valid_trace() { python3 -c 'import json, sys; json.load(open(sys.argv[1]))["traceEvents"]' "$1"; }
trace() { # path; the exit status of a run tracing to it (124: it hung)
  timeout 120 "$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace "$1" \
    >/dev/null 2>"$tmp/last.err"
}

echo old >"$tmp/t.json"
ln "$tmp/t.json" "$tmp/t.hardlink"
trace "$tmp/t.json"
check "a trace over an existing file exits 0" test $? -eq 0
check "and replaces it by a rename (a hard link to it keeps the old bytes)" \
  test "$(cat "$tmp/t.hardlink")" = old
check "with the trace" valid_trace "$tmp/t.json"

"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace /dev/stdout 2>/dev/null |
  python3 -c 'import json, sys; json.JSONDecoder().raw_decode(sys.stdin.read())[0]["traceEvents"]'
check "a trace to /dev/stdout (a pipe) is written into the pipe, before the outputs" test $? -eq 0

mkfifo "$tmp/fifo"
trace "$tmp/fifo"
check "a trace to a FIFO nobody reads fails at once instead of waiting" test $? -eq 1
check "and says so" grep -q "no process reads the FIFO" "$tmp/last.err"

# Links and FIFOs in a sticky, world-writable directory (/tmp) that belong
# to another user are not followed or written (what fs.protected_symlinks
# does, in case the kernel does not): making them needs chown.
mkdir -m 1777 "$tmp/sticky"
echo victim >"$tmp/victim"
ln -s "$tmp/victim" "$tmp/sticky/planted.json"
mkfifo "$tmp/sticky/planted.fifo"
if chown -h 4242:4242 "$tmp/sticky/planted.json" "$tmp/sticky/planted.fifo" 2>/dev/null; then
  trace "$tmp/sticky/planted.json"
  check "a link another user planted in a sticky directory is refused" test $? -eq 1
  check "the file it names is left alone" test "$(cat "$tmp/victim")" = victim
  check "and the refusal says why" grep -q "not following the symbolic link" "$tmp/last.err"
  trace "$tmp/sticky/planted.fifo"
  check "a FIFO another user planted there is refused" test $? -eq 1
  check "and the refusal says why" grep -q "not writing to the FIFO" "$tmp/last.err"
else
  for what in "a planted link is refused" "its file is left alone" "the refusal says why" \
      "a planted FIFO is refused" "the refusal says why"; do
    skip "$what" "chown to another user is not allowed here"
  done
fi
ln -s "$tmp/victim" "$tmp/sticky/mine.json"
trace "$tmp/sticky/mine.json"
check "our own link in a sticky directory is followed" valid_trace "$tmp/victim"
check "and stays a link" test -L "$tmp/sticky/mine.json"

echo "1..$n"
[[ $fails == 0 ]]
