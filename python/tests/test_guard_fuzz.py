"""Compiled code never writes outside its arrays, for every dtype: the
library's kernels (sort and argsort for both targets, top-k, the
cumulative scans, the reductions) and generated copy, elementwise and
masked-store kernels (one block, and blocks along a padded last dim) on
random shapes with odd last dims (1..300), run on the cpu backend with the
guard bytes on (TESSERA_GUARD=1, set by conftest.py: a write past an array
fails the run) and compared with the interpreter. Seeded: the same cases
every run. Narrow dtypes' vector tails once wrote past the end of their
outputs (docs/lowering.md, "Guard bytes")."""

import os
import zlib

import ml_dtypes
import numpy as np
import pytest

import tessera

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = ["f32", "bf16", "f16"]
INTS = ["i32", "u32", "i16", "u16", "i8", "u8"]
DTYPES = FLOATS + INTS
NP = {"f32": np.dtype(np.float32), "bf16": BF16, "f16": np.dtype(np.float16),
      "i32": np.dtype(np.int32), "u32": np.dtype(np.uint32), "i16": np.dtype(np.int16),
      "u16": np.dtype(np.uint16), "i8": np.dtype(np.int8), "u8": np.dtype(np.uint8),
      "i1": np.dtype(np.bool_)}
SEED = 20260301


def _shape(rng, rank=None):
    """Rank 1..3, the last dim odd in 1..299 or 1/300, leading dims 1..4."""
    rank = rank or int(rng.integers(1, 4))
    last = int(rng.choice([1, 3, 15, 17, 129, 300, int(rng.integers(0, 150)) * 2 + 1]))
    return tuple(int(d) for d in rng.integers(1, 5, size=rank - 1)) + (last,)


def _array(rng, shape, dt):
    if dt in FLOATS:
        return (rng.integers(-40, 40, size=shape) / 4).astype(np.float32).astype(NP[dt])
    if dt == "i1":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    info = np.iinfo(NP[dt])
    return rng.integers(info.min, int(info.max) + 1, size=shape, dtype=np.int64).astype(NP[dt])


def _same(a, b, dt, exact):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype
    if exact or a.dtype.kind in "iub":
        if a.dtype == BF16 or a.dtype.kind == "f":
            a, b = a.view(np.uint8), b.view(np.uint8)
        np.testing.assert_array_equal(a, b)
        return
    tol = 1e-2 if a.dtype.itemsize <= 2 else 1e-5
    np.testing.assert_allclose(a.astype(np.float64), b.astype(np.float64), rtol=tol, atol=tol,
                               equal_nan=True)


def _library_cases():
    """(id, dtype, input, call, exact): per dtype two random cases of each
    kernel."""
    rng = np.random.default_rng(SEED)
    cases = []
    for dt in DTYPES * 2:
        x = _array(rng, _shape(rng), dt)
        ax = int(rng.integers(0, x.ndim))
        for target in ("tpu", "host"):
            cases.append((f"sort-{target}-{dt}-{x.shape}-ax{ax}", dt, x,
                          lambda x, b, t=target, a=ax: tessera.sort(x, axis=a, backend=b, target=t),
                          True))
        x = _array(rng, _shape(rng), dt)
        ax = int(rng.integers(0, x.ndim))
        cases.append((f"argsort-tpu-{dt}-{x.shape}-ax{ax}", dt, x,
                      lambda x, b, a=ax: tessera.argsort(x, axis=a, stable=True, backend=b,
                                                         target="tpu"), True))
        x = _array(rng, _shape(rng), dt)
        k = int(rng.integers(1, min(x.shape[-1], 8) + 1))
        cases.append((f"topk-{dt}-{x.shape}-k{k}", dt, x,
                      lambda x, b, k=k: tessera.top_k(x, k, backend=b), True))
        x = _array(rng, _shape(rng), dt)
        ax = int(rng.integers(0, x.ndim))
        op = str(rng.choice(["sum", "prod", "max", "min"]))
        cases.append((f"cum{op}-{dt}-{x.shape}-ax{ax}", dt, x,
                      lambda x, b, o=op, a=ax: tessera.cumulative(x, o, axis=a, backend=b),
                      False))
        x = _array(rng, _shape(rng), dt)
        ax = int(rng.integers(0, x.ndim))
        op = str(rng.choice(["sum", "max", "min", "argmax", "argmin", "mean"]))
        cases.append((f"reduce-{op}-{dt}-{x.shape}-ax{ax}", dt, x,
                      lambda x, b, o=op, a=ax: tessera.reduce(x, o, axis=a, backend=b), False))
    return cases


LIBRARY_CASES = _library_cases()


@pytest.mark.parametrize("case", LIBRARY_CASES, ids=[c[0] for c in LIBRARY_CASES])
def test_library_kernel_stays_inside_its_arrays(case):
    assert os.environ.get("TESSERA_GUARD") == "1"
    _, dt, x, call, exact = case
    try:
        want = call(x, "interp")
    except (tessera.TesseraError, ValueError) as e:
        with pytest.raises(type(e)):
            call(x, "cpu")
        return
    got = call(x, "cpu")
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        _same(g, w, dt, exact)


def _generated_kernel(dt, shape, blocked):
    """Copies %x to %c, and for numeric dtypes stores max(x, y) to %m and,
    masked where x > y, x + y over a copy of y to %s. blocked: a grid over
    the last dim in blocks of 128 (the last one padded)."""
    t = f"{dt}[{', '.join(map(str, shape))}]"
    idx = ", ".join(":" for _ in shape)
    if blocked:
        bshape = shape[:-1] + (128,)
        bt = f"{dt}[{', '.join(map(str, bshape))}]"
        zeros = ", ".join("0" for _ in shape[:-1])
        spec = (f" vmem block[{', '.join(map(str, bshape))}] map(%i) -> "
                f"({zeros + ', ' if zeros else ''}%i)")
        grid = f"grid({-(-shape[-1] // 128)}) semantics(parallel)"
    else:
        bt, spec, grid = t, " vmem", "grid(1)"
    numeric = dt != "i1"
    lines = [f"kernel @guarded", f"  {grid}", f"  in %x: {t}{spec}", f"  in %y: {t}{spec}",
             f"  out %c: {t}{spec}"]
    if numeric:
        lines += [f"  out %m: {t}{spec}", f"  out %s: {t}{spec}"]
    bt1 = bt.replace(dt + "[", "i1[")
    lines += ["{", f"  %a = load %x[{idx}] : {bt}", f"  store %c[{idx}], %a"]
    if numeric:
        lines += [f"  %b = load %y[{idx}] : {bt}", f"  %mx = max %a, %b : {bt}",
                  f"  store %m[{idx}], %mx", f"  %k = gt %a, %b : {bt1}",
                  f"  %sum = add %a, %b : {bt}", f"  store %s[{idx}], %b",
                  f"  store %s[{idx}], %sum mask %k"]
    lines.append("}")
    return tessera.Module.parse("\n".join(lines) + "\n").kernels[0]


def _generated_cases():
    rng = np.random.default_rng(SEED + 1)
    cases = []
    for dt in DTYPES + ["i1"]:
        for blocked in (False, True):
            shape = _shape(rng, rank=int(rng.integers(1, 3)))
            if blocked:
                shape = shape[:-1] + (int(rng.integers(64, 150)) * 2 + 1,)  # 129..299: padded
            cases.append((f"{dt}-{shape}-{'blocked' if blocked else 'whole'}", dt, shape, blocked))
    return cases


GENERATED_CASES = _generated_cases()


@pytest.mark.parametrize("case", GENERATED_CASES, ids=[c[0] for c in GENERATED_CASES])
def test_generated_kernel_stays_inside_its_arrays(case):
    assert os.environ.get("TESSERA_GUARD") == "1"
    _, dt, shape, blocked = case
    rng = np.random.default_rng(zlib.crc32(case[0].encode()))
    k = _generated_kernel(dt, shape, blocked)
    x, y = _array(rng, shape, dt), _array(rng, shape, dt)
    want = tessera.run(k, x, y)
    got = tessera.run(k, x, y, backend="cpu")
    for w, g in zip(want if isinstance(want, tuple) else (want,),
                    got if isinstance(got, tuple) else (got,)):
        _same(g, w, dt, exact=True)
