"""Host threads (docs/semantics.md, "Host threads"): the `threads` option on
both backends gives the same outputs bit for bit and the same diagnostics as
one thread; tessera.jax passes it; `pytest -n 2 --tessera` (pytest-xdist)
runs a suite of kernels in two processes sharing one disk cache."""

from __future__ import annotations

import os
import pathlib
import subprocess

import numpy as np
import pytest

import tessera

pytest_plugins = ["pytester"]

# Flash attention's shape of state: a scratch accumulator set at the first
# step of each (i, j) point (pl.when(k == 0)), the output written at its last.
MATMUL = """kernel @mm
  grid(8, 4, 4) semantics(parallel, parallel, arbitrary)
  in %a: f32[128, 128] vmem block[16, 32] map(%i, %j, %k) -> (%i, %k)
  in %b: f32[128, 128] vmem block[32, 32] map(%i, %j, %k) -> (%k, %j)
  out %c: f32[128, 128] vmem block[16, 32] map(%i, %j, %k) -> (%i, %j)
  scratch %acc: vmem f32[16, 32]
{
  %k = program_id 2 : i32
  %zero = const 0 : i32
  %first = eq %k, %zero : i1
  if %first {
    %z = const 0.0 : f32[16, 32]
    store %acc[:, :], %z
  }
  %x = load %a[:, :] : f32[16, 32]
  %y = load %b[:, :] : f32[32, 32]
  %s = load %acc[:, :] : f32[16, 32]
  %p = dot %x, %y, %s : f32[16, 32]
  store %acc[:, :], %p
  %three = const 3 : i32
  %last = eq %k, %three : i1
  if %last {
    store %c[:, :], %p
  }
}
"""

# Reads a row past its block at two grid points, a late one first in the
# parallel split: the error a run reports is the serial run's first.
OOB = """kernel @oob
  grid(16) semantics(parallel)
  in %x: f32[128, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[128, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %i = program_id 0 : i32
  %three = const 3 : i32
  %twelve = const 12 : i32
  %a = eq %i, %three : i1
  %b = eq %i, %twelve : i1
  %bad = or %a, %b : i1
  %eight = const 8 : i32
  %zero = const 0 : i32
  %row = select %bad, %eight, %zero : i32
  %v = load %x[%row, :] : f32[128]
  %w = load %x[:, :] : f32[8, 128]
  store %y[:, :], %w
}
"""


@pytest.fixture(autouse=True)
def _every_run_may_split(monkeypatch):
    # A kernel's runs learn whether splitting pays (docs/semantics.md, "Host
    # threads"): these small ones would soon stay on one thread, and a
    # compiled kernel is shared by the executables of one context.
    monkeypatch.setenv("TESSERA_SPLIT", "always")


def _inputs():
    rng = np.random.default_rng(7)
    return (rng.standard_normal((128, 128)).astype(np.float32),
            rng.standard_normal((128, 128)).astype(np.float32))


def test_threads_give_the_same_bits(backend):
    k = tessera.Module.parse(MATMUL, "mm.tsr")["mm"]
    a, b = _inputs()
    one = tessera.compile(k, backend, threads=1)(a, b)
    np.testing.assert_allclose(one, a @ b, rtol=1e-4, atol=1e-4)
    for n in (2, 3, 4, 7):
        many = tessera.compile(k, backend, threads=n)(a, b)
        assert many.tobytes() == one.tobytes(), n


def test_the_default_and_the_environment_give_the_same_bits(backend, monkeypatch):
    k = tessera.Module.parse(MATMUL, "mm.tsr")["mm"]
    a, b = _inputs()
    one = tessera.compile(k, backend, threads=1)(a, b)
    assert tessera.compile(k, backend)(a, b).tobytes() == one.tobytes()
    monkeypatch.setenv("TESSERA_THREADS", "4")
    assert tessera.compile(k, backend)(a, b).tobytes() == one.tobytes()


def _error_of(k, backend, threads):
    with pytest.raises(tessera.KernelError) as info:
        tessera.compile(k, backend, threads=threads)(np.zeros((128, 128), np.float32))
    return str(info.value), [(d.kind, d.message, d.line) for d in info.value.diagnostics]


def test_the_first_error_is_the_serial_runs(backend):
    k = tessera.Module.parse(OOB, "oob.tsr")["oob"]
    text, diags = _error_of(k, backend, 1)
    assert "grid point (3)" in text
    for n in (2, 4, 16):
        assert _error_of(k, backend, n) == (text, diags)


def test_threads_must_be_a_count():
    k = tessera.Module.parse(MATMUL, "mm.tsr")["mm"]
    with pytest.raises(ValueError, match="threads"):
        tessera.compile(k, threads=-1)
    with pytest.raises(TypeError, match="threads"):
        tessera.compile(k, threads="4")


def test_jax_bridge_passes_threads(backend):
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    import tessera.jax as tj

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = jnp.dot(x_ref[...], y_ref[...]) + 1.0

    def call(**kw):
        return tj.pallas_call(kernel, jax.ShapeDtypeStruct((128, 128), jnp.float32),
                              grid=(8, 4), in_specs=[pl.BlockSpec((16, 128), lambda i, j: (i, 0)),
                                                     pl.BlockSpec((128, 32), lambda i, j: (0, j))],
                              out_specs=pl.BlockSpec((16, 32), lambda i, j: (i, j)),
                              compiler_params=dict(mosaic=dict(
                                  dimension_semantics=("parallel", "parallel"))),
                              backend=backend, **kw)

    a, b = _inputs()
    one = np.asarray(call(threads=1)(a, b))
    np.testing.assert_allclose(one, a @ b + 1.0, rtol=1e-4, atol=1e-4)
    assert np.asarray(call(threads=4)(a, b)).tobytes() == one.tobytes()
    with tj.interpret(backend=backend, threads=3):
        f = pl.pallas_call(kernel, jax.ShapeDtypeStruct((128, 128), jnp.float32), grid=(8, 4),
                           in_specs=[pl.BlockSpec((16, 128), lambda i, j: (i, 0)),
                                     pl.BlockSpec((128, 32), lambda i, j: (0, j))],
                           out_specs=pl.BlockSpec((16, 32), lambda i, j: (i, j)),
                           interpret=True)
        assert np.asarray(f(a, b)).tobytes() == one.tobytes()


XDIST_SUITE = '''
import jax, jax.numpy as jnp, numpy as np, pytest
from jax.experimental import pallas as pl

@pytest.mark.parametrize("n", range(4))
def test_kernel(n):
    def k(x_ref, o_ref):
        o_ref[...] = x_ref[...] * float(n + 1) + float(n)
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    f = pl.pallas_call(k, jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2,),
                       in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                       out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)), interpret=True)
    np.testing.assert_array_equal(np.asarray(f(x)), x * (n + 1) + n)
'''


def test_pytest_xdist_workers_share_the_disk_cache(pytester, cpu_backend, tessera_cli, tmp_path,
                                                   monkeypatch):
    pytest.importorskip("xdist")
    pytest.importorskip("jax")
    from importlib.metadata import entry_points
    cache = tmp_path / "cache"
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(cache))
    monkeypatch.delenv("TESSERA_CACHE", raising=False)
    # the workers import this tessera (a relative PYTHONPATH would not reach
    # pytester's directory)
    here = str(pathlib.Path(tessera.__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        [here] + [str(pathlib.Path(p).resolve())
                  for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if os.environ.get("TESSERA_LIBRARY"):
        monkeypatch.setenv("TESSERA_LIBRARY", str(pathlib.Path(os.environ["TESSERA_LIBRARY"]).resolve()))
    plugin = ([] if any(ep.value == "tessera.jax.pytest_plugin"
                        for ep in entry_points(group="pytest11"))
              else ["-p", "tessera.jax.pytest_plugin"])
    pytester.makepyfile(test_suite=XDIST_SUITE)
    args = ("-n", "2", *plugin, "--tessera", "--tessera-backend", cpu_backend,
            "--tessera-threads", "1", "-p", "no:cacheprovider")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=4)
    assert "2 workers" in result.stdout.str() or "gw1" in result.stdout.str()
    # the four kernels' objects are in the one cache, every entry sound
    cli = tessera_cli
    stats = subprocess.run([str(cli), "cache", "stats", "--dir", str(cache)], capture_output=True,
                           text=True, check=True).stdout
    entries = int(next(line for line in stats.splitlines() if "entries" in line)
                  .split(":")[1].split()[0])
    assert entries >= 4, stats
    verify = subprocess.run([str(cli), "cache", "verify", "--dir", str(cache)],
                            capture_output=True, text=True)
    assert verify.returncode == 0, verify.stdout + verify.stderr
    # a second run finds them all: nothing is compiled again
    again = pytester.runpytest_subprocess(*args)
    again.assert_outcomes(passed=4)
    stats2 = subprocess.run([str(cli), "cache", "stats", "--dir", str(cache)],
                            capture_output=True, text=True, check=True).stdout
    assert next(line for line in stats2.splitlines() if "entries" in line) == \
        next(line for line in stats.splitlines() if "entries" in line)
