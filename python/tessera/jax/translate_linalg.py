"""Reductions, cumulative reductions, matrix products and sorts:
reduce_* (a family registered by a loop), argmax/argmin, cumsum/cumprod/
cummax/cummin (log-step scans; cumlogsumexp is translate_math.py's),
dot_general (any dimension numbers, as rank-2 dots) and sort."""

from __future__ import annotations

from .. import _builder as B
from .translate_core import out_type, register, reshape_to


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


@register("dot_general", emits=("dot", "transpose", "convert", "reshape", "scoped", "for",
                                 "load", "store", "yield", "reduce_sum", "broadcast", "sub"))
def _dot_general(t, env, region, eqn, used):
    """Any dot_general as the IR's `dot`: each operand transposed (only
    where its dims are not already in order) to batch, free, contracting
    (lhs) and batch, contracting, free (rhs, or batch, free, contracting
    with `transpose_rhs`), reshaped to [B, M, K] x [B, K, N] (the free and
    contracting dims each flattened: a vector operand is one row or one
    column), then one rank-2 `dot` per batch element (a single batch is no
    loop at all), and the product reshaped to JAX's batch, lhs free, rhs
    free. This is XLA's own canonical form of a dot (DotDecomposer)."""
    a, b = (t.read(env, region, v) for v in eqn.invars)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    lc, rc, lb, rb = tuple(lc), tuple(rc), tuple(lb), tuple(rb)
    rt = out_type(eqn)
    ashape, bshape = tuple(a.type.shape), tuple(b.type.shape)
    lf = tuple(d for d in range(len(ashape)) if d not in lc and d not in lb)
    rf = tuple(d for d in range(len(bshape)) if d not in rc and d not in rb)

    def prod(dims, shape):
        n = 1
        for d in dims:
            n *= shape[d]
        return n

    nb, m, k, n = prod(lb, ashape), prod(lf, ashape), prod(lc, ashape), prod(rf, bshape)
    # the rhs as [B, K, N], or as [B, N, K] with transpose_rhs where that
    # needs no transpose (q.k^T: the contracting dims last)
    trans = rb + rf + rc == tuple(range(len(bshape))) and rb + rc + rf != rb + rf + rc
    a = _permute(t, region, a, lb + lf + lc)
    b = _permute(t, region, b, rb + rf + rc if trans else rb + rc + rf)
    ins = _dot_input_dtype(a.type.dtype, b.type.dtype, rt.dtype)
    acc = "i32" if ins not in B.FLOAT_DTYPES else (rt.dtype if rt.dtype in B.FLOAT_DTYPES
                                                    else "f32")
    lead = (nb,) if nb != 1 else ()
    a = _as(t, region, a, ins, lead + (m, k))
    b = _as(t, region, b, ins, lead + ((n, k) if trans else (k, n)))
    flags = B.OPF_TRANSPOSE_RHS if trans else 0
    pieces = _mxu_pieces(eqn.params.get("precision")) if t.numerics == "tpu" and ins == "f32" \
        else 0
    if nb == 1:
        d = _dot2(t, region, a, b, B.Type.value(acc, (m, n)), flags, pieces)
    else:
        d = _batched(t, region, a, b, B.Type.value(acc, (nb, m, n)),
                     lambda body, ai, bi: _dot2(t, body, ai, bi, B.Type.value(acc, (m, n)),
                                                flags, pieces))
    if acc != rt.dtype:
        d = t.emit(region, "convert", [d], B.Type.value(rt.dtype, d.type.shape))
    return [reshape_to(t, region, d, rt)]


def _batched(t, region, a: B.Value, b: B.Value, rt: B.Type, dot) -> B.Value:
    """A dot per batch element of [B, ...] operands, as a loop: the operands
    and the product live in scoped VMEM buffers, and step i loads a[i] and
    b[i] and stores dot(a[i], b[i]) at [i]. The IR stays the same size for
    any batch (an unrolled batch grew it, and the compile time, with B), and
    every access is a plain dynamic-index load or store, which Mosaic takes
    on a leading dimension."""
    nb = rt.shape[0]
    bufs = [B.Type.ref("vmem", x.dtype, x.shape) for x in (a.type, b.type, rt)]
    op, (res,) = t.op(region, "scoped", [], [rt], region_args=bufs)
    body = t.kb.op_region(op, 0)
    ar, br, rr = (t.kb.region_arg(body, j, bt) for j, bt in enumerate(bufs))

    def whole(shape):
        return [B.Index("full", 0, d, 1) for d in shape]
    t.op(body, "store", [ar, a], [], indices=whole(a.type.shape))
    t.op(body, "store", [br, b], [], indices=whole(b.type.shape))
    i32 = B.Type.value("i32", ())
    loop, _ = t.op(body, "for", [t.const(body, 0, i32), t.const(body, nb, i32),
                                 t.const(body, 1, i32)], [], region_args=[i32])
    step = t.kb.op_region(loop, 0)
    i = t.kb.region_arg(step, 0, i32)

    def row(ref, shape):
        return [B.Index("point", i)] + whole(shape[1:])
    ai = t.emit(step, "load", [ar], B.Type.value(a.type.dtype, a.type.shape[1:]),
                indices=row(ar, a.type.shape))
    bi = t.emit(step, "load", [br], B.Type.value(b.type.dtype, b.type.shape[1:]),
                indices=row(br, b.type.shape))
    t.op(step, "store", [rr, dot(step, ai, bi)], [], indices=row(rr, rt.shape))
    t.yield_(step, [])
    t.yield_(body, [t.emit(body, "load", [rr], rt, indices=whole(rt.shape))])
    return res


def _mxu_pieces(precision) -> int:
    """numerics="tpu": how many bf16 pieces a TPU splits each f32 operand
    of a dot into at this `precision` (lax.Precision per operand, the
    higher of the two, or a DotAlgorithmPreset): DEFAULT one (one bf16
    pass), HIGH two (bf16x3), HIGHEST three (bf16x6); 0: exact f32."""
    if precision is None:
        return 1
    names = [getattr(p, "name", str(p)).upper()
             for p in (precision if isinstance(precision, (tuple, list)) else (precision,))]
    if any("X6" in n for n in names) or "HIGHEST" in names:
        return 3
    if any("X3" in n for n in names) or "HIGH" in names:
        return 2
    if any(n.startswith(("F32_F32", "TF32", "F64")) for n in names):
        return 0
    return 1


def _dot2(t, region, a: B.Value, b: B.Value, rt: B.Type, flags: int, pieces: int) -> B.Value:
    """One rank-2 `dot`, or with `pieces` (numerics="tpu", f32 operands) the
    sum of bf16 passes a TPU's MXU makes: each operand split into bf16
    pieces (x0 = bf16(x), x1 = bf16(x - x0), x2 = bf16(x - x0 - x1), each
    rounded to nearest even), and the products of the pairs (i, j) with
    i + j < pieces, each exact in f32 and accumulated in f32, the smallest
    (largest i + j) first, through the dot's accumulator operand."""
    if not pieces:
        return t.emit(region, "dot", [a, b], rt, flags=flags)

    def split(x):
        out, rest = [], x
        for i in range(pieces):
            p = t.emit(region, "convert", [rest], B.Type.value("bf16", x.type.shape))
            out.append(p)
            if i + 1 < pieces:
                back = t.emit(region, "convert", [p], x.type)
                rest = t.emit(region, "sub", [rest, back], x.type)
        return out

    xs, ys = split(a), split(b)
    pairs = sorted(((i, j) for i in range(pieces) for j in range(pieces) if i + j < pieces),
                   key=lambda ij: (-(ij[0] + ij[1]), ij[0]))
    f32 = B.Type.value("f32", rt.shape)
    d = None
    for i, j in pairs:
        d = t.emit(region, "dot", [xs[i], ys[j]] + ([d] if d is not None else []), f32,
                   flags=flags)
    return d if rt.dtype == "f32" else t.emit(region, "convert", [d], rt)


def _dot_input_dtype(x: str, y: str, out: str) -> str:
    """The dtype both operands of the `dot` take: theirs if they agree and
    the result's class allows it (an integer dot accumulates in i32, so a
    float result of integer operands takes float operands), else the
    result's dtype when it is one of theirs, else f32."""
    fx, fy, fo = x in B.FLOAT_DTYPES, y in B.FLOAT_DTYPES, out in B.FLOAT_DTYPES
    if x == y and (fx == fo or fx):
        return x
    if out in (x, y):
        return out
    return "f32" if fx or fy or fo else "i32"


def _permute(t, region, x: B.Value, perm) -> B.Value:
    if perm == tuple(range(x.type.rank)):
        return x
    shape = tuple(x.type.shape[d] for d in perm)
    return t.emit(region, "transpose", [x], B.Type.value(x.type.dtype, shape), ints=list(perm))


def _as(t, region, x: B.Value, dtype: str, shape) -> B.Value:
    """x converted to dtype and reshaped to shape (neither if it already is)."""
    shape = tuple(shape)
    if x.type.dtype != dtype:
        x = t.emit(region, "convert", [x], B.Type.value(dtype, x.type.shape))
    if tuple(x.type.shape) != shape:
        x = t.emit(region, "reshape", [x], B.Type.value(dtype, shape))
    return x


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
