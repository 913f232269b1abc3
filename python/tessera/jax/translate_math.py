"""Math and PRNG primitives the tessera IR has no op for, expanded into
ops it has (rules of the registry of translate_core.py).

* `threefry2x32`: the Threefry-2x32 block cipher (Salmon et al., "Parallel
  random numbers: as easy as 1, 2, 3", SC'11; 20 rounds, key schedule
  ks2 = k0 ^ k1 ^ 0x1BD11BDA, a key injection after every 4 rounds), as
  u32 `add` (wrapping), `xor`, `shl`, `shrl`: the same bits as JAX's.
* `erf`, `erfc`: polynomial approximations fitted for this
  module (weighted least squares on Chebyshev nodes against scipy's float64
  functions, reweighted towards minimax; `_fit()` regenerates the
  coefficients), evaluated in f32 (bf16/f16 in f32, rounded once at the
  end, as JAX does):
  - erf(x), |x| < 1: x + x R(x^2), R of degree 7 (the small correction
    x R keeps the rounding of the polynomial below an ulp);
  - erfc(x), x >= 0.5, and erf(x) = 1 - erfc(x) for |x| >= 1: erfc(x) =
    exp(-x^2) erfcx(x), erfcx (the scaled complementary function) a
    degree-9 polynomial on each of [0.5, 1.25), [1.25, 2.5), [2.5, 5),
    [5, 10.1] (x beyond: erfc underflows); exp(-x^2) as exp(-h^2) exp(-(x -
    h)(x + h)) with h = x with its 12 low mantissa bits cleared, so h^2 is
    exact (a rounded x^2 costs up to 40 ulp near x = 9);
  - erfc(x), x < 0.5: 1 - erf(x) (2 - erfc(|x|) for x <= -1);
* `erf_inv`: XLA's algorithm (its f32 `ErfInv`, what JAX and Pallas's
  interpret modes compute), so that results equal JAX's: w = -log1p(x *
  -x); x P(w - 2.5) for w < 5, x Q(sqrt(w) - 3) beyond (M. Giles,
  "Approximating the erfinv function", GPU Computing Gems, 2011, single
  precision), P and Q Horner polynomials of degree 8 with Giles's
  coefficients, each step rounded; +-1 gives +-inf, |x| > 1 NaN, -0 stays
  -0. XLA:CPU fuses each Horner step into one fused multiply-add where the
  host has FMA and has its own log1p; tessera rounds every step (the same
  bits on every host) and uses its log1p, so a few percent of inputs
  differ from JAX's in the last bit.
* `lgamma`, `digamma`: polynomials relative to their roots (1, 2; 1.4616)
  near them, Stirling's / the asymptotic series for large x, the
  recurrences f(x + 1) below, reflection for x < 0.
* typed threefry PRNG keys in a kernel: `random_seed`, `random_wrap`,
  `random_unwrap`, `random_bits`, `random_split`, `random_fold_in` (JAX's
  threefry functions with jax_threefry_partitionable, bit for bit).
* inverse trigonometric and hyperbolic functions: `atan` (reduced to
  [-tan(pi/8), tan(pi/8)] through atan(1/a) and atan((a-1)/(a+1)), then
  z + z^3 S(z^2), S of degree 6), `atan2` (atan of min/max with the
  quadrant and IEEE special cases: signed zeros, infinities), `asin`,
  `acos` (atan2 of x and sqrt((1-x)(1+x))), `sinh`, `cosh` (expm1/exp, and
  exp(a/2)^2/2 where exp(a) overflows), `asinh`, `acosh`, `atanh`
  (log1p forms), `cbrt` (exp(log|x|/3) and a Newton step), `log2`.
* `polynomial` (Horner, as JAX lowers it), `split`, `unstack` (static
  slices), `cumlogsumexp` (a log-step scan of logaddexp).

Measured errors (docs/jax.md "Tolerances") are checked by
python/tests/test_math_prims.py.
"""

from __future__ import annotations

import math

import numpy as np

from .. import _builder as B
from .translate_core import BCAST_OPS, RESHAPE_OPS, bcast, out_type, register, reshape_to

# ---- coefficients (`_fit()` prints them) -----------------------------------

# erf(x)/x - 1 = R(x^2) on |x| < 1
_ERF_SMALL = (0.12837916612625122, -0.37612637877464294, 0.11283782869577408,
              -0.02686544507741928, 0.005221074912697077, -0.0008484710706397891,
              0.00011270540562691167, -9.680125913291704e-06)
# erfcx(x) = exp(x^2) erfc(x) on [lo, next lo): (lo, centre c, P(x - c))
_ERFCX = (
    (0.5, 0.875, (0.4643115699291229, -0.3158338963985443, 0.18795691430568695,
                  -0.10091439634561539, 0.049828894436359406, -0.02292580157518387,
                  0.009913244284689426, -0.004067903384566307, 0.0016675434308126569,
                  -0.0006164833321236074)),
    (1.25, 1.875, (0.2694299817085266, -0.11801671981811523, 0.048148613423109055,
                   -0.01849202997982502, 0.0067383768036961555, -0.002343318657949567,
                   0.0007790502859279513, -0.0002503868308849633, 8.473706839140505e-05,
                   -2.5085446395678446e-05)),
    (2.5, 3.75, (0.14558972418308258, -0.03645625710487366, 0.008878722786903381,
                 -0.002107280306518078, 0.0004883906804025173, -0.00011060403630835935,
                 2.4218159524025396e-05, -5.274686373013537e-06, 1.3469508530761232e-06,
                 -2.7796204449259676e-07)),
    (5.0, 7.550000190734863, (0.07408816367387772, -0.009647947736084461,
                              0.001246134052053094, -0.00015967374201864004,
                              2.0320721887401305e-05, -2.5635638394305715e-06,
                              3.1240844577951066e-07, -3.8916908806641004e-08,
                              6.323446211098371e-09, -7.691564607448242e-10)),
)
_ERFC_MAX = 10.1          # erfc(10.1) < 2^-149: beyond, the result is 0
# erf_inv(x)/x = P(w - 2.5) for w < 5, Q(sqrt(w) - 3) beyond: Giles's
# single-precision coefficients (the ones XLA's ErfInv uses), constant
# term first
_ERFINV_W = 5.0
_ERFINV_CENTRAL = (1.50140941, 0.246640727, -0.00417768164, -0.00125372503,
                   0.00021858087, -4.39150654e-06, -3.5233877e-06, 3.43273939e-07,
                   2.81022636e-08)
_ERFINV_TAIL = (2.83297682, 1.00167406, 0.00943887047, -0.0076224613, 0.00573950773,
                -0.00367342844, 0.00134934322, 0.000100950558, -0.000200214257)
# lgamma(x) = (x - 1)(x - 2) A(x - 1.75) on [0.75, 2.75), B(x - 3.625) on
# [2.75, 4.5), Stirling's series beyond
_LGAMMA_A = (0.4501393139362335, -0.11948160827159882, 0.044520504772663116,
             -0.019053136929869652, 0.008775191381573677, -0.004234755411744118,
             0.0021045850589871407, -0.0010216956725344062, 0.0005111982463859022,
             -0.000371851259842515, 0.00021515102707780898, 2.527800461393781e-05,
             -2.8088355975341983e-05, -7.759158324915916e-05, 4.5826258428860456e-05)
_LGAMMA_B = (1.3414145708084106, 1.1436282396316528, 0.15868011116981506,
             -0.016653336584568024, 0.0026018149219453335, -0.00048433689516969025,
             9.954402776202187e-05, -2.1640275008394383e-05, 4.861933120992035e-06,
             -1.3224429267211235e-06, 3.5930338526668493e-07)
# B_2k / (2k (2k - 1)), k = 1..7: the series in 1/x^2 of lgamma - Stirling
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188, -691 / 360360, 1 / 156)
# digamma(x) = (x - x0) A(x - 2) on [1, 3) (x0 its positive root, as
# hi + lo), B(x - 4.5) on [3, 6), the asymptotic series beyond
_DIGAMMA_ROOT = 1.4616321449683623
_DIGAMMA_ROOT_HI = float(np.float32(_DIGAMMA_ROOT))   # y - hi is exact near the root
_DIGAMMA_A = (0.7853075265884399, -0.26073896884918213, 0.10899996757507324,
              -0.04954998940229416, 0.023446261882781982, -0.011349407956004143,
              0.005560904275625944, -0.002689189976081252, 0.0013239141553640366,
              -0.0007918257033452392, 0.0004079423670191318, -2.8754493541782722e-05,
              4.609740699379472e-06, -0.00011874221672769636, 6.21060244156979e-05)
_DIGAMMA_B = (1.3888709545135498, 0.24872511625289917, -0.030778441578149796,
              0.0050536333583295345, -0.0009290697053074837, 0.00018170996918343008,
              -3.692940663313493e-05, 7.332274435611907e-06, -1.4794544540563948e-06,
              4.640313022719056e-07, -1.1185238690814003e-07)
# B_2k / 2k, k = 1..6: digamma(x) = log x - 1/(2x) - sum B_2k / (2k x^2k)
_DIGAMMA_ASYM = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760)
# (atan(z)/z - 1) / z^2 = S(z^2) on |z| <= tan(pi/8)
_ATAN = (-0.3333333432674408, 0.20000144839286804, -0.1429569125175476,
         0.11358461529016495, -0.11845970153808594, 0.21697677671909332,
         -0.32269054651260376)
_TAN_PI_8 = 0.41421356237309503
_TAN_3PI_8 = 2.414213562373095


def _fit():  # pragma: no cover - a development tool (needs scipy)
    """Re-derives and prints the coefficients above."""
    from scipy import special as sp

    def fit(fun, a, b, deg, rel=True, n=4000):
        v = (a + b) / 2 + (b - a) / 2 * np.cos(np.pi * (np.arange(n) + 0.5) / n)
        y = fun(v)
        V = np.vander(v, deg + 1, increasing=True)
        w = 1 / np.abs(y) if rel else np.ones_like(y)
        lw = np.ones_like(y)
        for _ in range(30):  # Lawson's reweighting towards the minimax fit
            W = w * np.sqrt(lw)
            c = np.linalg.lstsq(V * W[:, None], y * W, rcond=None)[0]
            err = np.abs(V @ c - y) * w
            lw = lw * err / err.max() + 1e-300
            lw /= lw.sum()
        return [float(np.float32(x)) for x in c], float(err.max())

    def erf_over_x(t):
        s = np.sqrt(np.maximum(t, 1e-300))
        return np.where(t > 0, sp.erf(s) / s, 2 / np.sqrt(np.pi))
    print("_ERF_SMALL", fit(lambda t: erf_over_x(t) - 1, 0, 1, 7, rel=False))
    for lo, hi in [(0.5, 1.25), (1.25, 2.5), (2.5, 5), (5, _ERFC_MAX)]:
        c0 = float(np.float32((lo + hi) / 2))
        print("_ERFCX", lo, c0, fit(lambda s: sp.erfcx(s + c0), lo - c0, hi - c0, 9))

    print("_LGAMMA_A", fit(lambda v: sp.gammaln(v + 1.75) / ((v + 0.75) * (v - 0.25)), -1, 1, 14))
    print("_LGAMMA_B", fit(lambda v: sp.gammaln(v + 3.625), -0.875, 0.875, 10))

    r0 = _DIGAMMA_ROOT
    print("_DIGAMMA_A", fit(lambda v: sp.digamma(v + 2) / (v + 2 - r0), -1, 1, 14))
    print("_DIGAMMA_B", fit(lambda v: sp.digamma(v + 4.5), -1.5, 1.5, 10))

    def atan_over_z(t):
        s = np.sqrt(np.maximum(t, 1e-300))
        return np.where(t > 0, np.arctan(s) / s, 1.0)
    print("_ATAN", fit(lambda t: np.where(t > 0, (atan_over_z(t) - 1) / np.where(t > 0, t, 1),
                                          -1 / 3), 0, _TAN_PI_8 ** 2, 6))


# ---- building helpers ----------------------------------------------------------

class _E:
    """Elementwise expression building in one region on values of one
    shape (scalars mix with blocks; constants are scalars)."""

    def __init__(self, t, region, shape, dtype="f32"):
        self.t, self.r, self.shape, self.dtype = t, region, tuple(shape), dtype

    def ty(self, dtype=None) -> B.Type:
        return B.Type.value(dtype or self.dtype, self.shape)

    def c(self, v, dtype=None) -> B.Value:
        return self.t.const(self.r, v, B.Type.value(dtype or self.dtype, ()))

    def _rt(self, args, dtype):
        shape = ()
        for a in args:
            if isinstance(a, B.Value) and a.type.kind != "scalar":
                shape = a.type.shape
        return B.Type.value(dtype, shape)

    def _v(self, a, dtype):
        return a if isinstance(a, B.Value) else self.c(a, dtype)

    def op(self, mnemonic, *args, dtype=None):
        dt = dtype or next((a.type.dtype for a in args if isinstance(a, B.Value)), self.dtype)
        vals = [self._v(a, dt) for a in args]
        return self.t.emit(self.r, mnemonic, vals, self._rt(vals, dt))

    def cmp(self, mnemonic, a, b):
        dt = a.type.dtype if isinstance(a, B.Value) else b.type.dtype
        vals = [self._v(a, dt), self._v(b, dt)]
        return self.t.emit(self.r, mnemonic, vals, self._rt(vals, "i1"))

    def full(self, a: B.Value) -> B.Value:
        if a.type.kind == "scalar" and self.shape:
            return self.t.emit(self.r, "broadcast", [a], B.Type.value(a.type.dtype, self.shape))
        return a

    def sel(self, c, a, b):
        dt = next(x.type.dtype for x in (a, b) if isinstance(x, B.Value))
        a, b = self._v(a, dt), self._v(b, dt)
        if c.type.kind != "scalar" or a.type.kind != "scalar" or b.type.kind != "scalar":
            c, a, b = self.full(c), self.full(a), self.full(b)
        return self.t.emit(self.r, "select", [c, a, b], a.type)

    def __getattr__(self, name):  # e.add(a, b), e.exp(a), ...
        if name.startswith("_"):
            raise AttributeError(name)
        return lambda *args: self.op(name, *args)

    def poly(self, coeffs, v):
        """Horner: c0 + v (c1 + v (c2 + ...)), one mul and one add a step."""
        acc = self.c(coeffs[-1])
        for ci in coeffs[-2::-1]:
            acc = self.add(self.mul(acc, v), self.c(ci))
        return acc

    def bits(self, x):
        return self.t.emit(self.r, "bitcast", [x], B.Type.value("u32", x.type.shape))

    def from_bits(self, u):
        return self.t.emit(self.r, "bitcast", [u], B.Type.value("f32", u.type.shape))

    def copysign(self, mag, sgn):
        """|mag| with the sign bit of sgn."""
        m = self.op("and", self.bits(mag), self.c(0x7FFFFFFF, "u32"))
        s = self.op("and", self.bits(sgn), self.c(0x80000000, "u32"))
        return self.from_bits(self.op("or", m, s))

    def signbit(self, x):
        return self.cmp("ne", self.op("and", self.bits(x), self.c(0x80000000, "u32")),
                        self.c(0, "u32"))


#: what the f32 expressions of this module build besides a function's own
#: transcendental ops: arithmetic, comparisons, selects, the bit operations
#: on f32 patterns, broadcasts of scalars, the conversions of bf16/f16
_F32_OPS = ("convert", "broadcast", "select", "bitcast", "and", "or", "add", "sub", "mul",
            "div", "neg", "abs", "max", "min", "eq", "ne", "lt", "le", "gt", "ge")


def _float_unary(name: str, *ops: str):
    """Decorator: fn(e, x), an f32 expression, is the rule of the unary
    float primitive `name` (which builds _F32_OPS and `ops`): bf16/f16 are
    widened to f32 and the result rounded once, as JAX does."""
    def add(fn):
        def handler(t, env, region, eqn, used):
            x = t.read(env, region, eqn.invars[0])
            rt = out_type(eqn)
            if x.type.dtype not in B.FLOAT_DTYPES:
                raise t.fail(f"`{eqn.primitive.name}` of {x.type.dtype}")
            e = _E(t, region, x.type.shape)
            x32 = x if x.type.dtype == "f32" else t.emit(region, "convert", [x], e.ty())
            r = e.full(fn(e, x32))
            return [r if rt.dtype == "f32" else t.emit(region, "convert", [r], rt)]
        handler.__qualname__ = f"_float_unary({fn.__name__})"
        register(name, emits=_F32_OPS + ops)(handler)
        return fn
    return add


def _float_binary(name: str, *ops: str):
    """Decorator: fn(e, a, b) is the rule of the binary float primitive
    `name`, as _float_unary (operands broadcast as JAX's)."""
    def add(fn):
        def handler(t, env, region, eqn, used):
            rt = out_type(eqn)
            a, b = (bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
            if rt.dtype not in B.FLOAT_DTYPES:
                raise t.fail(f"`{eqn.primitive.name}` of {rt.dtype}")
            e = _E(t, region, rt.shape)
            if rt.dtype != "f32":
                a, b = (t.emit(region, "convert", [v], B.Type.value("f32", v.type.shape))
                        for v in (a, b))
            r = e.full(fn(e, a, b))
            return [r if rt.dtype == "f32" else t.emit(region, "convert", [r], rt)]
        handler.__qualname__ = f"_float_binary({fn.__name__})"
        register(name, emits=_F32_OPS + BCAST_OPS + ops)(handler)
        return fn
    return add


# ---- erf family ------------------------------------------------------------------

def _exp_neg_square(e, a):
    """exp(-a^2) without the rounding of a^2: h = a with its low 12 mantissa
    bits cleared (h^2 is exact), a^2 = h^2 + (a - h)(a + h)."""
    h = e.from_bits(e.op("and", e.bits(a), e.c(0xFFFFF000, "u32")))
    lo = e.mul(e.sub(a, h), e.add(a, h))
    return e.mul(e.exp(e.neg(e.mul(h, h))), e.exp(e.neg(lo)))


def _erfc_tail(e, a, pieces=_ERFCX):
    """erfc(a) for a in [0.5, _ERFC_MAX] (a clamped there by the caller)."""
    r = None
    for lo, c0, coeffs in pieces:
        p = e.poly(coeffs, e.sub(a, e.c(c0)))
        r = p if r is None else e.sel(e.cmp("ge", a, e.c(lo)), p, r)
    return e.mul(_exp_neg_square(e, a), r)


def _erf_small(e, x):
    return e.add(x, e.mul(x, e.poly(_ERF_SMALL, e.mul(x, x))))


@_float_unary("erf", "exp")
def _erf(e, x):
    a = e.abs(x)
    small = _erf_small(e, x)
    ac = e.max(e.min(a, e.c(4.0)), e.c(1.0))  # erf rounds to 1 beyond 3.92
    big = e.sub(e.c(1.0), _erfc_tail(e, ac, _ERFCX[:3]))
    big = e.sel(e.cmp("lt", x, e.c(0.0)), e.neg(big), big)
    return e.sel(e.cmp("lt", a, e.c(1.0)), small, big)


@_float_unary("erfc", "exp")
def _erfc(e, x):
    a = e.abs(x)
    tail = _erfc_tail(e, e.max(e.min(a, e.c(_ERFC_MAX)), e.c(0.5)))
    near = e.sub(e.c(1.0), _erf_small(e, x))          # -1 < x < 0.5
    neg = e.sub(e.c(2.0), tail)                        # x <= -1
    r = e.sel(e.cmp("lt", a, e.c(1.0)), near, neg)
    return e.sel(e.cmp("ge", x, e.c(0.5)), tail, r)


@_float_unary("erf_inv", "log1p", "sqrt")
def _erf_inv(e, x):
    # XLA's steps in XLA's order: a different but equally accurate
    # expansion would not give JAX's bits, which JAX's tests compare
    w = e.neg(e.log1p(e.mul(x, e.neg(x))))
    p = e.poly(_ERFINV_CENTRAL, e.sub(w, e.c(_ERFINV_W / 2)))
    q = e.poly(_ERFINV_TAIL, e.sub(e.sqrt(w), e.c(3.0)))
    r = e.mul(e.sel(e.cmp("lt", w, e.c(_ERFINV_W)), p, q), x)   # -0 stays -0
    return e.sel(e.cmp("eq", e.abs(x), e.c(1.0)), e.mul(x, e.c(math.inf)), r)


def _lgamma_pos(e, z):
    """lgamma(z) for z > 0 (0 gives inf)."""
    small = e.cmp("lt", z, e.c(0.75))
    y = e.sel(small, e.add(z, e.c(1.0)), z)         # lgamma(z) = lgamma(z + 1) - log z
    a = e.mul(e.mul(e.sub(y, e.c(1.0)), e.sub(y, e.c(2.0))), e.poly(_LGAMMA_A, e.sub(y, e.c(1.75))))
    a = e.add(a, e.c(0.0))                           # lgamma(1) is +0
    b = e.poly(_LGAMMA_B, e.sub(y, e.c(3.625)))
    yc = e.max(y, e.c(4.5))
    u = e.div(e.c(1.0), yc)
    series = e.mul(u, e.poly(_STIRLING, e.mul(u, u)))
    c = e.add(e.mul(e.sub(yc, e.c(0.5)), e.sub(e.log(yc), e.c(1.0))),
              e.add(e.c(0.5 * math.log(2 * math.pi) - 0.5), series))
    r = e.sel(e.cmp("lt", y, e.c(2.75)), a, e.sel(e.cmp("lt", y, e.c(4.5)), b, c))
    return e.sel(small, e.sub(r, e.log(z)), r)


@_float_unary("lgamma", "log", "round", "sin")
def _lgamma(e, x):
    """lgamma for x > 0 as above; x < 0 by reflection: log(pi / |sin(pi x)|)
    - lgamma(1 - x), with sin(pi r) of the exact r = x - round(x) (poles at
    the non-positive integers give inf)."""
    neg = e.cmp("lt", x, e.c(0.0))
    pos = _lgamma_pos(e, e.sel(neg, e.sub(e.c(1.0), x), x))
    r = e.sub(x, e.round(x))
    s = e.abs(e.sin(e.mul(r, e.c(math.pi))))
    refl = e.sub(e.log(e.div(e.c(math.pi), s)), pos)
    refl = e.sel(e.cmp("eq", x, e.c(-math.inf)), e.c(math.inf), refl)
    return e.sel(neg, refl, pos)


def _digamma_pos(e, z):
    """digamma(z) for z > 0."""
    small = e.cmp("lt", z, e.c(1.0))
    y = e.sel(small, e.add(z, e.c(1.0)), z)         # digamma(z) = digamma(z + 1) - 1/z
    a = e.mul(e.sub(e.sub(y, e.c(_DIGAMMA_ROOT_HI)), e.c(_DIGAMMA_ROOT - _DIGAMMA_ROOT_HI)),
              e.poly(_DIGAMMA_A, e.sub(y, e.c(2.0))))
    b = e.poly(_DIGAMMA_B, e.sub(y, e.c(4.5)))
    yc = e.max(y, e.c(6.0))
    u = e.div(e.c(1.0), yc)
    uu = e.mul(u, u)
    c = e.sub(e.sub(e.log(yc), e.mul(u, e.c(0.5))), e.mul(uu, e.poly(_DIGAMMA_ASYM, uu)))
    r = e.sel(e.cmp("lt", y, e.c(3.0)), a, e.sel(e.cmp("lt", y, e.c(6.0)), b, c))
    return e.sel(small, e.sub(r, e.div(e.c(1.0), z)), r)


@_float_unary("digamma", "log", "round", "sin")
def _digamma(e, x):
    """digamma for x > 0 as above; x < 0 by reflection, digamma(1 - x) -
    pi cos(pi r) / sin(pi r) with the exact r = x - round(x). As JAX: +-0
    give -inf, the negative integers and -inf NaN."""
    neg = e.cmp("lt", x, e.c(0.0))
    pos = _digamma_pos(e, e.sel(neg, e.sub(e.c(1.0), x), x))
    r = e.sub(x, e.round(x))
    # cos(pi r) as sin(pi (1/2 - |r|)): exact argument where cos is small
    cos = e.sin(e.mul(e.sub(e.c(0.5), e.abs(r)), e.c(math.pi)))
    refl = e.sub(pos, e.div(e.mul(cos, e.c(math.pi)), e.sin(e.mul(r, e.c(math.pi)))))
    refl = e.sel(e.cmp("eq", x, e.round(x)), e.c(math.nan), refl)   # poles, -inf
    out = e.sel(neg, refl, pos)
    return e.sel(e.cmp("eq", x, e.c(0.0)), e.c(-math.inf), out)


# ---- trigonometric and hyperbolic -----------------------------------------------

def _atan_nonneg(e, a):
    """atan(a) for a >= 0 (NaN stays NaN; inf gives pi/2)."""
    big = e.cmp("gt", a, e.c(_TAN_3PI_8))
    mid = e.cmp("gt", a, e.c(_TAN_PI_8))
    one = e.c(1.0)
    z = e.sel(big, e.neg(e.div(one, a)),
              e.sel(mid, e.div(e.sub(a, one), e.add(a, one)), a))
    zz = e.mul(z, z)
    r = e.add(z, e.mul(z, e.mul(zz, e.poly(_ATAN, zz))))
    base = e.sel(big, e.c(math.pi / 2), e.sel(mid, e.c(math.pi / 4), e.c(0.0)))
    return e.add(base, r)


@_float_unary("atan")
def _atan(e, x):
    return e.copysign(_atan_nonneg(e, e.abs(x)), x)


@_float_binary("atan2")
def _atan2(e, y, x):
    ax, ay = e.abs(x), e.abs(y)
    hi, lo = e.max(ax, ay), e.min(ax, ay)
    q = e.div(lo, hi)
    q = e.sel(e.cmp("eq", hi, e.c(0.0)), e.c(0.0), q)                    # 0/0
    both_inf = e.op("and", e.cmp("eq", ax, e.c(math.inf)), e.cmp("eq", ay, e.c(math.inf)))
    q = e.sel(both_inf, e.c(1.0), q)                                       # inf/inf
    r = _atan_nonneg(e, q)
    r = e.sel(e.cmp("gt", ay, ax), e.sub(e.c(math.pi / 2), r), r)
    r = e.sel(e.signbit(x), e.sub(e.c(math.pi), r), r)
    nan = e.op("or", e.cmp("ne", x, x), e.cmp("ne", y, y))
    return e.sel(nan, e.add(x, y), e.copysign(r, y))


def _sqrt_one_minus_sq(e, x):
    one = e.c(1.0)
    return e.sqrt(e.mul(e.sub(one, x), e.add(one, x)))


@_float_unary("asin", "sqrt")
def _asin(e, x):
    return _atan2(e, x, _sqrt_one_minus_sq(e, x))


@_float_unary("acos", "sqrt")
def _acos(e, x):
    return _atan2(e, _sqrt_one_minus_sq(e, x), x)


def _expm1(e, x):
    """Kahan's expm1: u = exp(x); (u - 1) x / log(u), x where u == 1, -1
    where u - 1 == -1, inf where u is."""
    u = e.exp(x)
    one = e.c(1.0)
    um1 = e.sub(u, one)
    r = e.div(e.mul(um1, x), e.log(u))
    r = e.sel(e.cmp("eq", u, one), x, r)
    r = e.sel(e.cmp("eq", um1, e.c(-1.0)), e.c(-1.0), r)
    return e.sel(e.cmp("eq", u, e.c(math.inf)), e.c(math.inf), r)


def _half_exp(e, a):
    """exp(a) / 2 for large a (exp(a) alone overflows before it does)."""
    h = e.exp(e.mul(a, e.c(0.5)))
    return e.mul(e.mul(h, e.c(0.5)), h)


@_float_unary("sinh", "exp", "log")
def _sinh(e, x):
    a = e.abs(x)
    m = _expm1(e, a)
    small = e.mul(e.c(0.5), e.add(m, e.div(m, e.add(m, e.c(1.0)))))
    r = e.sel(e.cmp("lt", a, e.c(10.0)), small, _half_exp(e, a))
    return e.copysign(r, x)


@_float_unary("cosh", "exp")
def _cosh(e, x):
    a = e.abs(x)
    u = e.exp(a)
    small = e.mul(e.c(0.5), e.add(u, e.div(e.c(1.0), u)))
    return e.sel(e.cmp("lt", a, e.c(10.0)), small, _half_exp(e, a))


_LN2 = math.log(2.0)


@_float_unary("asinh", "log1p", "sqrt", "log")
def _asinh(e, x):
    a = e.abs(x)
    one = e.c(1.0)
    aa = e.mul(a, a)
    small = e.log1p(e.add(a, e.div(aa, e.add(one, e.sqrt(e.add(one, aa))))))
    large = e.add(e.log(a), e.c(_LN2))
    return e.copysign(e.sel(e.cmp("lt", a, e.c(4096.0)), small, large), x)


@_float_unary("acosh", "log1p", "sqrt", "log")
def _acosh(e, x):
    t = e.sub(x, e.c(1.0))
    small = e.log1p(e.add(t, e.sqrt(e.add(e.mul(t, t), e.mul(t, e.c(2.0))))))
    large = e.add(e.log(x), e.c(_LN2))
    r = e.sel(e.cmp("lt", x, e.c(4096.0)), small, large)
    return e.sel(e.cmp("lt", x, e.c(1.0)), e.c(math.nan), r)


@_float_unary("atanh", "log1p")
def _atanh(e, x):
    a = e.abs(x)
    r = e.mul(e.c(0.5), e.log1p(e.div(e.mul(a, e.c(2.0)), e.sub(e.c(1.0), a))))
    r = e.sel(e.cmp("gt", a, e.c(1.0)), e.c(math.nan), r)
    return e.copysign(r, x)


@_float_unary("cbrt", "exp", "log")
def _cbrt(e, x):
    a = e.abs(x)
    y = e.exp(e.mul(e.log(a), e.c(1.0 / 3.0)))
    # one Newton step on y^3 = a: y + (a / y^2 - y) / 3
    y1 = e.add(y, e.mul(e.sub(e.div(a, e.mul(y, y)), y), e.c(1.0 / 3.0)))
    special = e.op("or", e.cmp("eq", a, e.c(0.0)), e.cmp("eq", a, e.c(math.inf)))
    return e.copysign(e.sel(special, a, y1), x)


@_float_unary("log2", "log")
def _log2(e, x):
    return e.mul(e.log(x), e.c(1.0 / _LN2))


# ---- PRNG ----------------------------------------------------------------------

_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_THREEFRY_PARITY = 0x1BD11BDA
#: what the cipher builds (on u32 words)
_THREEFRY_OPS = ("add", "xor", "or", "shl", "shrl", "broadcast")
#: what reading a key's words, counting elements and making keys build
_KEY_OPS = ("slice", *RESHAPE_OPS, "concatenate", "iota", "mul", "add", "bitcast", "xor", "and")


def _threefry(e, k0, k1, x0, x1):
    """The Threefry-2x32 cipher of the counter (x0, x1) under key (k0, k1):
    the key schedule (k0, k1, k0 ^ k1 ^ parity), 5 groups of 4 rounds (add,
    rotate left, xor), after each group the key words of the schedule and
    the group's number added."""
    ks = [k0, k1, e.xor(e.xor(k0, k1), e.c(_THREEFRY_PARITY))]
    x0, x1 = e.add(x0, ks[0]), e.add(x1, ks[1])
    for i in range(5):
        for r in _THREEFRY_ROTATIONS[i % 2]:
            x0 = e.add(x0, x1)
            x1 = e.op("or", e.shl(x1, e.c(r)), e.shrl(x1, e.c(32 - r)))
            x1 = e.xor(x0, x1)
        x0 = e.add(x0, ks[(i + 1) % 3])
        x1 = e.add(x1, e.add(ks[(i + 2) % 3], e.c(i + 1)))
    return x0, x1


@register("threefry2x32", emits=(*_THREEFRY_OPS, *RESHAPE_OPS, *BCAST_OPS))
def _threefry2x32(t, env, region, eqn, used):
    """threefry2x32(k0, k1, x0, x1) -> (y0, y1) on u32 words (wrapping adds).
    Operands broadcast as JAX's (size-1 dimensions); an operand of one
    element is used as a scalar."""
    rt = out_type(eqn)
    e = _E(t, region, rt.shape, "u32")
    ins = []
    for v in eqn.invars:
        x = t.read(env, region, v)
        if x.type.dtype != "u32":
            raise t.fail("threefry2x32 of non-u32 operands")
        if x.type.kind != "scalar" and all(d == 1 for d in x.type.shape):
            x = reshape_to(t, region, x, B.Type.value("u32", ()))
        elif x.type.kind != "scalar":
            x = bcast(t, region, x, rt.shape)
        ins.append(x)
    return [e.full(y) for y in _threefry(e, *ins)]


# Typed PRNG keys (jax.random.key / wrap_key_data inside a kernel) of the
# threefry2x32 implementation: a key is carried as its u32 data (shape
# key_shape + (2,)), and split / fold_in / bits are JAX's threefry functions
# (with jax_threefry_partitionable, the default: counters are the row-major
# index of each element).

def _key_impl(t, aval) -> str:
    impl = getattr(getattr(aval, "dtype", None), "_impl", None)
    name = getattr(impl, "name", None)
    if name != "threefry2x32":
        raise t.fail(f"PRNG keys of the implementation {name!r} (tessera.jax translates "
                     "threefry2x32 keys)")
    import jax
    if not jax.config.jax_threefry_partitionable:
        raise t.fail("threefry random bits with jax_threefry_partitionable=False")
    return name


def _key_words(t, env, region, atom):
    """(k0, k1) of a single key (rank-0 key array) as u32 scalars."""
    _key_impl(t, atom.aval)
    if tuple(atom.aval.shape) != ():
        raise t.fail(f"an array of PRNG keys (shape {tuple(atom.aval.shape)}): tessera.jax "
                     "translates single keys")
    data = t.read(env, region, atom)
    words = []
    for i in range(2):
        w = t.emit(region, "slice", [data], B.Type.value("u32", (1,)),
                   indices=[B.Index("slice", i, 1, 1)])
        words.append(reshape_to(t, region, w, B.Type.value("u32", ())))
    return words


def _linear_index(t, region, shape):
    """The row-major index of each element of `shape`, as u32."""
    if not shape:
        return t.const(region, 0, B.Type.value("u32", ()))
    it = B.Type.value("i32", shape)
    idx, stride = None, 1
    for d in reversed(range(len(shape))):
        io = t.emit(region, "iota", [], it, ints=[d])
        if stride != 1:
            io = t.emit(region, "mul", [io, t.const(region, stride, B.Type.value("i32", ()))], it)
        idx = io if idx is None else t.emit(region, "add", [idx, io], it)
        stride *= shape[d]
    return t.emit(region, "bitcast", [idx], B.Type.value("u32", shape))


def _key_data(t, region, y0, y1, shape):
    """The key array of shape `shape` whose words are y0, y1 (u32 of shape)."""
    full = B.Type.value("u32", tuple(shape) + (1,))
    parts = []
    for y in (y0, y1):
        if y.type.kind == "scalar":
            parts.append(t.emit(region, "broadcast", [y], full))
        else:
            parts.append(t.emit(region, "reshape", [y], full))
    return t.emit(region, "concatenate", parts, B.Type.value("u32", tuple(shape) + (2,)),
                  ints=[len(shape)])


@register("random_wrap")
def _random_wrap(t, env, region, eqn, used):
    _key_impl(t, eqn.outvars[0].aval)
    return [t.read(env, region, eqn.invars[0])]


@register("random_unwrap")
def _random_unwrap(t, env, region, eqn, used):
    _key_impl(t, eqn.invars[0].aval)
    return [t.read(env, region, eqn.invars[0])]


@register("random_seed", emits=("convert", "bitcast", *_KEY_OPS))
def _random_seed(t, env, region, eqn, used):
    """jax.random.key(seed) for a 32-bit seed: the key (0, seed's bits)."""
    _key_impl(t, eqn.outvars[0].aval)
    seed = t.read(env, region, eqn.invars[0])
    if seed.type.kind != "scalar" or seed.type.dtype not in ("i32", "u32", "i16", "u16",
                                                             "i8", "u8"):
        raise t.fail(f"random_seed of {seed.type} (a 32-bit integer scalar is translated)")
    # a narrower seed is sign- or zero-extended, as JAX converts it
    wide = "i32" if seed.type.dtype.startswith("i") else "u32"
    if seed.type.dtype != wide:
        seed = t.emit(region, "convert", [seed], B.Type.value(wide, ()))
    lo = seed if wide == "u32" else t.emit(region, "bitcast", [seed], B.Type.value("u32", ()))
    return [_key_data(t, region, t.const(region, 0, B.Type.value("u32", ())), lo, ())]


@register("random_bits", emits=(*_THREEFRY_OPS, *_KEY_OPS, "convert"))
def _random_bits(t, env, region, eqn, used):
    k0, k1 = _key_words(t, env, region, eqn.invars[0])
    width, shape = int(eqn.params["bit_width"]), tuple(eqn.params["shape"])
    if width not in (8, 16, 32):
        raise t.fail(f"random_bits of {width} bits (tessera has no 64-bit integers)")
    e = _E(t, region, shape, "u32")
    y0, y1 = _threefry(e, k0, k1, e.c(0), _linear_index(t, region, shape))
    bits = e.full(e.xor(y0, y1))
    if width < 32:
        bits = e.op("and", bits, e.c((1 << width) - 1))
        bits = t.emit(region, "convert", [bits], B.Type.value(f"u{width}", shape))
    return [bits]


@register("random_split", emits=(*_THREEFRY_OPS, *_KEY_OPS))
def _random_split(t, env, region, eqn, used):
    k0, k1 = _key_words(t, env, region, eqn.invars[0])
    shape = tuple(eqn.params["shape"])
    e = _E(t, region, shape, "u32")
    y0, y1 = _threefry(e, k0, k1, e.c(0), _linear_index(t, region, shape))
    return [_key_data(t, region, y0, y1, shape)]


@register("random_fold_in", emits=(*_THREEFRY_OPS, *_KEY_OPS))
def _random_fold_in(t, env, region, eqn, used):
    k0, k1 = _key_words(t, env, region, eqn.invars[0])
    msg = t.read(env, region, eqn.invars[1])
    if msg.type.kind != "scalar" or msg.type.dtype != "u32":
        raise t.fail(f"random_fold_in with data {msg.type} (a u32 scalar is translated)")
    e = _E(t, region, (), "u32")
    y0, y1 = _threefry(e, k0, k1, e.c(0), msg)
    return [_key_data(t, region, y0, y1, ())]


# ---- other ----------------------------------------------------------------------

@register("polynomial", emits=("add", "mul", *BCAST_OPS))
def _polynomial(t, env, region, eqn, used):
    """lax.polynomial(x, c0, c1, ..): Horner from the highest coefficient, a
    mul and an add per step, as JAX lowers it (more than `unroll` (8)
    coefficients: a scan from 0, so the first step is 0 * x + c)."""
    rt = out_type(eqn)
    x, *cs = (bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
    e = _E(t, region, rt.shape, rt.dtype)
    unroll = eqn.params.get("unroll") or 8
    if len(cs) <= unroll:
        acc = cs[-1]
        rest = cs[-2::-1]
    else:
        acc, rest = e.c(0), cs[::-1]
    for c in rest:
        acc = e.add(e.mul(acc, x), c)
    return [e.full(acc)]


@register("split", emits=("slice",))
def _split(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    axis = int(eqn.params["axis"])
    outs, start = [], 0
    for n in eqn.params["sizes"]:
        n = int(n)
        idx = [B.Index("full", 0, d, 1) if i != axis else B.Index("slice", start, n, 1)
               for i, d in enumerate(x.type.shape)]
        shape = list(x.type.shape)
        shape[axis] = n
        outs.append(x if n == x.type.shape[axis] else
                    t.emit(region, "slice", [x], B.Type.value(x.type.dtype, shape), indices=idx))
        start += n
    return outs


@register("unstack", emits=("slice", *RESHAPE_OPS))
def _unstack(t, env, region, eqn, used):
    """unstack along an axis (tuple unpacking of an array, of keys too):
    a static slice and a reshape per output."""
    x = t.read(env, region, eqn.invars[0])
    axis = int(eqn.params["axis"])
    shape = x.type.shape
    outs = []
    for i in range(shape[axis]):
        idx = [B.Index("full", 0, d, 1) if k != axis else B.Index("slice", i, 1, 1)
               for k, d in enumerate(shape)]
        one = list(shape)
        one[axis] = 1
        v = x if shape[axis] == 1 else t.emit(region, "slice", [x], B.Type.value(
            x.type.dtype, one), indices=idx)
        rest = shape[:axis] + shape[axis + 1:]
        outs.append(reshape_to(t, region, v, B.Type.value(x.type.dtype, rest)))
    return outs


#: what _logaddexp builds
_LOGADDEXP_OPS = ("max", "sub", "add", "log1p", "exp", "neg", "abs", "eq", "broadcast")


def _logaddexp(e, a, b):
    """log(exp(a) + exp(b)): max + log1p(exp(-|a - b|)); equal infinities
    give that infinity (their difference is NaN)."""
    m = e.max(a, b)
    d = e.sub(a, b)
    r = e.add(m, e.log1p(e.exp(e.neg(e.abs(d)))))
    return e.sel(e.cmp("eq", a, b), e.add(a, e.c(_LN2)), r)


@register("cumlogsumexp", emits=("convert", "iota", "sub", "roll", "ge", "select",
                                  *_LOGADDEXP_OPS))
def _cumlogsumexp(t, env, region, eqn, used):
    """cumlogsumexp along an axis as a log-step (Hillis-Steele) scan of
    logaddexp, like the other cumulative reductions."""
    x = t.read(env, region, eqn.invars[0])
    rt = out_type(eqn)
    if x.type.kind == "scalar":
        return [x]
    if rt.dtype not in B.FLOAT_DTYPES:
        raise t.fail(f"`cumlogsumexp` of {rt.dtype}")
    e = _E(t, region, x.type.shape)
    if x.type.dtype != "f32":
        x = t.emit(region, "convert", [x], e.ty())
    axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
    n = x.type.shape[axis]
    i32 = B.Type.value("i32", ())
    pos = t.emit(region, "iota", [], e.ty("i32"), ints=[axis])
    if reverse:
        pos = t.emit(region, "sub", [t.const(region, n - 1, i32), pos], e.ty("i32"))
    k = 1
    while k < n:
        moved = t.emit(region, "roll", [x, t.const(region, -k if reverse else k, i32)],
                       x.type, ints=[axis])
        valid = t.emit(region, "ge", [pos, t.const(region, k, i32)], e.ty("i1"))
        x = t.emit(region, "select", [valid, _logaddexp(e, x, moved), x], x.type)
        k *= 2
    return [x if rt.dtype == "f32" else t.emit(region, "convert", [x], rt)]

