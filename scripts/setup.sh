#!/usr/bin/env bash
# Sets tessera up on a fresh Debian 12 machine, as root: installs the Debian
# packages the project needs (skipped when all are installed, so reruns are
# fast and work offline), makes the Python environment .venv (a Python >= 3.12
# with the pinned python/requirements.txt and the package, editable), then
# configures and builds build/, runs the bundled matmul example in the
# interpreter and once from Python, and says how to run your own Pallas tests
# under tessera.
#
#   bash scripts/setup.sh              install, build, run the example
#   bash scripts/setup.sh --deps-only  the packages and .venv only
#
# .venv's Python: pyenv's newest 3.12.x if pyenv has one (else its newest
# 3.13+), else python3.12 / python3.13 / python3.14 on PATH, else the default
# python3 with the newest JAX it allows (a warning says so). $TESSERA_PYTHON
# names another interpreter. pip's cache (~/.cache/pip) is kept; a rerun with
# the same interpreter, requirements.txt and pyproject.toml installs nothing.
# libtpu (python/requirements-tpu.txt, the TPU proof tests' compiler) is
# installed with --no-deps from a wheel kept in pip's cache directory, under
# tessera-wheels/: downloaded once, reused by later runs and new .venvs
# (TESSERA_NO_LIBTPU=1 skips it; the TPU suite then fails, saying why). It
# goes into .venv/libtpu, outside .venv's site-packages: JAX that can import
# libtpu starts a TPU backend at its first use, and on a machine without a
# TPU libtpu prints errors. Only the TPU proofs put .venv/libtpu on their
# path (python/tests/tpu/tpu_proof.py), with JAX_PLATFORMS=cpu.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(build-essential meson ninja-build pkg-config uthash-dev
          libxxhash-dev libzstd-dev libsodium-dev python3 python3-numpy python3-pip
          hyperfine valgrind
          # the suite's second UndefinedBehaviorSanitizer build (scripts/test.sh)
          clang
          # Highway's vqsort for bench/bench_vqsort.cc (docs/benchmarks.md)
          libhwy-dev
          # LLVM/MLIR 22 for the cpu backend (docs/lowering.md), from
          # bookworm-security; without them meson builds the interpreter only
          libmlir-22-dev llvm-22-dev mlir-22-tools)
# Python packages from PyPI (for Debian's python3): ml_dtypes reads bf16 .npy
# files in the CLI tests.
PIP_PACKAGES=(ml_dtypes)

deps_only=0
for arg in "$@"; do
  case "$arg" in
    --deps-only) deps_only=1 ;;
    -h|--help)
      # the comment block under the shebang, whatever its length
      sed -n '2,/^[^#]/s/^# \{0,1\}//p' "${BASH_SOURCE[0]}"
      exit 0 ;;
    *)
      echo "setup.sh: unknown option '$arg' (options: --deps-only, --help)" >&2
      exit 2 ;;
  esac
done

# ---- packages -------------------------------------------------------------
missing=()
for pkg in "${PACKAGES[@]}"; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
done

if ((${#missing[@]} == 0)); then
  echo "setup.sh: all ${#PACKAGES[@]} packages are installed"
elif [[ $(id -u) -ne 0 ]]; then
  echo "setup.sh: missing packages: ${missing[*]}" >&2
  echo "setup.sh: run this script as root, or install them with:" >&2
  echo "  apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 1
elif ! command -v apt-get >/dev/null 2>&1; then
  echo "setup.sh: apt-get not found (tessera's set-up targets Debian 12);" \
       "install the equivalents of: ${missing[*]}" >&2
  exit 1
else
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${PACKAGES[@]}"
fi

# ---- Python packages --------------------------------------------------------
for pkg in "${PIP_PACKAGES[@]}"; do
  if ! /usr/bin/python3 -c "import $pkg" 2>/dev/null; then
    echo "setup.sh: pip install $pkg"
    /usr/bin/python3 -m pip install --quiet --root-user-action=ignore \
      --break-system-packages "$pkg"
  fi
done

# ---- the Python environment (.venv) -------------------------------------------
# python_version PY: "3.12" for a Python that runs, else nothing.
python_version() {
  "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null
}

# version_at_least V MAJOR MINOR
version_at_least() {
  local major=${1%%.*} minor=${1#*.}
  ((major > $2 || (major == $2 && minor >= $3)))
}

# Prints the interpreter .venv is made with.
choose_python() {
  if [[ -n ${TESSERA_PYTHON:-} ]]; then
    echo "$TESSERA_PYTHON"
    return
  fi
  local pyenv
  pyenv=$(command -v pyenv || true)
  if [[ -z $pyenv && -x ${PYENV_ROOT:-$HOME/.pyenv}/bin/pyenv ]]; then
    pyenv=${PYENV_ROOT:-$HOME/.pyenv}/bin/pyenv
  fi
  if [[ -n $pyenv ]]; then
    local v py
    # 3.12.x first (what tessera is tested with), then the newest later one
    for v in $("$pyenv" versions --bare 2>/dev/null | grep -E '^3\.12\.[0-9]+$' | sort -V -r) \
             $("$pyenv" versions --bare 2>/dev/null |
               grep -E '^3\.(1[3-9]|[2-9][0-9])\.[0-9]+$' | sort -V -r); do
      py=$(PYENV_VERSION=$v "$pyenv" which python3 2>/dev/null) || continue
      if [[ -x $py ]] && version_at_least "$(python_version "$py")" 3 12; then
        echo "$py"
        return
      fi
    done
  fi
  local name ver
  for name in python3.12 python3.13 python3.14; do
    ver=$(python_version "$name")
    if [[ -n $ver ]] && version_at_least "$ver" 3 12; then
      command -v "$name"
      return
    fi
  done
  command -v python3
}

# install_libtpu PIP...: installs python/requirements-tpu.txt's pinned libtpu
# with --no-deps into $libtpu_dir (a directory of its own, see the top) from
# tessera-wheels/ in pip's cache directory, downloading the wheel there first
# if it is not there yet.
install_libtpu() {
  local pin wheels name version
  pin=$(grep -E '^libtpu==' "$tpu_requirements")
  version=${pin#libtpu==}
  wheels="$("$@" cache dir 2>/dev/null || echo "$HOME/.cache/pip")/tessera-wheels"
  mkdir -p "$wheels" || return 1
  name=$(ls "$wheels"/libtpu-"$version"-*.whl 2>/dev/null | head -n1)
  if [[ -z $name ]]; then
    echo "setup.sh: downloading $pin (214 MB) into $wheels"
    "$@" download --quiet --no-deps --only-binary=:all: -d "$wheels" "$pin" || return 1
    name=$(ls "$wheels"/libtpu-"$version"-*.whl 2>/dev/null | head -n1)
    [[ -n $name ]] || return 1
  else
    echo "setup.sh: $pin from $name (cached)"
  fi
  rm -rf "$libtpu_dir"
  "$@" install --quiet --no-deps --no-index --target "$libtpu_dir" "$name"
}

setup_venv() {
  local py ver requirements=python/requirements.txt tpu_requirements=python/requirements-tpu.txt
  py=$(choose_python)
  ver=$(python_version "$py")
  if [[ -z $ver ]]; then
    echo "setup.sh: no usable Python for .venv (tried $py)" >&2
    return 1
  fi
  if ! version_at_least "$ver" 3 10; then
    echo "setup.sh: .venv needs Python >= 3.10 (3.12 for JAX 0.12); $py is $ver" >&2
    return 1
  fi
  local pins=()
  if ! version_at_least "$ver" 3 12; then
    # JAX 0.12 needs Python >= 3.12: take the newest JAX this Python allows.
    echo "setup.sh: ************************************************************" >&2
    echo "setup.sh: WARNING: .venv uses $py, Python $ver: JAX 0.12 needs" >&2
    echo "setup.sh: Python >= 3.12, so .venv gets jax 0.10.2, not the jax 0.12.0.1" >&2
    echo "setup.sh: tessera.jax is tested with (docs/jax.md). Install Python 3.12" >&2
    echo "setup.sh: (pyenv install 3.12) or set TESSERA_PYTHON, then rerun." >&2
    echo "setup.sh: ************************************************************" >&2
    pins=(jax==0.10.2 jaxlib==0.10.2 ml_dtypes numpy pytest flatbuffers)
  fi
  # What .venv was made from (first line: the interpreter) and what was
  # installed: a change of any of these redoes the install, a change of the
  # interpreter makes .venv anew.
  local stamp_file=.venv/.tessera-setup interp stamp want_libtpu=1 check=tessera,numpy,ml_dtypes,pytest
  local libtpu_dir=.venv/libtpu
  if [[ -n ${TESSERA_NO_LIBTPU:-} || $(uname -s -m) != "Linux x86_64" ]] || ((${#pins[@]})); then
    want_libtpu=0  # x86-64 Linux only, and pinned for JAX 0.12
  fi
  interp="python=$(readlink -f "$(command -v "$py")") version=$ver"
  stamp="$interp
pins=${pins[*]:-} requirements=$(sha256sum "$requirements" | cut -d' ' -f1)
pyproject=$(sha256sum python/pyproject.toml | cut -d' ' -f1)
libtpu=$want_libtpu $(sha256sum "$tpu_requirements" | cut -d' ' -f1) in $libtpu_dir"
  if [[ -x .venv/bin/python && -f $stamp_file && $(cat "$stamp_file") == "$stamp" ]] &&
     .venv/bin/python -c "import $check" 2>/dev/null &&
     { ((!want_libtpu)) || [[ -f $libtpu_dir/libtpu/libtpu.so ]]; }; then
    echo "setup.sh: .venv is up to date ($(.venv/bin/python --version 2>&1))"
    return 0
  fi
  if [[ -x .venv/bin/python && -f $stamp_file && $(head -n1 "$stamp_file") == "$interp" ]]; then
    echo "setup.sh: updating .venv (Python $ver)"
  else
    echo "setup.sh: making .venv with $py (Python $ver)"
    rm -rf .venv
    if ! "$py" -m venv .venv; then
      if [[ $py == /usr/bin/python3* && $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        echo "setup.sh: installing python3-venv"
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv &&
          rm -rf .venv && "$py" -m venv .venv || return 1
      else
        echo "setup.sh: '$py -m venv .venv' failed" >&2
        return 1
      fi
    fi
  fi
  rm -f "$stamp_file"
  local pip=(.venv/bin/python -m pip --disable-pip-version-check --no-input)
  if ((${#pins[@]})); then
    "${pip[@]}" install --quiet "${pins[@]}" || return 1
  else
    "${pip[@]}" install --quiet -r "$requirements" || return 1
  fi
  "${pip[@]}" install --quiet -e ./python || return 1
  # A .venv made before libtpu had its own directory has it in site-packages.
  if .venv/bin/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("libtpu") is None)' 2>/dev/null; then
    echo "setup.sh: moving libtpu out of .venv's site-packages (into $libtpu_dir)"
    "${pip[@]}" uninstall --quiet --yes libtpu || return 1
  fi
  if ((want_libtpu)) && ! install_libtpu "${pip[@]}"; then
    # Not fatal: the C and Python suites still run; the TPU suite fails, and
    # the next run tries again (the stamp says libtpu is missing).
    echo "setup.sh: WARNING: installing libtpu failed; the TPU proof tests will fail" >&2
    stamp="${stamp%$'\n'libtpu=*}"$'\n'"libtpu=failed"
  fi
  echo "$stamp" > "$stamp_file"
  echo "setup.sh: .venv ready: $(.venv/bin/python --version 2>&1)," \
       "$(.venv/bin/python -c 'import jax; print("jax", jax.__version__)' 2>/dev/null || echo "no jax")"
}

if ! setup_venv; then
  echo "setup.sh: making .venv failed (see above)" >&2
  exit 1
fi

if ((deps_only)); then
  exit 0
fi

# ---- build ----------------------------------------------------------------
if [[ -f build/meson-private/coredata.dat ]]; then
  meson setup --reconfigure build || meson setup --wipe build
else
  meson setup build
fi
build_failed=0
if ! meson compile -C build; then
  # Still build the CLI and run the example, but report the failure.
  build_failed=1
  echo "setup.sh: the full build failed (see above); building the tessera CLI alone" >&2
  meson compile -C build tools/tessera
fi

# ---- the example ------------------------------------------------------------
example=kernels/examples/matmul.tsr
if [[ ! -f $example ]]; then
  echo "setup.sh: built, but $example is missing: nothing to run" >&2
  exit 1
fi
echo "setup.sh: running $example in the interpreter (checks on)"
echo "+ build/tools/tessera run $example --random-inputs 1"
build/tools/tessera run "$example" --random-inputs 1

# ---- the example from Python ---------------------------------------------------------
echo "setup.sh: the same kernel from Python (.venv, docs/python.md)"
TESSERA_LIBRARY=$PWD/build/libtessera.so .venv/bin/python - "$example" <<'PY'
import sys
import numpy as np
import tessera
kernel = tessera.Module.load(sys.argv[1]).kernels[0]
rng = np.random.default_rng(1)
inputs = [rng.standard_normal(o.shape).astype(o.dtype) for o in kernel.inputs]
out = tessera.run(kernel, *inputs)
print(f"tessera.run(@{kernel.name}): {out.dtype}{list(out.shape)}, "
      f"max |error| vs numpy {np.abs(out - inputs[0] @ inputs[1]).max():.3g}")
PY
if ((build_failed)); then
  echo "setup.sh: the example ran, but parts of the build failed (see above)" >&2
  exit 1
fi

# ---- what to do next ------------------------------------------------------------
echo
echo "setup.sh: done. Run your own Pallas tests with every pl.pallas_call in tessera:"
echo "  .venv/bin/python -m pytest --tessera path/to/your/tests"
echo "  (or wrap the calls in 'with tessera.jax.interpret():', docs/jax.md)"
echo "setup.sh: a kernel debugged with tessera step by step: docs/tutorial.md"
