#!/usr/bin/env bash
# Sets tessera up on a fresh Debian 12 machine, as root: installs the Debian
# packages the project needs (skipped when all are installed, so reruns are
# fast and work offline), configures and builds build/, and runs the bundled
# matmul example in the interpreter.
#
#   bash scripts/setup.sh              install, build, run the example
#   bash scripts/setup.sh --deps-only  install the packages only
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

PACKAGES=(build-essential meson ninja-build pkg-config uthash-dev
          libxxhash-dev libzstd-dev libsodium-dev python3 python3-numpy python3-pip
          hyperfine valgrind
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
if ((build_failed)); then
  echo "setup.sh: the example ran, but parts of the build failed (see above)" >&2
  exit 1
fi
