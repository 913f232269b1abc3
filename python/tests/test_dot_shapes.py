"""`dot` on awkward shapes: row counts that leave every remainder of the cpu
backend's 6-row tiles (and the 4 + 4 / 4 + 3 tails it takes instead of a
2-row or 1-row tile), column counts that are not a multiple of its 16-lane
panels, k = 1, k shorter and longer than the packing's prefetch distance,
transposed right operands (q @ k^T), an accumulator, bf16 inputs with f32
accumulation and integer dots. The cpu backend must give the interpreter's
results bit for bit (docs/lowering.md: both are fused multiply-adds in k
order), and the interpreter numpy's within rounding."""

from __future__ import annotations

import numpy as np
import pytest

import tessera

try:
    import ml_dtypes
except ImportError:  # pragma: no cover
    ml_dtypes = None


def dot_kernel(m: int, k: int, n: int, dtype: str, out: str, transpose: bool, acc: bool) -> str:
    bdims = f"{n}, {k}" if transpose else f"{k}, {n}"
    tr = " transpose_rhs" if transpose else ""
    acc_decl = f"  in %c: {out}[{m}, {n}] vmem block[{m}, {n}] map(%i) -> (0, 0)\n" if acc else ""
    acc_load = f"  %s = load %c[:, :] : {out}[{m}, {n}]\n" if acc else ""
    acc_arg = ", %s" if acc else ""
    return f"""
kernel @d
  grid(2) semantics(arbitrary)
  in %a: {dtype}[{m}, {k}] vmem block[{m}, {k}] map(%i) -> (0, 0)
  in %b: {dtype}[{bdims}] vmem block[{bdims}] map(%i) -> (0, 0)
{acc_decl}  out %r: {out}[{m}, {n}] vmem block[{m}, {n}] map(%i) -> (0, 0)
{{
  %x = load %a[:, :] : {dtype}[{m}, {k}]
  %y = load %b[:, :] : {dtype}[{bdims}]
{acc_load}  %p = dot %x, %y{acc_arg}{tr} : {out}[{m}, {n}]
  store %r[:, :], %p
}}
"""


# (m, k, n): rows 1..14 and 128 cover every row split; n 1, 8, 21, 40 (16-lane
# panels with a tail), 128; k 1 (a single step), 3 and 9 (around the prefetch
# distance of 8 rows), 128.
SHAPES = [(1, 1, 1), (2, 3, 8), (4, 9, 21), (5, 1, 16), (7, 9, 40), (8, 16, 16), (13, 20, 21),
          (14, 9, 33), (19, 128, 40), (128, 128, 128), (128, 1, 24), (130, 17, 129)]


def numpy_dtype(name: str):
    if name == "bf16":
        if ml_dtypes is None:
            pytest.skip("needs ml_dtypes")
        return ml_dtypes.bfloat16
    return {"f32": np.float32, "i8": np.int8, "i32": np.int32, "u8": np.uint8,
            "u32": np.uint32}[name]


def inputs(m, k, n, dtype, out, transpose, acc, seed):
    rng = np.random.default_rng(seed)
    nd = numpy_dtype(dtype)
    bshape = (n, k) if transpose else (k, n)
    if dtype in ("f32", "bf16"):
        a = rng.standard_normal((m, k)).astype(np.float32).astype(nd)
        b = rng.standard_normal(bshape).astype(np.float32).astype(nd)
    else:
        lo, hi = (0, 16) if dtype.startswith("u") else (-8, 8)
        a = rng.integers(lo, hi, (m, k)).astype(nd)
        b = rng.integers(lo, hi, bshape).astype(nd)
    xs = [a, b]
    if acc:
        on = numpy_dtype(out)
        if out in ("f32", "bf16"):
            xs.append(rng.standard_normal((m, n)).astype(np.float32).astype(on))
        else:
            xs.append(rng.integers(0, 100, (m, n)).astype(on))
    return xs


def reference(xs, out, transpose):
    a, b = (x.astype(np.float64) for x in xs[:2])
    r = a @ (b.T if transpose else b)
    if len(xs) > 2:
        r = r + xs[2].astype(np.float64)
    return r


CASES = [(s, "f32", "f32", tr, acc) for s in SHAPES for tr in (False, True) for acc in (False, True)]
CASES += [(s, "bf16", out, tr, False) for s in [(13, 20, 21), (128, 128, 128), (7, 1, 40)]
          for out in ("f32", "bf16") for tr in (False, True)]
CASES += [(s, dt, out, tr, acc) for s in [(13, 20, 21), (14, 9, 33), (128, 1, 24)]
          for dt, out in (("i8", "i32"), ("i32", "i32"), ("u8", "i32")) for tr in (False, True)
          for acc in (False, True)]


@pytest.mark.parametrize("shape,dtype,out,transpose,acc", CASES,
                         ids=[f"{m}x{k}x{n}-{dt}-{o}{'-T' if tr else ''}{'-acc' if acc else ''}"
                              for (m, k, n), dt, o, tr, acc in CASES])
def test_dot_cpu_equals_interpreter(cpu_backend, shape, dtype, out, transpose, acc):
    m, k, n = shape
    kernel = tessera.Module.parse(dot_kernel(m, k, n, dtype, out, transpose, acc))["d"]
    xs = inputs(m, k, n, dtype, out, transpose, acc, seed=m * 1000 + k * 10 + n)
    want = tessera.compile(kernel, "interp")(*xs)
    got = tessera.compile(kernel, cpu_backend)(*xs)
    assert got.dtype == want.dtype and got.shape == (m, n)
    # bit for bit: the same fused multiply-adds in the same k order
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8)), (
        f"cpu differs from the interpreter at {np.argwhere(got != want)[:5].tolist()}")
    ref = reference(xs, out, transpose)
    if out in ("f32", "bf16"):
        tol = 1e-2 if out == "bf16" or dtype == "bf16" else 1e-4
        np.testing.assert_allclose(want.astype(np.float64), ref, rtol=tol, atol=tol * (k + 1))
    else:
        wrap = 2**32
        assert np.array_equal(want.astype(np.int64) % wrap, ref.astype(np.int64) % wrap)


ALIAS = """
kernel @alias
  grid(2) semantics(arbitrary)
  in %a: f32[40, 40] vmem block[40, 40] map(%i) -> (0, 0)
  in %b: f32[40, 40] vmem block[40, 40] map(%i) -> (0, 0)
  out %c: f32[40, 40] vmem block[40, 40] map(%i) -> (0, 0)
  out %d: f32[40, 40] vmem block[40, 40] map(%i) -> (0, 0)
{
  %x = load %a[:, :] : f32[40, 40]
  %y = load %b[:, :] : f32[40, 40]
  %i = program_id 0 : i32
  %zero = const 0 : i32
  %first = eq %i, %zero : i1
  if %first {
    store %c[:, :], %y
    store %d[:, :], %x
  }
  %z = load %c[:, :] : f32[40, 40]
  %p = dot %x, %z : f32[40, 40]
  store %c[:, :], %p
  %w = load %d[:, :] : f32[40, 40]
  %q = dot %w, %y : f32[40, 40]
  store %d[:, :], %q
}
"""


def test_dot_operand_is_the_output_ref(backend):
    """B (then A) is a load of the ref the dot's result is stored into: the
    cpu backend packs B one panel at a time, so it must not read B where
    earlier panels were already stored."""
    kernel = tessera.Module.parse(ALIAS)["alias"]
    rng = np.random.default_rng(5)
    a, b = (rng.standard_normal((40, 40)).astype(np.float32) for _ in range(2))
    c, d = tessera.compile(kernel, backend)(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    # two grid steps: c = a (a b), d = (a b) b
    np.testing.assert_allclose(c, a64 @ (a64 @ b64), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(d, (a64 @ b64) @ b64, rtol=1e-4, atol=1e-3)
    if backend == "cpu":
        ci, di = tessera.compile(kernel, "interp")(a, b)
        assert np.array_equal(c, ci) and np.array_equal(d, di)
