"""The math and PRNG primitives tessera.jax expands into IR ops
(python/tessera/jax/translate_math.py): each runs in a Pallas kernel
through JAX's TPU interpret mode (the oracle) and through tessera, with the
interpreter and the cpu backend.

* `threefry2x32` is compared bit for bit (also broadcast operands), and
  with `jax.random.bits`.
* each float function runs on a sweep of its domain plus its special values
  (signed zeros, infinities, NaN, the edges of the domain) and must be
  within `VS_JAX` ulp of JAX (what JAX's own error allows: docs/jax.md,
  "Tolerances") and within `VS_EXACT` ulp of the float64 result of
  numpy/scipy (tessera's own accuracy, so that agreeing with JAX is not
  enough to pass); special values must match exactly (same value or both
  NaN).
* bf16 inputs are computed in f32 and rounded once.

`python test_math_prims.py` (with the environment of the tests) measures
the errors over a dense sweep (4M points a function) and prints the table
docs/jax.md gives.
"""

from __future__ import annotations

import functools
import math
import sys

import numpy as np
import pytest

from pallas_kernels import _harness as H

BACKENDS = ["interp", "cpu"]
# the comparisons subtract infinities and NaNs on purpose
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
F32 = np.float32


def _jax():
    import jax
    import jax.numpy as jnp
    from jax import lax
    return jax, jnp, lax


# ---- sweeps --------------------------------------------------------------------

def _lin(lo, hi, n):
    return np.linspace(lo, hi, n, dtype=np.float64).astype(F32)


def _sym_log(lo_exp, hi_exp, n):
    v = np.logspace(lo_exp, hi_exp, n // 2).astype(F32)
    return np.concatenate([-v[::-1], v])


SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5, -0.5], F32)


def _sweep(name: str, n: int) -> np.ndarray:
    """n points (a multiple of 128 is used) of `name`'s domain, the special
    values first. Inputs and results stay clear of denormals (XLA:CPU
    flushes them)."""
    k = n - SPECIAL.size
    parts = {
        "erf": lambda: np.concatenate([_lin(-5, 5, k - k // 4), _sym_log(-30, 0.7, k // 4)]),
        "erfc": lambda: np.concatenate([_lin(-10, 9.1, k - k // 4), _sym_log(-30, 0.7, k // 4)]),
        "erf_inv": lambda: np.concatenate([
            _lin(-1, 1, k - k // 2), (1 - np.logspace(-7.3, -0.3, k // 4)).astype(F32),
            _sym_log(-30, -0.3, k // 4)]),
        "atan": lambda: _sym_log(-30, 30, k),
        "asin": lambda: np.concatenate([_lin(-1, 1, k - k // 4), _sym_log(-30, 0, k // 4)]),
        "acos": lambda: np.concatenate([_lin(-1, 1, k - k // 4), _sym_log(-30, 0, k // 4)]),
        "sinh": lambda: np.concatenate([_lin(-89, 89, k - k // 4), _sym_log(-30, 0.5, k // 4)]),
        "cosh": lambda: _lin(-89, 89, k),
        "asinh": lambda: _sym_log(-30, 38, k),
        "acosh": lambda: np.concatenate([1 + np.logspace(-7, 1, k // 2).astype(F32),
                                         np.logspace(0, 38, k - k // 2).astype(F32)]),
        "atanh": lambda: np.concatenate([_lin(-1, 1, k - k // 4), _sym_log(-30, -0.01, k // 4)]),
        "cbrt": lambda: _sym_log(-37, 38, k),
        "log2": lambda: np.logspace(-37, 38, k).astype(F32),
        # x > 0 (x < 0: test_lgamma_negative)
        "lgamma": lambda: np.concatenate([_lin(1e-3, 20, k // 2),
                                          np.logspace(-30, 36, k - k // 2).astype(F32)]),
        "digamma": lambda: np.concatenate([_lin(1e-3, 20, k // 2),
                                           np.logspace(-30, 37, k - k // 2).astype(F32)]),
    }
    x = np.concatenate([SPECIAL, parts[name]()])
    m = (x.size + 127) // 128 * 128
    return np.resize(x, m).astype(F32)


def _exact(name):
    """The float64 function (NaN outside the domain, as IEEE says)."""
    from scipy import special as sp

    return {
        "erf": sp.erf, "erfc": sp.erfc, "erf_inv": sp.erfinv, "atan": np.arctan,
        "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh,
        "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh, "cbrt": np.cbrt,
        "log2": np.log2,
        # C's lgamma(-inf) is +inf (scipy's gammaln says -inf)
        "lgamma": lambda x: np.where(x == -np.inf, np.inf, sp.gammaln(x)),
        # JAX (and C's tgamma poles): digamma(-0) = -inf, -inf gives NaN
        "digamma": lambda x: np.where(x == 0, -np.inf, np.where(x == -np.inf, np.nan,
                                                                sp.digamma(x))),
    }[name]


def _lax_fn(name):
    _, jnp, lax = _jax()
    return {
        "erf": lax.erf, "erfc": lax.erfc, "erf_inv": lax.erf_inv, "atan": lax.atan,
        "asin": lax.asin, "acos": lax.acos, "sinh": lax.sinh, "cosh": lax.cosh,
        "asinh": lax.asinh, "acosh": lax.acosh, "atanh": lax.atanh, "cbrt": lax.cbrt,
        "log2": jnp.log2, "lgamma": lax.lgamma,
        "digamma": lax.digamma,
    }[name]


#: ulp of the larger magnitude, tessera vs JAX: tessera's error plus JAX's
#: (both measured over a dense sweep by this file's main; docs/jax.md)
VS_JAX = {"erf": 8, "erfc": 72, "erf_inv": 2, "atan": 5, "asin": 5, "acos": 5,
          "sinh": 28, "cosh": 28, "asinh": 4, "acosh": 5, "atanh": 4, "cbrt": 2, "log2": 3,
          "lgamma": 5,
          # JAX's digamma loses its relative accuracy near the root 1.4616
          # (1.7M ulp there; 1.1e-6 max(1, |digamma|) everywhere)
          "digamma": ("close", 2e-6, 2e-6)}
#: ulp, tessera vs the float64 result rounded to f32
VS_EXACT = {"erf": 2, "erfc": 5, "erf_inv": 66, "atan": 3, "asin": 5, "acos": 4,
            "sinh": 4, "cosh": 3, "asinh": 3, "acosh": 3, "atanh": 3, "cbrt": 2, "log2": 3,
            "lgamma": 4, "digamma": 4}
FUNCS = list(VS_JAX)


def _vs_jax(name):
    tol = VS_JAX[name]
    return ("ulp", tol) if isinstance(tol, int) else tol


# ---- running --------------------------------------------------------------------

def _unary_call(pallas_call, fn, x, block_rows=None):
    jax, _, _ = _jax()
    from jax.experimental import pallas as pl

    rows = x.shape[0]
    br = block_rows or rows

    def kernel(x_ref, o_ref):
        o_ref[...] = fn(x_ref[...])

    spec = pl.BlockSpec((br, 128), lambda i: (i, 0))
    return np.asarray(pallas_call(kernel, jax.ShapeDtypeStruct(x.shape, x.dtype),
                                  grid=(rows // br,), in_specs=[spec],
                                  out_specs=spec)(x))


def _oracle(fn, x):
    return _unary_call(H.jax_tpu_interpret(), fn, x)


def _tessera(fn, x, backend, block_rows=None):
    return _unary_call(H.tessera_call(backend), fn, x, block_rows)


def _ulp_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """|got - want| in ulp of the larger magnitude (f32 spacing); 0 where
    both are NaN or equal (infinities), inf where one only is NaN."""
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        mag = np.maximum(np.abs(g), np.abs(w))
        ulp = np.spacing(np.minimum(mag, np.finfo(F32).max).astype(F32)).astype(np.float64)
        err = np.abs(g - w) / ulp
    err[(g == w) | (np.isnan(g) & np.isnan(w))] = 0.0
    err[np.isnan(g) != np.isnan(w)] = np.inf
    err[np.isnan(err)] = np.inf  # an infinity against a finite value
    return err


def _exact_f32(name, x):
    with np.errstate(all="ignore"):
        return _exact(name)(x.astype(np.float64)).astype(F32)


# ---- tests ------------------------------------------------------------------------

@functools.cache
def _case(name):
    x = _sweep(name, 64 * 128).reshape(-1, 128)
    return x, _oracle(_lax_fn(name), x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", FUNCS)
def test_unary_matches_jax_and_exact(name, backend):
    H.bridge_module()
    x, want = _case(name)
    got = _tessera(_lax_fn(name), x, backend)
    assert got.dtype == np.float32 and got.shape == x.shape
    H.assert_outputs_match([got], [want], _vs_jax(name), f"{name} vs JAX")
    exact = _exact_f32(name, x)
    err = _ulp_error(got, exact)
    worst = np.unravel_index(np.argmax(err), err.shape)
    assert err.max() <= VS_EXACT[name], \
        f"{name}: {err.max()} ulp from the exact value at x = {x[worst]!r} " \
        f"(got {got[worst]!r}, want {exact[worst]!r})"
    # zeros, infinities, NaN: the same value (or both NaN), as IEEE and JAX give
    s = 5
    H.assert_outputs_match([got.reshape(-1)[:s]], [want.reshape(-1)[:s]], "exact",
                           f"{name} at {SPECIAL}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_atan2_matches_jax(backend):
    H.bridge_module()
    jax, jnp, lax = _jax()
    from jax.experimental import pallas as pl

    vals = np.array([0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 1e-30, -1e-30, 1e30, -1e30,
                     np.inf, -np.inf, np.nan, 3.0, -7.0, 0.1], F32)
    y, x = np.meshgrid(vals, vals, indexing="ij")            # 16 x 16: every pair
    rng = np.random.default_rng(5)
    ry = (rng.standard_normal((48, 16)) * 10.0 ** rng.integers(-3, 4, (48, 16))).astype(F32)
    rx = (rng.standard_normal((48, 16)) * 10.0 ** rng.integers(-3, 4, (48, 16))).astype(F32)
    y = np.concatenate([y, ry]).reshape(8, 128)
    x = np.concatenate([x, rx]).reshape(8, 128)

    def kernel(y_ref, x_ref, o_ref):
        o_ref[...] = lax.atan2(y_ref[...], x_ref[...])

    def run(pc):
        return np.asarray(pc(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32))(y, x))
    want = run(H.jax_tpu_interpret())
    got = run(H.tessera_call(backend))
    H.assert_outputs_match([got], [want], ("ulp", 4), "atan2 vs JAX")
    special = np.isin(y, vals) & np.isin(x, vals)
    H.assert_outputs_match([got[special]], [want[special]], ("ulp", 2), "atan2 special")
    err = _ulp_error(got, np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(F32))
    assert err.max() <= 3, err.max()
    # the quadrants of signed zeros and infinities exactly
    zeros = (y == 0) | np.isinf(y) | (x == 0) | np.isinf(x)
    H.assert_outputs_match([got[zeros]], [np.arctan2(y[zeros], x[zeros])], ("ulp", 1),
                           "atan2 zeros/infinities vs numpy")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["erf", "erf_inv", "atan", "sinh"])
def test_bf16_is_computed_in_f32(name, backend):
    """bf16 in, bf16 out: f32 arithmetic rounded once, like JAX (a result a
    few f32 ulp away may round to the neighbouring bf16: 1 bf16 ulp)."""
    H.bridge_module()
    import ml_dtypes

    x = _sweep(name, 16 * 128).reshape(-1, 128).astype(ml_dtypes.bfloat16)
    want = _oracle(_lax_fn(name), x)
    got = _tessera(_lax_fn(name), x, backend)
    assert got.dtype == want.dtype
    H.assert_outputs_match([got], [want], ("ulp", 1), f"{name} bf16 vs JAX")
    exact = _exact_f32(name, x.astype(F32)).astype(ml_dtypes.bfloat16)
    H.assert_outputs_match([got], [exact], ("ulp", 1), f"{name} bf16 vs exact")


@pytest.mark.parametrize("backend", BACKENDS)
def test_erf_inv_is_xlas(backend):
    """f32 erf_inv is XLA's algorithm step for step (JAX's tests compare it
    bit for bit): equal to JAX's result on most of the sweep, and within
    the few ulp that XLA:CPU's fused multiply-adds and its own log1p make
    elsewhere; the value JAX's ops_test.py checks included."""
    H.bridge_module()
    x, want = _case("erf_inv")
    got = _tessera(_lax_fn("erf_inv"), x, backend)
    same = (got == want) | (np.isnan(got) & np.isnan(want))
    assert same.mean() >= 0.9, f"only {same.mean():.3f} of erf_inv equals JAX's"
    pts = np.resize(np.array([-0.999517, -0.4, 0.72, 0.999517, 0.0, -0.0], F32), (8, 128))
    H.assert_outputs_match([_tessera(_lax_fn("erf_inv"), pts, backend)],
                           [_oracle(_lax_fn("erf_inv"), pts)], "exact", "erf_inv points")


def _all_bf16(lo, hi):
    """Every bf16 value in [lo, hi], as rows of 128 (the last row repeats)."""
    import ml_dtypes

    b = np.arange(1 << 16, dtype=np.uint16).view(ml_dtypes.bfloat16)
    v = b[(b.astype(F32) >= lo) & (b.astype(F32) <= hi)]
    return np.resize(v, ((v.size + 127) // 128, 128))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name,lo,hi", [("expm1", -20.0, 20.0), ("tan", -1.57, 1.57)])
def test_bf16_few_op_functions_round_once(name, lo, hi, backend):
    """bf16 expm1 and tan (a few tessera ops each) are computed in f32 and
    rounded to bf16 once, as XLA computes them: equal to JAX's result for
    every bf16 input but the rare f32 result that lies within an f32 ulp or
    two of a bf16 rounding boundary. Rounding each op to bf16 would be a
    bf16 ulp off on a good part of them."""
    H.bridge_module()
    _, jnp, _ = _jax()
    fn = {"expm1": jnp.expm1, "tan": jnp.tan}[name]
    x = _all_bf16(lo, hi)
    want = _oracle(fn, x)
    got = _tessera(fn, x, backend)
    assert got.dtype == want.dtype
    same = (got == want) | (np.isnan(got.astype(F32)) & np.isnan(want.astype(F32)))
    assert same.mean() >= 0.999, f"{name}: {int((~same).sum())} of {same.size} differ from JAX"
    H.assert_outputs_match([got], [want], ("ulp", 1), f"{name} bf16 vs JAX")


# ---- threefry --------------------------------------------------------------------

def _threefry_kernel(shapes):
    """A kernel binding threefry2x32 on operands of `shapes` (k0, k1, x0, x1,
    broadcast as JAX's), taken from the top-left corners of the inputs."""
    jax, jnp, lax = _jax()
    from jax._src.random import threefry2x32 as tf

    def part(ref, i, shape):
        if shape == ():
            return jnp.reshape(ref[i, :1, :1], ())
        return ref[i, :shape[0], :shape[1]]

    def kernel(k_ref, c_ref, o0_ref, o1_ref):
        o0, o1 = tf.threefry2x32_p.bind(part(k_ref, 0, shapes[0]), part(k_ref, 1, shapes[1]),
                                        part(c_ref, 0, shapes[2]), part(c_ref, 1, shapes[3]))
        o0_ref[...] = jnp.broadcast_to(o0, o0_ref.shape)
        o1_ref[...] = jnp.broadcast_to(o1, o1_ref.shape)
    return kernel


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", [((1, 1), (1, 1), (8, 128), (8, 128)),
                                    ((), (), (8, 128), (8, 128)),
                                    ((1, 128), (1, 128), (8, 128), (8, 128))],
                         ids=["key11", "keyscalar", "keyrow"])
def test_threefry2x32_bits_match_jax(shapes, backend):
    H.bridge_module()
    jax, jnp, _ = _jax()
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    rng = np.random.default_rng(7)
    keys = rng.integers(0, 2 ** 32, (2, 8, 128), dtype=np.uint32)
    counts = rng.integers(0, 2 ** 32, (2, 8, 128), dtype=np.uint32)
    counts[0, 0, :4] = [0, 1, 0xFFFFFFFF, 0x80000000]
    out = jax.ShapeDtypeStruct((8, 128), jnp.uint32)

    def run(pc):
        return tuple(np.asarray(o) for o in pc(_threefry_kernel(shapes), (out, out))(keys, counts))
    want = run(H.jax_tpu_interpret())
    got = run(H.tessera_call(backend))
    H.assert_outputs_match(got, want, "exact", "threefry2x32")


@pytest.mark.parametrize("backend", BACKENDS)
def test_threefry_shipped_kernel_is_jax_random_bits(backend):
    """jax's own Pallas threefry kernel (ops/tpu/random/threefry.py) gives
    `jax.random.bits` bit for bit; 300 x 200 pads to its 256 x 256 blocks
    (a grid of 2 x 1, an unpadded shape in its counters)."""
    tj = H.bridge_module()
    jax, _, _ = _jax()
    from jax.experimental.pallas.ops.tpu.random import threefry

    for shape, seed in (((16, 256), 0x12345678), ((300, 200), 42)):
        key = np.array([seed, 0x9ABCDEF0], np.uint32)
        want = np.asarray(jax.random.bits(jax.random.wrap_key_data(key, impl="threefry2x32"),
                                          shape, "uint32"))
        with tj.interpret(backend=backend):
            got = np.asarray(threefry.plthreefry_random_bits(key, 32, shape))
        H.assert_outputs_match([got], [want], "exact", f"threefry {shape}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_random_keys_in_kernel(backend):
    """Typed threefry keys inside a kernel: jax.random.key (from an SMEM
    seed), wrap_key_data, split (and unstack), fold_in, key_data, bits of 32
    and 8 bits, uniform (bit for bit), normal (through erf_inv)."""
    H.bridge_module()
    jax, jnp, _ = _jax()
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(k_ref, s_ref, o_ref, u_ref, n_ref, b8_ref):
        key = jax.random.wrap_key_data(k_ref[0, :], impl="threefry2x32")
        a, b = jax.random.split(jax.random.key(s_ref[0]))
        c = jax.random.fold_in(a, 7)
        o_ref[0] = jax.random.bits(key, (8, 128), jnp.uint32)
        o_ref[1] = jax.random.bits(b, (8, 128), jnp.uint32)
        o_ref[2] = jax.random.bits(c, (8, 128), jnp.uint32)
        data = jax.random.key_data(jax.random.split(key, 4)).reshape(1, 8)
        o_ref[3] = jnp.broadcast_to(data, (8, 8)).repeat(16, axis=1)
        u_ref[...] = jax.random.uniform(key, (8, 128))
        n_ref[...] = jax.random.normal(b, (8, 128))
        b8_ref[...] = jax.random.bits(c, (8, 128), jnp.uint8)

    outs = (jax.ShapeDtypeStruct((4, 8, 128), jnp.uint32),
            jax.ShapeDtypeStruct((8, 128), jnp.float32),
            jax.ShapeDtypeStruct((8, 128), jnp.float32),
            jax.ShapeDtypeStruct((8, 128), jnp.uint8))
    specs = [pl.BlockSpec(memory_space=pltpu.VMEM), pl.BlockSpec(memory_space=pltpu.SMEM)]
    args = (np.array([[0x12345678, 0x9ABCDEF0]], np.uint32), np.array([-5], np.int32))

    def run(pc):
        return tuple(np.asarray(o) for o in pc(kernel, outs, in_specs=specs)(*args))
    want = run(H.jax_tpu_interpret())
    got = run(H.tessera_call(backend))
    # normal = sqrt(2) erf_inv(u): erf_inv's bound vs JAX, in absolute terms
    H.assert_outputs_match(got, want, ["exact", "exact", ("close", 5e-6, 1e-6), "exact"],
                           "random")


# ---- other primitives and common kernels ----------------------------------------

def _kernel_vs_jax(body, inputs, out_shapes, backend, tolerance):
    jax, jnp, _ = _jax()

    def kernel(*refs):
        n = len(inputs)
        outs = body(*(r[...] for r in refs[:n]))
        for r, o in zip(refs[n:], outs):
            r[...] = o

    shapes = tuple(jax.ShapeDtypeStruct(s, d) for s, d in out_shapes)

    def run(pc):
        return tuple(np.asarray(o) for o in pc(kernel, shapes)(*inputs))
    want = run(H.jax_tpu_interpret())
    got = run(H.tessera_call(backend))
    H.assert_outputs_match(got, want, tolerance)
    return got


@pytest.mark.parametrize("backend", BACKENDS)
def test_polynomial_split_cumlogsumexp(backend):
    H.bridge_module()
    jax, jnp, lax = _jax()
    x = np.random.default_rng(3).standard_normal((8, 128)).astype(F32)

    def body(x):
        p = lax.polynomial(x, [1.0, -0.5, 0.25, 0.125])           # unrolled Horner
        q = lax.polynomial(x, [0.1 * k for k in range(12)])        # > 8 terms: a scan
        a, b = jnp.split(x, [32], axis=1)
        c = jnp.concatenate([b, a], axis=1)
        d = lax.cumlogsumexp(x, axis=1)
        e = lax.cumlogsumexp(x, axis=0, reverse=True)
        return p, q, c, d, e
    f = ((8, 128), jnp.float32)
    # XLA:CPU contracts Horner's mul and add into FMAs (one rounding
    # instead of two), tessera rounds each: close, not equal. logaddexp
    # cancels (a result near 0 from operands near +-0.7): an absolute bound
    _kernel_vs_jax(body, [x], [f] * 5, backend,
                   [("close", 1e-6, 1e-6), ("close", 1e-6, 1e-6), "exact",
                    ("close", 1e-6, 1e-6), ("close", 1e-6, 1e-6)])


@pytest.mark.parametrize("backend", BACKENDS)
def test_common_activations(backend):
    """gelu (exact: erfc), softplus, log_softmax, mish, elu inside a kernel."""
    H.bridge_module()
    jax, jnp, lax = _jax()
    # |x| <= 8: beyond, JAX's erfc(-x/sqrt(2)) is a denormal it flushes to 0
    x = np.clip(np.random.default_rng(4).standard_normal((8, 128)) * 4, -8, 8).astype(F32)

    def body(x):
        return (jax.nn.gelu(x, approximate=False), jax.nn.softplus(x),
                jax.nn.log_softmax(x, axis=-1), x * jnp.tanh(jax.nn.softplus(x)),
                jax.nn.elu(x), jnp.arctan2(x, x[::-1]))
    f = ((8, 128), jnp.float32)
    got = _kernel_vs_jax(body, [x], [f] * 6, backend,
                         [("ulp", VS_JAX["erfc"] + 4), ("ulp", 4), ("close", 2e-6, 1e-6),
                          ("ulp", 10), ("ulp", 4), ("ulp", 4)])
    x64 = x.astype(np.float64)
    from scipy import special as sp
    gelu = x64 * 0.5 * sp.erfc(-(x * F32(1 / math.sqrt(2))).astype(np.float64))
    H.assert_outputs_match([got[0]], [gelu.astype(F32)], ("ulp", VS_EXACT["erfc"] + 2),
                           "gelu exact vs float64")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["lgamma", "digamma"])
def test_gamma_functions_of_negative_x(name, backend):
    """lgamma and digamma for x < 0 by reflection (log(pi/|sin(pi x)|) -
    lgamma(1 - x), digamma(1 - x) - pi cot(pi x)): the two terms cancel near
    the function's roots, so the bound is absolute, scaled by max(1, |f|):
    2e-6 (measured: lgamma 1.5e-6, JAX 2.1e-7; digamma 1.1e-6, JAX 1.2e-6).
    The poles give JAX's values (lgamma inf, digamma NaN)."""
    H.bridge_module()
    _, _, lax = _jax()
    x = np.concatenate([np.array([-1, -2, -3, -30, -0.5, -2.5, -1e-3, -1e-30], F32),
                        _lin(-20, -1e-3, 64 * 128 - 8)]).reshape(-1, 128)
    fn = {"lgamma": lax.lgamma, "digamma": lax.digamma}[name]
    want = _oracle(fn, x)
    got = _tessera(fn, x, backend)
    H.assert_outputs_match([got], [want], ("close", 3e-6, 3e-6), f"{name} x < 0 vs JAX")
    exact = _exact_f32(name, x)
    H.assert_outputs_match([got], [exact], ("close", 2e-6, 2e-6), f"{name} x < 0 vs exact")
    H.assert_outputs_match([got.reshape(-1)[:4]], [want.reshape(-1)[:4]], "exact",
                           f"{name} at its poles")


def test_unsupported_special_function_names_it():
    tj = H.bridge_module()
    jax, jnp, lax = _jax()

    def kernel(x_ref, o_ref):
        o_ref[...] = lax.igamma(x_ref[...], x_ref[...])

    f = tj.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32))
    with pytest.raises(tj.TranslationError) as info:
        f(np.ones((8, 128), F32))
    assert info.value.primitive == "igamma"
    assert "`igamma` is not supported" in str(info.value)
    assert info.value.file == __file__


# ---- the dense sweep (docs/jax.md) ----------------------------------------------

def measure(n: int = 4 * 1024 * 1024) -> None:
    """Max ulp errors over an n-point sweep of each function: tessera (cpu
    backend) and JAX (jax.jit on CPU, as its TPU interpret mode computes
    it) against the float64 result, and tessera against JAX."""
    jax, _, _ = _jax()
    print(f"| function | points | tessera vs exact | JAX vs exact | tessera vs JAX | "
          f"test bound vs JAX | test bound vs exact |")
    print("|---|---|---|---|---|---|---|")
    for name in FUNCS:
        x = _sweep(name, n).reshape(-1, 128)
        fn = _lax_fn(name)
        got = _tessera(fn, x, "cpu", block_rows=512)
        want = np.asarray(jax.jit(fn)(x))
        exact = _exact_f32(name, x)
        finite = np.isfinite(exact) | np.isnan(exact)

        def m(a, b):
            e = _ulp_error(a, b)
            i = np.unravel_index(np.argmax(e), e.shape)
            return f"{e.max():.2f} (x = {x[i]:.6g})"
        print(f"| `{name}` | {x.size} | {m(got, exact)} | {m(want, exact)} | {m(got, want)} "
              f"| {VS_JAX[name]} | {VS_EXACT[name]} |")
        del finite


if __name__ == "__main__":
    measure(int(sys.argv[1]) if len(sys.argv) > 1 else 4 * 1024 * 1024)
