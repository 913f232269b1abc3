#!/usr/bin/env bash
# THE test command. Installs missing packages (scripts/setup.sh --deps-only),
# then builds and runs:
#   build-ci/    the whole suite, debugoptimized, warnings are errors
#   build-asan/  the same under AddressSanitizer + UndefinedBehaviorSanitizer
#   build-clang/ the same built with clang under its UndefinedBehaviorSanitizer
#                (it sees what gcc's does not, such as an offset added to a
#                null pointer), without the cpu backend (-Dmlir=disabled)
#   build-tsan/  suite 'cache' only (the multi-threaded code), under
#                ThreadSanitizer; only the programs that suite needs are built.
#                A test program joins it by being registered with
#                suite : 'cache' in tests/meson.build.
#   python/tests the Python package's pytest suite, in .venv (made by
#                setup.sh --deps-only), on build-ci/libtessera.so (without
#                python/tests/tpu)
#   python/tests/tpu  the TPU proof (docs/tpu.md, "Proved with libtpu"): every
#                kernel's Mosaic module compiled by libtpu for TPU chips,
#                its own pytest run after the others
#   build-wheel/ the package as a user gets it (scripts/test-wheel.sh): sdist,
#                wheel, auditwheel, a fresh venv outside the tree, the README's
#                example and python/tests against the installed wheel
# Compiled kernels run with guard bytes around their arrays (TESSERA_GUARD=1:
# meson test's default setup, tests/meson.build, and the pytest runs below).
# Prints totals over the eight runs; the last line is "N passed, N failed"
# (each TAP case and each pytest test counts once; skips are counted apart).
# Sanitizers stop at their first report (halt_on_error) and fail the test.
# Exit status 1 if anything failed (a build failure counts as a failure).
set -uo pipefail

usage() { sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
case ${1:-} in
  -h | --help) usage; exit 0 ;;
  '') ;;
  *) echo "test.sh: unknown argument '$1' (it takes none)" >&2; usage >&2; exit 2 ;;
esac

cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec </dev/null

extra_failures=()

# The host, so that a failure can be tied to it: results must not depend on
# the CPU (docs/lowering.md, "Target features"), and when they do, the CPU
# model and its vector features are the first thing to compare.
host_cpu() {
  local model flags
  model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n1)
  flags=$(sed -n 's/^flags[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -n1 |
    tr ' ' '\n' | grep -E '^(sse4_2|avx|avx2|fma|f16c|avx512.*|amx.*|avx_vnni.*)$' | tr '\n' ' ')
  echo "test.sh: host: ${model:-$(uname -m)}, $(nproc) cores"
  echo "test.sh: vector features: ${flags:-none listed}"
}
host_cpu

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

UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 CC=clang \
  suite build-clang -- \
    --buildtype=debugoptimized -Dmlir=disabled -Db_sanitize=undefined \
    -Db_lundef=false --werror

# ThreadSanitizer exits with status 66 at its first report, which meson
# counts as a failed test. second_deadlock_stack: lock-order reports show
# where both locks were taken.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  suite build-tsan --only cache --timeout-multiplier 4 -- \
    --buildtype=debugoptimized -Db_sanitize=thread -Db_lundef=false --werror

# The Python package's tests, on the library of build-ci/ (JAX on its cpu
# platform). Counted from pytest's JUnit XML report: passed = tests - failures
# - errors - skipped (errors include collection errors); a run that could not
# start, ended otherwise than "tests ran" (exit status 0 or 1; 5 is "no tests
# collected") or left no report counts one more failure.
# pytest_suite NAME XML PYTEST-ARGS...: one pytest run, counted from XML.
pytest_suite() {
  local name=$1 xml=$2
  shift 2
  rm -f "$xml"
  echo "=== $name: pytest"
  if [[ ! -x .venv/bin/python ]]; then
    extra_failures+=("$name: .venv/bin/python is missing (scripts/setup.sh --deps-only)")
    return
  elif [[ ! -f build-ci/libtessera.so ]]; then
    extra_failures+=("$name: build-ci/libtessera.so was not built")
    return
  fi
  local status=0 start=$SECONDS
  TESSERA_LIBRARY=$PWD/build-ci/libtessera.so JAX_PLATFORMS=cpu TPU_SKIP_MDS_QUERY=1 \
    TESSERA_GUARD=1 \
    timeout 3600 .venv/bin/python -m pytest "$@" -q -p no:cacheprovider \
    --junitxml="$xml" || status=$?
  echo "=== $name: $((SECONDS - start)) s"
  if ((status != 0 && status != 1)); then
    extra_failures+=("$name: pytest exited with status $status")
  elif [[ ! -f $xml ]]; then
    extra_failures+=("$name: pytest wrote no report")
  fi
}

pytest_xml=build-ci/pytest-junit.xml
pytest_suite python/tests "$pytest_xml" python/tests --ignore=python/tests/tpu

# The TPU proof: its own run (libtpu takes ~420 MB and its own start-up; the
# suites above never wait on it). JAX_PLATFORMS=cpu: libtpu compiles for
# TPU topologies without a TPU (deviceless ahead-of-time compilation).
tpu_xml=build-ci/pytest-tpu-junit.xml
pytest_suite python/tests/tpu "$tpu_xml" python/tests/tpu

# The package as a user gets it (docs/install.md): the sdist, the wheel built
# from it and repaired, installed with JAX in a fresh venv outside the tree;
# its checks (build-wheel/checks-junit.xml) and python/tests against it
# (build-wheel/pytest-junit.xml) are counted below.
echo "=== wheel: scripts/test-wheel.sh"
wheel_start=$SECONDS
rm -f build-wheel/checks-junit.xml build-wheel/pytest-junit.xml
bash scripts/test-wheel.sh build-wheel
echo "=== wheel: $((SECONDS - wheel_start)) s"
if [[ ! -f build-wheel/checks-junit.xml ]]; then
  extra_failures+=("wheel: scripts/test-wheel.sh wrote no report")
fi

count_args=()
for f in "${extra_failures[@]+"${extra_failures[@]}"}"; do
  count_args+=(--extra-failure "$f")
done
echo "=== totals"
# count-tests.py totals the meson logs; its last two lines ("skipped: N",
# "N passed, N failed") are printed again below with pytest's counts added.
c_totals=$(python3 scripts/count-tests.py "${count_args[@]+"${count_args[@]}"}" \
  build-ci build-asan build-clang build-tsan)
exec python3 - "$c_totals" python/tests "$pytest_xml" python/tests/tpu "$tpu_xml" \
  wheel build-wheel/checks-junit.xml "wheel: python/tests" build-wheel/pytest-junit.xml <<'PY'
import os
import re
import sys
import xml.etree.ElementTree as ET

c_totals = sys.argv[1]
reports = list(zip(sys.argv[2::2], sys.argv[3::2]))  # (suite name, JUnit XML)
lines = c_totals.splitlines()
m = re.fullmatch(r"(\d+) passed, (\d+) failed", lines[-1] if lines else "")
k = re.fullmatch(r"skipped: (\d+)", lines[-2] if len(lines) > 1 else "")
if not m or not k:
    print("\n".join(lines))
    print("FAILED: count-tests.py printed no totals")
    passed, failed, skipped = 0, 1, 0
else:
    print("\n".join(lines[:-2]))
    passed, failed, skipped = int(m[1]), int(m[2]), int(k[1])

for suite, xml_path in reports:
    py = None
    if os.path.exists(xml_path):
        try:
            root = ET.parse(xml_path).getroot()
            suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
            tests = sum(int(s.get("tests", 0)) for s in suites)
            bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
            skips = sum(int(s.get("skipped", 0)) for s in suites)
            py = (tests - bad - skips, bad, skips)
            failing = [f"{c.get('classname')}::{c.get('name')}" for c in root.iter("testcase")
                       if c.find("failure") is not None or c.find("error") is not None]
        except (ET.ParseError, ValueError, OSError) as e:
            print(f"FAILED: {suite}: unreadable pytest report {xml_path}: {e}")
            failed += 1
    if py is None and not os.path.exists(xml_path):
        print(f"{suite}: no pytest report (its failure is counted above)")
    elif py is not None:
        print(f"{suite}: {py[0]} passed, {py[1]} failed, {py[2]} skipped")
        for name in failing:
            print(f"FAILED: {suite}: {name}")
        passed += py[0]
        failed += py[1]
        skipped += py[2]
print(f"skipped: {skipped}")
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
