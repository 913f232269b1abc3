"""pytest plugin for scripts/jax-conformance.sh: what JAX's Pallas test files
need to run on a CPU-only host from a checkout of jax-ml/jax (loaded with
`-p tessera_conformance`; it changes no test).

* JAX_PLATFORMS=cpu (set by the script) keeps libtpu from claiming a device.
* A checkout may import test helpers that the installed jax does not ship
  (`jax._src.pallas.pallas_test_util`, `jax._src.hypothesis_test_util` live in
  the source tree only). A module of the `jax` package that the installed jax
  lacks is loaded from the checkout named by TESSERA_JAX_SOURCE_DIR, so the
  tests run as their authors wrote them; the installed jax itself is used for
  everything it has.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys


class _CheckoutHelpers(importlib.abc.MetaPathFinder):
    """Last on sys.meta_path: consulted only when the installed jax has no
    such module."""

    def __init__(self, source_dir: str):
        self.source_dir = source_dir

    def find_spec(self, name, path=None, target=None):
        if not name.startswith("jax."):
            return None
        file = os.path.join(self.source_dir, *name.split(".")) + ".py"
        if not os.path.exists(file):
            return None
        return importlib.util.spec_from_file_location(name, file)


def pytest_configure(config) -> None:
    # JAX's files run with filterwarnings = error. A checkout older than the
    # installed jax calls APIs the installed jax has since deprecated
    # (pl.core_map for pl.kernel, pltpu.DeviceIdType and the device_id_type=
    # argument of semaphore and DMA operations): those warnings are about the
    # pairing of versions, not the kernels, and would fail tests in every
    # mode alike.
    for message in (r"jax\.[\w.]+ is deprecated", r"device_id_type is deprecated"):
        config.addinivalue_line("filterwarnings", f"ignore:{message}:DeprecationWarning")
    source_dir = os.environ.get("TESSERA_JAX_SOURCE_DIR")
    if source_dir and not any(isinstance(f, _CheckoutHelpers) for f in sys.meta_path):
        sys.meta_path.append(_CheckoutHelpers(source_dir))


# ---- outcomes, one line per test, for the script's table ----------------------

_outcomes: dict[str, str] = {}


def pytest_runtest_logreport(report) -> None:
    # A test's outcome is its call phase's, unless set-up or tear-down failed
    # or set-up skipped it.
    if report.when == "call" or report.outcome != "passed":
        if _outcomes.get(report.nodeid) in ("failed",):
            return
        if report.outcome == "skipped" and report.when == "call" and hasattr(report, "wasxfail"):
            _outcomes[report.nodeid] = "failed"  # an expected failure did not pass
        else:
            _outcomes[report.nodeid] = report.outcome


def pytest_sessionfinish(session) -> None:
    out = os.environ.get("TESSERA_CONFORMANCE_OUT")
    if not out:
        return
    with open(out, "w") as f:
        for nodeid, outcome in sorted(_outcomes.items()):
            f.write(f"{outcome}\t{nodeid}\n")


# ---- configuration flags the checkout's tests set and the installed jax lacks --


def _add_missing_flags() -> None:
    """A checkout of another date may enter a config flag the installed jax
    has removed or not yet added (pallas_test.py enters
    `config.jax_pallas_use_mosaic_gpu(False)` in every setUp). Such a flag
    selects a GPU path and means nothing on a CPU: it is defined as an
    inert boolean so those tests run instead of failing in setUp."""
    from jax._src import config
    for name in ("jax_pallas_use_mosaic_gpu",):
        if not hasattr(config, name):
            setattr(config, name, config.bool_state(name, False, help="(inert here)"))


def pytest_sessionstart(session) -> None:
    _add_missing_flags()
