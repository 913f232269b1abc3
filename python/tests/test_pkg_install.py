"""The installed package's layout (docs/install.md): libtessera.so, the CLI
and the on-demand modules inside the package, tessera/_lib/, found there
before any source tree's build/; the console script; the package metadata.

Each test builds the layout in a temporary directory from the library this
run uses (symbolic links), so it runs in the developers' tree and against an
installed wheel (scripts/test-wheel.sh) alike."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tomllib

import pytest
from packaging.specifiers import SpecifierSet
from packaging.requirements import Requirement

import tessera
from tessera import _cli

from conftest import ROOT, cpu_backend_reason


def _native_files() -> dict[str, pathlib.Path]:
    """The files of tessera/_lib/ as this run has them: beside the library
    (an installed package) or in the build tree."""
    lib = pathlib.Path(tessera.library_path()).resolve()
    found = {"libtessera.so": lib}
    for name, candidates in {
        "libtessera-lower.so": [lib.parent / "libtessera-lower.so"],
        "libtessera-vqsort.so": [lib.parent / "libtessera-vqsort.so"],
        "tessera": [lib.parent / "tessera", lib.parent / "tools" / "tessera"],
    }.items():
        for c in candidates:
            if c.is_file():
                found[name] = c
                break
    return found


def _package_copy(dst: pathlib.Path) -> pathlib.Path:
    """The Python sources of the package in use, without its _lib/. For an
    installed wheel, with a link to the libraries auditwheel bundled beside
    the package (tessera.libs/: the native files find them relative to the
    directory they were opened from, $ORIGIN/../../tessera.libs)."""
    src = pathlib.Path(tessera.__file__).parent
    shutil.copytree(src, dst / "tessera",
                    ignore=shutil.ignore_patterns("__pycache__", "_lib", "jax"))
    bundled = src.parent / "tessera.libs"
    if bundled.is_dir():
        (dst / "tessera.libs").symlink_to(bundled)
    return dst / "tessera"


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("TESSERA_") and k not in ("PYTHONPATH", "LD_LIBRARY_PATH")}
    env.update(extra)
    return env


def test_the_package_library_comes_before_a_source_tree_build(tmp_path):
    """A package inside a source tree (a venv made in a checkout) that has its
    own _lib/libtessera.so opens that one, not the tree's build/; and the
    cpu backend's module is loaded from beside it, not from the prefix the
    library was configured with (there is none at that prefix)."""
    files = _native_files()
    tree = tmp_path / "tree"
    (tree / "include" / "tessera").mkdir(parents=True)
    (tree / "meson.build").write_text("# a stand-in source tree\n")
    (tree / "build").mkdir()
    (tree / "build" / "libtessera.so").symlink_to(files["libtessera.so"])
    pkg = _package_copy(tree / "python")
    (pkg / "_lib").mkdir()
    for name, path in files.items():
        (pkg / "_lib" / name).symlink_to(path)
    code = ("import numpy as np, tessera\n"
            "print(tessera.library_path())\n"
            "k = tessera.Module.parse(open('k.tsr').read(), 'k.tsr').kernels[0]\n"
            "x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)\n"
            "try:\n"
            "    exe = tessera.compile(k, 'cpu', context=tessera.Context(disk_cache=False))\n"
            "except tessera.TesseraError as e:\n"
            "    print('NO CPU', e)\n"
            "else:\n"
            "    print((exe(x) == 2 * x).all())\n")
    (tmp_path / "k.tsr").write_text(DOUBLE)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, text=True,
                         capture_output=True, timeout=300,
                         env=_clean_env(PYTHONPATH=str(tree / "python"),
                                        TESSERA_LOWER_TIMING="1"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == str(pkg / "_lib" / "libtessera.so")
    if "libtessera-lower.so" not in files or cpu_backend_reason():
        assert lines[1].startswith("NO CPU") or lines[1] == "True"
        pytest.skip("no cpu backend in this build: the module's place is not checked")
    assert lines[1] == "True", out.stdout
    assert f"load {pkg / '_lib' / 'libtessera-lower.so'}:" in out.stderr


DOUBLE = """kernel @double
  grid(2)
  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %v = load %x[:, :] : f32[8, 128]
  %w = add %v, %v : f32[8, 128]
  store %y[:, :], %w
}
"""


def _run_cli_main(pkg_parent: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    code = f"import sys, tessera._cli as c; sys.exit(c.main({list(args)!r}))"
    return subprocess.run([sys.executable, "-c", code], text=True, capture_output=True,
                          timeout=120, env=_clean_env(PYTHONPATH=str(pkg_parent)))


def test_console_script_runs_the_bundled_cli(tmp_path):
    """tessera._cli.main (the console script `tessera`) becomes the bundled
    CLI: its output and its exit status are the CLI's."""
    files = _native_files()
    if "tessera" not in files:
        pytest.skip("no tessera CLI beside the library or in the build tree")
    pkg = _package_copy(tmp_path)
    (pkg / "_lib").mkdir()
    (pkg / "_lib" / "tessera").symlink_to(files["tessera"])
    ok = _run_cli_main(tmp_path, "--help")
    assert ok.returncode == 0, ok.stderr
    assert "Usage: tessera COMMAND" in ok.stdout
    direct = subprocess.run([str(files["tessera"]), "no-such-command"], text=True,
                            capture_output=True, timeout=60)
    bad = _run_cli_main(tmp_path, "no-such-command")
    assert direct.returncode != 0
    assert (bad.returncode, bad.stderr) == (direct.returncode, direct.stderr)


def test_console_script_without_a_bundled_cli_says_where_one_is(tmp_path):
    """The developers' editable install bundles no CLI: the script says so
    and where to find one, with exit status 127 (a command not found)."""
    _package_copy(tmp_path)
    out = _run_cli_main(tmp_path, "--help")
    assert out.returncode == 127
    assert "no bundled CLI" in out.stderr
    assert "build/tools/tessera" in out.stderr and "pip install ." in out.stderr


def test_installed_package_has_its_cli_and_library_inside():
    """When this run's package is an installed one (it has _lib/), the CLI
    and the library are in it, where the console script and _lib look."""
    lib_dir = pathlib.Path(tessera.__file__).parent / "_lib"
    if not lib_dir.is_dir():
        pytest.skip("the package in use is the source tree's (no _lib/)")
    assert pathlib.Path(tessera.library_path()) == lib_dir / "libtessera.so"
    assert _cli.cli_path() == lib_dir / "tessera" and os.access(_cli.cli_path(), os.X_OK)


def _jax_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "python" / "requirements.txt").read_text().splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower()] = version.strip()
    return pins


@pytest.mark.parametrize("pyproject", ["pyproject.toml", "python/pyproject.toml"])
def test_jax_extra_is_a_range_holding_the_tested_version(pyproject):
    """The [jax] extra allows a range of JAX versions, not one pin, and the
    range holds the version python/requirements.txt pins for developers
    (the one tessera.jax is tested with); both package definitions agree."""
    meta = tomllib.loads((ROOT / pyproject).read_text())["project"]
    reqs = {Requirement(r).name: Requirement(r) for r in meta["optional-dependencies"]["jax"]}
    pins = _jax_pins()
    for name in ("jax", "jaxlib"):
        spec: SpecifierSet = reqs[name].specifier
        assert not any(s.operator in ("==", "===") for s in spec), f"{name} is pinned: {spec}"
        assert any(s.operator.startswith("<") for s in spec), f"{name} has no upper bound: {spec}"
        assert spec.contains(pins[name]), f"{name} {spec} excludes the tested {pins[name]}"


def test_root_pyproject_builds_with_meson_python_and_names_the_console_script():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert meta["build-system"]["build-backend"] == "mesonpy"
    assert meta["project"]["scripts"]["tessera"] == "tessera._cli:main"
    args = meta["tool"]["meson-python"]["args"]
    assert "-Dpython_package=true" in args["setup"]
    # the wheel holds what the package needs: no headers, static library or pkg-config file
    assert args["install"] == ["--tags=runtime,python-runtime"]
