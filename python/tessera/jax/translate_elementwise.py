"""Elementwise primitives: those that are one tessera op each (the unary and
binary families, registered by a loop over their tables), and those made of
a few ops (convert, bitcast, select_n, clamp, integer_pow, square,
one_minus_square, expm1, tan, is_finite, round, reciprocal). Functions
tessera has no op for are expanded in translate_math.py."""

from __future__ import annotations

from .. import _builder as B
from .translate_core import (BCAST_OPS, TPU_BITCAST_OPS, WIDTH_OPS, bcast, bitcast_widths,
                             convert_value, out_type, register, tpu_bitcast)


#: JAX's unary elementwise primitives that are one tessera op: name -> op
_UNARY = {
    "neg": "neg", "abs": "abs", "sign": "sign", "exp": "exp", "exp2": "exp2", "log": "log",
    "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "logistic": "logistic",
    "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil", "not": "not", "clz": "clz",
    "population_count": "popcount",
}


def _unary_rule(mnemonic: str):
    def unary(t, env, region, eqn, used):
        x = t.read(env, region, eqn.invars[0])
        return [t.emit(region, mnemonic, [x], out_type(eqn))]
    return unary


for _name, _mnemonic in _UNARY.items():
    register(_name, emits=(_mnemonic,))(_unary_rule(_mnemonic))


#: JAX's binary elementwise primitives (comparisons too) that are one
#: tessera op: name -> op; size-1 dimensions broadcast implicitly, as in JAX
_BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "rem": "rem", "max": "max",
    "min": "min", "and": "and", "or": "or", "xor": "xor", "shift_left": "shl",
    "shift_right_logical": "shrl", "shift_right_arithmetic": "shra", "eq": "eq", "ne": "ne",
    "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "add_any": "add",
    "nextafter": "nextafter",
}


def _binary_rule(mnemonic: str):
    def binary(t, env, region, eqn, used):
        rt = out_type(eqn)
        a, b = (bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
        return [t.emit(region, mnemonic, [a, b], rt)]
    return binary


for _name, _mnemonic in _BINARY.items():
    register(_name, emits=(_mnemonic, *BCAST_OPS))(_binary_rule(_mnemonic))


@register("pow", emits=("pow", "convert", *BCAST_OPS))
def _pow(t, env, region, eqn, used):
    # lax.pow takes an integer exponent of a float base; JAX lowers it by
    # converting the exponent to the base's dtype (rounding a large one, as
    # that conversion does) and taking the float power, so pow(0, 0) is 1
    # and a negative exponent is the reciprocal power. tessera's pow wants
    # operands of one dtype: the same conversion, then its pow.
    rt = out_type(eqn)
    a, b = (bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
    if b.type.dtype != rt.dtype:
        b = convert_value(t, region, b, B.Type.value(rt.dtype, b.type.shape))
    return [t.emit(region, "pow", [a, b], rt)]


@register("convert_element_type", emits=("convert", "ne"))
def _convert(t, env, region, eqn, used):
    return [convert_value(t, region, t.read(env, region, eqn.invars[0]), out_type(eqn))]


@register("bitcast_convert_type", emits=WIDTH_OPS)
def _bitcast(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    return [bitcast_widths(t, region, x, out_type(eqn).dtype)]


@register("bitcast", emits=TPU_BITCAST_OPS)
def _pltpu_bitcast(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    return [tpu_bitcast(t, region, x, out_type(eqn).dtype, eqn.params["dim"])]


@register("select_n", emits=("select", "eq", *BCAST_OPS))
def _select_n(t, env, region, eqn, used):
    rt = out_type(eqn)
    pred = t.read(env, region, eqn.invars[0])
    cases = [bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars[1:]]
    if len(cases) == 1:
        return [cases[0]]
    if rt.kind != "scalar":
        pred = bcast(t, region, pred, rt.shape)
        if pred.type.kind == "scalar":
            pred = t.emit(region, "broadcast", [pred], B.Type.value(pred.type.dtype, rt.shape))
    bt = B.Type.value("i1", pred.type.shape)
    if pred.type.dtype == "i1":
        if len(cases) != 2:
            raise t.fail("select_n with a boolean predicate and more than two cases")
        return [t.emit(region, "select", [pred, cases[1], cases[0]], rt)]
    result = cases[0]
    for k in range(1, len(cases)):
        kk = t.const(region, k, B.Type.value(pred.type.dtype, ()))
        c = t.emit(region, "eq", [pred, kk], bt)
        result = t.emit(region, "select", [c, cases[k], result], rt)
    return [result]


@register("clamp", emits=("max", "min", *BCAST_OPS))
def _clamp(t, env, region, eqn, used):
    rt = out_type(eqn)
    lo, x, hi = (bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
    return [t.emit(region, "min", [t.emit(region, "max", [x, lo], rt), hi], rt)]


@register("integer_pow", emits=("mul", "div"))
def _integer_pow(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    y = int(eqn.params["y"])
    rt = out_type(eqn)
    if y == 0:
        return [t.const(region, 1, rt)]
    n, acc, base = abs(y), None, x
    while n:
        if n & 1:
            acc = base if acc is None else t.emit(region, "mul", [acc, base], rt)
        n >>= 1
        if n:
            base = t.emit(region, "mul", [base, base], rt)
    if y < 0:
        acc = t.emit(region, "div", [t.const(region, 1, B.Type.value(rt.dtype, ())), acc], rt)
    return [acc]


@register("square", emits=("mul",))
def _square(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    return [t.emit(region, "mul", [x, x], out_type(eqn))]


@register("one_minus_square", emits=("add", "sub", "mul"))
def _one_minus_square(t, env, region, eqn, used):
    # (1 + x) * (1 - x), as Mosaic lowers it: 1 - x*x would lose the digits
    # of the result near |x| = 1 (tanh's derivative, 1 - tanh(x)^2).
    x = t.read(env, region, eqn.invars[0])
    rt = out_type(eqn)
    one = t.const(region, 1, B.Type.value(rt.dtype, ()))
    return [t.emit(region, "mul", [t.emit(region, "add", [one, x], rt),
                                   t.emit(region, "sub", [one, x], rt)], rt)]


def _in_f32(t, region, x, rt):
    """x and the type to compute in for a float function of a few ops: a
    narrower float (bf16, f16, the f8s) is widened to f32, computed there
    and rounded once by _round_to (XLA widens them so: JAX's bf16 tan is
    f32 tan rounded to bf16; rounding each op of the expansion would not
    give it)."""
    if rt.dtype == "f32" or rt.dtype not in B.FLOAT_DTYPES:
        return x, rt
    ct = B.Type.value("f32", rt.shape)
    return t.emit(region, "convert", [x], B.Type.value("f32", x.type.shape)), ct


def _round_to(t, region, r, rt):
    return r if r.type.dtype == rt.dtype else t.emit(region, "convert", [r], rt)


@register("expm1", emits=("exp", "sub", "mul", "div", "log", "eq", "select", "convert"))
def _expm1(t, env, region, eqn, used):
    # exp(x) - 1 loses every digit near 0 (115 ulp at x = -0.0019). Kahan's
    # form keeps them: with u = exp(x) rounded, (u - 1) * x / log(u) is
    # within a few ulp; u == 1 gives x itself, u - 1 == -1 gives -1, and an
    # infinite u gives inf (the formula would give inf/inf).
    out = out_type(eqn)
    x, rt = _in_f32(t, region, t.read(env, region, eqn.invars[0]), out)
    u = t.emit(region, "exp", [x], rt)
    one = t.const(region, 1.0, rt)
    um1 = t.emit(region, "sub", [u, one], rt)
    r = t.emit(region, "div", [t.emit(region, "mul", [um1, x], rt),
                               t.emit(region, "log", [u], rt)], rt)
    ct = B.Type.value("i1", rt.shape)
    r = t.emit(region, "select", [t.emit(region, "eq", [u, one], ct), x, r], rt)
    minus_one = t.const(region, -1.0, rt)
    r = t.emit(region, "select", [t.emit(region, "eq", [um1, minus_one], ct), minus_one, r], rt)
    inf = t.const(region, float("inf"), rt)
    r = t.emit(region, "select", [t.emit(region, "eq", [u, inf], ct), inf, r], rt)
    return [_round_to(t, region, r, out)]


@register("tan", emits=("sin", "cos", "div", "convert"))
def _tan(t, env, region, eqn, used):
    out = out_type(eqn)
    x, rt = _in_f32(t, region, t.read(env, region, eqn.invars[0]), out)
    r = t.emit(region, "div", [t.emit(region, "sin", [x], rt),
                               t.emit(region, "cos", [x], rt)], rt)
    return [_round_to(t, region, r, out)]


@register("is_finite", emits=("sub", "eq"))
def _is_finite(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    xt = x.type
    d = t.emit(region, "sub", [x, x], xt)
    return [t.emit(region, "eq", [d, t.const(region, 0.0, B.Type.value(xt.dtype, ()))],
                   out_type(eqn))]


@register("round", emits=("round",))
def _round(t, env, region, eqn, used):
    method = eqn.params.get("rounding_method")
    if int(getattr(method, "value", method) or 0) != 1:
        raise t.fail("`round` away from zero (tessera rounds half to even: use "
                     "jnp.round or rounding_method=TO_NEAREST_EVEN)")
    return [t.emit(region, "round", [t.read(env, region, eqn.invars[0])], out_type(eqn))]


@register("reciprocal", emits=("div",))
def _reciprocal(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = out_type(eqn)
    return [t.emit(region, "div", [t.const(region, 1.0, B.Type.value(rt.dtype, ())), x], rt)]
