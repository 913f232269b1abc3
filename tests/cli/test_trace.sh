#!/usr/bin/env bash
# `tessera run --trace`: the file is valid Chrome trace JSON with the events
# docs/dma.md promises (grid steps per core, DMAs with bytes on the DMA
# engine tracks, waits), also after a deadlock; an unwritable path fails.
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
echo "1..$n"
[[ $fails == 0 ]]
