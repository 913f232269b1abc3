"""A thin Python layer over tessera's C IR builder (include/tessera/ir.h).

It declares the ctypes prototypes of the builder entry points and wraps them
in `ModuleBuilder` / `KernelBuilder`, which build the same modules the .tsr
parser does (docs/ir.md gives every op's operand layout). Values are carried
as `Value` (the C pointer plus its `Type`, which the C API does not hand
back), so a caller can compute result types as it builds.
"""

from __future__ import annotations

import ctypes
import dataclasses
from typing import Sequence

from . import _capi, _lib

__all__ = [
    "MAX_RANK", "SQUEEZED", "DTYPES", "Type", "Value", "Region", "Index",
    "ModuleBuilder", "KernelBuilder", "ROLE_PREFETCH", "ROLE_IN", "ROLE_OUT",
    "ROLE_SCRATCH", "SPACES", "SEMANTICS", "OPF_MASK", "OPF_TRANSPOSE_RHS",
    "OPF_HAS_ELSE", "OPF_DMA_ADD", "OPF_DEVICE", "OPF_CORE", "OPF_SEND",
]

# The constants and structs of ir.h, mirrored in _capi (where
# python/tests/test_pkg_layout.py checks them against the header).
MAX_RANK = _capi.MAX_RANK
SQUEEZED = _capi.SQUEEZED
GRID_DYNAMIC = -1  # TSR_GRID_DYNAMIC: a grid dim set_grid_bound names

DTYPES = _capi.DTYPES
_DTYPE_INDEX = {name: i for i, name in enumerate(DTYPES)}
FLOAT_DTYPES = frozenset({"f32", "bf16", "f16", "f8e4m3fn", "f8e5m2"})
SINT_DTYPES = frozenset({"i32", "i16", "i8", "i4", "i2"})
UINT_DTYPES = frozenset({"u32", "u16", "u8", "u4", "u2"})

KIND_SCALAR, KIND_VECTOR, KIND_REF, KIND_SEM = (_capi.TYPE_KINDS[k] for k in
                                                ("scalar", "vector", "ref", "sem"))
SPACES = _capi.SPACES
SEM_REGULAR, SEM_DMA = _capi.SEM_KINDS["regular"], _capi.SEM_KINDS["dma"]
ROLE_PREFETCH, ROLE_IN, ROLE_OUT, ROLE_SCRATCH = range(len(_capi.ROLES))
SEMANTICS = _capi.SEMANTICS
REVISIT_MODES = _capi.REVISIT_MODES
INDEX_FULL, INDEX_POINT, INDEX_SLICE, INDEX_DS, INDEX_DSIZE = (
    _capi.INDEX_KINDS[k] for k in ("full", "point", "slice", "ds", "dsize"))

OPF_MASK = _capi.OP_FLAGS["mask"]
OPF_TRANSPOSE_RHS = _capi.OP_FLAGS["transpose_rhs"]
OPF_HAS_ELSE = _capi.OP_FLAGS["has_else"]
OPF_DMA_ADD = _capi.OP_FLAGS["dma_add"]
OPF_DEVICE = _capi.OP_FLAGS["device"]
OPF_CORE = _capi.OP_FLAGS["core"]
OPF_SEND = _capi.OP_FLAGS["send"]

_CType = _capi.IrType
_CIndex = _capi.IrIndex
_CLiteral = _capi.IrLiteral
_CLoc = _capi.Loc
_COperandParams = _capi.IrOperandParams
_COpParams = _capi.IrOpParams


class _Functions:
    """Private ctypes function objects of the library (see `bind`)."""


def bind(protos: dict) -> _Functions:
    """Function objects for `protos` ({name: (restype, argtypes)}) of their
    own, not the CDLL's shared attributes: another module of the package
    may declare the same C function with its own ctypes structs, and
    declarations on the shared handle would overwrite each other."""
    h = _lib.lib()
    fns = _Functions()
    for name, (res, args) in protos.items():
        setattr(fns, name, ctypes.CFUNCTYPE(res, *args)((name, h)))
    return fns


_fns: _Functions | None = None


def _h() -> _Functions:
    """The builder's C functions (bound once)."""
    global _fns
    if _fns is not None:
        return _fns
    vp, sz = ctypes.c_void_p, ctypes.c_size_t
    protos = {
        "tsr_ir_module_create": (vp, [ctypes.c_char_p, ctypes.POINTER(vp)]),
        "tsr_ir_module_destroy": (None, [vp]),
        "tsr_ir_module_verify": (vp, [vp]),
        "tsr_ir_module_print": (vp, [vp]),
        "tsr_ir_kernel_print": (vp, [vp]),
        "tsr_ir_string_free": (None, [vp]),
        "tsr_ir_module_kernel_count": (sz, [vp]),
        "tsr_ir_module_kernel": (vp, [vp, sz]),
        "tsr_ir_kernel_create": (vp, [vp, ctypes.c_char_p, ctypes.POINTER(vp)]),
        "tsr_ir_kernel_set_grid": (vp, [vp, ctypes.c_uint32, ctypes.POINTER(ctypes.c_int64),
                                        ctypes.POINTER(ctypes.c_int)]),
        "tsr_ir_kernel_set_grid_bound": (vp, [vp, ctypes.c_uint32, ctypes.c_uint32]),
        "tsr_ir_kernel_set_element_dim": (vp, [vp, ctypes.c_uint32, ctypes.c_uint32,
                                               ctypes.c_int64, ctypes.c_int64]),
        "tsr_ir_kernel_set_revisit": (vp, [vp, ctypes.c_uint32, ctypes.c_int]),
        "tsr_ir_dim_semantics_order": (None, [ctypes.c_uint32, ctypes.POINTER(ctypes.c_int)]),
        "tsr_ir_kernel_add_operand": (vp, [vp, ctypes.POINTER(_COperandParams),
                                           ctypes.POINTER(vp), ctypes.POINTER(vp)]),
        "tsr_ir_kernel_body": (vp, [vp]),
        "tsr_ir_build_op": (vp, [vp, vp, ctypes.POINTER(_COpParams), ctypes.POINTER(vp)]),
        "tsr_ir_op_result": (vp, [vp, ctypes.c_uint32]),
        "tsr_ir_op_region": (vp, [vp, ctypes.c_uint32]),
        "tsr_ir_region_arg": (vp, [vp, ctypes.c_uint32]),
    }
    _fns = bind(protos)
    return _fns


@dataclasses.dataclass(frozen=True)
class Type:
    """An IR type. kind: "scalar", "vector", "ref" or "sem"; dtype a tessera
    dtype name (for "sem": "sem" or "dma_sem"); space for refs."""
    kind: str
    dtype: str
    shape: tuple[int, ...] = ()
    space: str = ""

    @staticmethod
    def value(dtype: str, shape: Sequence[int]) -> "Type":
        """A scalar (rank 0) or a block value of `shape`."""
        shape = tuple(int(d) for d in shape)
        return Type("vector" if shape else "scalar", dtype, shape)

    @staticmethod
    def ref(space: str, dtype: str, shape: Sequence[int]) -> "Type":
        return Type("ref", dtype, tuple(int(d) for d in shape), space)

    @staticmethod
    def sem(dma: bool, shape: Sequence[int] = ()) -> "Type":
        return Type("sem", "dma_sem" if dma else "sem", tuple(int(d) for d in shape))

    @property
    def rank(self) -> int:
        return len(self.shape)

    def __str__(self) -> str:
        dims = "[" + ", ".join(map(str, self.shape)) + "]" if self.shape else ""
        if self.kind == "sem":
            return self.dtype + dims
        if self.kind == "ref":
            return f"{self.space} {self.dtype}{dims}"
        return self.dtype + dims

    def _c(self) -> _CType:
        if len(self.shape) > MAX_RANK:
            raise ValueError(f"tessera: rank {len(self.shape)} exceeds {MAX_RANK} ({self})")
        t = _CType()
        t.kind = {"scalar": KIND_SCALAR, "vector": KIND_VECTOR, "ref": KIND_REF,
                  "sem": KIND_SEM}[self.kind]
        if self.kind == "sem":
            t.dtype = SEM_DMA if self.dtype == "dma_sem" else SEM_REGULAR
        else:
            try:
                t.dtype = _DTYPE_INDEX[self.dtype]
            except KeyError:
                raise ValueError(f"tessera: unknown dtype {self.dtype!r}") from None
        t.space = SPACES[self.space] if self.kind == "ref" else 0
        t.rank = len(self.shape)
        for i, d in enumerate(self.shape):
            t.dims[i] = d
        return t


@dataclasses.dataclass(frozen=True)
class Value:
    """An SSA value (or ref) of the kernel being built, with its type."""
    ptr: int
    type: Type


Region = int  # a tsr_ir_region_t pointer


@dataclasses.dataclass(frozen=True)
class Index:
    """One index of a view (docs/ir.md, "Views"). kind: "full", "point",
    "slice", "ds". `start` is an int (static) or a Value (dynamic); so is a
    "ds" index's `size` (a Value only in DMA views: the run reads it, and
    `dim` is then the size of the dimension it indexes)."""
    kind: str
    start: "int | Value" = 0
    size: "int | Value" = 1
    stride: int = 1
    dim: int = 0

    @staticmethod
    def full() -> "Index":
        return Index("full")


Loc = tuple  # (file: str, line: int, col: int), or () for none


class ModuleBuilder:
    """Owns a tsr_ir_module_t being built. `take()` hands the handle over
    (to `tessera.Module._from_handle` or a runner); otherwise `close()` (or
    garbage collection) destroys it."""

    def __init__(self, filename: str = "<jax>"):
        h = _h()
        out = ctypes.c_void_p()
        _lib.check(h.tsr_ir_module_create(filename.encode(), ctypes.byref(out)))
        self._ptr: int | None = out.value

    @property
    def ptr(self) -> int:
        if self._ptr is None:
            raise ValueError("tessera: the module was taken or closed")
        return self._ptr

    def kernel(self, name: str) -> "KernelBuilder":
        out = ctypes.c_void_p()
        _lib.check(_h().tsr_ir_kernel_create(self.ptr, name.encode(), ctypes.byref(out)))
        return KernelBuilder(self, out.value)

    def verify(self) -> None:
        """Raises TesseraError (TSR_VERIFY_ERROR) with every diagnostic."""
        _lib.check(_h().tsr_ir_module_verify(self.ptr))

    def verify_status(self) -> int | None:
        """The raw status of verification (caller frees it), for callers that
        turn statuses into structured diagnostics."""
        return _h().tsr_ir_module_verify(self.ptr)

    def text(self) -> str:
        """The canonical .tsr text of the module."""
        h = _h()
        p = h.tsr_ir_module_print(self.ptr)
        if not p:
            raise MemoryError("tessera: printing the module failed")
        try:
            return ctypes.string_at(p).decode()
        finally:
            h.tsr_ir_string_free(p)

    def first_kernel(self) -> int:
        return _h().tsr_ir_module_kernel(self.ptr, 0)

    def take(self) -> int:
        """Gives up ownership of the module handle."""
        p = self.ptr
        self._ptr = None
        return p

    def close(self) -> None:
        if self._ptr is not None:
            _h().tsr_ir_module_destroy(self._ptr)
            self._ptr = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _indices_c(indices: Sequence[Index], operands: list, base: int) -> ctypes.Array:
    """Encodes views: dynamic starts (and a ds's dynamic size after its
    start) are appended to `operands` (whose length is the next operand
    position)."""
    arr = (_CIndex * max(1, len(indices)))()
    for i, ix in enumerate(indices):
        c = arr[i]
        c.operand = -1
        c.stride = ix.stride
        if isinstance(ix.start, Value):
            c.operand = len(operands)
            operands.append(ix.start)
        else:
            c.start = int(ix.start)
        if ix.kind == "full":
            c.kind = INDEX_FULL
            c.size = ix.size
            c.stop = ix.size
        elif ix.kind == "point":
            c.kind = INDEX_POINT
            c.size = 1
        elif ix.kind == "slice":
            c.kind = INDEX_SLICE
            c.size = ix.size
            c.stop = c.start + (ix.size - 1) * ix.stride + 1 if ix.size else c.start
        elif ix.kind == "ds" and isinstance(ix.size, Value):
            c.kind = INDEX_DSIZE
            c.stop = len(operands)  # the size's operand (docs/ir.md)
            operands.append(ix.size)
            c.size = (ix.dim - 1) // ix.stride + 1  # the bound
        elif ix.kind == "ds":
            c.kind = INDEX_DS
            c.size = ix.size
        else:
            raise ValueError(f"tessera: unknown index kind {ix.kind!r}")
    return arr


class KernelBuilder:
    """Builds one kernel: grid, operands, then ops into regions."""

    def __init__(self, module: ModuleBuilder, ptr: int):
        self.module = module
        self.ptr = ptr
        self._keep: list = []  # ctypes buffers alive for the build
        self._num_operands = 0

    @property
    def body(self) -> Region:
        return _h().tsr_ir_kernel_body(self.ptr)

    def set_grid(self, dims: Sequence[int], semantics: Sequence[str] | None = None) -> None:
        n = len(dims)
        cd = (ctypes.c_int64 * max(1, n))(*dims)
        cs = None
        if semantics is not None:
            cs = (ctypes.c_int * max(1, n))(*[SEMANTICS[s] for s in semantics])
        _lib.check(_h().tsr_ir_kernel_set_grid(self.ptr, n, cd, cs))

    def set_grid_bound(self, dim: int, decl: int) -> None:
        """Makes grid dim `dim` dynamic: its extent is, when a run starts,
        the value of decl number `decl` (a rank-0 i32 prefetch operand)."""
        _lib.check(_h().tsr_ir_kernel_set_grid_bound(self.ptr, dim, decl))

    @staticmethod
    def ordered_semantics(semantics: Sequence[str]) -> list[str]:
        """`semantics` in the order the verifier accepts: a parallel dim after
        an arbitrary one becomes arbitrary (tsr_ir_dim_semantics_order)."""
        n = len(semantics)
        cs = (ctypes.c_int * max(1, n))(*[SEMANTICS[s] for s in semantics])
        _h().tsr_ir_dim_semantics_order(n, cs)
        names = {v: k for k, v in SEMANTICS.items()}
        return [names[cs[i]] for i in range(n)]

    def add_operand(self, role: int, name: str, array: Type, space: str = "vmem",
                    block: Sequence[int] | None = None,
                    alias: int = -1,
                    elements: dict[int, tuple[int, int]] | None = None,
                    revisit: str | None = None
                    ) -> tuple[Value, Region | None]:
        """Adds a kernel operand (prefetch/in/out with `array` the whole array
        as a value type; scratch with `array` a ref or sem type). Returns the
        ref the body sees and the index-map region (None without a block).
        `elements`: block dim -> (pad_low, pad_high) of its element dims
        (pl.Element: the index map gives element offsets there). `revisit`:
        an output's revisit mode, "immediate" (the default) or "any"
        (pl.RevisitMode.ANY: blocks may be entered again at any step)."""
        p = _COperandParams()
        p.role = role
        p.name = name.encode()
        p.array = array._c()
        p.space = SPACES.get(space, 2)
        if block is not None:
            cb = (ctypes.c_int64 * max(1, len(block)))(*block)
            p.block = ctypes.cast(cb, ctypes.POINTER(ctypes.c_int64))
        p.alias = alias
        ref, imap = ctypes.c_void_p(), ctypes.c_void_p()
        _lib.check(_h().tsr_ir_kernel_add_operand(self.ptr, ctypes.byref(p), ctypes.byref(ref),
                                                  ctypes.byref(imap)))
        index = self._num_operands
        self._num_operands += 1
        for dim, (lo, hi) in sorted((elements or {}).items()):
            _lib.check(_h().tsr_ir_kernel_set_element_dim(self.ptr, index, dim, lo, hi))
        if revisit is not None:
            if revisit not in REVISIT_MODES:
                raise ValueError(f"revisit mode {revisit!r}: expected one of "
                                 f"{sorted(REVISIT_MODES)}")
            _lib.check(_h().tsr_ir_kernel_set_revisit(self.ptr, index, REVISIT_MODES[revisit]))
        if role == ROLE_SCRATCH:
            ref_type = array
        else:
            dims = [b for b in (block if block is not None else array.shape) if b != SQUEEZED]
            ref_type = Type.ref("smem" if role == ROLE_PREFETCH else space, array.dtype, dims)
        return Value(ref.value, ref_type), imap.value

    def region_arg(self, region: Region, i: int, type: Type) -> Value:
        return Value(_h().tsr_ir_region_arg(region, i), type)

    def op(self, region: Region, mnemonic: str, operands: Sequence[Value] = (),
           results: Sequence[Type] = (), *, loc: Loc = (), indices: Sequence[Index] = (),
           extra_operands: Sequence[Value] = (), ints: Sequence[int] = (),
           literal: float | int | bool | None = None, text: str | None = None,
           flags: int = 0, region_args: Sequence[Type] = (),
           names: Sequence[str | None] | None = None,
           region_arg_names: Sequence[str | None] | None = None) -> tuple[int, list[Value]]:
        """Appends an op to `region`: `operands` are the fixed operands, then
        the dynamic starts of `indices` are appended in index order, then
        `extra_operands` (a DMA's device, a semaphore op's device/core, a
        mask). `names` / `region_arg_names`: a name (or None: `%v<N>`) per
        result / region argument. Returns the op pointer and its results as
        Values."""
        h = _h()
        ops = list(operands)
        cidx = _indices_c(indices, ops, len(ops))
        ops.extend(extra_operands)
        p = _COpParams()
        p.mnemonic = mnemonic.encode()
        fname = None
        if loc:
            fname = str(loc[0]).encode()
            p.loc.file = fname
            p.loc.line = max(0, int(loc[1]))
            p.loc.col = max(0, int(loc[2])) if len(loc) > 2 else 0
        cops = (ctypes.c_void_p * max(1, len(ops)))(*[v.ptr for v in ops])
        p.operands = cops
        p.num_operands = len(ops)
        cres = (_CType * max(1, len(results)))(*[t._c() for t in results])
        p.result_types = cres
        p.num_results = len(results)
        cnames = None
        if names is not None:
            cnames = (ctypes.c_char_p * max(1, len(names)))(
                *[n.encode() if n else None for n in names])
            p.result_names = cnames
        p.indices = cidx
        p.num_indices = len(indices)
        cints = (ctypes.c_int64 * max(1, len(ints)))(*[int(i) for i in ints])
        p.ints = cints
        p.num_ints = len(ints)
        if literal is not None:
            if isinstance(literal, float):
                p.literal.f = literal
            else:
                p.literal.i = int(literal)
        ctext = text.encode() if text is not None else None
        p.text = ctext
        p.flags = flags
        crat = (_CType * max(1, len(region_args)))(*[t._c() for t in region_args])
        p.region_arg_types = crat
        p.num_region_args = len(region_args)
        carg_names = None
        if region_arg_names is not None:
            carg_names = (ctypes.c_char_p * max(1, len(region_arg_names)))(
                *[n.encode() if n else None for n in region_arg_names])
            p.region_arg_names = carg_names
        out = ctypes.c_void_p()
        _lib.check(h.tsr_ir_build_op(self.ptr, region, ctypes.byref(p), ctypes.byref(out)))
        op = out.value
        vals = [Value(h.tsr_ir_op_result(op, i), t) for i, t in enumerate(results)]
        return op, vals

    def op_region(self, op: int, i: int) -> Region:
        return _h().tsr_ir_op_region(op, i)

    def const(self, region: Region, value: float | int | bool, type: Type,
              loc: Loc = ()) -> Value:
        """A `const` of `type` (scalar or splat block)."""
        if type.dtype in FLOAT_DTYPES:
            lit: float | int = float(value)
        else:
            lit = int(bool(value)) if type.dtype == "i1" else int(value)
        return self.op(region, "const", results=[type], literal=lit, loc=loc)[1][0]

    def text(self) -> str:
        h = _h()
        p = h.tsr_ir_kernel_print(self.ptr)
        try:
            return ctypes.string_at(p).decode()
        finally:
            h.tsr_ir_string_free(p)
