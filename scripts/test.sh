#!/usr/bin/env bash
# THE test command. Installs missing packages (scripts/setup.sh --deps-only),
# then builds and runs:
#   build-ci/    the whole suite, debugoptimized, warnings are errors
#   build-asan/  the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   build-tsan/  suite 'cache' only (the multi-threaded code), under
#                ThreadSanitizer; only the programs that suite needs are built.
#                A test program joins it by being registered with
#                suite : 'cache' in tests/meson.build.
# and prints totals over the three runs; the last line is "N passed, N failed".
# Sanitizers stop at their first report (halt_on_error) and fail the test.
# Exit status 1 if anything failed (a build failure counts as a failure).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

extra_failures=()

if ! bash scripts/setup.sh --deps-only; then
  echo "test.sh: installing the dependencies failed" >&2
  echo "0 passed, 1 failed"
  exit 1
fi

# configure DIR OPTIONS...: meson setup, reconfiguring (or wiping, if the
# directory is from another meson) an existing build directory.
configure() {
  local dir=$1
  shift
  if [[ -f $dir/meson-private/coredata.dat ]]; then
    meson setup --reconfigure "$dir" "$@" || meson setup --wipe "$dir" "$@"
  else
    meson setup "$dir" "$@"
  fi
}

# suite DIR [--only SUITE] TEST-OPTIONS -- SETUP-OPTIONS...
# With --only, builds just what the tests of SUITE need and runs those tests.
suite() {
  local dir=$1
  shift
  local only=
  if [[ $1 == --only ]]; then
    only=$2
    shift 2
  fi
  local test_opts=()
  while [[ $1 != -- ]]; do
    test_opts+=("$1")
    shift
  done
  shift
  echo "=== $dir: configure"
  rm -f "$dir/meson-logs/testlog.json"
  if ! configure "$dir" "$@"; then
    extra_failures+=("$dir: meson setup failed")
    return
  fi
  local build=(meson compile -C "$dir") outputs=()
  if [[ -n $only ]]; then
    test_opts+=(--suite "$only")
    mapfile -t outputs < <(
      python3 scripts/count-tests.py --list-suite-outputs "$dir" "$only")
    if ((${#outputs[@]} == 0)); then
      extra_failures+=("$dir: no test program in suite $only")
      return
    fi
    build=(ninja -C "$dir" "${outputs[@]}")
  fi
  echo "=== $dir: build${only:+ (suite $only)}"
  local names=()
  if ! "${build[@]}"; then
    # Count the broken build once, build what can be built, and run the tests
    # whose programs exist; each test left unbuilt counts as a failure.
    extra_failures+=("$dir: build failed")
    ninja -C "$dir" -k 0 "${outputs[@]+"${outputs[@]}"}" >/dev/null 2>&1
    local name
    while IFS= read -r name; do
      extra_failures+=("$dir: test $name was not built")
    done < <(python3 scripts/count-tests.py --list-unbuilt "$dir" ${only:+"$only"})
    mapfile -t names < <(python3 scripts/count-tests.py --list-built "$dir" ${only:+"$only"})
    if ((${#names[@]} == 0)); then
      return
    fi
  fi
  echo "=== $dir: test"
  # Failures are counted from the test log below, not from the exit status.
  meson test -C "$dir" --no-rebuild --print-errorlogs \
    "${test_opts[@]+"${test_opts[@]}"}" "${names[@]+"${names[@]}"}" || true
}

suite build-ci -- --buildtype=debugoptimized --werror

ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  suite build-asan --timeout-multiplier 4 -- \
    --buildtype=debugoptimized -Db_sanitize=address,undefined \
    -Db_lundef=false --werror

# ThreadSanitizer exits with status 66 at its first report, which meson
# counts as a failed test. second_deadlock_stack: lock-order reports show
# where both locks were taken.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  suite build-tsan --only cache --timeout-multiplier 4 -- \
    --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false --werror

count_args=()
for f in "${extra_failures[@]+"${extra_failures[@]}"}"; do
  count_args+=(--extra-failure "$f")
done
echo "=== totals"
exec python3 scripts/count-tests.py "${count_args[@]+"${count_args[@]}"}" \
  build-ci build-asan build-tsan
