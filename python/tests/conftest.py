"""Shared fixtures of the package's tests (python/tests). Kept small: a test
file's own fixtures live in it.

The disk cache of the default context is pointed at a directory of the test
session (unless TESSERA_CACHE_DIR is set), so the tests never touch
~/.cache/tessera. Compiled kernels run on guarded copies of their arrays
(TESSERA_GUARD=1 unless set: docs/lowering.md, "Guard bytes"), so a write of
compiled code past an array fails the test that made it. The JAX bridge's
translation rules are held to the IR ops they declare
(TESSERA_JAX_CHECK_EMITS=1 unless set)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
"""The source tree (kernels/, tests/diagnostics/, include/)."""

_session_dir: str | None = None


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--installed-package", action="store_true",
        help="test the tessera package installed in this Python (a wheel: scripts/test-wheel.sh), "
             "not the source tree's: refuse to run when tessera would be imported from the "
             "tree, and skip the tests that need the tree's package or build/")


def installed_package(config: pytest.Config) -> bool:
    return bool(config.getoption("--installed-package"))


def pytest_configure(config: pytest.Config) -> None:
    global _session_dir
    config.addinivalue_line(
        "markers", "source_tree: runs the source tree's package or build/ (skipped with "
        "--installed-package)")
    if installed_package(config):
        import tessera
        where = pathlib.Path(tessera.__file__).resolve()
        if ROOT in where.parents:
            raise pytest.UsageError(
                f"--installed-package: tessera is imported from the source tree ({where}), "
                "not from an installed package (PYTHONPATH, or an editable install?)")
    os.environ.setdefault("TESSERA_GUARD", "1")
    # every op a tessera.jax translation rule builds must be one its `emits`
    # declares (python/tessera/jax/translate_core.py): the op coverage of
    # tessera.jax.translate.ir_op_coverage() is read from those
    os.environ.setdefault("TESSERA_JAX_CHECK_EMITS", "1")
    if "TESSERA_CACHE_DIR" not in os.environ and os.environ.get("TESSERA_CACHE") != "off":
        _session_dir = tempfile.mkdtemp(prefix="tessera-pytest-")
        os.environ["TESSERA_CACHE_DIR"] = os.path.join(_session_dir, "cache")
        os.environ["TESSERA_CACHE_KEY_FILE"] = os.path.join(_session_dir, "key", "cache.key")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _session_dir:
        shutil.rmtree(_session_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def root() -> pathlib.Path:
    return ROOT


@pytest.fixture(scope="session")
def tessera_cli() -> pathlib.Path:
    """The `tessera` CLI: $TESSERA (as meson's tests give it), else the one
    built beside the library the package opened: in the build tree's tools/,
    or in the same directory (an installed package's tessera/_lib/). Skips
    when there is none."""
    env = os.environ.get("TESSERA")
    candidates = [pathlib.Path(env)] if env else []
    if not env:
        import tessera

        lib_dir = pathlib.Path(tessera._lib.library_path()).resolve().parent
        candidates = [lib_dir / "tools" / "tessera", lib_dir / "tessera"]
    for cli in candidates:
        if cli.is_file():
            return cli
    pytest.skip(f"no tessera CLI at {candidates[0]} (set $TESSERA)")


_CPU_PROBE = """kernel @probe
  grid(2)
  in %x: i32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: i32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %v = load %x[:, :] : i32[8, 128]
  %w = add %v, %v : i32[8, 128]
  store %y[:, :], %w
}
"""

_cpu_reason: str | None = None
_cpu_probed = False


def cpu_backend_reason() -> str | None:
    """None when the cpu backend works here; else why not. Probed by
    compiling and running a small kernel and checking its result."""
    global _cpu_reason, _cpu_probed
    if not _cpu_probed:
        import numpy as np
        import tessera
        _cpu_probed = True
        try:
            exe = tessera.compile(tessera.Module.parse(_CPU_PROBE, "probe.tsr")["probe"], "cpu")
            x = np.arange(16 * 128, dtype=np.int32).reshape(16, 128)
            if not np.array_equal(exe(x), 2 * x):
                _cpu_reason = "the cpu backend computed a wrong result for a probe kernel"
        except tessera.TesseraError as e:
            _cpu_reason = f"no working cpu backend: {e}"
    return _cpu_reason


@pytest.fixture(scope="session")
def cpu_backend() -> str:
    """"cpu", or the test is skipped with the reason the backend cannot
    compile and run a kernel here."""
    reason = cpu_backend_reason()
    if reason:
        pytest.skip(reason)
    return "cpu"


@pytest.fixture(params=["interp", "cpu"])
def backend(request: pytest.FixtureRequest) -> str:
    """Each backend in turn (cpu skipped where it does not work)."""
    if request.param == "cpu":
        return request.getfixturevalue("cpu_backend")
    return "interp"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not installed_package(config):
        return
    skip = pytest.mark.skip(
        reason="--installed-package: this test runs the source tree's package or build/, "
               "not the installed one")
    for item in items:
        if item.get_closest_marker("source_tree"):
            item.add_marker(skip)
