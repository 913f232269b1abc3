"""Reductions, cumulative reductions, matrix products and sorts:
reduce_* (a family registered by a loop), argmax/argmin, cumsum/cumprod/
cummax/cummin (log-step scans; cumlogsumexp is translate_math.py's),
dot_general (with one leading batch dimension unrolled) and sort."""

from __future__ import annotations

from .. import _builder as B
from .translate_core import out_type, register


#: JAX's reductions over axes that are one tessera op: name -> op
_REDUCE = {"reduce_sum": "reduce_sum", "reduce_max": "reduce_max", "reduce_min": "reduce_min",
           "reduce_prod": "reduce_prod", "reduce_and": "reduce_and", "reduce_or": "reduce_or"}


def _reduce_rule(mnemonic: str):
    def reduce(t, env, region, eqn, used):
        x = t.read(env, region, eqn.invars[0])
        axes = tuple(eqn.params["axes"])
        if not axes:
            return [x]
        return [t.emit(region, mnemonic, [x], out_type(eqn), ints=axes)]
    return reduce


for _name, _mnemonic in _REDUCE.items():
    register(_name, emits=(_mnemonic,))(_reduce_rule(_mnemonic))


@register("argmax", "argmin", emits=("argmax", "argmin", "convert"))
def _argminmax(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    axes = tuple(eqn.params["axes"])
    if len(axes) != 1:
        raise t.fail(f"`{eqn.primitive.name}` over {len(axes)} axes")
    rt = out_type(eqn)
    r = t.emit(region, eqn.primitive.name, [x], B.Type.value("i32", rt.shape), ints=axes)
    if rt.dtype != "i32":
        r = t.emit(region, "convert", [r], rt)
    return [r]


@register("dot_general", emits=("dot", "transpose", "convert", "slice", "reshape",
                                 "concatenate"))
def _dot_general(t, env, region, eqn, used):
    a, b = (t.read(env, region, v) for v in eqn.invars)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    rt = out_type(eqn)
    if lb or rb:
        return [_batched_dot(t, region, a, b, (tuple(lc), tuple(rc)), (tuple(lb), tuple(rb)),
                             rt)]
    if a.type.rank != 2 or b.type.rank != 2:
        raise t.fail("`dot_general` of operands that are not matrices")
    lc, rc = tuple(lc), tuple(rc)
    if lc == (0,):
        m, k = a.type.shape[1], a.type.shape[0]
        a = t.emit(region, "transpose", [a], B.Type.value(a.type.dtype, (m, k)), ints=[1, 0])
    elif lc != (1,):
        raise t.fail(f"`dot_general` contracting lhs dims {lc}")
    if a.type.dtype != b.type.dtype:
        wide = rt.dtype if rt.dtype in (a.type.dtype, b.type.dtype) else "f32"
        a = a if a.type.dtype == wide else t.emit(region, "convert", [a],
                                                  B.Type.value(wide, a.type.shape))
        b = b if b.type.dtype == wide else t.emit(region, "convert", [b],
                                                  B.Type.value(wide, b.type.shape))
    flags = 0
    if rc == (1,):
        flags = B.OPF_TRANSPOSE_RHS
    elif rc != (0,):
        raise t.fail(f"`dot_general` contracting rhs dims {rc}")
    return [t.emit(region, "dot", [a, b], rt, flags=flags)]


_MAX_UNROLLED_BATCH = 64


def _batched_dot(t, region, a, b, contracting, batch, rt) -> B.Value:
    """dot_general with one leading batch dimension on both sides (einsum
    'bmk,bkn->bmn' and its transposed forms), unrolled over the batch: a
    static slice and a `dot` per batch element, concatenated."""
    (lc, rc), (lb, rb) = contracting, batch
    if lb != (0,) or rb != (0,) or a.type.rank != 3 or b.type.rank != 3:
        raise t.fail("`dot_general` with batch dimensions other than one leading batch "
                     "dimension of rank-3 operands")
    nb = a.type.shape[0]
    if nb > _MAX_UNROLLED_BATCH:
        raise t.fail(f"`dot_general` with a batch of {nb} (at most {_MAX_UNROLLED_BATCH} "
                     "are unrolled)")
    if lc not in ((2,), (1,)) or rc not in ((1,), (2,)):
        raise t.fail(f"`dot_general` contracting dims {lc}, {rc} with a batch dimension")
    parts = []
    for i in range(nb):
        def take(x):
            idx = [B.Index("slice", i, 1, 1)] + [B.Index("full", 0, d, 1) for d in x.type.shape[1:]]
            s = t.emit(region, "slice", [x], B.Type.value(x.type.dtype, (1,) + x.type.shape[1:]),
                       indices=idx)
            return t.emit(region, "reshape", [s], B.Type.value(x.type.dtype, x.type.shape[1:]))
        ai, bi = take(a), take(b)
        if lc == (1,):  # a[i] is [K, M]
            ai = t.emit(region, "transpose", [ai], B.Type.value(
                ai.type.dtype, ai.type.shape[::-1]), ints=[1, 0])
        flags = B.OPF_TRANSPOSE_RHS if rc == (2,) else 0
        m, n = rt.shape[1], rt.shape[2]
        if ai.type.dtype != bi.type.dtype:
            ai = t.emit(region, "convert", [ai], B.Type.value(rt.dtype, ai.type.shape))
            bi = t.emit(region, "convert", [bi], B.Type.value(rt.dtype, bi.type.shape))
        d = t.emit(region, "dot", [ai, bi], B.Type.value(rt.dtype, (m, n)), flags=flags)
        parts.append(t.emit(region, "reshape", [d], B.Type.value(rt.dtype, (1, m, n))))
    if len(parts) == 1:
        return parts[0]
    return t.emit(region, "concatenate", parts, rt, ints=[0])


#: the cumulative reductions: name -> the tessera op combining two elements
_CUMULATIVE = {"cumsum": "add", "cumprod": "mul", "cummax": "max", "cummin": "min"}


def _cumulative_rule(mnemonic: str):
    def cumulative(t, env, region, eqn, used):
        """cumsum/cumprod/cummax/cummin along an axis as a log-step scan
        (Hillis-Steele): x = x op roll(x, k) where index >= k, for k = 1, 2,
        4..."""
        x = t.read(env, region, eqn.invars[0])
        if x.type.kind == "scalar":
            return [x]
        axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
        n = x.type.shape[axis]
        it = B.Type.value("i32", x.type.shape)
        bt = B.Type.value("i1", x.type.shape)
        pos = t.emit(region, "iota", [], it, ints=[axis])
        if reverse:
            pos = t.emit(region, "sub", [t.const(region, n - 1, B.Type.value("i32", ())), pos],
                         it)
        k = 1
        while k < n:
            shift = t.const(region, -k if reverse else k, B.Type.value("i32", ()))
            moved = t.emit(region, "roll", [x, shift], x.type, ints=[axis])
            combined = t.emit(region, mnemonic, [x, moved], x.type)
            valid = t.emit(region, "ge", [pos, t.const(region, k, B.Type.value("i32", ()))], bt)
            x = t.emit(region, "select", [valid, combined, x], x.type)
            k *= 2
        return [x]
    return cumulative


for _name, _mnemonic in _CUMULATIVE.items():
    register(_name, emits=(_mnemonic, "iota", "sub", "roll", "ge", "select"))(
        _cumulative_rule(_mnemonic))


@register("sort", emits=("sort", "argsort", "gather"))
def _sort(t, env, region, eqn, used):
    """lax.sort (jnp.sort, jnp.argsort, lax.sort of a tuple): the `sort` op
    for one operand, else an `argsort` of the keys and a gather of each
    operand; both stable, as is_stable=False permits. Mosaic has no
    TensorCore sort, so `interpret=True` runs these kernels and a TPU does
    not: tessera runs them and `check --target tpu` says why not."""
    xs = [t.read(env, region, v) for v in eqn.invars]
    dim, nk = eqn.params["dimension"], eqn.params["num_keys"]
    if len(xs) == 1:
        return [t.emit(region, "sort", xs, xs[0].type, ints=[dim])]
    order = t.emit(region, "argsort", xs[:nk], B.Type.value("i32", xs[0].type.shape), ints=[dim])
    return [t.emit(region, "gather", [x, order], x.type, ints=[dim]) for x in xs]
