#!/usr/bin/env bash
# End-to-end tests of the tessera CLI, in TAP: exit codes, help, check/fmt/ops,
# run with every way of binding inputs and outputs, .npy errors, and that
# nothing is written when a run fails. Needs $TESSERA and $TSR_SOURCE_ROOT
# (set by meson); .npy files are made and inspected with python3 + numpy.
set -u

T=${TESSERA:?TESSERA must name the tessera binary}
SRC=${TSR_SOURCE_ROOT:?TSR_SOURCE_ROOT must name the source tree}
K=$SRC/tests/cli
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tessera-cli-XXXXXX")
trap 'umount "$tmp/tiny" 2>/dev/null; rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1

source "${TSR_SOURCE_ROOT:?}/tests/cli/tap.sh"
find_numpy_python

# t_in FILE ARGS...: the same with stdin from FILE.
t_in() { local f=$1; shift; "$T" "$@" >"$tmp/out" 2>"$tmp/err" <"$f"; rc=$?; }

context() { echo "exit status $rc" "stdout: $(head -c 1500 "$tmp/out")" "stderr: $(head -c 1500 "$tmp/err")"; }

# ok_if DESC COMMAND...: passes if the command succeeds.
ok_if() {
  local desc=$1
  shift
  local why
  if why=$("$@" 2>&1); then pass "$desc"; else fail "$desc" "$why" "$(context)"; fi
}

# py SCRIPT: runs python with numpy in $tmp; the script sees np.
py() { "$PY" -c "import numpy as np, sys
$1"; }

absent() { [[ ! -e $1 ]] || { echo "$1 exists"; return 1; }; }

# ---- version and help ------------------------------------------------------
t --version
expect "--version exits 0" 0
ok_if "--version prints the version" grep -qE '^tessera [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/out"

t --help
expect "--help exits 0" 0
ok_if "--help lists the commands" grep -q 'check' "$tmp/out"
cp "$tmp/out" "$tmp/main_help"
# Every command the dispatcher knows (the list its usage error prints) has
# its line in --help, and its own help.
t
commands=$(sed -n 's/^Usage: tessera COMMAND \[OPTIONS\] \[ARGS\]  (\(.*\))$/\1/p' "$tmp/err" | tr -d ,)
ok_if "the usage error names the commands" test -n "$commands"
for cmd in $commands; do
  ok_if "--help lists '$cmd'" grep -qE "^  $cmd +[a-z]" "$tmp/main_help"
  [[ $cmd == help ]] && continue
  t help "$cmd"
  ok_if "help $cmd shows its usage" grep -q "Usage: tessera $cmd" "$tmp/out"
done

t help
expect "help exits 0" 0

for cmd in run check fmt ops; do
  t "$cmd" --help
  expect "$cmd --help exits 0" 0
  ok_if "$cmd --help shows its usage and options" \
    bash -c "grep -q 'Usage: tessera $cmd' '$tmp/out' && grep -q -- '--help' '$tmp/out' && grep -q 'Example' '$tmp/out'"
  cp "$tmp/out" "$tmp/help1"
  t help "$cmd"
  ok_if "help $cmd equals $cmd --help" cmp -s "$tmp/out" "$tmp/help1"
done
t run -h
expect "run -h exits 0" 0

# Every option of the run/hash option table (tools/run_options.c) is in the
# help of run or hash and in docs/cli.md.
"$T" run --help >"$tmp/help_run"
"$T" hash --help >>"$tmp/help_run"
# (--out must not count as found through --out-dir: the name ends at a
# character that cannot continue an option name.)
mapfile -t table_options < <(sed -n 's/^ *{"\([a-z-]*\)", .*/\1/p' "$SRC/tools/run_options.c")
ok_if "the run/hash option table lists at least 27 options" test "${#table_options[@]}" -ge 27
for opt in "${table_options[@]}"; do
  pattern="--$opt([^a-z-]|\$)"
  if grep -qE -- "$pattern" "$tmp/help_run" && grep -qE -- "$pattern" "$SRC/docs/cli.md"; then
    pass "option --$opt is in the help and in docs/cli.md"
  else
    fail "option --$opt is in the help and in docs/cli.md" \
      "help: $(grep -cE -- "$pattern" "$tmp/help_run"), docs: $(grep -cE -- "$pattern" "$SRC/docs/cli.md")"
  fi
done

# ---- usage errors ------------------------------------------------------------
t
expect "no command is a usage error" 2
t frobnicate
expect "unknown command is a usage error" 2 "unknown command 'frobnicate'"
t help frobnicate
expect "help for an unknown command is a usage error" 2
t run "$K/scale.tsr" --bogus
expect "unknown option is a usage error" 2 "unknown option '--bogus'"
t run "$K/scale.tsr" --random-inputs
expect "option without its value is a usage error" 2 "'--random-inputs' needs a value"
t run "$K/scale.tsr" --random-inputs -3
expect "negative seed is a usage error" 2 "non-negative integer"
t run "$K/scale.tsr" --random-inputs 1 --uninit maybe
expect "bad --uninit is a usage error" 2 "'nan' or 'zero'"
t run "$K/scale.tsr" --random-inputs 1 --chip v99
expect "unknown chip is a usage error" 2 "unknown chip 'v99'"
t run "$K/scale.tsr" --random-inputs 1 --max-errors many
expect "bad --max-errors is a usage error" 2 "positive integer"
t run "$K/scale.tsr" --random-inputs 1 --quiet=yes
expect "value for a flag is a usage error" 2 "takes no value"
t run --random-inputs 1
expect "missing kernel file is a usage error" 2 "missing the kernel file"
t run "$K/scale.tsr" "$K/multi.tsr" --random-inputs 1
expect "two kernel files is a usage error" 2 "one kernel file expected"
t run "$tmp/no-such.tsr" --random-inputs 1
expect "unreadable kernel file is a usage error" 2 "no-such.tsr"
t run "$K/scale.tsr" --in x
expect "--in without NAME=FILE is a usage error" 2 "NAME=FILE"
t check
expect "check without files is a usage error" 2
t fmt
expect "fmt without files is a usage error" 2
t fmt -i --check "$K/scale.tsr"
expect "fmt -i --check is a usage error" 2
t ops extra
expect "ops with an argument is a usage error" 2

# ---- check --------------------------------------------------------------------
t check "$K/scale.tsr" "$K/multi.tsr"
expect "check of valid files exits 0" 0
ok_if "check reports each valid file" grep -q 'multi.tsr: ok (2 kernels)' "$tmp/out"
t check "$K/parse_error.tsr"
expect "check of a parse error exits 1 with file:line:col" 1 'parse_error\.tsr:5:[0-9]+: error: '
t check "$K/verify_error.tsr"
expect "check of a verify error exits 1 with file:line:col" 1 'verify_error\.tsr:6:[0-9]+: error: '
t check "$K/scale.tsr" "$K/parse_error.tsr" "$K/verify_error.tsr"
expect "check of several files reports every failing file" 1 'verify_error\.tsr:6:'
ok_if "check of several files reports the first failing file too" grep -q 'parse_error.tsr:5:' "$tmp/err"
t_in "$K/scale.tsr" check -
expect "check - reads stdin" 0
t check "$tmp/no-such.tsr"
expect "check of a missing file is a usage error" 2 "no-such.tsr"
t check -q "$K/scale.tsr"
expect "check -q of a valid file exits 0" 0
ok_if "check -q prints nothing for valid files" test ! -s "$tmp/out"
t check "$SRC/tests/diagnostics/warnings/reduction_along_parallel.tsr"
expect "check of a sum along a parallel dim: its warning, at the output's index map; exit 0" 0 \
  'reduction_along_parallel\.tsr:4:7: warning: kernel @reduction_along_parallel, grid point \(0\): out %s: every step along grid dimension 0 \(parallel, 4 steps\)'
ok_if "... and the file is still ok" grep -q 'reduction_along_parallel.tsr: ok (1 kernel)' "$tmp/out"
t check "$K/scale.tsr"
ok_if "check of a kernel without such outputs prints nothing on stderr" test ! -s "$tmp/err"

# ---- fmt --------------------------------------------------------------------------
t fmt --check "$K/scale.tsr" "$K/multi.tsr"
expect "fmt --check of canonical files exits 0" 0
t fmt --check "$K/noncanonical.tsr"
expect "fmt --check of a non-canonical file exits 1" 1 "noncanonical.tsr: not in canonical form"
t fmt "$K/noncanonical.tsr"
expect "fmt prints canonical text" 0
ok_if "fmt output equals the canonical file" cmp "$tmp/out" "$K/scale.tsr"
t_in "$K/noncanonical.tsr" fmt -
ok_if "fmt - reads stdin" cmp "$tmp/out" "$K/scale.tsr"
cp "$K/noncanonical.tsr" "$tmp/rewrite.tsr"
chmod 640 "$tmp/rewrite.tsr"
t fmt -i "$tmp/rewrite.tsr"
expect "fmt -i exits 0" 0
ok_if "fmt -i rewrites the file canonically" cmp "$tmp/rewrite.tsr" "$K/scale.tsr"
ok_if "fmt -i keeps the file mode" test "$(stat -c %a "$tmp/rewrite.tsr")" = 640
ok_if "fmt -i leaves no temporary files" bash -c "! ls '$tmp' | grep -q 'rewrite.tsr.tmp'"
t fmt --check "$tmp/rewrite.tsr"
expect "fmt --check accepts the rewritten file" 0
t fmt "$K/parse_error.tsr"
expect "fmt of a parse error exits 1" 1 'parse_error\.tsr:5:[0-9]+: error: '

# ---- ops --------------------------------------------------------------------------
t ops
expect "ops exits 0" 0
ok_if "ops lists load and dot" bash -c "grep -q '^load ' '$tmp/out' && grep -q '^dot ' '$tmp/out'"
t ops --markdown
expect "ops --markdown exits 0" 0
sed -n '/<!-- BEGIN GENERATED OP TABLE -->/,/<!-- END GENERATED OP TABLE -->/p' "$SRC/docs/ir.md" |
  sed '1d;$d' >"$tmp/doc_table"
if cmp -s "$tmp/out" "$tmp/doc_table"; then
  pass "ops --markdown equals the generated block of docs/ir.md"
else
  fail "ops --markdown equals the generated block of docs/ir.md" \
    "regenerate it: paste 'tessera ops --markdown' between the markers" \
    "$(diff "$tmp/doc_table" "$tmp/out" | head -20)"
fi
t ops
cp "$tmp/out" "$tmp/ops_text"
t ops --json
expect "ops --json exits 0" 0
ok_if "ops --json parses as JSON and lists every op 'tessera ops' lists, in order" \
  python3 -c '
import json, sys
ops = json.load(open(sys.argv[1]))
listed = [line.split()[0] for line in open(sys.argv[2]).read().splitlines()[1:]]
names = [o["mnemonic"] for o in ops]
assert names == listed, "json %s\nops  %s" % (names, listed)
for o in ops:
    for key, kind in [("syntax", str), ("rule", str), ("min_operands", int),
                      ("max_operands", int), ("results", int), ("regions", int),
                      ("flags", list), ("synopsis", str)]:
        assert isinstance(o.get(key), kind), "%s: %s is %r" % (o["mnemonic"], key, o.get(key))
    assert o["syntax"] == o["syntax"].lower() and o["rule"] == o["rule"].lower(), o
by_name = {o["mnemonic"]: o for o in ops}
assert by_name["add"]["max_operands"] == 2 and "pure" in by_name["add"]["flags"], by_name["add"]
assert by_name["for"]["regions"] == 1 and by_name["for"]["results"] == -1, by_name["for"]
assert "\"" in by_name["print"]["synopsis"], by_name["print"]
' "$tmp/out" "$tmp/ops_text"
t ops --markdown --json
expect "ops --markdown --json is a usage error" 2 "exclude each other"

# ---- run: random inputs and printing ---------------------------------------------------
t run "$K/scale.tsr" --random-inputs 1
expect "run with --random-inputs exits 0" 0 '^tessera: @scale: 2 grid steps, [0-9]+ ops, .* blocks? in, .* blocks? out, .* copied, .* VMEM in use, .* ms$'
ok_if "run prints the output's name and type" grep -q '^%y: f32\[16, 128\]$' "$tmp/out"
ok_if "run prints elements numpy-style" grep -qE '^  \[\[ *-?[0-9]' "$tmp/out"
ok_if "run prints statistics over finite values" grep -qE 'finite values: min -?[0-9.e+-]+, max [0-9.e+-]+, mean -?[0-9.e+-]+; 0 NaN' "$tmp/out"
cp "$tmp/out" "$tmp/first_run"
t run "$K/scale.tsr" --random-inputs=1 --quiet
ok_if "random inputs are deterministic (and --opt=value works)" cmp "$tmp/out" "$tmp/first_run"
ok_if "--quiet prints no summary" test ! -s "$tmp/err"
t run "$K/scale.tsr" --random-inputs 2 -q
expect "run with another seed exits 0" 0
ok_if "another seed gives other data" bash -c "! cmp -s '$tmp/out' '$tmp/first_run'"
t run "$K/scale.tsr" --random-inputs 1 --uninit zero --no-check --shuffle-parallel 7 --chip v4 --max-errors 3 -q
expect "interpreter options are accepted" 0
ok_if "interpreter options do not change a correct kernel's result" cmp "$tmp/out" "$tmp/first_run"
t run "$K/scale.tsr" --random-inputs 1 --check --chip=v5p -q
expect "--check and --chip=v5p are accepted" 0
t run "$K/scale.tsr" --random-inputs 1 --parallel-order 1,0 -q
expect "--parallel-order is accepted" 0
ok_if "--parallel-order does not change a correct kernel's result" cmp "$tmp/out" "$tmp/first_run"
t run "$K/scale.tsr" --random-inputs 1 --parallel-order 0,0 -q
expect "a --parallel-order that is no permutation fails the run" 1 "not a permutation"
t run "$K/scale.tsr" --random-inputs 1 --parallel-order 1,x -q
expect "a --parallel-order that is not integers is a usage error" 2 "comma-separated"
t_in "$K/scale.tsr" run - --random-inputs 1 -q
expect "run - reads the kernel from stdin" 0
ok_if "run - gives the same result" cmp "$tmp/out" "$tmp/first_run"
t run "$K/ints.tsr" --random-inputs 3
expect "run of an integer kernel with a prefetch operand exits 0" 0
ok_if "run prints booleans as True/False" grep -qE 'True|False' "$tmp/out"
ok_if "run prints integer statistics" grep -qE '^  min -?[0-9]+, max -?[0-9]+, mean' "$tmp/out"
if [[ -f $SRC/kernels/examples/gather_prefetch.tsr ]]; then
  t run "$SRC/kernels/examples/gather_prefetch.tsr" --random-inputs 5 -q
  expect "random prefetch values index valid blocks" 0
fi

# ---- run: kernel selection --------------------------------------------------------------
t run "$K/multi.tsr" --random-inputs 1
expect "a file with several kernels needs --kernel" 2 '@first, @second'
t run "$K/multi.tsr" --kernel second --random-inputs 1 -q
expect "--kernel picks a kernel" 0
t run "$K/multi.tsr" --kernel @first --random-inputs 1 -q
expect "--kernel accepts @name" 0
t run "$K/multi.tsr" --kernel third --random-inputs 1
expect "--kernel with an unknown name is a usage error" 2 'no kernel named @third'

# ---- run: missing and unknown operands ---------------------------------------------------
t run "$K/scale.tsr"
expect "run without input data is a usage error naming the input" 2 'no data for input %x'
t run "$K/ints.tsr" --out-dir "$tmp/never"
expect "every missing input is named" 2 'inputs %p, %a, %m'
ok_if "nothing is written when inputs are missing" absent "$tmp/never"
t run "$K/scale.tsr" --random-inputs 1 --in nope=x.npy
expect "--in with an unknown operand is a usage error" 2 'no operand %nope; its inputs are: %x'
t run "$K/scale.tsr" --random-inputs 1 --in y=x.npy
expect "--in naming an output is a usage error" 2 '%y is not an input'
t run "$K/scale.tsr" --random-inputs 1 --out x=x.npy
expect "--out naming an input is a usage error" 2 '%x is not an output'
t run "$K/scale.tsr" --random-inputs 1 --out y=a.npy --out y=b.npy
expect "--out given twice is a usage error" 2 'given twice'
t run "$K/bf16.tsr" --random-inputs 1 --out y=same.npy --out f=same.npy
expect "two outputs to one file is a usage error" 2 'both write same.npy'
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/no-dir/y.npy"
expect "--out into a missing directory is a usage error" 2 'does not exist'
t run "$K/scale.tsr" --random-inputs 1 --in-dir "$tmp/no-dir"
expect "--in-dir that does not exist is a usage error" 2 'no such directory'

# ---- run: kernel errors ---------------------------------------------------------------------
t run "$K/kernel_error.tsr" --random-inputs 1 --out "y=$tmp/kerr.npy" --out-dir "$tmp/kerr_dir"
expect "a kernel error exits 1" 1 'error: '
ok_if "every diagnostic is printed" test "$(grep -c 'error: ' "$tmp/err")" -ge 2
ok_if "nothing is written after a kernel error (--out)" absent "$tmp/kerr.npy"
ok_if "nothing is written after a kernel error (--out-dir)" absent "$tmp/kerr_dir"
# ---- run: warnings (legal but suspicious kernels exit 0; --strict: 1) -------------------------
W=$SRC/tests/diagnostics/warnings
t run "$W/output_never_written.tsr" --random-inputs 1 --out-dir "$tmp/warn_dir" -q
expect "an output never fully written is a warning: exit 0" 0 \
  'output_never_written\.tsr:4:[0-9]+: warning: .*1024 of 2048 output elements were never written'
ok_if "the outputs are written despite a warning" test -f "$tmp/warn_dir/y.npy"
t run "$W/output_never_written.tsr" --random-inputs 1 --out-dir "$tmp/strict_dir" -q --strict
expect "--strict makes that warning an error: exit 1" 1 \
  'error: .*never written.*\[a warning, an error with --strict\]'
ok_if "nothing is written when --strict fails a run" absent "$tmp/strict_dir"
t run "$W/read_fresh_output_block.tsr" --random-inputs 1 -q
expect "reading a fresh output block before writing it is a warning: exit 0" 0 \
  "warning: .*'load': read of uninitialized memory: %y\[0, 0\]"
t run "$W/uninit_partial_dma.tsr" --random-inputs 1 -q --uninit zero
expect "reading never-written scratch under --uninit zero is a warning: exit 0" 0 \
  'warning: .*read of uninitialized memory: %buf\[6, 0\]'
t run "$W/uninit_partial_dma.tsr" --random-inputs 1 -q
expect "reading never-written scratch under --uninit nan is a warning: exit 0" 0 \
  'warning: .*read of uninitialized memory: %buf\[6, 0\]'
TWO=$SRC/tests/diagnostics/bugs/two_cores_one_output_block.tsr
t run "$TWO" --random-inputs 1 -q --cores 2
expect "two cores writing one output block along a parallel dim: the parallel_revisit warning" 0 \
  'warning: .*out %s: every step along grid dimension 0 \(parallel, 2 steps\) writes this same output block'
ok_if "... and not the two-core warning too (one cause, one report)" \
  bash -c "! grep -q 'is written by core' '$tmp/err'"
t run "$TWO" --random-inputs 1 -q
expect "the same kernel on one core: the same warning (a megacore splits the dim)" 0 \
  'warning: .*out %s: every step along grid dimension 0 \(parallel, 2 steps\)'
t run "$TWO" --random-inputs 1 -q --cores 2 --detect-races
expect "two cores writing one output block: an error (a race) with --detect-races" 1 \
  'error: .*output block \[0, 0\] is written by core 1'
t run "$SRC/tests/lower/big_blocks.tsr" --kernel short_array --random-inputs 1 -q
expect "a block larger than its array runs: exit 0, no diagnostic" 0
ok_if "... and prints nothing on stderr" test ! -s "$tmp/err"

t run "$K/parse_error.tsr" --random-inputs 1
expect "run of a file with a parse error exits 1" 1 'parse_error\.tsr:5:[0-9]+: error: '
t run "$K/verify_error.tsr" --random-inputs 1
expect "run of a file with a verify error exits 1" 1 'verify_error\.tsr:6:[0-9]+: error: '
t run "$K/big_scratch.tsr" --random-inputs 1 --chip v4 --out-dir "$tmp/vmem_out"
expect "VMEM over the chip's budget exits 1" 1 'big_scratch\.tsr:.*VMEM'
ok_if "nothing is written when VMEM is over budget" absent "$tmp/vmem_out"
t run "$K/big_scratch.tsr" --random-inputs 1 --chip v5e -q
expect "the same kernel fits a chip with more VMEM" 0
mkdir -p "$tmp/blocker"
touch "$tmp/blocker/file"
t run "$K/scale.tsr" --random-inputs 1 --out-dir "$tmp/blocker/file/sub"
expect "an output directory that cannot be created exits 1" 1 'cannot create the output directory'

# ---- run: where outputs go ------------------------------------------------------------
# A regular file is replaced through a temporary file and rename; a symlink's
# target is replaced, not the link; a character device or FIFO is written
# into, never replaced (as root, `--out y=/dev/null` once replaced /dev/null
# with a regular file).
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/ref.npy" -q
expect "run --out to a new file exits 0" 0
t run "$K/scale.tsr" --random-inputs 1 --out y=/dev/null -q
expect "--out y=/dev/null exits 0" 0
ok_if "/dev/null is still a character device after --out y=/dev/null" test -c /dev/null
if [[ $(id -u) == 0 ]] && mknod "$tmp/null" c 1 3 2>/dev/null; then
  t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/null" -q
  expect "--out into a character device exits 0" 0
  ok_if "a character device output stays a character device" test -c "$tmp/null"
else
  skip "a character device output stays a character device" "needs root for mknod"
fi
"$T" run "$K/scale.tsr" --random-inputs 1 --out y=/dev/stdout -q </dev/null 2>"$tmp/err" |
  cat >"$tmp/piped.npy"
ok_if "--out y=/dev/stdout writes the .npy into a pipe" cmp "$tmp/piped.npy" "$tmp/ref.npy"

mkfifo "$tmp/fifo"
cat "$tmp/fifo" >"$tmp/from_fifo" &
reader=$!
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/fifo" -q
if [[ -p $tmp/fifo ]]; then
  : 1<>"$tmp/fifo" # ends the reader if tessera never opened the FIFO
  wait "$reader"
else
  kill "$reader" 2>/dev/null
  wait "$reader" 2>/dev/null
fi
expect "--out into a FIFO exits 0" 0
ok_if "a FIFO output stays a FIFO" test -p "$tmp/fifo"
ok_if "a FIFO output's reader gets the .npy" cmp "$tmp/from_fifo" "$tmp/ref.npy"

printf old >"$tmp/target.npy"
chmod 640 "$tmp/target.npy"
ln -s target.npy "$tmp/link.npy"
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/link.npy" -q
expect "--out through a symlink exits 0" 0
ok_if "a symlink output stays a symlink" test "$(readlink "$tmp/link.npy")" = target.npy
ok_if "a symlink output replaces the link's target" cmp "$tmp/target.npy" "$tmp/ref.npy"
ok_if "the link's target keeps its mode" test "$(stat -c %a "$tmp/target.npy")" = 640
mkdir -p "$tmp/links"
ln -s ../new_target.npy "$tmp/links/dangling.npy"
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/links/dangling.npy" -q
expect "--out through a dangling relative symlink exits 0" 0
ok_if "a dangling symlink output creates its target" \
  bash -c "[[ -L '$tmp/links/dangling.npy' ]] && cmp '$tmp/new_target.npy' '$tmp/ref.npy'"
mkdir -p "$tmp/out_is_dir"
t run "$K/scale.tsr" --random-inputs 1 --out "y=$tmp/out_is_dir" -q
expect "--out naming a directory exits 1" 1 'out_is_dir: is a directory'
ok_if "writing outputs leaves no temporary files" bash -c "! ls -R '$tmp' | grep -q '\.tmp-'"

cp "$K/noncanonical.tsr" "$tmp/fmt_target.tsr"
ln -s fmt_target.tsr "$tmp/fmt_link.tsr"
t fmt -i "$tmp/fmt_link.tsr"
expect "fmt -i through a symlink exits 0" 0
ok_if "fmt -i through a symlink keeps the link" test "$(readlink "$tmp/fmt_link.tsr")" = fmt_target.tsr
ok_if "fmt -i through a symlink rewrites its target" cmp "$tmp/fmt_target.tsr" "$K/scale.tsr"

# ---- run: outputs are all or nothing ------------------------------------------------------
# @bf16_double writes %y, then %f. When %f cannot be written, %y must not be
# either (nor an --out-dir the run created). A device that is always full:
# a copy of /dev/full made with mknod as root, /dev/full itself otherwise (a
# user who is not root could not replace it).
full=/dev/full
if [[ $(id -u) == 0 ]]; then
  full=$tmp/full
  mknod "$full" c 1 7 2>/dev/null || full=
fi
if [[ -n $full ]]; then
  t run "$K/bf16.tsr" --random-inputs 1 --out "y=$tmp/aon_y.npy" --out "f=$full"
  expect "a second output that cannot be written exits 1" 1 'No space left on device'
  ok_if "a failing second output leaves the first unwritten" absent "$tmp/aon_y.npy"
  printf old >"$tmp/aon_old.npy"
  t run "$K/bf16.tsr" --random-inputs 1 --out "y=$tmp/aon_old.npy" --out "f=$full"
  expect "a failing second output over an existing first exits 1" 1 'No space left on device'
  ok_if "a failing second output leaves an existing first as it was" \
    test "$(cat "$tmp/aon_old.npy")" = old
  t run "$K/bf16.tsr" --random-inputs 1 --out "f=$full" --out-dir "$tmp/aon_dir/sub"
  expect "a failing output with --out-dir exits 1" 1 'No space left on device'
  ok_if "a failing output removes the --out-dir the run created" absent "$tmp/aon_dir"
else
  for what in "exits 1" "leaves the first unwritten" "leaves an existing first" "removes --out-dir"; do
    skip "a failing second output: $what" "mknod of a full device failed"
  done
fi
# A full disk: a tiny tmpfs, filled up (root); a read-only directory otherwise.
if [[ $(id -u) == 0 ]] && mkdir "$tmp/tiny" && mount -t tmpfs -o size=64k tmpfs "$tmp/tiny" 2>/dev/null; then
  dd if=/dev/zero of="$tmp/tiny/filler" bs=4096 2>/dev/null
  t run "$K/bf16.tsr" --random-inputs 1 --out "y=$tmp/disk_y.npy" --out "f=$tmp/tiny/f.npy"
  expect "a second output on a full disk exits 1" 1 'No space left on device'
  ok_if "a second output on a full disk leaves the first unwritten" absent "$tmp/disk_y.npy"
  ok_if "a full disk keeps no temporary file" bash -c "! ls '$tmp/tiny' | grep -q 'tmp-'"
  umount "$tmp/tiny"
elif [[ $(id -u) != 0 ]]; then
  mkdir -p "$tmp/read_only"
  chmod 555 "$tmp/read_only"
  t run "$K/bf16.tsr" --random-inputs 1 --out "y=$tmp/disk_y.npy" --out "f=$tmp/read_only/f.npy"
  expect "a second output in a read-only directory exits 1" 1 'Permission denied'
  ok_if "a second output in a read-only directory leaves the first unwritten" absent "$tmp/disk_y.npy"
  ok_if "a read-only directory keeps no temporary file" \
    bash -c "! ls -A '$tmp/read_only' | grep -q ."
else
  for what in "exits 1" "leaves the first unwritten" "keeps no temporary file"; do
    skip "a second output on a full disk: $what" "mounting a tmpfs failed"
  done
fi

# ---- run: limits and messages -------------------------------------------------------------
t run "$tmp/no-such.tsr" --devices 16 --cores 32
expect "more than 256 cores is a usage error, found while parsing the options" 2 \
  '--devices 16 x --cores 32 is 512 simulated cores; a run has at most 256'
t run "$K/scale.tsr" --random-inputs 1 --devices 16 --cores 16 -q
expect "exactly 256 cores run" 0
awk 'BEGIN { for (i = 0; i < 100000; i++)
  printf "kernel @k%d\n  in %%x: f32[8] smem\n  out %%y: f32[8] smem\n{\n}\n", i }' >"$tmp/many.tsr"
t run "$tmp/many.tsr" --random-inputs 1
expect "a file of 100000 kernels needs --kernel" 2 \
  'the module has 100000 kernels \(@k0, @k1, @k2, @k3, @k4, @k5, @k6, @k7 and 99992 more\): name the one to run'
ok_if "the kernel list of 100000 kernels is short" test "$(wc -c <"$tmp/err")" -lt 400
t run "$tmp/many.tsr" --random-inputs 1 --kernel nope
expect "an unknown --kernel among 100000 kernels" 2 'no kernel named @nope; the module has 100000 kernels: @k0, .* and 99992 more'
ok_if "the kernel list after an unknown --kernel is short" test "$(wc -c <"$tmp/err")" -lt 400
# Out of memory says what and how much (it said "out of memory: out of
# memory"). 2^40 bytes cannot be allocated unless the kernel overcommits.
if [[ $(cat /proc/sys/vm/overcommit_memory 2>/dev/null) != 1 ]]; then
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}allocator_may_return_null=1" t run "$K/huge_input.tsr" --random-inputs 1
  expect "an input too large for memory exits 1" 1 \
    '^tessera run: out of memory: input %x: cannot allocate 1099511627776 bytes \(1\.00 TiB\) for an array of f32\[262144, 1048576\]$'
  ok_if "out of memory is said once" bash -c "! grep -q 'out of memory: out of memory' '$tmp/err'"
else
  skip "an input too large for memory exits 1" "vm.overcommit_memory is 1: the allocation would succeed"
  skip "out of memory is said once" "vm.overcommit_memory is 1"
fi

# ---- run with .npy files ----------------------------------------------------------------------
if [[ -z $PY ]]; then
  for what in "--in/--out" "--in-dir/--out-dir" "aliases" "bf16 round trip" "bad .npy inputs"; do
    skip "run with .npy files: $what" "python3 with numpy not found"
  done
  echo "1..$n"
  exit 0
fi

py "
rng = np.random.default_rng(0)
np.save('x.npy', rng.standard_normal((16, 128)).astype(np.float32))
np.save('x_f64.npy', rng.standard_normal((16, 128)))
np.save('x_i32.npy', np.zeros((16, 128), np.int32))
np.save('x_shape.npy', np.zeros((8, 128), np.float32))
np.save('x_be.npy', np.zeros((16, 128), '>f4'))
np.save('x_fortran.npy', np.asfortranarray(np.zeros((16, 128), np.float32)))
b = open('x.npy', 'rb').read()
open('x_trunc.npy', 'wb').write(b[:len(b) - 100])
open('x_magic.npy', 'wb').write(b'NOTNPY' + b[6:])
"

t run "$K/scale.tsr" --in x=x.npy --out y=y.npy
expect "run with --in/--out exits 0" 0
ok_if "the output of --out is 2x + 1" py "
x = np.load('x.npy'); y = np.load('y.npy')
assert y.dtype == np.float32 and y.shape == (16, 128), (y.dtype, y.shape)
assert np.array_equal(y, x * np.float32(2) + np.float32(1))"
ok_if "--out prints no arrays" test ! -s "$tmp/out"
t run "$K/scale.tsr" --in %x=x.npy --out %y=y2.npy -q
ok_if "%NAME works in --in/--out" cmp y.npy y2.npy

mkdir -p ins
cp x.npy ins/x.npy
t run "$K/scale.tsr" --in-dir ins --out-dir outs/nested
expect "run with --in-dir/--out-dir exits 0" 0
ok_if "--out-dir is created and holds NAME.npy" cmp outs/nested/y.npy y.npy
t run "$K/ints.tsr" --in-dir ins --random-inputs 4 --out-dir outs/ints -q
expect "inputs missing from --in-dir fall back to --random-inputs" 0
ok_if "every output goes to --out-dir" bash -c "[[ -f outs/ints/b.npy && -f outs/ints/c.npy && -f outs/ints/d.npy ]]"
ok_if "integer outputs have the declared dtypes" py "
assert np.load('outs/ints/b.npy').dtype == np.int32
assert np.load('outs/ints/c.npy').dtype == np.bool_
assert np.load('outs/ints/d.npy').dtype == np.uint8"
# The --in-dir copy of x has another shape: if it were read, the run would fail.
mkdir -p other_ins
cp x_shape.npy other_ins/x.npy
t run "$K/scale.tsr" --in x=x.npy --in-dir other_ins --out y=y3.npy -q
expect "--in with a conflicting --in-dir exits 0" 0
ok_if "--in takes precedence over --in-dir" cmp y3.npy y.npy

t run "$K/alias.tsr" --in x=x.npy --out y=ya.npy
expect "run of an aliased output exits 0" 0
ok_if "an aliased output starts as its input" py "
x = np.load('x.npy'); y = np.load('ya.npy')
assert np.array_equal(y[:8], x[:8] + np.float32(1))
assert np.array_equal(y[8:], x[8:])"

py "
rng = np.random.default_rng(1)
f = rng.standard_normal((4, 128)).astype(np.float32)
bits = (f.view(np.uint32) >> 16).astype(np.uint16)   # truncate to bf16
np.save('xb_u2.npy', bits)
np.save('xb_v2.npy', bits.view('V2'))
"
for form in u2 v2; do
  t run "$K/bf16.tsr" --in "x=xb_$form.npy" --out "y=yb_$form.npy" --out "f=fb_$form.npy"
  expect "bf16 input as <${form^} is accepted" 0
done
ok_if "bf16 round trip: outputs are <V2, bit-exact" py "
import struct
bits = np.load('xb_u2.npy')
hdr = open('yb_u2.npy', 'rb').read(128)
assert b\"'descr': '<V2'\" in hdr, hdr
y = np.load('yb_u2.npy').view(np.uint16)
xf = (bits.astype(np.uint32) << 16).view(np.float32)
want = ((xf * np.float32(2)).view(np.uint32) >> 16).astype(np.uint16)
assert np.array_equal(y, want)
assert np.array_equal(np.load('fb_u2.npy'), xf)
assert open('yb_u2.npy','rb').read() == open('yb_v2.npy','rb').read()"
if "$PY" -c 'import ml_dtypes' 2>/dev/null; then
  ok_if "bf16 output loads with ml_dtypes" py "
import ml_dtypes
y = np.load('yb_u2.npy').view(ml_dtypes.bfloat16)
assert y.dtype == ml_dtypes.bfloat16 and y.shape == (4, 128)"
else
  skip "bf16 output loads with ml_dtypes" "ml_dtypes not installed"
fi

# Bad inputs: each is a usage error naming the file, and nothing is written.
bad_input() {
  local desc=$1 file=$2 pattern=$3
  rm -rf out_bad
  t run "$K/scale.tsr" --in "x=$file" --out "y=$tmp/y_bad.npy" --out-dir out_bad
  expect "$desc: exit 2 naming the file" 2 "$file.*$pattern"
  if [[ -e $tmp/y_bad.npy || -e out_bad ]]; then
    fail "$desc: nothing is written" "an output exists"
  else
    pass "$desc: nothing is written"
  fi
}
bad_input "input of dtype <f8" x_f64.npy 'dtype <f8 is not supported'
bad_input "input of the wrong dtype" x_i32.npy 'dtype <i4 \(i32\) does not match: expected f32'
bad_input "input of the wrong shape" x_shape.npy 'shape \(8, 128\) does not match .* expected \(16, 128\)'
bad_input "truncated input" x_trunc.npy 'truncated: header says 8192 bytes of data, file has 8092'
bad_input "input with bad magic" x_magic.npy 'not a .npy file'
bad_input "big-endian input" x_be.npy 'big-endian'
bad_input "Fortran-order input" x_fortran.npy 'Fortran order'
bad_input "missing input file" no_such.npy 'cannot open'

# A header that claims 2^40 bytes of data in a 192-byte file: the claim is
# checked against the file before anything is allocated (it was allocated and
# zero-filled, or failed as "out of memory" without naming the file).
py "
hdr = b\"{'descr': '<f4', 'fortran_order': False, 'shape': (274877906944,), }\"
hdr += b' ' * (128 - 10 - len(hdr) - 1) + b'\n'
open('x_lie.npy', 'wb').write(b'\x93NUMPY\x01\x00' + bytes([len(hdr), 0]) + hdr + bytes(64))
"
bad_input "a header claiming 2^40 bytes in a small file" x_lie.npy \
  'truncated: header says 1099511627776 bytes of data, file has 64'
cat x_lie.npy | "$T" run "$K/scale.tsr" --in x=/dev/stdin --out "y=$tmp/y_lie.npy" >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "a header claiming 2^40 bytes through a pipe: exit 2 naming the file" 2 \
  '/dev/stdin: truncated: header says 1099511627776 bytes of data, the stream ended after 64'
cat x.npy | "$T" run "$K/scale.tsr" --in x=/dev/stdin --out "y=$tmp/y_pipe.npy" -q >"$tmp/out" 2>"$tmp/err"
rc=$?
expect "an input read through a pipe exits 0" 0
ok_if "an input read through a pipe gives the same result" cmp "$tmp/y_pipe.npy" y.npy

# Run bounds (--max-steps, --timeout, Ctrl-C) in the interpreter.
source "$K/bounds.sh"
bounds_tests interp

echo "1..$n"
