# Run bounds through the CLI, for one backend (sourced by tests/cli/test_cli.sh
# for the interpreter and tests/lower/test_lower_cli.sh for the cpu backend;
# needs tap.sh's helpers, $T, $SRC and $tmp). Kernels that never end
# (tests/cli/spin.tsr) are stopped by --max-steps, --timeout and Ctrl-C with
# a kernel error naming the op, its location and the grid point; both
# backends count steps alike and print the same reports.
bounds_tests() { # bounds_tests BACKEND
  local b=$1 spin=$SRC/tests/cli/spin.tsr
  bounds_check() { # DESC STATUS TEXT
    if [ "$rc" -eq "$2" ] && grep -qF -- "$3" "$tmp/err"; then
      pass "$b: $1"
    else
      fail "$b: $1" "exit status $rc (expected $2)" "stderr: $(head -c 800 "$tmp/err")" \
        "expected: $3"
    fi
  }
  t run "$spin" --kernel spin --backend "$b" --max-steps 1000 -q
  bounds_check "an infinite while loop stops after --max-steps" 1 \
    "spin.tsr:9:3: error: kernel @spin, grid point (0): 'while': run stopped after 1000 steps (--max-steps 1000)"
  t run "$spin" --kernel spin --backend "$b" --max-steps 1 -q
  bounds_check "... the first grid step is step 1, the first iteration step 2" 1 \
    "grid point (0): 'while': run stopped after 1 step (--max-steps 1)"
  t run "$SRC/tests/cli/scale.tsr" --random-inputs 1 --backend "$b" --max-steps 1 -q
  bounds_check "a grid without loops stops at its second grid step" 1 \
    "grid point (1): the grid step: run stopped after 1 step (--max-steps 1)"
  t run "$SRC/tests/cli/scale.tsr" --random-inputs 1 --backend "$b" --max-steps 2 -q
  if [ "$rc" -eq 0 ]; then pass "$b: ... and runs with steps enough"; else
    fail "$b: ... and runs with steps enough" "exit status $rc"; fi
  t run "$spin" --kernel spin --backend "$b" --timeout 0.3 -q
  bounds_check "an infinite while loop stops at --timeout" 1 \
    "kernel @spin, grid point (0): 'while': run stopped: timeout of 0.3 s reached (--timeout 0.3)"
  t run "$spin" --kernel spin_wait --cores 2 --backend "$b" --max-steps 5000 -q
  bounds_check "two cores, one blocked in a wait: --max-steps stops both" 1 \
    "kernel @spin_wait, core 1, grid point (1): 'while': run stopped after 5000 steps (--max-steps 5000)"
  t run "$spin" --kernel spin_wait --cores 2 --backend "$b" --timeout 0.3 -q
  bounds_check "... and so does --timeout" 1 \
    "core 1, grid point (1): 'while': run stopped: timeout of 0.3 s reached"
  # Ctrl-C: sent once the kernel has printed "spinning" (its handler is
  # installed by then; at most 30 s of waiting for the line), then again
  # until the run ends.
  "$T" run "$spin" --kernel spin --backend "$b" -q >"$tmp/out" 2>"$tmp/err" </dev/null &
  local pid=$! i
  for i in $(seq 150); do
    grep -q spinning "$tmp/err" && break
    sleep 0.2
  done
  for i in $(seq 100); do
    kill -INT "$pid" 2>/dev/null || break
    sleep 0.2
  done
  wait "$pid"
  rc=$?
  bounds_check "SIGINT ends an infinite loop cleanly: status 130 and the report" 130 \
    "kernel @spin, grid point (0): 'while': run stopped: cancelled"
}
