"""The ctypes mirrors of tessera's public headers (python/tessera/_capi.py)
against the C compiler's view of include/tessera/: every struct's and union's
size, field names and field offsets, every mirrored constant's value, and the
ABI version the package checks when it opens the library.

The mirrors are found, not listed: every ctypes struct or union of the
package's modules (tessera.jax's mirrors of XLA's FFI are not tessera's), and
every constant _capi records in C_CONSTANTS. A mirror of something the
headers lack fails its own test, by name; so does a struct mirror that lacks
a field, or defined outside _capi. The package's public names are pinned
here too."""

from __future__ import annotations

import ctypes
import importlib
import pkgutil
import re
import shutil
import subprocess

import pytest

import tessera
from tessera import _api, _capi, _lib


def _package_modules() -> list:
    """tessera's own modules (not tessera.jax, which needs JAX and mirrors
    XLA's C API, not tessera's)."""
    return [importlib.import_module(f"tessera.{m.name}")
            for m in pkgutil.iter_modules(tessera.__path__) if not m.ispkg]


def _mirror_classes() -> list[tuple[str, type]]:
    """(module, class) of every ctypes struct or union the package defines."""
    out = []
    for module in _package_modules():
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, (ctypes.Structure, ctypes.Union)) \
                    and value.__module__ == module.__name__:
                out.append((module.__name__, value))
    return out


STRUCTS = {cls._c_name_: cls for module, cls in _mirror_classes()
           if module == "tessera._capi" and hasattr(cls, "_c_name_")}


# ---- The headers as text: which types, members and names they declare ------------


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


@pytest.fixture(scope="module")
def headers(root) -> str:
    include = root / "include" / "tessera"
    if not (include / "api.h").exists():
        pytest.skip("needs the source tree's include/")
    text = "\n".join(_strip_comments(p.read_text()) for p in sorted(include.glob("*.h")))
    # tsr_dtype_t's enumerators, which base.h makes from dtypes.def's rows
    rows = re.findall(r"^TSR_DTYPE\(\s*(\w+)", (include / "dtypes.def").read_text(), re.M)
    return text + "\n" + " ".join(f"TSR_DTYPE_{e}" for e in rows)


def _members(headers: str, cname: str) -> list[str] | None:
    """The member names of `typedef struct|union X {...} cname;` in order,
    None when the headers have no such typedef."""
    m = re.search(r"typedef\s+(?:struct|union)\s+\w*\s*\{([^{}]*)\}\s*" + re.escape(cname) + r"\s*;",
                  headers)
    if not m:
        return None
    names = []
    for decl in m.group(1).split(";"):
        decl = re.sub(r"\[[^\]]*\]", "", decl).strip()  # array extents
        if not decl:
            continue
        first, *more = decl.split(",")
        names.append(re.findall(r"\w+", first)[-1])
        names += [re.findall(r"\w+", d)[-1] for d in more]
    return names


def _declares(headers: str, name: str) -> bool:
    return re.search(r"\b" + re.escape(name) + r"\b", headers) is not None


# ---- The C compiler's values ----------------------------------------------------------


@pytest.fixture(scope="module")
def c_values(tmp_path_factory, root, headers) -> dict[str, int]:
    """"sizeof X", "offsetof X.f" and constants' names -> the C compiler's
    value, for the mirrors the headers declare (the others fail their tests
    without breaking this program)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("needs a C compiler")
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <tessera/tessera.h>",
             "int main(void) {"]
    for cname, py in STRUCTS.items():
        members = _members(headers, cname)
        if members is None:
            continue
        lines.append(f'  printf("sizeof {cname} %zu\\n", sizeof({cname}));')
        for field, _ in py._fields_:
            if field in members:
                lines.append(f'  printf("offsetof {cname}.{field} %zu\\n", '
                             f'offsetof({cname}, {field}));')
    for name in _capi.C_CONSTANTS:
        if _declares(headers, name):
            lines.append(f'  printf("{name} %lld\\n", (long long)({name}));')
    lines += ["  return 0;", "}"]
    d = tmp_path_factory.mktemp("layout")
    (d / "layout.c").write_text("\n".join(lines) + "\n")
    build = subprocess.run([cc, "-std=c11", f"-I{root / 'include'}", "-o", str(d / "layout"),
                            str(d / "layout.c")], capture_output=True, text=True, timeout=120)
    assert build.returncode == 0, f"the layout program does not compile:\n{build.stderr}"
    out = subprocess.run([str(d / "layout")], check=True, capture_output=True, text=True).stdout
    return {k: int(v) for k, v in (line.rsplit(" ", 1) for line in out.splitlines())}


# ---- Structs and unions ---------------------------------------------------------------


def test_every_mirror_names_its_c_type_and_lives_in_capi():
    for module, cls in _mirror_classes():
        assert module == "tessera._capi", (
            f"{module}.{cls.__name__} mirrors a C type outside _capi.py: move it there, "
            "where this test checks it")
        assert isinstance(getattr(cls, "_c_name_", None), str), (
            f"_capi.{cls.__name__} does not say which C type it mirrors (_c_name_)")


@pytest.mark.parametrize("cname", sorted(STRUCTS))
def test_struct_matches_c(headers, c_values, cname):
    py = STRUCTS[cname]
    members = _members(headers, cname)
    assert members is not None, \
        f"_capi.{py.__name__} mirrors {cname}, which include/tessera/ does not declare"
    fields = [f for f, _ in py._fields_]
    assert fields == members, (
        f"_capi.{py.__name__}'s fields are not those of {cname}:\n"
        f"  Python: {fields}\n  C:      {members}")
    assert c_values[f"sizeof {cname}"] == ctypes.sizeof(py), f"sizeof({cname})"
    for field in fields:
        assert c_values[f"offsetof {cname}.{field}"] == getattr(py, field).offset, \
            f"offsetof({cname}, {field})"


# ---- Constants ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(_capi.C_CONSTANTS))
def test_constant_matches_c(headers, c_values, name):
    declared = _declares(headers, name)
    assert declared, f"_capi mirrors {name}, which include/tessera/ does not declare"
    assert c_values[name] == _capi.C_CONSTANTS[name], \
        f"{name} is {c_values[name]} in C, {_capi.C_CONSTANTS[name]} in _capi"


def test_every_enumerator_of_a_mirrored_enum_is_mirrored(headers):
    """An enum the package mirrors in part must be mirrored whole: a value
    added in C (a new dtype, backend or status code) then fails here, not
    later as a number the package cannot name. Counts (TSR_*_COUNT) and
    enums no mirror touches are left out."""
    missing = []
    for body in re.findall(r"\benum\s+\w*\s*\{([^{}]*)\}", headers):
        if "#" in body:  # tsr_dtype_t, made from dtypes.def: the next test's
            continue
        names = [item.split("=")[0].strip() for item in body.split(",") if item.strip()]
        names = [n for n in names if not n.endswith("_COUNT")]
        if any(n in _capi.C_CONSTANTS for n in names):
            missing += [n for n in names if n not in _capi.C_CONSTANTS]
    assert not missing, f"enumerators of mirrored enums that _capi lacks: {missing}"


def test_every_dtype_is_mirrored(root):
    rows = re.findall(r"^TSR_DTYPE\(\s*(\w+)\s*,\s*(\w+)", (root / "include" / "tessera" /
                                                           "dtypes.def").read_text(), re.M)
    assert tuple(name for _, name in rows) == _capi.DTYPES


# ---- The ABI version --------------------------------------------------------------------


def test_library_has_the_packages_abi_version():
    h = _lib.lib()
    assert h.tsr_abi_version() == _lib.ABI_VERSION == _capi.ABI_VERSION


def test_another_abi_version_is_refused_naming_both_and_the_library(monkeypatch):
    path = _lib.library_path()
    handle = ctypes.CDLL(path)
    monkeypatch.setattr(_lib, "ABI_VERSION", _lib.ABI_VERSION + 1)
    with pytest.raises(_lib.LibraryMismatch) as e:
        _lib._check_abi(handle, path, "$TESSERA_LIBRARY")
    message = str(e.value)
    assert f"ABI version {_lib.ABI_VERSION - 1}" in message  # the library's
    assert f"needs ABI version {_lib.ABI_VERSION}" in message  # the package's
    assert path in message
    assert isinstance(e.value, ImportError)


def test_a_library_without_an_abi_version_is_refused(monkeypatch):
    class Old:  # a library from before tsr_abi_version
        pass
    with pytest.raises(_lib.LibraryMismatch, match="no ABI version"):
        _lib._check_abi(Old(), "/old/libtessera.so", "$TESSERA_LIBRARY")


# ---- Names ---------------------------------------------------------------------------


def test_every_run_option_is_a_compile_keyword():
    """A field of tsr_interp_options_t (the executable's `run`) is a
    keyword of tessera.compile under its own name (HACKING.md, "A run
    option")."""
    fields = {f for f, _ in _capi.InterpOptions._fields_} | {"opt_level"}
    # the length of an array option and the user pointer of a callback
    # come with the keyword itself
    fields -= {f for f in fields if f.rsplit("_", 1)[0] in fields
               and f.rsplit("_", 1)[-1] in ("size", "user")}
    assert fields <= set(_api._EXECUTABLE_OPTIONS), fields - set(_api._EXECUTABLE_OPTIONS)


PUBLIC = {
    "CacheWarning", "CancelToken", "CompileError", "Context", "Diagnostic", "Executable",
    "Kernel", "KernelError", "KernelWarning", "LibraryNotFound", "Module", "Operand",
    "RunResult", "RunStats", "TesseraError", "backend_names", "compile", "default_context",
    "dtypes", "library_path", "numpy_dtype", "run",
    "argmax", "argmin", "cummax", "cummin", "cumprod", "cumsum", "cumulative", "logsumexp",
    "mean", "prod", "reduce", "var", "argsort", "sort", "sort_multiple", "top_k",
}


def test_public_names():
    assert set(tessera.__all__) == PUBLIC
    for name in PUBLIC | {"sum", "max", "min", "__version__"}:
        assert hasattr(tessera, name), name
