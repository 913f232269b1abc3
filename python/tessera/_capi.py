"""ctypes mirrors of tessera's public headers (include/tessera/): every
struct and union the package passes to or reads from C, every enum
constant and define it relies on, and the prototypes of the functions it
calls, declared once on the library `_lib.lib()` opens.

Every mirror lives here and names what it mirrors: a struct its C type in
`_c_name_`, a constant its C name in `C_CONSTANTS` (through `_enum` and
`_constant`). python/tests/test_pkg_layout.py finds them all and compares
each struct's size and field offsets, its field names, and each constant's
value with the C compiler's; a mirror of something the headers lack fails
it by name. The TSR_ABI_VERSION these mirrors follow is `_lib.ABI_VERSION`
(checked against the library's tsr_abi_version() when `_lib` opens it): a
change to a mirror goes with a bump of it and of the header's.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, Union, c_bool, c_char, c_char_p, c_double,
                    c_int, c_int32, c_int64, c_size_t, c_uint8, c_uint32, c_uint64,
                    c_void_p)
from typing import Any, Mapping, Sequence

from . import _lib

# ---- Constants ---------------------------------------------------------------------
# C name -> value of every constant mirrored below, for the layout test.
C_CONSTANTS: dict[str, int] = {}


def _constant(c_name: str, value: int) -> int:
    """`value`, recorded as the mirror of C constant `c_name`."""
    C_CONSTANTS[c_name] = value
    return value


def _enum(names: Sequence[str] | Mapping[str, str], prefix: str = "") -> dict[str, int]:
    """{name: value} of an enum whose constants count from 0 in this order:
    a sequence of names whose C constants are `prefix` + NAME, or a mapping
    of name -> C constant."""
    c_names = names if isinstance(names, Mapping) else {n: prefix + n.upper() for n in names}
    return {name: _constant(c_name, value) for value, (name, c_name) in enumerate(c_names.items())}


ABI_VERSION = _constant("TSR_ABI_VERSION", _lib.ABI_VERSION)
MAX_RANK = _constant("TSR_MAX_RANK", 6)
SQUEEZED = _constant("TSR_SQUEEZED", -1)          # a squeezed block dimension
KERNELS_MAX_OPERANDS = _constant("TSR_KERNELS_MAX_OPERANDS", 8)

# base.h
STATUS_CODES = _enum(("ok", "invalid_argument", "parse_error", "verify_error", "kernel_error",
                      "io_error", "format_error", "not_found", "out_of_memory",
                      "resource_exhausted", "unimplemented", "internal"), "TSR_")
STATUS_KERNEL_ERROR = STATUS_CODES["kernel_error"]
SEVERITIES = tuple(_enum(("error", "warning", "note"), "TSR_SEVERITY_"))
# tsr_dtype_t, in the order of include/tessera/dtypes.def.
DTYPES = tuple(_enum(("f32", "bf16", "f16", "i32", "u32", "i16", "u16", "i8", "u8", "i1",
                      "i4", "u4", "i2", "u2", "f8e4m3fn", "f8e5m2"), "TSR_DTYPE_"))
# ir.h
TYPE_KINDS = _enum(("scalar", "vector", "ref", "sem"), "TSR_TYPE_")
SPACES = _enum(("any", "hbm", "vmem", "smem"), "TSR_SPACE_")
SEM_KINDS = _enum(("regular", "dma"), "TSR_SEM_")
INDEX_KINDS = _enum(("full", "point", "slice", "ds", "dsize"), "TSR_INDEX_")
ROLES = tuple(_enum(("prefetch", "in", "out", "scratch"), "TSR_ROLE_"))
SEMANTICS = _enum(("arbitrary", "parallel", "core_parallel"), "TSR_DIM_")
REVISIT_MODES = _enum(("immediate", "any"), "TSR_REVISIT_")
OP_FLAGS = {name: _constant("TSR_OPF_" + name.upper(), 1 << bit) for bit, name in enumerate(
    ("mask", "transpose_rhs", "has_else", "dma_add", "device", "core", "send"))}
# interp.h
UNINIT = _enum(("nan", "zero"), "TSR_UNINIT_")
# api.h
BACKENDS = _enum(("interp", "cpu"), "TSR_BACKEND_")
# kernels.h
KERNELS_TARGETS = _enum({"tpu": "TSR_KERNELS_FOR_TPU", "host": "TSR_KERNELS_FOR_HOST"})
KERNELS_OPS = _enum({"sum": "TSR_KERNELS_SUM", "prod": "TSR_KERNELS_PROD",
                     "max": "TSR_KERNELS_MAX", "min": "TSR_KERNELS_MIN",
                     "argmax": "TSR_KERNELS_ARGMAX", "argmin": "TSR_KERNELS_ARGMIN",
                     "mean": "TSR_KERNELS_MEAN", "var": "TSR_KERNELS_VARIANCE",
                     "logsumexp": "TSR_KERNELS_LOGSUMEXP"})

# ---- Checked conversions ------------------------------------------------------------
# ctypes keeps the low bits of an int too large for its C type (2**64 + 1 is
# stored as 1) and C reads a string up to its first NUL (b"/tmp/a\0/etc/x" is
# "/tmp/a"). Every integer and string the package hands to C goes through
# these two instead, which raise as Python's own conversions do.


@functools.cache
def int_range(ctype: type) -> tuple[int, int]:
    """The values a ctypes integer type holds: (min, max)."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def c_int_of(ctype: type, value: Any, what: str) -> int:
    """`value` as an int that `ctype` holds unchanged: TypeError for what is
    not an integer (floats, and bools, which are surely a mistake here),
    OverflowError outside the type's range."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got {value!r}")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {value!r}") from None
    lo, hi = int_range(ctype)
    if not lo <= v <= hi:
        raise OverflowError(f"{what} = {v} is out of range: it must be in [{lo}, {hi}]")
    return v


def c_bytes_of(value: Any, what: str) -> bytes:
    """A path (str, bytes or os.PathLike) or name as the NUL-terminated bytes
    C reads: ValueError for an embedded NUL, as open() raises."""
    try:
        b = os.fsencode(value)
    except TypeError:
        raise TypeError(f"{what} must be a str, bytes or os.PathLike, got {value!r}") from None
    if b"\0" in b:
        raise ValueError(f"{what}: embedded null byte")
    return b


def set_checked(struct: ctypes.Structure, name: str, value: Any, what: str | None = None) -> None:
    """struct.name = value, an integer field through c_int_of and a string
    field (char *) through c_bytes_of. The caller keeps a string's bytes
    alive while C may read them (ctypes keeps no reference)."""
    ctype = _field_types(type(struct))[name]
    if ctype in _INTEGER_TYPES:
        value = c_int_of(ctype, value, what or name)
    elif ctype is c_char_p and value is not None:
        value = c_bytes_of(value, what or name)
    setattr(struct, name, value)


_INTEGER_TYPES = frozenset({c_int, c_int32, c_int64, c_uint8, c_uint32, c_uint64, c_size_t,
                            ctypes.c_uint16, ctypes.c_int16, ctypes.c_int8, ctypes.c_long,
                            ctypes.c_ulong, ctypes.c_uint, ctypes.c_longlong,
                            ctypes.c_ulonglong})


@functools.cache
def _field_types(cls: type) -> dict[str, type]:
    return dict(cls._fields_)

# ---- Structs ------------------------------------------------------------------------
# Each names the C type it mirrors in `_c_name_`; fields in the header's order
# and with its names (structs in the public headers are append-only).

# tsr_output_fn: void (*)(void *user, const char *text, size_t size). The text
# is not NUL-terminated, so it arrives as a pointer, read with string_at.
OUTPUT_FN = CFUNCTYPE(None, c_void_p, POINTER(c_char), c_size_t)
# tsr_allocator_allocate_fn / tsr_allocator_release_fn
ALLOCATE_FN = CFUNCTYPE(c_void_p, c_void_p, c_size_t, c_size_t)
RELEASE_FN = CFUNCTYPE(None, c_void_p, c_void_p, c_size_t)


class StringView(Structure):
    _c_name_ = "tsr_string_view_t"
    _fields_ = [("data", c_void_p), ("size", c_size_t)]

    def text(self) -> str:
        if not self.data or not self.size:
            return ""
        return ctypes.string_at(self.data, self.size).decode("utf-8", errors="replace")


class Loc(Structure):
    _c_name_ = "tsr_loc_t"
    _fields_ = [("file", c_char_p), ("line", c_uint32), ("col", c_uint32)]


class Array(Structure):
    _c_name_ = "tsr_array_t"
    _fields_ = [("dtype", c_int), ("rank", c_uint32), ("dims", c_int64 * MAX_RANK),
                ("data", c_void_p)]


class Allocator(Structure):
    _c_name_ = "tsr_allocator_t"
    _fields_ = [("allocate", ALLOCATE_FN), ("release", RELEASE_FN), ("user", c_void_p)]


# ir.h

class IrType(Structure):
    _c_name_ = "tsr_ir_type_t"
    _fields_ = [("kind", c_uint8), ("dtype", c_uint8), ("space", c_uint8), ("rank", c_uint8),
                ("dims", c_int64 * MAX_RANK)]


class IrIndex(Structure):
    _c_name_ = "tsr_ir_index_t"
    _fields_ = [("kind", c_uint8), ("operand", c_int32), ("start", c_int64),
                ("stop", c_int64), ("size", c_int64), ("stride", c_int64)]


class IrLiteral(Union):
    _c_name_ = "tsr_ir_literal_t"
    _fields_ = [("f", c_double), ("i", c_int64)]


class OperandInfo(Structure):
    _c_name_ = "tsr_ir_operand_info_t"
    _fields_ = [
        ("name", c_char_p),
        ("role", c_int),
        ("dtype", c_int),
        ("rank", c_uint32),
        ("dims", c_int64 * MAX_RANK),
        ("space", c_int),
        ("alias", c_int32),
    ]


class IrOperandParams(Structure):
    _c_name_ = "tsr_ir_operand_params_t"
    _fields_ = [("role", c_int), ("name", c_char_p), ("array", IrType), ("space", c_int),
                ("block", POINTER(c_int64)), ("alias", c_int32)]


class IrOpParams(Structure):
    _c_name_ = "tsr_ir_op_params_t"
    _fields_ = [("mnemonic", c_char_p), ("loc", Loc),
                ("operands", POINTER(c_void_p)), ("num_operands", c_uint32),
                ("result_types", POINTER(IrType)), ("result_names", POINTER(c_char_p)),
                ("num_results", c_uint32),
                ("indices", POINTER(IrIndex)), ("num_indices", c_uint32),
                ("ints", POINTER(c_int64)), ("num_ints", c_uint32),
                ("literal", IrLiteral), ("text", c_char_p), ("flags", c_uint32),
                ("region_arg_types", POINTER(IrType)),
                ("region_arg_names", POINTER(c_char_p)),
                ("num_region_args", c_uint32)]


# interp.h

# on_grid_step(user, device, core, rank, point)
GRID_STEP_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_uint32, c_uint32, c_uint32,
                                POINTER(ctypes.c_int64))
# on_progress(user, done, total)
PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, c_uint64, c_uint64)
# tsr_xla_call_fn and tsr_xla_finish_fn: they answer an XLA_FFI_Error * (or
# NULL) in their last argument
XLA_CALL_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, POINTER(c_void_p))
XLA_FINISH_FN = ctypes.CFUNCTYPE(None, c_void_p, c_void_p, c_void_p, c_void_p,
                                 POINTER(c_char), c_size_t, POINTER(c_char), c_size_t, c_bool,
                                 POINTER(c_void_p))


class InterpOptions(Structure):
    _c_name_ = "tsr_interp_options_t"
    _fields_ = [
        ("uninit", c_int),
        ("check", c_bool),
        ("shuffle_parallel", c_bool),
        ("shuffle_seed", c_uint64),
        ("chip", c_char_p),
        ("max_errors", c_uint32),
        ("devices", c_uint32),
        ("cores", c_uint32),
        ("schedule_seed", c_uint64),
        ("dma_eager", c_bool),
        ("detect_races", c_bool),
        ("oob_reads_uninit", c_bool),
        ("padded", c_bool),
        ("out_blocks_copied_in", c_bool),
        ("parallel_order", POINTER(ctypes.c_int64)),
        ("parallel_order_size", c_uint32),
        ("trace_path", c_char_p),
        ("strict", c_bool),
        ("timeout_seconds", c_double),
        ("max_steps", c_uint64),
        ("cancel", POINTER(c_int)),
        ("on_grid_step", GRID_STEP_FN),
        ("on_grid_step_user", ctypes.c_void_p),
        ("on_progress", PROGRESS_FN),
        ("on_progress_user", ctypes.c_void_p),
        ("progress_interval", c_double),
        ("threads", c_uint32),
    ]


class InterpStats(Structure):
    _c_name_ = "tsr_interp_stats_t"
    _fields_ = [
        ("grid_steps", c_uint64),
        ("ops_executed", c_uint64),
        ("blocks_copied_in", c_uint64),
        ("blocks_copied_out", c_uint64),
        ("bytes_copied", c_uint64),
        ("vmem_bytes", c_uint64),
        ("warnings", c_uint64),
    ]


# api.h

class Output(Structure):
    _c_name_ = "tsr_output_t"
    _fields_ = [("print", OUTPUT_FN), ("warning", OUTPUT_FN), ("user", c_void_p)]


class ContextOptions(Structure):
    _c_name_ = "tsr_context_options_t"
    _fields_ = [
        ("disk_cache", c_bool),
        ("cache_dir", c_char_p),
        ("cache_key_file", c_char_p),
        ("cache_max_bytes", c_uint64),
        ("cache_shared", c_bool),
        ("cache_optional", c_bool),
        ("cache_environment", c_bool),
        ("lower_library", c_char_p),
        ("output", Output),
        ("allocator", Allocator),
    ]


class DiskUse(Structure):
    _c_name_ = "tsr_runtime_disk_use_t"
    _fields_ = [("enabled", c_bool), ("hits", c_uint64), ("misses", c_uint64),
                ("puts", c_uint64), ("bad_entries", c_uint64), ("errors", c_uint64)]


class ProgramCacheStats(Structure):
    _c_name_ = "tsr_runtime_cache_stats_t"
    _fields_ = [(n, c_uint64) for n in (
        "memory_hits", "memory_misses", "memory_builds", "memory_waits",
        "memory_evictions", "memory_entries", "memory_bytes")]


class CompiledStats(Structure):
    _c_name_ = "tsr_runtime_compiled_stats_t"
    _fields_ = [
        ("memory_hits", c_uint64),
        ("memory_misses", c_uint64),
        ("memory_entries", c_uint64),
        ("disk", DiskUse),
        ("compiles", c_uint64),
        ("load_failures", c_uint64),
        ("lower_library_loaded", c_bool),
    ]


class ContextStats(Structure):
    _c_name_ = "tsr_context_stats_t"
    _fields_ = [("programs", ProgramCacheStats), ("compiled", CompiledStats)]


class DiagnosticRecord(Structure):
    _c_name_ = "tsr_diagnostic_t"
    _fields_ = [
        ("kind", c_int),
        ("severity", c_int),
        ("file", StringView),
        ("line", c_int32),
        ("col", c_int32),
        ("kernel", StringView),
        ("op", StringView),
        ("buffer", StringView),
        ("index_rank", c_uint32),
        ("index_lo", c_int64 * MAX_RANK),
        ("index_hi", c_int64 * MAX_RANK),
        ("grid_rank", c_uint32),
        ("grid_point", c_int64 * MAX_RANK),
        ("core", c_int32),
        ("device", c_int32),
        ("other_op", StringView),
        ("other_line", c_int32),
        ("other_grid_rank", c_uint32),
        ("other_grid_point", c_int64 * MAX_RANK),
        ("message", StringView),
        ("text", StringView),
    ]


class ExecutableOptions(Structure):
    _c_name_ = "tsr_executable_options_t"
    _fields_ = [
        ("backend", c_int),
        ("run", InterpOptions),
        ("opt_level", c_int),
        ("output", Output),
    ]


class RunOptions(Structure):
    _c_name_ = "tsr_run_options_t"
    _fields_ = [
        ("output", Output),
        ("strict", c_int),
        ("timeout_seconds", c_double),
        ("max_steps", c_uint64),
        ("cancel", POINTER(c_int)),
        ("trace_path", c_char_p),
        ("on_progress", PROGRESS_FN),
        ("on_progress_user", ctypes.c_void_p),
        ("progress_interval", c_double),
    ]


class TpuVmem(Structure):
    _c_name_ = "tsr_tpu_vmem_t"
    _fields_ = [("need_bytes", c_int64), ("default_limit_bytes", c_int64),
                ("capacity_bytes", c_int64)]


# kernels.h

class SortParams(Structure):
    _c_name_ = "tsr_kernels_sort_params_t"
    _fields_ = [("rank", c_uint32), ("dims", c_int64 * MAX_RANK),
                ("num_operands", c_uint32), ("dtypes", c_int * KERNELS_MAX_OPERANDS),
                ("num_keys", c_uint32), ("axis", c_int32), ("descending", c_bool),
                ("stable", c_bool), ("return_indices", c_bool),
                ("vmem_budget_bytes", c_int64), ("target", c_int)]


class TopkParams(Structure):
    _c_name_ = "tsr_kernels_topk_params_t"
    _fields_ = [("rank", c_uint32), ("dims", c_int64 * MAX_RANK), ("dtype", c_int),
                ("k", c_int64), ("axis", c_int32), ("smallest", c_bool),
                ("vmem_budget_bytes", c_int64)]


class CumulativeParams(Structure):
    _c_name_ = "tsr_kernels_cumulative_params_t"
    _fields_ = [("op", c_int), ("rank", c_uint32), ("dims", c_int64 * MAX_RANK),
                ("dtype", c_int), ("axis", c_int32), ("reverse", c_bool),
                ("vmem_budget_bytes", c_int64)]


class ReduceParams(Structure):
    _c_name_ = "tsr_kernels_reduce_params_t"
    _fields_ = [("op", c_int), ("rank", c_uint32), ("dims", c_int64 * MAX_RANK),
                ("dtype", c_int), ("axes_mask", c_uint32), ("keepdims", c_bool),
                ("vmem_budget_bytes", c_int64)]


# ---- Functions ----------------------------------------------------------------------

_declared = False


def lib() -> ctypes.CDLL:
    """The library with the prototypes of this module declared."""
    global _declared
    h = _lib.lib()
    if not _declared:
        _declare(h)
        _declared = True
    return h


def _fn(h: ctypes.CDLL, name: str, restype, *argtypes) -> None:
    f = getattr(h, name)
    f.restype = restype
    f.argtypes = list(argtypes)


def _declare(h: ctypes.CDLL) -> None:
    P = POINTER
    status = c_void_p
    # base.h
    _fn(h, "tsr_dtype_name", c_char_p, c_int)
    _fn(h, "tsr_dtype_size", c_size_t, c_int)
    _fn(h, "tsr_dtype_from_name", c_bool, c_char_p, c_size_t, P(c_int))
    _fn(h, "tsr_diagnostic_severity_name", c_char_p, c_int)
    # ir.h
    _fn(h, "tsr_ir_module_parse", status, StringView, StringView, P(c_void_p))
    _fn(h, "tsr_ir_module_parse_file", status, c_char_p, P(c_void_p))
    _fn(h, "tsr_ir_module_destroy", None, c_void_p)
    _fn(h, "tsr_ir_module_verify", status, c_void_p)
    _fn(h, "tsr_ir_module_print", c_void_p, c_void_p)
    _fn(h, "tsr_ir_kernel_print", c_void_p, c_void_p)
    _fn(h, "tsr_ir_string_free", None, c_void_p)
    _fn(h, "tsr_ir_module_kernel_count", c_size_t, c_void_p)
    _fn(h, "tsr_ir_module_kernel", c_void_p, c_void_p, c_size_t)
    _fn(h, "tsr_ir_kernel_name", c_char_p, c_void_p)
    _fn(h, "tsr_ir_kernel_operand_count", c_size_t, c_void_p)
    _fn(h, "tsr_ir_kernel_operand_info", None, c_void_p, c_size_t, P(OperandInfo))
    # api.h: contexts
    _fn(h, "tsr_context_options_initialize", None, P(ContextOptions))
    _fn(h, "tsr_context_options_from_environment", None, P(ContextOptions))
    _fn(h, "tsr_context_create", status, P(ContextOptions), P(c_void_p))
    _fn(h, "tsr_context_destroy", None, c_void_p)
    _fn(h, "tsr_context_disk_cache", c_void_p, c_void_p)
    _fn(h, "tsr_context_disk_use", None, c_void_p, P(DiskUse))
    _fn(h, "tsr_context_stats", None, c_void_p, P(ContextStats))
    # diagnostics
    _fn(h, "tsr_diagnostic_kind_name", c_char_p, c_int)
    _fn(h, "tsr_diagnostic_list_count", c_size_t, c_void_p)
    _fn(h, "tsr_diagnostic_list_get", P(DiagnosticRecord), c_void_p, c_size_t)
    _fn(h, "tsr_diagnostic_list_create_from_status", status, c_void_p, P(c_void_p))
    _fn(h, "tsr_diagnostic_list_destroy", None, c_void_p)
    # executables and runs
    _fn(h, "tsr_executable_options_initialize", None, P(ExecutableOptions))
    _fn(h, "tsr_executable_create", status, c_void_p, c_void_p, P(ExecutableOptions),
        P(c_void_p))
    _fn(h, "tsr_executable_destroy", None, c_void_p)
    _fn(h, "tsr_executable_backend", c_int, c_void_p)
    _fn(h, "tsr_run_options_initialize", None, P(RunOptions))
    _fn(h, "tsr_executable_run", status, c_void_p, c_void_p, c_size_t, P(RunOptions),
        P(c_void_p))
    _fn(h, "tsr_run_result_destroy", None, c_void_p)
    _fn(h, "tsr_run_result_code", c_int, c_void_p)
    _fn(h, "tsr_run_result_message", c_char_p, c_void_p)
    _fn(h, "tsr_run_result_diagnostics", c_void_p, c_void_p)
    _fn(h, "tsr_run_result_stats", None, c_void_p, P(InterpStats))
    _fn(h, "tsr_interp_chip_vmem_bytes", c_bool, c_char_p, P(c_uint64))
    # XLA custom calls (a library built before them has none: the JAX
    # bridge's handler stays in Python)
    if hasattr(h, "tsr_xla_bind"):
        _fn(h, "tsr_xla_handler", c_void_p)
        _fn(h, "tsr_xla_process", c_uint64)
        _fn(h, "tsr_xla_bind", status, c_void_p, c_void_p, c_size_t, c_size_t, c_bool,
            XLA_CALL_FN, XLA_FINISH_FN, c_void_p, P(c_void_p))
        _fn(h, "tsr_xla_retire", None, c_void_p)
        _fn(h, "tsr_xla_set_interrupt_thread", None, c_uint64)
        _fn(h, "tsr_xla_interrupt", c_bool)
        _fn(h, "tsr_xla_direct_runs", c_uint64)
    # tpu.h (a library built before the TPU emitter has none: Kernel.to_mosaic
    # says so)
    if hasattr(h, "tsr_tpu_emit"):
        _fn(h, "tsr_tpu_emit", status, c_void_p, c_void_p, c_char_p, P(c_void_p))
    if hasattr(h, "tsr_tpu_vmem"):
        _fn(h, "tsr_tpu_vmem", status, c_void_p, c_char_p, P(TpuVmem))


def output_discard() -> ctypes._CFuncPtr:
    """tsr_output_discard as a tsr_output_fn value."""
    return ctypes.cast(lib().tsr_output_discard, OUTPUT_FN)
