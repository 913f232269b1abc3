"""The TPU proof suite (docs/tpu.md, "Proved with libtpu"): its own pytest
run in scripts/test.sh, after the other suites. It needs libtpu (installed by
scripts/setup.sh from python/requirements-tpu.txt into .venv/libtpu, which
tpu_proof.use_libtpu puts on the path) and runs with JAX_PLATFORMS=cpu:
without libtpu every test fails, saying so (never a skip).
"""

from __future__ import annotations

import os
import sys

import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tpu_proof  # noqa: E402  (puts libtpu on the path: tpu_proof.LIBTPU_DIR)

LIBTPU_VERSION = "0.0.50.1"


def _libtpu_problem() -> str | None:
    try:
        from importlib import metadata
        version = metadata.version("libtpu")
    except Exception:  # noqa: BLE001
        return (f"libtpu is not installed for this Python: not in {tpu_proof.LIBTPU_DIR} "
                "(where scripts/setup.sh installs python/requirements-tpu.txt) nor "
                "importable otherwise")
    if version != LIBTPU_VERSION:
        return f"libtpu {version} is installed; the proof is pinned to {LIBTPU_VERSION}"
    return None


@pytest.fixture(autouse=True)
def _needs_libtpu():
    problem = _libtpu_problem()
    if problem:
        pytest.fail(problem, pytrace=False)
