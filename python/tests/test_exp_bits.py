"""`exp` (and `logistic`, which computes exp(-|x|)) gives the same bits on
both backends, on every host: the interpreter computes base/expf.c's
tsr_expf, the cpu backend the same steps written out on vectors
(lower/emit_expr.c, em_expf; docs/lowering.md, "exp"). Checked here on
the edges of its special cases (overflow, underflow, the "may underflow"
range, NaN payloads, infinities, signed zeros, subnormal results), on the
inputs where fused and separate multiply-adds differ, and on a strided
sweep of all 2^32 bit patterns; and on a few values whose result is known
exactly.
"""

from __future__ import annotations

import numpy as np
import pytest

import tessera

ROWS, COLS = 64, 2048  # 2^17 elements: one block per grid step, 8 steps

KERNEL = f"""
kernel @exp_bits
  grid(8) semantics(parallel)
  in %a: i32[{8 * ROWS}, {COLS}] vmem block[{ROWS}, {COLS}] map(%i) -> (%i, 0)
  out %e: i32[{8 * ROWS}, {COLS}] vmem block[{ROWS}, {COLS}] map(%i) -> (%i, 0)
  out %l: i32[{8 * ROWS}, {COLS}] vmem block[{ROWS}, {COLS}] map(%i) -> (%i, 0)
{{
  %x = load %a[:, :] : i32[{ROWS}, {COLS}]
  %f = bitcast %x : f32[{ROWS}, {COLS}]
  %ef = exp %f : f32[{ROWS}, {COLS}]
  %lf = logistic %f : f32[{ROWS}, {COLS}]
  %eb = bitcast %ef : i32[{ROWS}, {COLS}]
  %lb = bitcast %lf : i32[{ROWS}, {COLS}]
  store %e[:, :], %eb
  store %l[:, :], %lb
}}
"""

N = 8 * ROWS * COLS
H = float.fromhex


def _bits(values) -> np.ndarray:
    return np.asarray(values, np.float32).view(np.uint32)


def _inputs() -> np.ndarray:
    edges = _bits([88.0, H("0x1.62e42ep6"), H("0x1.62e430p6"), -88.0, -H("0x1.9fe368p6"),
                   -H("0x1.9d1d9ep6"), -87.33654, -103.0, -104.0, 0.0, -0.0,
                   np.inf, -np.inf, 1.0, -1.0, 1e-30, -1e-30, H("0x1p-149"),
                   32.564632, -63.099434])  # the last two: FMA matters
    around = (edges[:, None].astype(np.int64) + np.arange(-300, 301)[None, :]).ravel()
    nans = np.array([0x7fc00000, 0xffc00000, 0x7f800001, 0xff812345, 0x7fffffff,
                     0x7fa5a5a5], np.int64)
    fixed = np.concatenate([around, nans]) & 0xFFFFFFFF
    rest = N - len(fixed)
    stride = (1 << 32) // rest
    sweep = np.arange(rest, dtype=np.int64) * stride + 12345
    return np.concatenate([fixed, sweep]).astype(np.uint32).view(np.int32).reshape(
        8 * ROWS, COLS)


@pytest.fixture(scope="module")
def results(request):
    module = tessera.Module.parse(KERNEL, "exp_bits.tsr")
    x = _inputs()
    out = {"interp": tessera.compile(module["exp_bits"], "interp")(x)}
    return x, out, module


def test_cpu_backend_exp_is_bitwise_the_interpreters(results, cpu_backend):
    x, out, module = results
    e_cpu, l_cpu = tessera.compile(module["exp_bits"], cpu_backend)(x)
    e_int, l_int = out["interp"]
    for name, got, want in (("exp", e_cpu, e_int), ("logistic", l_cpu, l_int)):
        differ = np.nonzero(got.ravel() != want.ravel())[0]
        assert len(differ) == 0, (
            f"{name}: {len(differ)} of {N} results differ, first for input bits "
            f"{x.ravel().view(np.uint32)[differ[0]]:#010x}: cpu "
            f"{got.ravel().view(np.uint32)[differ[0]]:#010x}, interp "
            f"{want.ravel().view(np.uint32)[differ[0]]:#010x}")


@pytest.mark.parametrize("backend_name", ["interp", "cpu"])
def test_exp_known_values(results, backend_name, request):
    x, out, module = results
    if backend_name == "cpu":
        request.getfixturevalue("cpu_backend")
        e, _ = tessera.compile(module["exp_bits"], "cpu")(x)
    else:
        e, _ = out["interp"]
    got = dict(zip(x.ravel().view(np.uint32).tolist(), e.ravel().view(np.uint32).tolist()))

    def exp_of(value: float) -> int:
        return got[int(_bits([value])[0])]

    assert exp_of(0.0) == 0x3F800000 and exp_of(-0.0) == 0x3F800000
    assert exp_of(np.inf) == 0x7F800000          # +inf
    assert exp_of(-np.inf) == 0                  # +0
    assert exp_of(H("0x1.62e430p6")) == 0x7F800000    # overflows
    assert exp_of(-104.0) == 0                   # underflows to +0
    assert exp_of(-103.0) != 0                   # a subnormal
    assert exp_of(1.0) == int(_bits([np.e])[0])  # e, correctly rounded
    # NaNs come back quiet with their payload and sign
    assert got[0x7F800001] == 0x7FC00001 and got[0xFF812345] == 0xFFC12345
    assert got[0x7FFFFFFF] == 0x7FFFFFFF
