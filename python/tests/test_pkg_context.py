"""tessera.Context (disk cache, stats, allocator, errors), the default
context, and finding the library."""

from __future__ import annotations

import ctypes
import os
import pathlib
import shutil
import subprocess
import sys
import threading

import numpy as np
import pytest

import tessera

DOUBLE = """kernel @double
  grid(2) semantics(parallel)
  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %v = load %x[:, :] : f32[8, 128]
  %w = add %v, %v : f32[8, 128]
  store %y[:, :], %w
}
"""


def kernel(text: str = DOUBLE) -> tessera.Kernel:
    return tessera.Module.parse(text, "double.tsr").kernels[0]


def test_plain_context_has_no_disk_cache():
    with tessera.Context() as ctx:
        assert not ctx.has_disk_cache
        x = np.ones((16, 128), np.float32)
        np.testing.assert_array_equal(tessera.run(kernel(), x, context=ctx), 2 * x)
        stats = ctx.stats()
        assert stats["programs"]["memory_misses"] >= 1
    with pytest.raises(ValueError, match="closed"):
        ctx.stats()


def test_context_caches_prepared_programs():
    ctx = tessera.Context()
    k = kernel()
    tessera.compile(k, context=ctx)
    tessera.compile(kernel(DOUBLE.replace("@double", "@renamed")), context=ctx)
    progs = ctx.stats()["programs"]
    assert progs["memory_misses"] == 1 and progs["memory_hits"] == 1


def test_disk_cache_dir(tmp_path):
    ctx = tessera.Context(cache_dir=tmp_path / "cache", cache_key_file=tmp_path / "key" / "k")
    assert ctx.has_disk_cache
    assert ctx.stats()["compiled"]["disk"]["enabled"] in (True, False)
    assert (tmp_path / "cache").is_dir()


def test_disk_cache_serves_a_second_context(tmp_path, cpu_backend):
    opts = dict(cache_dir=tmp_path / "cache", cache_key_file=tmp_path / "key" / "k")
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    first = tessera.Context(**opts)
    np.testing.assert_array_equal(tessera.run(kernel(), x, backend=cpu_backend,
                                              context=first), 2 * x)
    st1 = first.stats()["compiled"]
    assert st1["compiles"] == 1 and st1["disk"]["puts"] == 1
    second = tessera.Context(**opts)
    np.testing.assert_array_equal(tessera.run(kernel(), x, backend=cpu_backend,
                                              context=second), 2 * x)
    st2 = second.stats()["compiled"]
    assert st2["compiles"] == 0 and st2["disk"]["hits"] == 1


def test_disk_cache_needs_a_key_file(tmp_path):
    with pytest.raises(tessera.TesseraError) as info:
        tessera.Context(disk_cache=True, cache_dir=tmp_path / "c")
    assert info.value.code == "invalid argument"


def test_unusable_optional_cache_is_a_cache_warning(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.warns(tessera.CacheWarning):
        ctx = tessera.Context(cache_dir=blocker / "cache", cache_key_file=tmp_path / "k",
                              cache_optional=True)
    assert not ctx.has_disk_cache


def test_from_environment_reads_the_cache_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("TESSERA_CACHE_DIR", str(tmp_path / "envcache"))
    monkeypatch.setenv("TESSERA_CACHE_KEY_FILE", str(tmp_path / "envkey"))
    monkeypatch.delenv("TESSERA_CACHE", raising=False)
    ctx = tessera.Context(from_environment=True)
    assert ctx.has_disk_cache
    monkeypatch.setenv("TESSERA_CACHE", "off")
    assert not tessera.Context(from_environment=True).has_disk_cache
    # a field given overrides the environment
    assert not tessera.Context(from_environment=True, disk_cache=False).has_disk_cache


def test_default_context_is_shared():
    assert tessera.default_context() is tessera.default_context()
    exe = tessera.compile(kernel())
    assert exe.context is tessera.default_context()


class CountingAllocator:
    """Memory from libc, counted."""

    def __init__(self):
        self.libc = ctypes.CDLL(None)
        self.libc.aligned_alloc.restype = ctypes.c_void_p
        self.libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
        self.libc.free.argtypes = [ctypes.c_void_p]
        self.lock = threading.Lock()
        self.live: dict[int, int] = {}
        self.allocations = 0

    def allocate(self, size, alignment):
        rounded = (size + alignment - 1) // alignment * alignment
        p = self.libc.aligned_alloc(alignment, rounded or alignment)
        with self.lock:
            self.live[p] = size
            self.allocations += 1
        return p

    def release(self, block, size):
        with self.lock:
            assert self.live.pop(block) == size
        self.libc.free(block)


def test_allocator_serves_the_context_and_gets_everything_back():
    alloc = CountingAllocator()
    ctx = tessera.Context(allocator=alloc)
    exe = tessera.compile(kernel(), context=ctx)
    x = np.ones((16, 128), np.float32)
    np.testing.assert_array_equal(exe(x), 2 * x)
    assert alloc.allocations > 0
    exe.close()
    ctx.close()
    assert alloc.live == {}


def test_bad_allocator_is_refused():
    with pytest.raises(TypeError, match="allocate"):
        tessera.Context(allocator=object())


def _copy_package(dst: pathlib.Path) -> pathlib.Path:
    """The package alone, far from any source tree's build/."""
    src = pathlib.Path(tessera.__file__).parent
    shutil.copytree(src, dst / "tessera", ignore=shutil.ignore_patterns("__pycache__", "jax"))
    return dst


def test_library_not_found_says_what_was_tried(tmp_path):
    pkg = _copy_package(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(pkg), TESSERA_LIBRARY=str(tmp_path / "none" / "libtessera.so"))
    env.pop("LD_LIBRARY_PATH", None)
    code = ("import tessera\n"
            "try:\n"
            "    tessera.Module.parse('kernel @k\\n{\\n}\\n')\n"
            "except tessera.LibraryNotFound as e:\n"
            "    print(e)\n"
            "else:\n"
            "    print('FOUND', tessera.library_path())\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    if "FOUND" in out.stdout and "libtessera.so.0" in out.stdout:
        pytest.skip("libtessera is installed on this system: the loader finds it")
    assert "cannot find libtessera.so" in out.stdout
    assert "TESSERA_LIBRARY" in out.stdout
    assert str(tmp_path / "none" / "libtessera.so") in out.stdout and "no such file" in out.stdout
    assert "libtessera.so.0 (the system's loader)" in out.stdout


def test_library_from_the_source_tree_build(tmp_path, root):
    """Without TESSERA_LIBRARY the package finds <tree>/build/libtessera.so."""
    built = root / "build" / "libtessera.so"
    env = dict(os.environ, PYTHONPATH=str(root / "python"))
    env.pop("TESSERA_LIBRARY", None)
    code = "import tessera; print(tessera.library_path())"
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, text=True,
                         capture_output=True, timeout=120)
    if built.exists():
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(built)
    else:
        assert "cannot find libtessera.so" in out.stderr
        assert str(built) in out.stderr


def _doubles_on_cpu_in_a_subprocess(cwd: pathlib.Path, root: pathlib.Path, library: str,
                                    prelude: str = "") -> None:
    """Runs DOUBLE on the cpu backend in a new process (in `cwd`, with
    TESSERA_LIBRARY=`library`, after `prelude`) and checks its result."""
    env = dict(os.environ, PYTHONPATH=str(root / "python"), TESSERA_LIBRARY=library)
    env.pop("TESSERA_LOWER_LIBRARY", None)
    code = (prelude + "import numpy as np, tessera\n"
            f"k = tessera.Module.parse({DOUBLE!r})\n"
            "x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)\n"
            "print(bool((tessera.run(k, x, backend='cpu') == 2 * x).all()))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=cwd, text=True,
                         capture_output=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True"


def test_library_given_by_a_relative_path_finds_its_cpu_backend(tmp_path, root):
    """TESSERA_LIBRARY relative to the working directory: the library still
    finds the lowering library beside itself (it was looked for at the
    installed place, from the relative path the library was opened by)."""
    built = pathlib.Path(tessera.library_path())
    _doubles_on_cpu_in_a_subprocess(tmp_path, root, os.path.relpath(built, tmp_path))


def test_library_loaded_by_a_relative_path_finds_its_cpu_backend(tmp_path, root):
    """The C library itself, dlopen'd by a relative path (as a C program or
    another binding might): it resolves that path to find the lowering
    library beside itself, not at the installed place. The package's own
    open then finds the library already loaded under its relative name."""
    built = pathlib.Path(tessera.library_path())
    prelude = ("import ctypes\n"
               f"ctypes.CDLL({os.path.relpath(built, tmp_path)!r}, mode=ctypes.RTLD_GLOBAL)\n")
    _doubles_on_cpu_in_a_subprocess(tmp_path, root, str(built), prelude)


def test_closing_a_context_closes_its_executables():
    with tessera.Context() as ctx:
        exe = tessera.compile(kernel(), context=ctx)
        x = np.ones((16, 128), np.float32)
        np.testing.assert_array_equal(exe(x), 2 * x)
    with pytest.raises(ValueError, match="executable is closed"):
        exe(x)


def test_lower_library_reaches_the_cpu_backend(tmp_path):
    """A context naming a lowering library that does not exist: compiling for
    the cpu backend says so (in a fresh process: the choice is process-wide)."""
    bogus = tmp_path / "libtessera-lower-missing.so"
    code = ("import sys, tessera\n"
            f"ctx = tessera.Context(lower_library={str(bogus)!r})\n"
            "k = tessera.Module.parse(open(sys.argv[1]).read(), 'd.tsr').kernels[0]\n"
            "try:\n"
            "    tessera.compile(k, 'cpu', context=ctx)\n"
            "except tessera.CompileError as e:\n"
            "    print('ERROR', e.code, e)\n"
            "else:\n"
            "    print('COMPILED')\n")
    src = tmp_path / "d.tsr"
    src.write_text(DOUBLE)
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(tessera.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code, str(src)], env=env, text=True,
                         capture_output=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("ERROR unimplemented"), out.stdout
    assert str(bogus) in out.stdout


def test_module_with_one_kernel_stands_for_it():
    m = tessera.Module.parse(DOUBLE, "double.tsr")
    x = np.ones((16, 128), np.float32)
    np.testing.assert_array_equal(tessera.run(m, x), 2 * x)
    two = tessera.Module.parse(DOUBLE + DOUBLE.replace("@double", "@again"), "two.tsr")
    with pytest.raises(ValueError, match="the module has 2 kernels"):
        tessera.run(two, x)
