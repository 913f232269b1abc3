#!/usr/bin/env bash
# From a fresh venv to a first kernel run, from a repaired wheel
# (docs/benchmarks.md, "The wheel"), and the import time of tessera.jax over
# jax's. Each of RUNS runs (default 3), in a new temporary directory outside
# the tree and without TESSERA_* variables:
#   venv      python -m venv (the .venv's Python)
#   install   pip install WHEEL (numpy and ml_dtypes from pip's cache)
#   first run python -c: import tessera, run kernels/examples/add.tsr's kernel on
#             the interpreter (a copy of the file)
#   jax       pip install WHEEL[jax] with python/requirements.txt as constraints
#   first jax python -c: a pl.pallas_call under tessera.jax.interpret()
# then, in the last venv, IMPORTS (default 11) alternating runs of
# `python -c "import jax"` and `python -c "import jax, tessera.jax"`.
# Prints each time in seconds and the medians.
#
#   bash bench/wheel_install.sh build-wheel/repaired/tessera-*.whl [RUNS] [IMPORTS]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
wheel=$(readlink -f "$1")
runs=${2:-3}
imports=${3:-11}
unset PYTHONPATH LD_LIBRARY_PATH $(compgen -e | grep '^TESSERA_' || true)
export JAX_PLATFORMS=cpu

now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f}')" "$1" "$(now)"; }

cat > /tmp/tessera-bench-jax.py <<'PY'
import jax, jax.numpy as jnp, numpy as np
from jax.experimental import pallas as pl
import tessera.jax

def add_kernel(a_ref, b_ref, c_ref):
    c_ref[...] = a_ref[...] + b_ref[...]

a = jnp.arange(32 * 128, dtype=jnp.float32).reshape(32, 128)
spec = pl.BlockSpec((8, 128), lambda i: (i, 0))
with tessera.jax.interpret():
    c = pl.pallas_call(add_kernel, jax.ShapeDtypeStruct(a.shape, a.dtype),
                       grid=(4,), in_specs=[spec, spec], out_specs=spec)(a, a)
assert (np.asarray(c) == 2 * np.asarray(a)).all()
PY

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
printf 'run\tvenv\tinstall\tfirst run\tjax\tfirst jax\n'
for ((r = 1; r <= runs; r++)); do
  work=$(mktemp -d /tmp/tessera-bench-wheel-XXXXXX)
  cp kernels/examples/add.tsr "$work/"
  t=$(now); "$root/.venv/bin/python" -m venv "$work/venv"; venv=$(since "$t")
  t=$(now); "$work/venv/bin/python" -m pip install -q "$wheel"; install=$(since "$t")
  t=$(now)
  (cd "$work" && venv/bin/python -c "
import numpy as np, tessera
k = tessera.Module.load('add.tsr').kernels[0]
ins = [np.ones(o.shape, o.dtype) for o in k.inputs]
assert (tessera.run(k, *ins) == 2).all()")
  first=$(since "$t")
  t=$(now); "$work/venv/bin/python" -m pip install -q -c python/requirements.txt "$wheel[jax]"; jax=$(since "$t")
  t=$(now); (cd "$work" && venv/bin/python /tmp/tessera-bench-jax.py); firstjax=$(since "$t")
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$venv" "$install" "$first" "$jax" "$firstjax"
  if ((r < runs)); then rm -rf "$work"; fi
done

py=$work/venv/bin/python
python3 - "$py" "$imports" "$work" <<'PY'
import statistics, subprocess, sys, time
py, n, cwd = sys.argv[1], int(sys.argv[2]), sys.argv[3]
t = {"jax": [], "jax+tessera.jax": []}
for _ in range(n):
    for name, code in (("jax", "import jax"), ("jax+tessera.jax", "import jax, tessera.jax")):
        s = time.perf_counter()
        subprocess.run([py, "-c", code], check=True, cwd=cwd)
        t[name].append(time.perf_counter() - s)
m = {k: statistics.median(v) for k, v in t.items()}
print(f"import jax: median {m['jax'] * 1e3:.0f} ms; import jax, tessera.jax: median "
      f"{m['jax+tessera.jax'] * 1e3:.0f} ms; tessera.jax adds {(m['jax+tessera.jax'] - m['jax']) * 1e3:.0f} ms "
      f"({m['jax+tessera.jax'] / m['jax']:.2f}x) over {n} alternating runs")
out = subprocess.run([py, "-X", "importtime", "-c", "import jax, tessera.jax"], cwd=cwd,
                     capture_output=True, text=True, check=True).stderr
for line in out.splitlines():
    parts = [p.strip() for p in line.split("|")]
    if len(parts) == 3 and parts[2] in ("jax", "tessera", "tessera.jax"):
        print(f"-X importtime, cumulative: {parts[2]} {int(parts[1]) / 1e3:.0f} ms")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -rf "$work"
