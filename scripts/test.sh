#!/usr/bin/env bash
# THE test command. Installs missing packages (scripts/setup.sh --deps-only),
# then builds and runs the whole suite twice:
#   build-ci/    debugoptimized, warnings are errors
#   build-asan/  the same under AddressSanitizer + UndefinedBehaviorSanitizer
# and prints totals over both runs; the last line is "N passed, N failed".
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

# suite NAME DIR TEST-OPTIONS -- SETUP-OPTIONS...
suite() {
  local dir=$1
  shift
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
  echo "=== $dir: build"
  local names=()
  if ! meson compile -C "$dir"; then
    # Count the broken build once, build what can be built, and run the tests
    # whose programs exist; each test left unbuilt counts as a failure.
    extra_failures+=("$dir: build failed")
    ninja -C "$dir" -k 0 >/dev/null 2>&1
    local name
    while IFS= read -r name; do
      extra_failures+=("$dir: test $name was not built")
    done < <(python3 scripts/count-tests.py --list-unbuilt "$dir")
    mapfile -t names < <(python3 scripts/count-tests.py --list-built "$dir")
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

count_args=()
for f in "${extra_failures[@]+"${extra_failures[@]}"}"; do
  count_args+=(--extra-failure "$f")
done
echo "=== totals"
exec python3 scripts/count-tests.py "${count_args[@]+"${count_args[@]}"}" \
  build-ci build-asan
