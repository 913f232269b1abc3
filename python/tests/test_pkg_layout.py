"""The ctypes mirrors of tessera's structs (python/tessera/_capi.py) against
the C compiler's layout of the public headers: every field's offset and
every struct's size."""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import pytest

from tessera import _capi

STRUCTS = {
    "tsr_string_view_t": _capi.StringView,
    "tsr_output_t": _capi.Output,
    "tsr_allocator_t": _capi.Allocator,
    "tsr_context_options_t": _capi.ContextOptions,
    "tsr_executable_options_t": _capi.ExecutableOptions,
    "tsr_run_options_t": _capi.RunOptions,
    "tsr_array_t": _capi.Array,
    "tsr_ir_operand_info_t": _capi.OperandInfo,
    "tsr_diagnostic_t": _capi.DiagnosticRecord,
    "tsr_interp_stats_t": _capi.InterpStats,
    "tsr_runtime_disk_use_t": _capi.DiskUse,
    "tsr_runtime_cache_stats_t": _capi.ProgramCacheStats,
    "tsr_runtime_compiled_stats_t": _capi.CompiledStats,
    "tsr_context_stats_t": _capi.ContextStats,
}


@pytest.fixture(scope="module")
def c_layout(tmp_path_factory, root):
    cc = shutil.which("cc") or shutil.which("gcc")
    include = root / "include"
    if not cc or not (include / "tessera" / "api.h").exists():
        pytest.skip("needs a C compiler and the source tree's include/")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <tessera/tessera.h>",
             "int main(void) {"]
    for cname, py in STRUCTS.items():
        lines.append(f'  printf("{cname} %zu\\n", sizeof({cname}));')
        for field, _ in py._fields_:
            lines.append(f'  printf("{cname}.{field} %zu\\n", offsetof({cname}, {field}));')
    lines += ["  return 0;", "}"]
    d = tmp_path_factory.mktemp("layout")
    (d / "layout.c").write_text("\n".join(lines) + "\n")
    subprocess.run([cc, "-std=c11", f"-I{include}", "-o", str(d / "layout"), str(d / "layout.c")],
                   check=True, capture_output=True, timeout=120)
    out = subprocess.run([str(d / "layout")], check=True, capture_output=True, text=True).stdout
    return dict(line.rsplit(" ", 1) for line in out.splitlines())


@pytest.mark.parametrize("cname", sorted(STRUCTS))
def test_struct_layout_matches_c(c_layout, cname):
    py = STRUCTS[cname]
    assert int(c_layout[cname]) == ctypes.sizeof(py), f"sizeof({cname})"
    for field, _ in py._fields_:
        assert int(c_layout[f"{cname}.{field}"]) == getattr(py, field).offset, f"{cname}.{field}"
