#!/usr/bin/env python3
"""What a warm call costs through the Python package, against the C API
called directly, on a kernel small enough that the call is all there is
(bench/python/tiny.tsr: one grid step, one (8, 128) f32 block).

    TESSERA_LIBRARY=build/libtessera.so .venv/bin/python bench/python/bench_binding.py

Measures, per run (the best of 15 repetitions of --iterations calls: the
minimum is what the code costs when nothing else runs on the machine):
  C          tsr_executable_run from C (bench_c_run.c, compiled here with cc),
             result destroyed each time; "C + output" also sets the output
             callbacks and cancel flag the package sets on every run
  exe(x)     tessera.Executable.__call__: checks the input, allocates the
             output, runs, reads the diagnostics count
  exe.run(x) the same plus the run's counters (a RunResult)
  ctypes     tsr_executable_run through ctypes with prepared arguments: the
             floor of a ctypes binding
  cffi       the same through cffi's ABI mode, if cffi can be imported
  null call  a call of a trivial C function (tsr_dtype_size), ctypes and cffi
Prints a Markdown table (docs/python.md, "ctypes or cffi").
"""

from __future__ import annotations

import argparse
import ctypes
import os
import pathlib
import platform
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "python"))

import tessera  # noqa: E402
from tessera import _capi  # noqa: E402


def best_ns(fn, iterations: int, repeats: int = 15) -> float:
    for _ in range(min(iterations, 200)):
        fn()
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(iterations):
            fn()
        best = min(best, (time.perf_counter_ns() - t0) / iterations)
    return best


def c_floor(kernel: pathlib.Path, iterations: int, backend: str, with_output: bool,
            workdir: pathlib.Path) -> float | None:
    exe = workdir / "bench_c_run"
    if not exe.exists():
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            return None
        lib = pathlib.Path(tessera.library_path()).resolve()
        subprocess.run([cc, "-O2", "-std=c11", f"-I{ROOT / 'include'}", str(HERE / "bench_c_run.c"),
                        "-o", str(exe), str(lib), f"-Wl,-rpath,{lib.parent}"], check=True)
    args = [str(exe), str(kernel), str(iterations), backend] + (["with-output"] if with_output else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return float(out.split()[1])


def raw_ctypes(exe: tessera.Executable, x: np.ndarray, y: np.ndarray):
    h = _capi.lib()
    arrays = (_capi.Array * 2)()
    ptrs = (ctypes.POINTER(_capi.Array) * 2)()
    for i, a in enumerate((x, y)):
        arrays[i].dtype = 0
        arrays[i].rank = 2
        arrays[i].dims[0], arrays[i].dims[1] = a.shape
        arrays[i].data = a.ctypes.data
        ptrs[i] = ctypes.pointer(arrays[i])
    run, destroy = h.tsr_executable_run, h.tsr_run_result_destroy
    handle = exe._handle
    result = ctypes.c_void_p()
    ref = ctypes.byref(result)

    def call():
        s = run(handle, ptrs, 2, None, ref)
        destroy(result)
        assert not s
    return call


def raw_cffi(exe: tessera.Executable, x: np.ndarray, y: np.ndarray):
    try:
        import cffi
    except ImportError:
        return None, None
    ffi = cffi.FFI()
    ffi.cdef("""
        typedef struct { int dtype; uint32_t rank; int64_t dims[6]; void *data; } tsr_array_t;
        void *tsr_executable_run(void *exe, tsr_array_t *const *ops, size_t n, void *ro,
                                 void **out_result);
        void tsr_run_result_destroy(void *r);
        size_t tsr_dtype_size(int dtype);
    """)
    lib = ffi.dlopen(tessera.library_path())
    arrays = ffi.new("tsr_array_t[2]")
    ptrs = ffi.new("tsr_array_t *[2]")
    for i, a in enumerate((x, y)):
        arrays[i].dtype = 0
        arrays[i].rank = 2
        arrays[i].dims[0], arrays[i].dims[1] = a.shape
        arrays[i].data = ffi.cast("void *", a.ctypes.data)
        ptrs[i] = arrays + i
    handle = ffi.cast("void *", exe._handle.value)
    result = ffi.new("void **")
    run, destroy = lib.tsr_executable_run, lib.tsr_run_result_destroy

    def call():
        s = run(handle, ptrs, 2, ffi.NULL, result)
        destroy(result[0])
        assert s == ffi.NULL
    size = lib.tsr_dtype_size
    return call, (lambda: size(0))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iterations", type=int, default=5000)
    ap.add_argument("--backends", default="interp,cpu")
    args = ap.parse_args()
    kernel = HERE / "tiny.tsr"
    k = tessera.Module.load(kernel)["tiny"]
    x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
    y = np.empty_like(x)
    print(f"# python {platform.python_version()}, numpy {np.__version__}, "
          f"library {tessera.library_path()}, {args.iterations} calls x best of 15")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        for backend in args.backends.split(","):
            try:
                exe = tessera.compile(k, backend, context=tessera.Context())
            except tessera.TesseraError as e:
                print(f"# {backend}: skipped: {e}")
                continue
            np.testing.assert_array_equal(exe(x), 2 * x)
            n = args.iterations
            row = {"backend": backend}
            row["C"] = c_floor(kernel, n, backend, False, workdir)
            row["C + output"] = c_floor(kernel, n, backend, True, workdir)
            row["exe(x)"] = best_ns(lambda: exe(x), n)
            row["exe.run(x)"] = best_ns(lambda: exe.run(x), n)
            row["ctypes"] = best_ns(raw_ctypes(exe, x, y), n)
            cffi_call, _ = raw_cffi(exe, x, y)
            row["cffi"] = best_ns(cffi_call, n) if cffi_call else None
            rows.append(row)
        h = _capi.lib()
        size = h.tsr_dtype_size
        null_ctypes = best_ns(lambda: size(0), 200000)
        _, cffi_null = raw_cffi(exe, x, y) if rows else (None, None)
        null_cffi = best_ns(cffi_null, 200000) if cffi_null else None

    def fmt(v):
        return "n/a" if v is None else f"{v / 1000:.2f}"

    cols = ["C", "C + output", "exe(x)", "exe.run(x)", "ctypes", "cffi"]
    print("\n| backend | " + " | ".join(cols) + " |  (microseconds per run)")
    print("|---" * (len(cols) + 1) + "|")
    for row in rows:
        print(f"| {row['backend']} | " + " | ".join(fmt(row[c]) for c in cols) + " |")
    print(f"\nnull call (tsr_dtype_size): ctypes {fmt(null_ctypes)} us, cffi {fmt(null_cffi)} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
