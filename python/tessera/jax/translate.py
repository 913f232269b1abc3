"""Translates a traced Pallas TPU kernel (the pallas_call equation) into a
tessera IR kernel through the C builder (tessera._builder).

The kernel's header comes from the grid mapping: the grid and its dimension
semantics, scalar-prefetch operands, one in/out operand per block mapping
(block shape, memory space, index map translated from its jaxpr), scratch,
input/output aliases. The body is translated equation by equation; every op
carries the equation's user Python file:line, so tessera's diagnostics name
the user's line. A primitive (or a form of one) tessera cannot express is a
`TranslationError` naming it and that line: never a different kernel.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Sequence

import numpy as np

from .. import _builder as B
from . import _jax_internal as ji
from . import translate_math

__all__ = ["TranslationError", "TranslatedKernel", "translate", "dtype_name"]


class TranslationError(NotImplementedError):
    """The kernel uses something tessera.jax cannot translate. `primitive`
    names the JAX primitive, `file`/`line` the user's Python line."""

    def __init__(self, message: str, primitive: str = "", file: str = "", line: int = 0):
        where = f"{file}:{line}: " if file else ""
        super().__init__(f"{where}tessera.jax: {message}")
        self.primitive = primitive
        self.file = file
        self.line = line


_DTYPES = {
    "float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "i32",
    "uint32": "u32", "int16": "i16", "uint16": "u16", "int8": "i8", "uint8": "u8",
    "bool": "i1",
}


def dtype_name(dtype) -> str:
    """tessera's name for a numpy/JAX dtype; ValueError for one it lacks."""
    name = np.dtype(dtype).name if not hasattr(dtype, "name") else dtype.name
    try:
        return _DTYPES[str(name)]
    except KeyError:
        raise ValueError(f"dtype {name} (tessera has f32 bf16 f16 i32 u32 i16 u16 i8 u8 "
                         "bool)") from None


@dataclasses.dataclass
class TranslatedKernel:
    """A built module plus what running it needs."""
    module: B.ModuleBuilder
    name: str
    num_prefetch: int
    num_inputs: int
    num_outputs: int
    in_avals: tuple
    out_avals: tuple
    aliases: dict  # output index -> flat input index
    text: str = ""
    # operand name -> (file, line, col) for diagnostics tessera reports at an
    # operand (its block copies, index map results): the BlockSpec's index
    # map, else the pallas_call's line.
    operand_locs: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class RefView:
    """A ref (or semaphore) with a view: per dimension of the base ref, a
    point (start) or a range (start, size, stride); starts are ints or
    Values."""
    base: B.Value
    dims: list  # [("point", start) | ("range", start, size, stride)]
    # After `ref.reshape(R)`: R, and the view's indexing of R in `rdims`
    # (same entries as `dims`). Only reads of such views are translated.
    reshaped: tuple | None = None
    rdims: list | None = None

    @staticmethod
    def whole(ref: B.Value) -> "RefView":
        return RefView(ref, [("range", 0, d, 1) for d in ref.type.shape])

    @property
    def shape(self) -> tuple[int, ...]:
        if self.reshaped is not None:
            return tuple(d[2] for d in self.rdims if d[0] == "range")
        return tuple(d[2] for d in self.dims if d[0] == "range")

    @property
    def pre_shape(self) -> tuple[int, ...]:
        """The view's shape before its reshape."""
        return tuple(d[2] for d in self.dims if d[0] == "range")


def _type_of_aval(aval) -> B.Type:
    return B.Type.value(dtype_name(aval.dtype), aval.shape)


_UNARY = {
    "neg": "neg", "abs": "abs", "sign": "sign", "exp": "exp", "exp2": "exp2", "log": "log",
    "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "logistic": "logistic",
    "sin": "sin", "cos": "cos", "floor": "floor", "ceil": "ceil", "not": "not", "clz": "clz",
    "population_count": "popcount",
}
_BINARY = {
    "add": "add", "sub": "sub", "mul": "mul", "div": "div", "rem": "rem", "max": "max",
    "min": "min", "pow": "pow", "and": "and", "or": "or", "xor": "xor", "shift_left": "shl",
    "shift_right_logical": "shrl", "shift_right_arithmetic": "shra", "eq": "eq", "ne": "ne",
    "lt": "lt", "le": "le", "gt": "gt", "ge": "ge", "add_any": "add",
}
_REDUCE = {"reduce_sum": "reduce_sum", "reduce_max": "reduce_max", "reduce_min": "reduce_min",
           "reduce_prod": "reduce_prod", "reduce_and": "reduce_and", "reduce_or": "reduce_or"}
_WIDENED = {"i8", "i16", "u8", "u16", "i1"}
_PASSTHROUGH = {"copy", "copy_p", "pvary", "optimization_barrier", "stop_gradient"}
_INLINE_CALLS = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint",
                 "custom_jvp_call", "custom_vjp_call", "custom_vjp_call_jaxpr", "custom_lin"}


class _Translator:
    def __init__(self, call: ji.PallasCall, name: str):
        self.call = call
        self.name = name
        self.kernel_file = ""
        dbg = getattr(call.jaxpr, "debug_info", None)
        src = getattr(dbg, "func_src_info", None) or ""
        m = re.search(r" at (.+):(\d+)$", src)
        if m:
            self.kernel_file = m.group(1)
        self.mb = B.ModuleBuilder(self.kernel_file or f"<pallas kernel {name}>")
        self.kb = self.mb.kernel(name)
        self.loc: tuple = ()
        self.prim = "pallas_call"
        self.num_sems = 0
        self.prefetch_refs: list[B.Value] = []
        self.narrowed: dict[int, str] = {}    # widened ref -> the kernel's dtype
        self.operand_locs: dict = {}
        # ((axis name, size), ...) of the mesh the kernel runs on (the named
        # axes of the enclosing shard_map, in JAX's axis-environment order),
        # or None when unknown (then `axis_index` is the device id itself).
        self.mesh: tuple | None = None
        self.barrier: B.Value | None = None  # the `sem` get_barrier_semaphore gives
        self.in_index_map = False  # translating an index map (only `map` ops there)

    # ---- errors and locations ------------------------------------------------

    def fail(self, message: str) -> TranslationError:
        file, line = (self.loc[0], self.loc[1]) if self.loc else ("", 0)
        return TranslationError(message, self.prim, file, line)

    # ---- building helpers -----------------------------------------------------

    def op(self, region, mnemonic, operands=(), results=(), **kw):
        try:
            return self.kb.op(region, mnemonic, operands, results, loc=self.loc, **kw)
        except Exception as e:  # a builder refusal: name the user's line
            raise self.fail(f"building `{mnemonic}` for `{self.prim}` failed: {e}") from e

    def emit(self, region, mnemonic, operands, rtype: B.Type, **kw) -> B.Value:
        return self.op(region, mnemonic, operands, [rtype], **kw)[1][0]

    def const(self, region, value, t: B.Type) -> B.Value:
        if t.dtype in B.FLOAT_DTYPES:
            lit: Any = float(value)
        elif t.dtype == "i1":
            lit = int(bool(value))
        else:
            lit = int(value)
        return self.op(region, "const", (), [t], literal=lit)[1][0]

    def i32(self, region, x) -> B.Value:
        """x (an int or a scalar Value) as an i32 scalar Value."""
        if isinstance(x, B.Value):
            if x.type.kind != "scalar":
                raise self.fail(f"an index must be a scalar, got {x.type}")
            if x.type.dtype != "i32":
                return self.emit(region, "convert", [x], B.Type.value("i32", ()))
            return x
        return self.const(region, int(x), B.Type.value("i32", ()))

    def iarith(self, region, mnemonic, a, b):
        """a op b on index starts (ints folded, else i32 ops)."""
        if not isinstance(a, B.Value) and not isinstance(b, B.Value):
            return a + b if mnemonic == "add" else a * b
        if mnemonic == "add" and not isinstance(b, B.Value) and b == 0:
            return a
        if mnemonic == "add" and not isinstance(a, B.Value) and a == 0:
            return b
        if mnemonic == "mul" and not isinstance(b, B.Value) and b == 1:
            return a
        if mnemonic == "mul" and not isinstance(a, B.Value) and a == 1:
            return b
        return self.emit(region, mnemonic, [self.i32(region, a), self.i32(region, b)],
                         B.Type.value("i32", ()))

    # ---- environment ----------------------------------------------------------

    def read(self, env, region, atom) -> B.Value:
        """A scalar/block value for a jaxpr atom (a Literal becomes a const)."""
        if isinstance(atom, ji.Literal):
            return self.const_array(region, atom.val, atom.aval)
        try:
            v = env[atom]
        except KeyError:
            raise self.fail(f"internal: variable {atom} is not defined") from None
        if isinstance(v, RefView):
            raise self.fail(f"a ref is used where a value is expected ({atom})")
        return v

    def const_array(self, region, val, aval) -> B.Value:
        t = _type_of_aval(aval)
        arr = np.asarray(val)
        flat = np.ascontiguousarray(arr.reshape(-1))
        # a splat is one bit pattern repeated: compared as bytes, so that a
        # NaN splat is one (NaN != NaN) and 0.0 and -0.0 are not
        raw = flat.view(np.uint8).reshape(flat.size, -1) if flat.size else flat
        if flat.size == 0 or not np.all(raw == raw[0]):
            raise self.fail("a constant array that is not a splat (capture it as an input)")
        return self.const(region, flat[0].item(), t)

    def static_int(self, env, atom):
        """An index atom as an int when static, else its Value."""
        if isinstance(atom, (int, np.integer)):
            return int(atom)
        if isinstance(atom, ji.Literal):
            return int(atom.val)
        if hasattr(atom, "shape") and not isinstance(atom, ji.Var) and np.ndim(atom) == 0:
            try:
                return int(atom)
            except Exception:
                pass
        v = env.get(atom)
        if v is None:
            raise self.fail(f"an index ({atom}) that is not a scalar value")
        if isinstance(v, RefView):
            raise self.fail("a ref used as an index")
        return v

    def ref(self, env, atom) -> RefView:
        v = env.get(atom) if isinstance(atom, ji.Var) else None
        if not isinstance(v, RefView):
            raise self.fail(f"expected a ref, got {atom}")
        return v

    # ---- views ---------------------------------------------------------------

    def apply_transforms(self, env, region, view: RefView, transforms) -> RefView:
        for t in transforms:
            shape = ji.reshape_of(t)
            if shape is not None:
                if view.reshaped is not None:
                    raise self.fail("a ref reshaped twice")
                if int(np.prod(shape)) != int(np.prod(view.shape)):
                    raise self.fail(f"a reshape of a ref view of shape {view.shape} to {shape}")
                view = RefView(view.base, view.dims, tuple(shape),
                               [("range", 0, d, 1) for d in shape])
                continue
            try:
                dims = ji.ndindexer_dims(t)
            except NotImplementedError as e:
                raise self.fail(f"`{self.prim}` with {e}") from None
            cur = view.rdims if view.reshaped is not None else view.dims
            kept = [i for i, d in enumerate(cur) if d[0] == "range"]
            if len(dims) != len(kept):
                raise self.fail(f"an indexer of rank {len(dims)} on a view of rank {len(kept)}")
            new = list(cur)
            for pos, d in zip(kept, dims):
                _, s, n, st = cur[pos]
                start = self.static_int(env, d.start)
                if isinstance(start, B.Value):
                    start = self.i32(region, start)
                off = self.iarith(region, "add", s, self.iarith(region, "mul", start, st))
                if d.kind == "point":
                    new[pos] = ("point", off)
                else:
                    new[pos] = ("range", off, d.size, st * d.stride)
            if view.reshaped is not None:
                view = RefView(view.base, view.dims, view.reshaped, new)
            else:
                view = RefView(view.base, new)
        return view

    def indices(self, view: RefView) -> list[B.Index]:
        if view.reshaped is not None and self.prim not in ("get",):
            raise self.fail(f"`{self.prim}` on a reshaped ref (only reads of reshaped refs "
                            "are translated)")
        out = []
        for d, full in zip(view.dims, view.base.type.shape):
            if d[0] == "point":
                out.append(B.Index("point", d[1]))
            else:
                _, s, n, st = d
                if isinstance(s, B.Value):
                    out.append(B.Index("ds", s, n, st))
                elif s == 0 and n == full and st == 1:
                    out.append(B.Index("full", 0, full, 1))
                else:
                    out.append(B.Index("slice", s, n, st))
        return out

    def view_of(self, env, region, obj) -> RefView:
        ref, transforms = ji.ref_transforms(obj)
        return self.apply_transforms(env, region, self.ref(env, ref), transforms)

    # ---- jaxprs ---------------------------------------------------------------

    def run_jaxpr(self, region, jaxpr, consts: Sequence[Any], args: Sequence[Any]) -> list:
        """Translates `jaxpr` into `region` with constvars bound to `consts`
        and invars to `args` (env entries); returns its outputs' entries."""
        env: dict = {}
        for v, c in zip(jaxpr.constvars, consts):
            env[v] = c if isinstance(c, (B.Value, RefView)) else self.const_array(
                region, c, ji.aval_of(v))
        for v, a in zip(jaxpr.invars, args):
            env[v] = a
        used = {v for e in jaxpr.eqns for v in e.invars if isinstance(v, ji.Var)}
        used.update(v for v in jaxpr.outvars if isinstance(v, ji.Var))
        outer_loc, outer_prim = self.loc, self.prim
        for eqn in jaxpr.eqns:
            loc = ji.user_location(eqn)
            self.loc = loc if loc[0] else outer_loc
            self.prim = eqn.primitive.name
            self.equation(env, region, eqn, used)
        self.loc, self.prim = outer_loc, outer_prim
        out = []
        for v in jaxpr.outvars:
            out.append(self.const_array(region, v.val, v.aval) if isinstance(v, ji.Literal)
                       else env[v])
        return out

    def yield_(self, region, values: Sequence[B.Value]) -> None:
        self.op(region, "yield", list(values), [])

    def equation(self, env, region, eqn, used) -> None:
        name = eqn.primitive.name
        handler = _HANDLERS.get(name)
        if handler is None:
            if name in _UNARY:
                handler = _unary
            elif name in _BINARY:
                handler = _binary
            elif name in _REDUCE:
                handler = _reduce
            elif name in _PASSTHROUGH:
                handler = _passthrough
            elif name in _INLINE_CALLS:
                handler = _inline_call
        if handler is None:
            raise self.fail(f"primitive `{name}` is not supported")
        outs = handler(self, env, region, eqn, used)
        if outs is not None:
            for v, o in zip(eqn.outvars, outs):
                if not isinstance(v, ji.DropVar):
                    env[v] = o

    # ---- the kernel -----------------------------------------------------------

    def build(self) -> TranslatedKernel:
        call, gm = self.call, self.call.grid_mapping
        params = call.eqn.params
        loc = ji.call_location(call)
        self.loc = loc if loc[0] else ()  # header errors name the pallas_call's line
        grid = tuple(int(g) for g in gm.grid)
        sem = ji.dimension_semantics(params.get("compiler_params"), len(grid))
        if isinstance(params.get("compiler_params"), dict):
            for v in params["compiler_params"].values():
                sem = sem or ji.dimension_semantics(v, len(grid))
        if sem is not None:
            if len(sem) != len(grid):
                raise self.fail(f"dimension_semantics has {len(sem)} entries for a grid of "
                                f"rank {len(grid)}")
            # tessera needs the parallel dimensions to be a prefix (as Mosaic
            # does for sharding); later ones are run as arbitrary.
            seen_arbitrary = False
            for i, s in enumerate(sem):
                if s == "arbitrary":
                    seen_arbitrary = True
                elif seen_arbitrary:
                    sem[i] = "arbitrary"
        self.kb.set_grid(grid, sem)
        nidx, nin, nout = gm.num_index_operands, gm.num_inputs, gm.num_outputs
        aliases_in_out = dict(params.get("input_output_aliases") or ())
        out_alias = {o: i for i, o in aliases_in_out.items()}
        refs: list[Any] = []
        for i in range(nidx):
            aval = call.in_avals[i]
            try:
                t = B.Type.value(dtype_name(aval.dtype), aval.shape)
            except ValueError as e:
                raise self.fail(f"scalar prefetch operand {i}: {e}") from None
            narrow = None
            if t.dtype in _WIDENED:
                # SMEM holds 32-bit words: a narrow integer table (as Pallas
                # kernels "downcast" SMEM data) is widened to i32 on the way
                # in, and every read converts back to its dtype.
                narrow, t = t.dtype, B.Type.value("i32", t.shape)
            elif t.dtype not in ("i32", "u32", "f32"):
                raise self.fail(f"scalar prefetch operand {i} has dtype {t.dtype} "
                                "(tessera's SMEM holds i32, u32, f32)")
            ref, _ = self.kb.add_operand(B.ROLE_PREFETCH, f"p{i}", t, "smem")
            self.prefetch_refs.append(ref)
            if narrow:
                self.narrowed[ref.ptr] = narrow
            refs.append(RefView.whole(ref))
        maps = []
        for k, bm in enumerate(gm.block_mappings):
            is_out = k >= nin
            role = B.ROLE_OUT if is_out else B.ROLE_IN
            aval = bm.array_aval
            try:
                at = B.Type.value(dtype_name(aval.dtype), aval.shape)
            except ValueError as e:
                raise self.fail(f"{bm.origin}: {e}") from None
            if at.kind == "scalar":
                raise self.fail(f"{bm.origin}: rank-0 arrays as inputs or outputs "
                                "(use a shape (1,) array)")
            space = ji.memory_space_name(bm.transformed_block_aval)
            if space in ("default", "vmem"):
                space = "vmem"
            elif space not in ("any", "hbm", "smem"):
                raise self.fail(f"{bm.origin}: memory space {space} for a block")
            block = None
            if space in ("vmem", "smem"):
                dims = ji.block_dims(bm)
                for d in dims:
                    if d.kind in ("element", "bounded"):
                        raise self.fail(f"{bm.origin}: pl.{d.kind.title()} block dimensions "
                                        "are not supported")
                block = [B.SQUEEZED if d.kind == "squeezed" else d.size for d in dims]
            alias = -1
            if is_out and (k - nin) in out_alias:
                alias = out_alias[k - nin]
                if alias < nidx:
                    raise self.fail("an output aliased to a scalar-prefetch operand")
            name = f"out{k - nin}" if is_out else f"in{k}"
            loc = ji.index_map_location(bm) if block is not None else None
            self.operand_locs[name] = loc or ji.call_location(call)
            ref, imap = self.kb.add_operand(role, name, at, space, block, alias)
            refs.append(RefView.whole(ref))
            if imap is not None:
                maps.append((bm, imap))
        for i, aval in enumerate(gm.scratch_avals):
            refs.append(RefView.whole(self.scratch(aval, f"s{i}")))
        for bm, region in maps:
            self.index_map(bm, region, len(grid))
        body = self.kb.body
        jaxpr = call.jaxpr
        if len(jaxpr.invars) != len(refs):
            raise self.fail(f"the kernel takes {len(jaxpr.invars)} refs, the grid mapping "
                            f"gives {len(refs)}")
        self.run_jaxpr(body, jaxpr, [], refs)
        tk = TranslatedKernel(self.mb, self.name, nidx, nin, nout, call.in_avals,
                              call.out_avals, {o: i for i, o in aliases_in_out.items()},
                              operand_locs=dict(self.operand_locs))
        return tk

    def scratch(self, aval, name: str) -> B.Value:
        space = ji.memory_space_name(aval)
        inner = ji.inner_aval(aval)
        kind = ji.semaphore_kind(inner.dtype)
        if kind is not None or space == "semaphore_mem":
            # a barrier semaphore is an ordinary `sem` signalled across
            # devices (docs/dma.md, "Decisions")
            t = B.Type.sem(kind == "dma_sem", inner.shape)
        else:
            if space in ("default", "vmem", "any"):
                space = "vmem"
            if space not in ("vmem", "smem"):
                raise self.fail(f"scratch in memory space {space}")
            try:
                t = B.Type.ref(space, dtype_name(inner.dtype), inner.shape)
            except ValueError as e:
                raise self.fail(f"scratch {name}: {e}") from None
        ref, _ = self.kb.add_operand(B.ROLE_SCRATCH, name, t)
        return ref

    def index_map(self, bm, region, grid_rank: int) -> None:
        jaxpr, consts = ji.index_map(bm)
        args = [self.kb.region_arg(region, i, B.Type.value("i32", ())) for i in range(grid_rank)]
        args += [RefView.whole(r) for r in self.prefetch_refs]
        outer = self.loc
        self.prim = "index_map"
        if len(jaxpr.invars) != len(args):
            raise self.fail(f"{bm.origin}: index map takes {len(jaxpr.invars)} arguments, "
                            f"expected {len(args)}")
        self.in_index_map = True
        try:
            outs = self.run_jaxpr(region, jaxpr, consts, args)
        finally:
            self.in_index_map = False
        vals = []
        for o in outs:
            if isinstance(o, RefView):
                raise self.fail(f"{bm.origin}: an index map that returns a ref")
            vals.append(self.i32(region, o))
        self.yield_(region, vals)
        self.loc, self.prim = outer, "pallas_call"


# ---- handlers -------------------------------------------------------------------

def _out_type(eqn, i=0) -> B.Type:
    return _type_of_aval(eqn.outvars[i].aval)


def _unary(t: _Translator, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    return [t.emit(region, _UNARY[eqn.primitive.name], [x], _out_type(eqn))]


def _bcast(t, region, x: B.Value, shape) -> B.Value:
    """x broadcast (numpy rules) to `shape`, when it is a block of another
    shape (JAX's jaxprs broadcast size-1 dimensions implicitly)."""
    shape = tuple(shape)
    if x.type.kind == "scalar" or x.type.shape == shape:
        return x
    if x.type.rank != len(shape):
        x = t.emit(region, "reshape", [x], B.Type.value(
            x.type.dtype, (1,) * (len(shape) - x.type.rank) + x.type.shape))
    return t.emit(region, "broadcast", [x], B.Type.value(x.type.dtype, shape))


def _binary(t: _Translator, env, region, eqn, used):
    rt = _out_type(eqn)
    a, b = (_bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
    return [t.emit(region, _BINARY[eqn.primitive.name], [a, b], rt)]


def _reduce(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    axes = tuple(eqn.params["axes"])
    if not axes:
        return [x]
    return [t.emit(region, _REDUCE[eqn.primitive.name], [x], _out_type(eqn), ints=axes)]


def _passthrough(t, env, region, eqn, used):
    return [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]


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


def _inline_call(t, env, region, eqn, used):
    p = eqn.params
    sub = p.get("jaxpr") or p.get("call_jaxpr") or p.get("fun_jaxpr")
    if sub is None:
        raise t.fail(f"`{eqn.primitive.name}` without a jaxpr")
    jaxpr, consts = ji.sub_jaxpr(sub)
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    return t.run_jaxpr(region, jaxpr, consts, args[len(args) - len(jaxpr.invars):])


def _program_id(t, env, region, eqn, used):
    return [t.emit(region, "program_id", [], B.Type.value("i32", ()), ints=[eqn.params["axis"]])]


def _num_programs(t, env, region, eqn, used):
    return [t.emit(region, "num_programs", [], B.Type.value("i32", ()),
                   ints=[eqn.params["axis"]])]


def _get(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[1:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    rt = _out_type(eqn)
    if tuple(rt.shape) != view.shape:
        raise t.fail(f"a read of shape {rt.shape} from a view of shape {view.shape}")
    _check_loadable(t, view)
    if view.reshaped is not None:
        return [_get_reshaped(t, region, view, rt)]
    narrow = t.narrowed.get(view.base.ptr)
    if narrow is not None:  # a widened prefetch table: read i32, convert back
        wide = t.emit(region, "load", [view.base], B.Type.value("i32", rt.shape),
                      indices=t.indices(view))
        return [_convert_value(t, region, wide, rt)]
    return [t.emit(region, "load", [view.base], rt, indices=t.indices(view))]


def _get_reshaped(t, region, view: RefView, rt: B.Type) -> B.Value:
    """A read through `ref.reshape(R)[idx]`: a load of the view before the
    reshape, masked to the elements idx selects (others are not read, so no
    uninitialized-read reports for them), reshaped to R, then the selected
    elements taken out of the value (a roll and a strided slice per
    dimension)."""
    R, S = view.reshaped, view.pre_shape
    dt = view.base.type.dtype
    it, bt = B.Type.value("i32", R), B.Type.value("i1", R)
    i32 = B.Type.value("i32", ())
    mask = None
    for d, e in enumerate(view.rdims):
        io = t.emit(region, "iota", [], it, ints=[d])
        if e[0] == "point":
            m = t.emit(region, "eq", [io, t.i32(region, e[1])], bt)
        else:
            _, s, n, st = e
            if not isinstance(s, B.Value) and s == 0 and n == R[d] and st == 1:
                continue
            s32 = t.i32(region, s)
            end = t.emit(region, "add", [s32, t.const(region, n * st, i32)], i32) \
                if isinstance(s, B.Value) else t.const(region, s + n * st, i32)
            m = t.emit(region, "and", [t.emit(region, "ge", [io, s32], bt),
                                       t.emit(region, "lt", [io, end], bt)], bt)
            if st > 1:
                off = t.emit(region, "sub", [io, s32], it)
                r = t.emit(region, "rem", [off, t.const(region, st, i32)], it)
                m = t.emit(region, "and", [m, t.emit(region, "eq", [r, t.const(
                    region, 0, i32)], bt)], bt)
        mask = m if mask is None else t.emit(region, "and", [mask, m], bt)
    vt = B.Type.value(dt, S)
    pre = RefView(view.base, view.dims)
    if mask is None:
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre))
    else:
        ms = t.emit(region, "reshape", [mask], B.Type.value("i1", S))
        v = t.emit(region, "load", [view.base], vt, indices=t.indices(pre),
                   extra_operands=[ms], flags=B.OPF_MASK)
    v = t.emit(region, "reshape", [v], B.Type.value(dt, R)) if S != R else v
    idx = []
    out_shape = []
    for d, e in enumerate(view.rdims):
        start = e[1]
        if not (not isinstance(start, B.Value) and start == 0):
            shift = t.emit(region, "neg", [t.i32(region, start)], i32)
            v = t.emit(region, "roll", [v, shift], v.type, ints=[d])
        n, st = (1, 1) if e[0] == "point" else (e[2], e[3])
        idx.append(B.Index("full", 0, R[d], 1) if (n, st) == (R[d], 1)
                   else B.Index("slice", 0, n, st))
        out_shape.append(n)
    if any(i.kind != "full" for i in idx):
        v = t.emit(region, "slice", [v], B.Type.value(dt, out_shape), indices=idx)
    return _reshape_to(t, region, v, rt)


def _check_loadable(t, view):
    if view.base.type.kind != "ref":
        raise t.fail("reading a semaphore as an array")
    if view.base.type.space in ("any", "hbm"):
        raise t.fail("a load or store on a ref in HBM/ANY memory (only DMAs may touch it: "
                     "use pltpu.make_async_copy)")


def _swap(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[2:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    _check_loadable(t, view)
    val = t.read(env, region, eqn.invars[1])
    idx = t.indices(view)
    old = None
    if eqn.outvars and eqn.outvars[0] in used:
        old = t.emit(region, "load", [view.base], _out_type(eqn), indices=idx)
    if val.type.shape != view.shape and val.type.kind != "scalar":
        raise t.fail(f"a store of shape {val.type.shape} to a view of shape {view.shape}")
    t.op(region, "store", [view.base, val], [], indices=idx)
    return [old]


def _addupdate(t, env, region, eqn, used):
    transforms = ji.unflatten(eqn.params["tree"], eqn.invars[2:])
    view = t.apply_transforms(env, region, t.ref(env, eqn.invars[0]), transforms)
    _check_loadable(t, view)
    val = t.read(env, region, eqn.invars[1])
    idx = t.indices(view)
    vt = B.Type.value(view.base.type.dtype, view.shape)
    old = t.emit(region, "load", [view.base], vt, indices=idx)
    new = t.emit(region, "add", [old, val], vt)
    t.op(region, "store", [view.base, new], [], indices=idx)
    return []


def _mask_of(t, env, region, mask, shape) -> B.Value:
    m = t.read(env, region, mask)
    if m.type.kind == "scalar":
        return t.emit(region, "broadcast", [m], B.Type.value("i1", shape))
    return _bcast(t, region, m, shape)


def _masked_load(t, env, region, eqn, used):
    ref, transforms, mask, other = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    _check_loadable(t, view)
    rt = _out_type(eqn)
    idx = t.indices(view)
    if mask is None:
        return [t.emit(region, "load", [view.base], rt, indices=idx)]
    m = _mask_of(t, env, region, mask, rt.shape)
    v = t.emit(region, "load", [view.base], rt, indices=idx, extra_operands=[m],
               flags=B.OPF_MASK)
    if other is not None:
        o = _bcast(t, region, t.read(env, region, other), rt.shape)
        v = t.emit(region, "select", [m, v, o], rt)
    return [v]


def _masked_swap(t, env, region, eqn, used):
    ref, transforms, val, mask = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    _check_loadable(t, view)
    vt = B.Type.value(view.base.type.dtype, view.shape)
    idx = t.indices(view)
    v = _bcast(t, region, t.read(env, region, val), vt.shape)
    extra, flags = [], 0
    if mask is not None:
        extra, flags = [_mask_of(t, env, region, mask, vt.shape)], B.OPF_MASK
    old = None
    if eqn.outvars and eqn.outvars[0] in used:
        old = t.emit(region, "load", [view.base], vt, indices=idx, extra_operands=extra,
                     flags=flags)
    t.op(region, "store", [view.base, v], [], indices=idx, extra_operands=extra, flags=flags)
    return [old]


def _reciprocal(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = _out_type(eqn)
    return [t.emit(region, "div", [t.const(region, 1.0, B.Type.value(rt.dtype, ())), x], rt)]


def _convert(t, env, region, eqn, used):
    return [_convert_value(t, region, t.read(env, region, eqn.invars[0]), _out_type(eqn))]


def _convert_value(t, region, x: B.Value, rt: B.Type) -> B.Value:
    if rt.dtype == x.type.dtype:
        return x
    if rt.dtype == "i1":
        zero = t.const(region, 0, B.Type.value(x.type.dtype, ()))
        return t.emit(region, "ne", [x, zero], rt)
    return t.emit(region, "convert", [x], rt)


def _bitcast(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = _out_type(eqn)
    if rt.shape != x.type.shape:
        raise t.fail("bitcast_convert_type between dtypes of different widths")
    return [t.emit(region, "bitcast", [x], rt)]


def _iota(t, env, region, eqn, used):
    rt = _out_type(eqn)
    return [t.emit(region, "iota", [], rt, ints=[eqn.params["dimension"]])]


def _broadcast_in_dim(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = _out_type(eqn)
    if x.type.kind == "scalar":
        return [t.emit(region, "broadcast", [x], rt)]
    bdims = tuple(eqn.params["broadcast_dimensions"])
    shape = [1] * rt.rank
    for d, n in zip(bdims, x.type.shape):
        shape[d] = n
    if tuple(shape) != x.type.shape:
        x = t.emit(region, "reshape", [x], B.Type.value(x.type.dtype, shape))
    if tuple(shape) == rt.shape:
        return [x]
    return [t.emit(region, "broadcast", [x], rt)]


def _reshape_to(t, region, x: B.Value, rt: B.Type) -> B.Value:
    if rt.shape == x.type.shape:
        return x
    if rt.kind == "scalar":
        return t.emit(region, "reduce_sum", [x], rt, ints=list(range(x.type.rank)))
    if x.type.kind == "scalar":
        return t.emit(region, "broadcast", [x], rt)
    return t.emit(region, "reshape", [x], rt)


def _reshape(t, env, region, eqn, used):
    if eqn.params.get("dimensions") not in (None, ()):
        raise t.fail("reshape with `dimensions`")
    return [_reshape_to(t, region, t.read(env, region, eqn.invars[0]), _out_type(eqn))]


def _squeeze(t, env, region, eqn, used):
    return [_reshape_to(t, region, t.read(env, region, eqn.invars[0]), _out_type(eqn))]


def _transpose(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    perm = tuple(eqn.params["permutation"])
    if perm == tuple(range(len(perm))):
        return [x]
    return [t.emit(region, "transpose", [x], _out_type(eqn), ints=perm)]


def _concatenate(t, env, region, eqn, used):
    xs = [t.read(env, region, v) for v in eqn.invars]
    return [t.emit(region, "concatenate", xs, _out_type(eqn), ints=[eqn.params["dimension"]])]


def _slice(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    p = eqn.params
    strides = p.get("strides") or (1,) * x.type.rank
    idx = []
    for s, e, st, n in zip(p["start_indices"], p["limit_indices"], strides, x.type.shape):
        size = max(0, -(-(e - s) // st))
        idx.append(B.Index("full", 0, n, 1) if (s, e, st) == (0, n, 1)
                   else B.Index("slice", s, size, st))
    return [t.emit(region, "slice", [x], _out_type(eqn), indices=idx)]


def _dynamic_slice(t, env, region, eqn, used):
    """A slice of a value at dynamic starts: a dynamic start s (clamped to
    [0, dim - size] as lax does) becomes a roll by -s, then a static slice
    from 0."""
    x = t.read(env, region, eqn.invars[0])
    starts = [t.static_int(env, v) for v in eqn.invars[1:]]
    sizes = eqn.params["slice_sizes"]
    i32 = B.Type.value("i32", ())
    idx = []
    for axis, (s, n, d) in enumerate(zip(starts, sizes, x.type.shape)):
        if isinstance(s, B.Value):
            if n == d:
                idx.append(B.Index("full", 0, d, 1))
                continue
            s = t.i32(region, s)
            s = t.emit(region, "max", [s, t.const(region, 0, i32)], i32)
            s = t.emit(region, "min", [s, t.const(region, d - n, i32)], i32)
            shift = t.emit(region, "neg", [s], i32)
            x = t.emit(region, "roll", [x, shift], x.type, ints=[axis])
            s = 0
        s = min(max(s, 0), d - n)
        idx.append(B.Index("full", 0, d, 1) if (s, n) == (0, d) else B.Index("slice", s, n, 1))
    if all(i.kind == "full" for i in idx):
        return [x]
    return [t.emit(region, "slice", [x], _out_type(eqn), indices=idx)]


def _select_n(t, env, region, eqn, used):
    rt = _out_type(eqn)
    pred = t.read(env, region, eqn.invars[0])
    cases = [_bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars[1:]]
    if len(cases) == 1:
        return [cases[0]]
    if rt.kind != "scalar":
        pred = _bcast(t, region, pred, rt.shape)
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


def _clamp(t, env, region, eqn, used):
    rt = _out_type(eqn)
    lo, x, hi = (_bcast(t, region, t.read(env, region, v), rt.shape) for v in eqn.invars)
    return [t.emit(region, "min", [t.emit(region, "max", [x, lo], rt), hi], rt)]


def _integer_pow(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    y = int(eqn.params["y"])
    rt = _out_type(eqn)
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


def _square(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    return [t.emit(region, "mul", [x, x], _out_type(eqn))]


def _expm1(t, env, region, eqn, used):
    # exp(x) - 1 loses every digit near 0 (115 ulp at x = -0.0019). Kahan's
    # form keeps them: with u = exp(x) rounded, (u - 1) * x / log(u) is
    # within a few ulp; u == 1 gives x itself, u - 1 == -1 gives -1, and an
    # infinite u gives inf (the formula would give inf/inf).
    x = t.read(env, region, eqn.invars[0])
    rt = _out_type(eqn)
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
    return [t.emit(region, "select", [t.emit(region, "eq", [u, inf], ct), inf, r], rt)]


def _tan(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    rt = _out_type(eqn)
    return [t.emit(region, "div", [t.emit(region, "sin", [x], rt),
                                   t.emit(region, "cos", [x], rt)], rt)]


def _is_finite(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    xt = x.type
    d = t.emit(region, "sub", [x, x], xt)
    return [t.emit(region, "eq", [d, t.const(region, 0.0, B.Type.value(xt.dtype, ()))],
                   _out_type(eqn))]


def _round(t, env, region, eqn, used):
    method = eqn.params.get("rounding_method")
    if int(getattr(method, "value", method) or 0) != 1:
        raise t.fail("`round` away from zero (tessera rounds half to even: use "
                     "jnp.round or rounding_method=TO_NEAREST_EVEN)")
    return [t.emit(region, "round", [t.read(env, region, eqn.invars[0])], _out_type(eqn))]


def _argminmax(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    axes = tuple(eqn.params["axes"])
    if len(axes) != 1:
        raise t.fail(f"`{eqn.primitive.name}` over {len(axes)} axes")
    rt = _out_type(eqn)
    r = t.emit(region, eqn.primitive.name, [x], B.Type.value("i32", rt.shape), ints=axes)
    if rt.dtype != "i32":
        r = t.emit(region, "convert", [r], rt)
    return [r]


def _dot_general(t, env, region, eqn, used):
    a, b = (t.read(env, region, v) for v in eqn.invars)
    (lc, rc), (lb, rb) = eqn.params["dimension_numbers"]
    rt = _out_type(eqn)
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


_CUMULATIVE = {"cumsum": ("add", 0), "cumprod": ("mul", 1), "cummax": ("max", None),
               "cummin": ("min", None), "cumlogsumexp": (None, None)}


def _cumulative(t, env, region, eqn, used):
    """cumsum/cumprod/cummax/cummin along an axis as a log-step scan
    (Hillis-Steele): x = x op roll(x, k) where index >= k, for k = 1, 2, 4..."""
    mnemonic, identity = _CUMULATIVE[eqn.primitive.name]
    if mnemonic is None:
        raise t.fail(f"primitive `{eqn.primitive.name}` is not supported")
    x = t.read(env, region, eqn.invars[0])
    if x.type.kind == "scalar":
        return [x]
    axis, reverse = eqn.params["axis"], eqn.params.get("reverse", False)
    n = x.type.shape[axis]
    it = B.Type.value("i32", x.type.shape)
    bt = B.Type.value("i1", x.type.shape)
    pos = t.emit(region, "iota", [], it, ints=[axis])
    if reverse:
        pos = t.emit(region, "sub", [t.const(region, n - 1, B.Type.value("i32", ())), pos], it)
    k = 1
    while k < n:
        shift = t.const(region, -k if reverse else k, B.Type.value("i32", ()))
        moved = t.emit(region, "roll", [x, shift], x.type, ints=[axis])
        combined = t.emit(region, mnemonic, [x, moved], x.type)
        valid = t.emit(region, "ge", [pos, t.const(region, k, B.Type.value("i32", ()))], bt)
        x = t.emit(region, "select", [valid, combined, x], x.type)
        k *= 2
    return [x]


def _gather(t, env, region, eqn, used):
    """lax.gather in the form jnp.take_along_axis gives (one collapsed axis,
    every other dimension batched, slices of size 1) -> tessera `gather`."""
    x = t.read(env, region, eqn.invars[0])
    idx = t.read(env, region, eqn.invars[1])
    dn = eqn.params["dimension_numbers"]
    r = x.type.rank
    axis = tuple(dn.collapsed_slice_dims)
    others = tuple(d for d in range(r) if d not in axis)
    if (len(axis) != 1 or tuple(dn.offset_dims) != () or tuple(dn.start_index_map) != axis
            or tuple(getattr(dn, "operand_batching_dims", ())) != others
            or tuple(getattr(dn, "start_indices_batching_dims", ())) != others
            or tuple(eqn.params["slice_sizes"]) != (1,) * r
            or idx.type.rank != r + 1 or idx.type.shape[-1] != 1):
        raise t.fail("`gather` other than jnp.take_along_axis within a block")
    rt = _out_type(eqn)
    it = B.Type.value("i32", rt.shape)
    idx = t.emit(region, "reshape", [idx], B.Type.value(idx.type.dtype, rt.shape))
    if idx.type.dtype != "i32":
        idx = t.emit(region, "convert", [idx], it)
    if "CLIP" in str(eqn.params.get("mode")):
        i32 = B.Type.value("i32", ())
        idx = t.emit(region, "max", [idx, t.const(region, 0, i32)], it)
        idx = t.emit(region, "min", [idx, t.const(region, x.type.shape[axis[0]] - 1, i32)], it)
    # Other modes: an index out of range is a tessera kernel error (it is
    # undefined on the TPU), never a silently different value.
    return [t.emit(region, "gather", [x, idx], rt, ints=[axis[0]])]


def _tile(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    for axis, r in enumerate(eqn.params["reps"]):
        if r > 1:
            shape = list(x.type.shape)
            shape[axis] *= r
            x = t.emit(region, "concatenate", [x] * r, B.Type.value(x.type.dtype, shape),
                       ints=[axis])
    return [x]


def _rev(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    for d in eqn.params["dimensions"]:
        n = x.type.shape[d]
        it = B.Type.value("i32", x.type.shape)
        idx = t.emit(region, "iota", [], it, ints=[d])
        idx = t.emit(region, "sub", [t.const(region, n - 1, B.Type.value("i32", ())), idx], it)
        x = t.emit(region, "gather", [x, idx], x.type, ints=[d])
    return [x]


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


def _cond(t, env, region, eqn, used):
    branches = eqn.params["branches"]
    idx = t.read(env, region, eqn.invars[0])
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars[1:]]
    rtypes = [_type_of_aval(v.aval) for v in eqn.outvars]

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
        t.yield_(then_r, [_as_value(t, then_r, o) for o in outs])
        rest_idx = idx
        if len(bs) > 2:
            rest_idx = t.emit(else_r, "sub", [idx, t.const(else_r, 1, B.Type.value(
                idx.type.dtype, ()))], idx.type)
        outs = emit(else_r, bs[1:], rest_idx)
        t.yield_(else_r, [_as_value(t, else_r, o) for o in outs])
        return res
    return emit(region, list(branches), idx)


def _as_value(t, region, o) -> B.Value:
    if isinstance(o, RefView):
        raise t.fail("a control-flow region that returns a ref")
    return o


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
    inits = [_as_value(t, region, a) for a in args[nc:nc + nk]]
    xs = [_as_value(t, region, a) for a in args[nc + nk:]]
    y_types = [_type_of_aval(v.aval) for v in eqn.outvars[nk:]]
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
    outs = [_as_value(t, body, o) for o in outs]
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
    return _reshape_to(t, region, one, B.Type.value(x.type.dtype, x.type.shape[1:]))


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


def _while(t, env, region, eqn, used):
    p = eqn.params
    cj, cc = ji.sub_jaxpr(p["cond_jaxpr"])
    bj, bc = ji.sub_jaxpr(p["body_jaxpr"])
    ncc, nbc = p["cond_nconsts"], p["body_nconsts"]
    args = [env[v] if isinstance(v, ji.Var) else t.read(env, region, v) for v in eqn.invars]
    cargs, bargs = args[:ncc], args[ncc:ncc + nbc]
    inits = [_as_value(t, region, a) for a in args[ncc + nbc:]]
    rtypes = [a.type for a in inits]
    op, res = t.op(region, "while", inits, rtypes, region_args=rtypes)
    cr, br = t.kb.op_region(op, 0), t.kb.op_region(op, 1)
    cvals = [t.kb.region_arg(cr, i, rt) for i, rt in enumerate(rtypes)]
    (c,) = t.run_jaxpr(cr, cj, cc, cargs + cvals)
    t.op(cr, "condition", [_as_value(t, cr, c)], [])
    bvals = [t.kb.region_arg(br, i, rt) for i, rt in enumerate(rtypes)]
    outs = t.run_jaxpr(br, bj, bc, bargs + bvals)
    t.yield_(br, [_as_value(t, br, o) for o in outs])
    return res


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
    for i, v in enumerate(jaxpr.invars):
        aval = v.aval
        inner = ji.inner_aval(aval)
        space = ji.memory_space_name(aval)
        if ji.semaphore_kind(inner.dtype) is not None or space == "semaphore_mem":
            t.num_sems += 1
            news[i] = RefView.whole(t.scratch(aval, f"scoped_sem{t.num_sems}"))
        else:
            if space in ("default", "any"):
                space = "vmem"
            if space not in ("vmem", "smem"):
                raise t.fail(f"run_scoped buffer in memory space {space}")
            buf_types.append((i, B.Type.ref(space, dtype_name(inner.dtype), inner.shape)))
    # The jaxpr's constvars are the refs it closes over (passed as operands).
    closed = outer[:len(jaxpr.constvars)]
    rest = outer[len(jaxpr.constvars):]
    del consts  # stale tracers of the closed-over refs: bound to `closed`
    if not buf_types:
        return t.run_jaxpr(region, jaxpr, list(closed), news)
    rtypes = [_type_of_aval(v.aval) for v in eqn.outvars]
    op, res = t.op(region, "scoped", [], rtypes, region_args=[bt for _, bt in buf_types])
    body = t.kb.op_region(op, 0)
    for j, (i, bt) in enumerate(buf_types):
        news[i] = RefView.whole(t.kb.region_arg(body, j, bt))
    del rest
    outs = t.run_jaxpr(body, jaxpr, list(closed), news)
    t.yield_(body, [_as_value(t, body, o) for o in outs])
    return res


def _sem_view(t, env, region, obj) -> RefView:
    view = t.view_of(env, region, obj)
    if view.base.type.kind != "sem":
        raise t.fail("a DMA or semaphore op on something that is not a semaphore")
    if any(d[0] != "point" for d in view.dims):
        raise t.fail("a semaphore op on an array of semaphores (index it to one semaphore)")
    return view


def _dma_common(t, env, region, eqn):
    src, dst, dst_sem, src_sem, device_id = ji.unflatten(eqn.params["tree"], eqn.invars)
    return src, dst, dst_sem, src_sem, device_id


# Device ids. tessera's devices are numbered 0..N-1 (`device_id`); JAX's TPU
# interpret mode numbers a mesh's devices the same way: the logical id of the
# mesh coordinates (c0, c1, ...) over the axes (s0, s1, ...) of its axis
# environment is row-major, sum(c_i * prod(s_{i+1:})) (jax/_src/pallas/mosaic/
# interpret/utils.py, device_coords_to_logical_id). A coordinate is therefore
# (id // prod(s_{i+1:})) % s_i.

def _mesh(t) -> tuple:
    if t.mesh is None:
        raise t.fail("a mesh device id needs the mesh (call the kernel inside shard_map)")
    return t.mesh


def _axis_coord(t, region, axis) -> Any:
    """This device's coordinate along the mesh axis `axis` (an i32 Value)."""
    mesh = _mesh(t)
    names = [n for n, _ in mesh]
    if axis not in names:
        raise t.fail(f"mesh axis {axis!r} is not an axis of the enclosing shard_map "
                     f"(its axes: {', '.join(map(repr, names)) or 'none'})")
    i = names.index(axis)
    size = mesh[i][1]
    inner = int(np.prod([s for _, s in mesh[i + 1:]], dtype=np.int64))
    total = int(np.prod([s for _, s in mesh], dtype=np.int64))
    if size == 1:
        return 0
    c = t.emit(region, "device_id", [], B.Type.value("i32", ()))
    if inner != 1:
        c = t.emit(region, "div", [c, t.i32(region, inner)], B.Type.value("i32", ()))
    if size * inner != total:
        c = t.emit(region, "rem", [c, t.i32(region, size)], B.Type.value("i32", ()))
    return c


def _logical_of_coords(t, region, coords: dict) -> Any:
    """The logical id of mesh coordinates {axis: int or Value}; axes not
    given are this device's own (as JAX fills them in)."""
    mesh = _mesh(t)
    out: Any = 0
    stride = 1
    for name, size in reversed(mesh):
        c = coords[name] if name in coords else _axis_coord(t, region, name)
        out = t.iarith(region, "add", out, t.iarith(region, "mul", c, stride))
        stride *= size
    return out


def _device_operand(t, env, region, device_id, eqn=None):
    """The i32 logical device id of a DMA's or signal's `device_id` (None
    when the op is local)."""
    if device_id is None:
        return None
    kind = getattr((eqn.params if eqn is not None else {}).get("device_id_type"),
                   "value", "mesh")
    if kind == "logical":
        if isinstance(device_id, (tuple, list, dict)):
            raise t.fail("a LOGICAL device id that is not one number")
        return t.i32(region, t.static_int(env, device_id))
    if kind != "mesh":
        raise t.fail(f"device id type {kind!r}")
    if t.mesh is None:  # no mesh known: a one-axis mesh, where the id is the coordinate
        if isinstance(device_id, dict) and len(device_id) == 1:
            device_id = next(iter(device_id.values()))
        if isinstance(device_id, (tuple, list)) and len(device_id) == 1:
            device_id = device_id[0]
        if isinstance(device_id, (tuple, list, dict)):
            raise t.fail("a mesh device id with several axes outside shard_map")
        return t.i32(region, t.static_int(env, device_id))
    names = [n for n, _ in t.mesh]
    if isinstance(device_id, dict):
        coords = {}
        for axis, idx in device_id.items():
            if isinstance(axis, tuple) and len(axis) == 1:
                axis = axis[0]
            if isinstance(axis, tuple):
                raise t.fail(f"a mesh device id over the combined axes {axis} "
                             "(give one coordinate per mesh axis)")
            if axis not in names:
                raise t.fail(f"a device id on axis {axis!r}, which is not an axis of the "
                             f"enclosing shard_map (its axes: {', '.join(map(repr, names))})")
            coords[axis] = t.static_int(env, idx)
    else:
        ids = list(device_id) if isinstance(device_id, (tuple, list)) else [device_id]
        if len(ids) != len(names):
            raise t.fail(f"a mesh device id of {len(ids)} coordinate(s) on a mesh of "
                         f"{len(names)} axes ({', '.join(map(repr, names))})")
        coords = {n: t.static_int(env, i) for n, i in zip(names, ids)}
    return t.i32(region, _logical_of_coords(t, region, coords))


def _dma_start(t, env, region, eqn, used):
    src, dst, dst_sem, src_sem, device_id = _dma_common(t, env, region, eqn)
    sv, dv = t.view_of(env, region, src), t.view_of(env, region, dst)
    semv = _sem_view(t, env, region, dst_sem)
    flags = 0
    fixed = [sv.base, dv.base, semv.base]
    idx = t.indices(sv) + t.indices(dv) + t.indices(semv)
    if src_sem is not None:
        ssv = _sem_view(t, env, region, src_sem)
        fixed.append(ssv.base)
        idx += t.indices(ssv)
        flags |= B.OPF_SEND
    extra = []
    dev = _device_operand(t, env, region, device_id, eqn)
    if dev is not None:
        extra.append(dev)
        flags |= B.OPF_DEVICE
    if eqn.params.get("add"):
        flags |= B.OPF_DMA_ADD
    ints = [len(sv.dims), len(dv.dims), len(semv.dims)]
    t.op(region, "dma_start", fixed, [], indices=idx, extra_operands=extra, ints=ints,
         flags=flags)
    return []


def _dma_wait(t, env, region, eqn, used):
    src, dst, dst_sem, src_sem, device_id = _dma_common(t, env, region, eqn)
    # wait_read / wait_send (is_wait_send) bind dma_wait with the copy's
    # source and destination (and their semaphores) already swapped (jax
    # 0.12, pallas/mosaic/primitives.py): the semaphore waited on is in the
    # destination-semaphore slot either way, and the view is its own side's.
    if eqn.params.get("is_wait_send") and dst_sem is None:
        raise t.fail("wait_send without a source semaphore")
    dv = t.view_of(env, region, dst)
    sv = t.view_of(env, region, src) if src is not None else dv
    semv = _sem_view(t, env, region, dst_sem)
    idx = t.indices(sv) + t.indices(dv) + t.indices(semv)
    t.op(region, "dma_wait", [sv.base, dv.base, semv.base], [], indices=idx,
         ints=[len(sv.dims), len(dv.dims), len(semv.dims)])
    return []


def _sem_signal(t, env, region, eqn, used):
    ref, transforms, inc, device_id, core_index = ji.unflatten(eqn.params["args_tree"],
                                                               eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    if view.base.type.kind != "sem":
        raise t.fail("semaphore_signal on something that is not a semaphore")
    amount = t.i32(region, t.static_int(env, inc))
    extra, flags = [], 0
    dev = _device_operand(t, env, region, device_id, eqn)
    if dev is not None:
        extra.append(dev)
        flags |= B.OPF_DEVICE
    if core_index is not None:
        extra.append(t.i32(region, t.static_int(env, core_index)))
        flags |= B.OPF_CORE
    t.op(region, "sem_signal", [view.base, amount], [], indices=t.indices(view),
         extra_operands=extra, flags=flags)
    return []


def _sem_wait(t, env, region, eqn, used):
    ref, transforms, value, decrement = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    if not ji.literal_value(decrement if decrement is not None else True):
        raise t.fail("semaphore_wait without decrement")
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    amount = t.i32(region, t.static_int(env, value))
    t.op(region, "sem_wait", [view.base, amount], [], indices=t.indices(view))
    return []


def _sem_read(t, env, region, eqn, used):
    ref, transforms = ji.unflatten(eqn.params["args_tree"], eqn.invars)
    view = t.apply_transforms(env, region, t.ref(env, ref), transforms)
    return [t.emit(region, "sem_read", [view.base], B.Type.value("i32", ()),
                   indices=t.indices(view))]


def _roll(t, env, region, eqn, used):
    x = t.read(env, region, eqn.invars[0])
    if eqn.params.get("stride") not in (None, 0):
        raise t.fail("pltpu.roll with a stride")
    shift = t.i32(region, t.static_int(env, eqn.invars[1]))
    return [t.emit(region, "roll", [x, shift], x.type, ints=[eqn.params["axis"]])]


def _debug_print(t, env, region, eqn, used):
    p = eqn.params
    if p.get("static_args"):
        raise t.fail("debug_print with static (non-array) arguments")
    fmt = re.sub(r"\{[^{}]*\}", "{}", p["fmt"])
    vals = [t.read(env, region, v) for v in eqn.invars]
    t.op(region, "print", vals, [], text=fmt)
    return []


def _check(t, env, region, eqn, used):
    for pred, message in ji.check_conditions(eqn):
        bad = t.read(env, region, pred)
        if bad.type.kind != "scalar":
            bad = t.emit(region, "reduce_or", [bad], B.Type.value("i1", ()),
                         ints=list(range(bad.type.rank)))
        ok = t.emit(region, "not", [bad], B.Type.value("i1", ()))
        t.op(region, "assert", [ok], [], text=message)
    return []


def _device_id(t, env, region, eqn, used):
    return [t.emit(region, "device_id", [], B.Type.value("i32", ()))]


def _axis_index(t, env, region, eqn, used):
    names = eqn.params["axis_name"]
    names = tuple(names) if isinstance(names, (tuple, list)) else (names,)
    if t.mesh is None:  # no mesh known: one axis, whose index is the device id
        if len(names) != 1:
            raise t.fail(f"lax.axis_index over the axes {names} outside shard_map")
        return _device_id(t, env, region, eqn, used)
    sizes = dict(t.mesh)
    out: Any = 0
    stride = 1
    for name in reversed(names):  # a tuple of axes: their combined row-major index
        out = t.iarith(region, "add", out,
                       t.iarith(region, "mul", _axis_coord(t, region, name), stride))
        stride *= sizes[name]
    return [t.i32(region, out)]


def _barrier_semaphore(t, env, region, eqn, used):
    # One regular semaphore per kernel, kernel scratch (so zero at the start
    # of every run and checked to be zero at its end), signalled across
    # devices like any other (docs/dma.md, "Decisions").
    if t.barrier is None:
        t.barrier, _ = t.kb.add_operand(B.ROLE_SCRATCH, "barrier", B.Type.sem(False, ()))
    return [RefView.whole(t.barrier)]


_HANDLERS: dict[str, Callable] = {
    "program_id": _program_id, "num_programs": _num_programs, "get": _get, "swap": _swap,
    "addupdate": _addupdate, "convert_element_type": _convert,
    "bitcast_convert_type": _bitcast, "iota": _iota, "broadcast_in_dim": _broadcast_in_dim,
    "reshape": _reshape, "squeeze": _squeeze, "expand_dims": _squeeze,
    "transpose": _transpose, "concatenate": _concatenate, "slice": _slice,
    "dynamic_slice": _dynamic_slice, "select_n": _select_n, "clamp": _clamp,
    "integer_pow": _integer_pow, "square": _square, "expm1": _expm1, "tan": _tan,
    "is_finite": _is_finite, "round": _round, "argmax": _argminmax, "argmin": _argminmax,
    "dot_general": _dot_general, "cond": _cond, "scan": _scan, "while": _while,
    "run_scoped": _run_scoped, "dma_start": _dma_start, "dma_wait": _dma_wait,
    "semaphore_signal": _sem_signal, "semaphore_wait": _sem_wait,
    "semaphore_read": _sem_read, "roll": _roll, "debug_print": _debug_print,
    "device_id": _device_id, "masked_load": _masked_load, "masked_swap": _masked_swap,
    "reciprocal": _reciprocal, "check": _check, "axis_index": _axis_index, "rev": _rev, "gather": _gather, "sort": _sort, "tile": _tile,
    **{name: _cumulative for name in _CUMULATIVE},
    "get_barrier_semaphore": _barrier_semaphore,
    "multiple_of": _multiple_of,
    **translate_math.HANDLERS,
}


def supported_primitives() -> list[str]:
    """The names of the JAX primitives the translator handles."""
    return sorted(set(_HANDLERS) | set(_UNARY) | set(_BINARY) | set(_REDUCE) | _PASSTHROUGH
                  | _INLINE_CALLS)


def translate(call: ji.PallasCall, name: str | None = None,
              mesh: Sequence[tuple[Any, int]] | None = None) -> TranslatedKernel:
    """Builds the tessera kernel of a traced pallas_call. `mesh`: ((axis
    name, size), ...) of the devices it runs on, in JAX's axis-environment
    order (what `lax.axis_index` and mesh device ids refer to); None: the
    kernel runs on one device, `axis_index` is the device id. Raises
    TranslationError for what cannot be translated."""
    kname = re.sub(r"[^A-Za-z0-9_]", "_", name or call.name) or "kernel"
    if not re.match(r"[A-Za-z_]", kname):
        kname = "k_" + kname
    tr = _Translator(call, kname)
    tr.mesh = tuple((n, int(s)) for n, s in mesh) if mesh is not None else None
    tk = tr.build()
    return tk
