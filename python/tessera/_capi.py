"""ctypes mirrors of the structs of tessera/api.h, ir.h and base.h that the
numpy-level API uses, and the prototypes of the functions it calls, declared
once on the library `_lib.lib()` opens.

The layouts follow the headers field by field (structs in the public headers
are append-only: a field is never reordered); tests/test_pkg_layout.py
compares them with the C compiler's offsets.
"""

from __future__ import annotations

import ctypes
import functools
import operator
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_bool, c_char, c_char_p, c_double,
                    c_int, c_int32, c_int64, c_size_t, c_uint8, c_uint32, c_uint64,
                    c_void_p)
from typing import Any

from . import _lib

MAX_RANK = 6  # TSR_MAX_RANK


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

# tsr_output_fn: void (*)(void *user, const char *text, size_t size). The text
# is not NUL-terminated, so it arrives as a pointer, read with string_at.
OUTPUT_FN = CFUNCTYPE(None, c_void_p, POINTER(c_char), c_size_t)
# tsr_allocator_allocate_fn / tsr_allocator_release_fn
ALLOCATE_FN = CFUNCTYPE(c_void_p, c_void_p, c_size_t, c_size_t)
RELEASE_FN = CFUNCTYPE(None, c_void_p, c_void_p, c_size_t)


class StringView(Structure):
    """tsr_string_view_t"""
    _fields_ = [("data", c_void_p), ("size", c_size_t)]

    def text(self) -> str:
        if not self.data or not self.size:
            return ""
        return ctypes.string_at(self.data, self.size).decode("utf-8", errors="replace")


class Output(Structure):
    """tsr_output_t"""
    _fields_ = [("print", OUTPUT_FN), ("warning", OUTPUT_FN), ("user", c_void_p)]


class Allocator(Structure):
    """tsr_allocator_t"""
    _fields_ = [("allocate", ALLOCATE_FN), ("release", RELEASE_FN), ("user", c_void_p)]


class ContextOptions(Structure):
    """tsr_context_options_t"""
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


class ExecutableOptions(Structure):
    """tsr_executable_options_t"""
    _fields_ = [
        ("backend", c_int),
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
        ("strict", c_bool),
        ("timeout_seconds", c_double),
        ("max_steps", c_uint64),
        ("cancel", POINTER(c_int)),
        ("trace_path", c_char_p),
        ("opt_level", c_int),
        ("output", Output),
    ]


class RunOptions(Structure):
    """tsr_run_options_t"""
    _fields_ = [
        ("output", Output),
        ("strict", c_int),
        ("timeout_seconds", c_double),
        ("max_steps", c_uint64),
        ("cancel", POINTER(c_int)),
        ("trace_path", c_char_p),
    ]


class Array(Structure):
    """tsr_array_t"""
    _fields_ = [("dtype", c_int), ("rank", c_uint32), ("dims", c_int64 * MAX_RANK),
                ("data", c_void_p)]


class OperandInfo(Structure):
    """tsr_ir_operand_info_t"""
    _fields_ = [
        ("name", c_char_p),
        ("role", c_int),
        ("dtype", c_int),
        ("rank", c_uint32),
        ("dims", c_int64 * MAX_RANK),
        ("space", c_int),
        ("alias", c_int32),
    ]


class DiagnosticRecord(Structure):
    """tsr_diagnostic_t"""
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


class InterpStats(Structure):
    """tsr_interp_stats_t"""
    _fields_ = [
        ("grid_steps", c_uint64),
        ("ops_executed", c_uint64),
        ("blocks_copied_in", c_uint64),
        ("blocks_copied_out", c_uint64),
        ("bytes_copied", c_uint64),
        ("vmem_bytes", c_uint64),
        ("warnings", c_uint64),
    ]


class DiskUse(Structure):
    """tsr_runtime_disk_use_t"""
    _fields_ = [("enabled", c_bool), ("hits", c_uint64), ("misses", c_uint64),
                ("puts", c_uint64), ("bad_entries", c_uint64), ("errors", c_uint64)]


class ProgramCacheStats(Structure):
    """tsr_runtime_cache_stats_t"""
    _fields_ = [(n, c_uint64) for n in (
        "memory_hits", "memory_misses", "memory_builds", "memory_waits",
        "memory_evictions", "memory_entries", "memory_bytes")]


class CompiledStats(Structure):
    """tsr_runtime_compiled_stats_t"""
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
    """tsr_context_stats_t"""
    _fields_ = [("programs", ProgramCacheStats), ("compiled", CompiledStats)]


# Enums (values from the headers).
BACKENDS = {"interp": 0, "cpu": 1}                       # tsr_backend_t
UNINIT = {"nan": 0, "zero": 1}                           # tsr_uninit_mode_t
ROLES = ("prefetch", "in", "out", "scratch")             # tsr_ir_role_t
SPACES = ("any", "hbm", "vmem", "smem")                  # tsr_ir_space_t
SEVERITIES = ("error", "warning", "note")                # tsr_diagnostic_severity_t
STATUS_KERNEL_ERROR = 4                                  # TSR_KERNEL_ERROR

_declared = False


def lib() -> ctypes.CDLL:
    """The library with the prototypes of this module declared."""
    global _declared
    h = _lib.lib()
    if not _declared:
        _declare(h)
        _declared = True
    return h


class TpuVmem(Structure):
    _fields_ = [("need_bytes", c_int64), ("default_limit_bytes", c_int64),
                ("capacity_bytes", c_int64)]


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
    # tpu.h (a library built before the TPU emitter has none: Kernel.to_mosaic
    # says so)
    if hasattr(h, "tsr_tpu_emit"):
        _fn(h, "tsr_tpu_emit", status, c_void_p, c_void_p, c_char_p, P(c_void_p))
    if hasattr(h, "tsr_tpu_vmem"):
        _fn(h, "tsr_tpu_vmem", status, c_void_p, c_char_p, P(TpuVmem))


def output_discard() -> ctypes._CFuncPtr:
    """tsr_output_discard as a tsr_output_fn value."""
    return ctypes.cast(lib().tsr_output_discard, OUTPUT_FN)
