#!/usr/bin/env bash
# `tessera run --trace`: the file is valid Chrome trace JSON with the events
# docs/dma.md promises (grid steps per core, DMAs with bytes on the DMA
# engine tracks, waits), also after a deadlock; an unwritable path fails;
# the file is written as --out writes one (a temporary file renamed into
# place, no link or FIFO another user planted in a sticky directory, no
# wait for a FIFO's reader); an existing file is refused unless --force, a
# directory gets a new file named by the time; on a terminal a long run
# draws a progress line on stderr, never when stderr is a file.
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
trace() { # path; the exit status of a run tracing to it (124: it hung), --force
  timeout 120 "$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --force --trace "$1" \
    >/dev/null 2>"$tmp/last.err"
}

echo old >"$tmp/t.json"
ln "$tmp/t.json" "$tmp/t.hardlink"
"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace "$tmp/t.json" \
  >/dev/null 2>"$tmp/exists.err"
check "a trace over an existing file without --force is a usage error" test $? -eq 2
check "which says so and names --force" grep -q "t.json: the file exists; give --force" \
  "$tmp/exists.err"
check "and leaves the file alone" test "$(cat "$tmp/t.json")" = old
ln -s "$tmp/t.json" "$tmp/t.symlink"
"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace "$tmp/t.symlink" \
  >/dev/null 2>&1
check "so is a link to an existing file" test $? -eq 2
trace "$tmp/t.json"
check "with --force, a trace over an existing file exits 0" test $? -eq 0
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

mkdir "$tmp/traces"
"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 --trace "$tmp/traces" \
  >/dev/null 2>"$tmp/dir.err"
check "a trace into a directory exits 0" test $? -eq 0
check "and names its new file, trace-YYYYMMDD-HHMMSS.json" \
  grep -Eq "trace written to $tmp/traces/trace-[0-9]{8}-[0-9]{6}\.json$" "$tmp/dir.err"
"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace "$tmp/traces/" \
  >/dev/null 2>&1
"$tessera" run ok/one_wait_two_dmas.tsr --random-inputs 1 -q --trace "$tmp/traces" \
  >/dev/null 2>&1
check "three traces into it make three files, none overwritten" \
  test "$(ls "$tmp/traces" | grep -Ec '^trace-[0-9]{8}-[0-9]{6}(-[0-9]+)?\.json$')" -eq 3
for f in "$tmp"/traces/*.json; do
  check "$(basename "$f") is a trace" valid_trace "$f"
done

# The progress line: the spinning kernel runs until its timeout; under a
# pseudo-terminal with --progress-after 0 stderr gets the line (grid step
# 1 of 3 begun), erased at the end; with stderr a file, never.
cd "$root/tests/cli"
under_pty() { # output file, then the arguments of tessera
  python3 - "$tessera" "$@" <<'PY'
import os, pty, sys
tessera, out, args = sys.argv[1], sys.argv[2], sys.argv[3:]
pid, fd = pty.fork()
if pid == 0:
    os.execv(tessera, [tessera] + args)
data = b""
while True:
    try:
        chunk = os.read(fd, 4096)
    except OSError:
        break
    if not chunk:
        break
    data += chunk
os.waitpid(pid, 0)
open(out, "wb").write(data)
PY
}
under_pty "$tmp/pty.out" run spin.tsr --kernel spin --timeout 0.6 --progress-after 0
check "under a pty, a long run draws the progress line" \
  grep -aq "tessera: grid step 1/3 (33%), .* steps/s, ETA" "$tmp/pty.out"
check "redrawn in place and erased at the end" grep -aq $'\r\033\\[K' "$tmp/pty.out"
"$tessera" run spin.tsr --kernel spin --timeout 0.6 --progress-after 0 >/dev/null 2>"$tmp/file.err"
under_pty "$tmp/pty_q.out" run spin.tsr --kernel spin --timeout 0.6 --progress-after 0 -q
check "under a pty with -q there is none" bash -c "! grep -aq 'grid step 1/3' '$tmp/pty_q.out'"
check "(that run did stop at its timeout)" grep -aq "timeout of 0.6 s" "$tmp/pty_q.out"
under_pty "$tmp/pty_slow.out" run spin.tsr --kernel spin --timeout 0.6
check "nor for a run shorter than --progress-after (default 1 s)" \
  bash -c "! grep -aq 'grid step 1/3' '$tmp/pty_slow.out'"
check "with stderr a file there is none" bash -c "! grep -q 'grid step 1/3' '$tmp/file.err'"
check "(the run did stop at its timeout)" grep -q "timeout of 0.6 s" "$tmp/file.err"

echo "1..$n"
[[ $fails == 0 ]]
