"""Control flow and the kernel's own primitives: cond/switch (nested
`if`s), scan (a `for`), while, run_scoped (`scoped`), calls inlined (jit,
custom_jvp_call, remat...), values passed through (copy, pvary...), the grid
(program_id, num_programs), the multiple_of hint, debug_print and checkify's
check (`assert`)."""

from __future__ import annotations

import re
from typing import Any

from .. import _builder as B
from . import _jax_internal as ji
from .translate_core import (RESHAPE_OPS, RefView, ScopedHbmError, as_value, dtype_name,
                             register, reshape_to, type_of_aval)


# Identities in a kernel: copies, autodiff and sharding annotations
# (`checkpoint_name` is the primitive `name`).
@register("copy", "copy_p", "pvary", "optimization_barrier", "stop_gradient", "name")
def _passthrough(t, env, region, eqn, used):
    return [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]


# Calls, and what carries a jaxpr to run as it is (jax.checkpoint is `remat2`
# in some jax versions, `checkpoint`/`remat` in others; `core.closed_call`
# is `eval_jaxpr`).
@register("pjit", "jit", "closed_call", "eval_jaxpr", "core_call", "remat", "remat2",
          "checkpoint", "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin")
def _inline_call(t, env, region, eqn, used):
    p = eqn.params
    sub = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
    if sub is None:
        raise t.fail(f"`{eqn.primitive.name}` without a jaxpr")
    jaxpr, consts = ji.sub_jaxpr(sub)
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    return t.run_jaxpr(region, jaxpr, consts, args[len(args) - len(jaxpr.invars):])


# A `fuser.custom_fusion` call inside a kernel (its eval rule, run while
# `fuser.fuse` builds the kernel, may call the decorated function again). It
# carries two jaxprs: the function's, and optionally its `def_pallas_impl`.
# Mosaic lowers the Pallas one when there is one (jax/_src/pallas/mosaic/
# lowering.py), so that is what runs on a TPU and what runs here; JAX's TPU
# interpret mode evaluates the function's jaxpr instead. Operands are the
# function's consts, the Pallas consts, then the arguments.
@register("custom_fusion")
def _custom_fusion(t, env, region, eqn, used):
    p = eqn.params
    nc, npc = int(p.get("num_consts", 0)), int(p.get("pallas_num_consts", 0))
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    consts, pallas_consts, args = args[:nc], args[nc:nc + npc], args[nc + npc:]
    sub, sub_consts = p.get("pallas_jaxpr"), pallas_consts
    if sub is None:
        sub, sub_consts = p["jaxpr"], consts
    # the consts are operands (jax binds them to the jaxpr's constvars)
    jaxpr, _ = ji.sub_jaxpr(sub)
    return t.run_jaxpr(region, jaxpr, sub_consts, args)


@register("program_id", emits=("program_id",))
def _program_id(t, env, region, eqn, used):
    return [t.emit(region, "program_id", [], B.Type.value("i32", ()), ints=[eqn.params["axis"]])]


@register("num_programs", emits=("num_programs",))
def _num_programs(t, env, region, eqn, used):
    return [t.emit(region, "num_programs", [], B.Type.value("i32", ()),
                   ints=[eqn.params["axis"]])]


@register("multiple_of", emits=("multiple_of",))
def _multiple_of(t, env, region, eqn, used):
    """pl.multiple_of on a scalar i32/u32: one `multiple_of` op per multiple
    (as Pallas's lowering makes one tpu.assume_multiple each), so that the
    kernel keeps the hint for Mosaic and the interpreter checks it. Literals,
    blocks and index maps (where only `map` ops may appear) pass through."""
    x = _passthrough(t, env, region, eqn, used)[0]
    if (t.in_index_map or not isinstance(x, B.Value) or x.type.kind != "scalar"
            or x.type.dtype not in ("i32", "u32")):
        return [x]
    for multiple in eqn.params.get("values", ()):
        if 1 <= int(multiple) <= 2**31 - 1:
            x = t.emit(region, "multiple_of", [x], x.type, ints=[int(multiple)])
    return [x]


def _platform_branch(platforms) -> int:
    """The branch of lax.platform_dependent that JAX's TPU interpret mode
    takes: it evaluates the kernel on the CPU, so the branch naming "cpu",
    else the default (None); with neither (that mode then fails), the one
    naming a TPU ("mosaic", "tpu"), else the first."""
    platforms = list(platforms)
    for want in ("cpu", None, "mosaic", "tpu"):
        for i, ps in enumerate(platforms):
            if (ps is None) if want is None else (ps is not None and want in ps):
                return i
    return 0


@register("platform_index", emits=())
def _platform_index(t, env, region, eqn, used):
    i32 = B.Type.value("i32", ())
    return [t.const(region, _platform_branch(eqn.params["platforms"]), i32)]


@register("cond", emits=("if", "yield", "not", "le", "sub"))
def _cond(t, env, region, eqn, used):
    branches = eqn.params["branches"]
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars[1:]]
    if eqn.params.get("branches_platforms") is not None:
        # lax.platform_dependent: one branch, chosen now; the others (a
        # TPU-only lowering, say) are not translated.
        j, c = ji.sub_jaxpr(branches[_platform_branch(eqn.params["branches_platforms"])])
        return t.run_jaxpr(region, j, c, args)
    idx = t.read(env, region, eqn.invars[0])
    rtypes = [type_of_aval(v.aval) for v in eqn.outvars]

    def emit(reg, bs, idx):
        if len(bs) == 1:
            j, c = ji.sub_jaxpr(bs[0])
            return t.run_jaxpr(reg, j, c, args)
        if idx.type.dtype == "i1":
            pred = t.emit(reg, "not", [idx], B.Type.value("i1", ()))
        else:
            pred = t.emit(reg, "le", [idx, t.const(reg, 0, B.Type.value(idx.type.dtype, ()))],
                          B.Type.value("i1", ()))
        op, res = t.op(reg, "if", [pred], rtypes, flags=B.OPF_HAS_ELSE)
        then_r, else_r = t.kb.op_region(op, 0), t.kb.op_region(op, 1)
        outs = emit(then_r, bs[:1], idx)
        t.yield_(then_r, [as_value(t, then_r, o) for o in outs])
        rest_idx = idx
        if len(bs) > 2:
            rest_idx = t.emit(else_r, "sub", [idx, t.const(else_r, 1, B.Type.value(
                idx.type.dtype, ()))], idx.type)
        outs = emit(else_r, bs[1:], rest_idx)
        t.yield_(else_r, [as_value(t, else_r, o) for o in outs])
        return res
    return emit(region, list(branches), idx)


@register("scan", emits=("for", "yield", "sub", "roll", "neg", "slice", *RESHAPE_OPS,
                          "iota", "eq", "select"))
def _scan(t, env, region, eqn, used):
    """scan as a `for` loop: the carry is carried; an `xs` array is indexed
    at the step (a roll and a slice of its leading axis); a stacked output
    `ys` is carried as a whole array, the step's row selected in."""
    p = eqn.params
    nc, nk, nx = ji.scan_groups(p)
    jaxpr, consts = ji.sub_jaxpr(p["jaxpr"])
    length, reverse = int(p["length"]), bool(p.get("reverse", False))
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    cargs = args[:nc]
    inits = [as_value(t, region, a) for a in args[nc:nc + nk]]
    xs = [as_value(t, region, a) for a in args[nc + nk:]]
    y_types = [type_of_aval(v.aval) for v in eqn.outvars[nk:]]
    ys0 = [t.const(region, 0, yt) for yt in y_types]
    rtypes = [a.type for a in inits] + y_types
    i32 = B.Type.value("i32", ())
    lo = t.const(region, 0, i32)
    hi = t.const(region, length, i32)
    st = t.const(region, 1, i32)
    op, res = t.op(region, "for", [lo, hi, st] + inits + ys0, rtypes,
                   region_args=[i32] + rtypes)
    body = t.kb.op_region(op, 0)
    step = t.kb.region_arg(body, 0, i32)
    if reverse:
        step = t.emit(body, "sub", [t.const(body, length - 1, i32), step], i32)
    carried = [t.kb.region_arg(body, 1 + i, rt) for i, rt in enumerate(rtypes)]
    x_rows = [_row(t, body, x, step) for x in xs]
    outs = t.run_jaxpr(body, jaxpr, consts, cargs + carried[:nk] + x_rows)
    outs = [as_value(t, body, o) for o in outs]
    new_ys = [_set_row(t, body, buf, y, step) for buf, y in zip(carried[nk:], outs[nk:])]
    t.yield_(body, outs[:nk] + new_ys)
    return res


def _row(t, region, x: B.Value, i: B.Value) -> B.Value:
    """x[i] along the leading axis, for a dynamic i."""
    if x.type.kind == "scalar":
        raise t.fail("`scan` over a scalar")
    n = x.type.shape[0]
    rolled = t.emit(region, "roll", [x, t.emit(region, "neg", [i], i.type)], x.type, ints=[0])
    idx = [B.Index("slice", 0, 1, 1)] + [B.Index("full", 0, d, 1) for d in x.type.shape[1:]]
    one = t.emit(region, "slice", [rolled], B.Type.value(x.type.dtype, (1,) + x.type.shape[1:]),
                 indices=idx) if n > 1 else rolled
    return reshape_to(t, region, one, B.Type.value(x.type.dtype, x.type.shape[1:]))


def _set_row(t, region, buf: B.Value, y: B.Value, i: B.Value) -> B.Value:
    """buf with row i (leading axis) replaced by y."""
    shape = buf.type.shape
    it = B.Type.value("i32", shape)
    rows = t.emit(region, "iota", [], it, ints=[0])
    here = t.emit(region, "eq", [rows, i], B.Type.value("i1", shape))
    if y.type.kind == "scalar":
        wide = t.emit(region, "broadcast", [y], buf.type)
    else:
        one = t.emit(region, "reshape", [y], B.Type.value(y.type.dtype, (1,) + y.type.shape))
        wide = t.emit(region, "broadcast", [one], buf.type) if shape[0] > 1 else one
    return t.emit(region, "select", [here, wide, buf], buf.type)


@register("while", emits=("while", "condition", "yield"))
def _while(t, env, region, eqn, used):
    p = eqn.params
    cj, cc = ji.sub_jaxpr(p["cond_jaxpr"])
    bj, bc = ji.sub_jaxpr(p["body_jaxpr"])
    ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    cargs, bargs = args[:ncc], args[ncc:ncc + nbc]
    inits = [as_value(t, region, a) for a in args[ncc + nbc:]]
    rtypes = [a.type for a in inits]
    op, res = t.op(region, "while", inits, rtypes, region_args=rtypes)
    cr, br = t.kb.op_region(op, 0), t.kb.op_region(op, 1)
    cvals = [t.kb.region_arg(cr, i, rt) for i, rt in enumerate(rtypes)]
    (c,) = t.run_jaxpr(cr, cj, cc, cargs + cvals)
    t.op(cr, "condition", [as_value(t, cr, c)], [])
    bvals = [t.kb.region_arg(br, i, rt) for i, rt in enumerate(rtypes)]
    outs = t.run_jaxpr(br, bj, bc, bargs + bvals)
    t.yield_(br, [as_value(t, br, o) for o in outs])
    return res


@register("run_scoped", emits=("scoped", "yield"))
def _run_scoped(t, env, region, eqn, used):
    jaxpr, consts = ji.sub_jaxpr(eqn.params["jaxpr"])
    outer = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    if eqn.params.get("collective_axes"):
        raise t.fail("run_scoped with collective_axes")
    # Buffers become `scoped` region arguments; semaphores, which tessera
    # keeps in kernel scratch only, become kernel scratch (each run_scoped
    # gets its own, as fresh as Pallas's: they must be zero when it ends).
    news: list[Any] = [None] * len(jaxpr.invars)
    buf_types = []
    # The body's parameter names name its refs in the IR (and so in every
    # diagnostic), as the kernel's do (Translator.fresh_name).
    py_names = ji.kernel_arg_names(jaxpr)
    for i, v in enumerate(jaxpr.invars):
        aval = v.aval
        inner = ji.inner_aval(aval)
        space = ji.memory_space_name(aval)
        if ji.semaphore_kind(inner.dtype) is not None or space == "semaphore_mem":
            t.num_sems += 1
            news[i] = RefView.whole(t.scratch(
                aval, t.fresh_name(py_names[i] if i < len(py_names) else None,
                                   f"scoped_sem{t.num_sems}")))
        else:
            if space in ("hbm", "any") and t.refuse_scoped_hbm:
                # ANY included: JAX's interpret mode takes it as HBM here.
                file, line = (t.loc[0], t.loc[1]) if t.loc else ("", 0)
                raise ScopedHbmError(
                    "Cannot allocate HBM in `run_scoped`. (JAX's InterpretParams "
                    "allow_hbm_allocation_in_run_scoped is False)", t.prim, file, line)
            if space == "default":
                space = "vmem"
            # HBM or ANY (JAX's interpret mode takes ANY as HBM here): a
            # device-wide buffer, shared by the cores of the device.
            if space == "any":
                space = "hbm"
            if space not in ("vmem", "smem", "hbm"):
                raise t.fail(f"run_scoped buffer in memory space {space}")
            buf_types.append((i, B.Type.ref(space, dtype_name(inner.dtype), inner.shape),
                              t.fresh_name(py_names[i] if i < len(py_names) else None, None)))
    # The jaxpr's constvars are the refs it closes over (passed as operands).
    closed = outer[:len(jaxpr.constvars)]
    rest = outer[len(jaxpr.constvars):]
    del consts  # stale tracers of the closed-over refs: bound to `closed`
    if not buf_types:
        return t.run_jaxpr(region, jaxpr, list(closed), news)
    rtypes = [type_of_aval(v.aval) for v in eqn.outvars]
    op, res = t.op(region, "scoped", [], rtypes, region_args=[bt for _, bt, _ in buf_types],
                   region_arg_names=[n for _, _, n in buf_types])
    body = t.kb.op_region(op, 0)
    for j, (i, bt, _) in enumerate(buf_types):
        news[i] = RefView.whole(t.kb.region_arg(body, j, bt))
    del rest
    outs = t.run_jaxpr(body, jaxpr, list(closed), news)
    t.yield_(body, [as_value(t, body, o) for o in outs])
    return res


def _print_operand(t, env, region, atom):
    """A value to print: `jax.debug.print("{}", x_ref)` prints the ref's
    contents (JAX reads a ref argument of debug_print as its value), so a
    ref (or a view of one) is loaded whole where it is printed."""
    v = env.get(atom) if isinstance(atom, ji.Var) else None
    if not isinstance(v, RefView):
        return t.read(env, region, atom)
    rt = B.Type.value(v.base.type.dtype, v.shape)
    return t.emit(region, "load", [v.base], rt, indices=t.indices(v))


@register("debug_print", emits=("print", "load"))
def _debug_print(t, env, region, eqn, used):
    p = eqn.params
    if p.get("static_args"):
        raise t.fail("debug_print with static (non-array) arguments")
    fmt = re.sub(r"\{[^{}]*\}", "{}", p["fmt"])
    vals = [_print_operand(t, env, region, v) for v in eqn.invars]
    t.op(region, "print", vals, [], text=fmt)
    return []


@register("check", emits=("reduce_or", "not", "assert"))
def _check(t, env, region, eqn, used):
    for pred, message in ji.check_conditions(eqn):
        bad = t.read(env, region, pred)
        if bad.type.kind != "scalar":
            bad = t.emit(region, "reduce_or", [bad], B.Type.value("i1", ()),
                         ints=list(range(bad.type.rank)))
        ok = t.emit(region, "not", [bad], B.Type.value("i1", ()))
        t.op(region, "assert", [ok], [], text=message)
    return []
