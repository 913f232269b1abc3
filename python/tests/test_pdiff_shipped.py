"""The kernels jax ships under jax.experimental.pallas.ops.tpu (jax
0.12.0.1), at small shapes, through JAX's TPU interpret mode and through
tessera (differential tests). survey_shipped.py holds the cases and prints the
table of docs/jax.md ("Shipped kernels"); these tests assert its cells:
JAX's TPU interpret mode runs each kernel on CPU (and agrees with the
reference jax ships where there is one), and tessera translates each and
matches JAX within the case's tolerance.

all_gather needs 4 devices, which must be asked for before jax starts: it
runs in a subprocess (the script itself); tessera runs it on all 4 devices
at once (tessera.jax's rendezvous, docs/jax.md "Several devices").

A missing tessera.jax fails the tessera tests; with
TESSERA_PDIFF_ALLOW_MISSING_BRIDGE=1 they skip (only while developing)."""

import json
import os
import subprocess
import sys

import pytest

import survey_shipped as S
from pallas_kernels import _harness as H

IN_PROCESS = [n for n, s in S.SHIPPED.items() if s.devices == 1]
SUBPROCESS = [n for n, s in S.SHIPPED.items() if s.devices > 1]

#: kernels JAX's TPU interpret mode cannot run on CPU (jax 0.12.0.1), and
#: why; a kernel listed here must fail there, and tessera is compared with
#: the reference jax ships beside it instead.
JAX_CANNOT_RUN: dict[str, str] = {
    "ragged_paged_attention": "AttributeError: 'ReshapeTransform' object has "
                              "no attribute 'indices' (a ref reshape view)",
    "ragged_paged_attention bf16": "AttributeError: 'ReshapeTransform' object has "
                                   "no attribute 'indices' (a ref reshape view)",
}

#: what tessera.jax does not translate in a shipped kernel (a substring of
#: the table's "missing feature: ..." cell; its docs/jax.md lists these):
#: the test asserts that cell, so the day it translates the test says so.
TESSERA_MISSING: dict[str, str] = {}

_ROWS: dict[str, dict] = {}


def _row(name):
    if name not in _ROWS:
        if name in SUBPROCESS:
            proc = subprocess.run(
                [sys.executable, os.path.join(os.path.dirname(
                    os.path.abspath(__file__)), "survey_shipped.py"),
                 "--only", name, "--json"],
                capture_output=True, text=True, timeout=900,
                env=dict(os.environ, JAX_PLATFORMS="cpu"))
            assert proc.returncode == 0, proc.stderr[-3000:]
            _ROWS[name] = json.loads(proc.stdout)[0]
        else:
            _ROWS[name] = S.survey_one(S.SHIPPED[name], ["interp", "cpu"])
    return _ROWS[name]


@pytest.mark.parametrize("name", list(S.SHIPPED))
def test_jax_tpu_interpret_runs_on_cpu(name):
    status = _row(name)["jax"]
    if name in JAX_CANNOT_RUN:
        assert status.startswith("fails"), status
    else:
        assert status.startswith("runs"), status
        assert "differs" not in status, status


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("name", list(S.SHIPPED))
def test_tessera_translates_and_matches(name, backend):
    H.bridge_module()                     # fails (or skips) without it
    status = _row(name)[backend]
    if name in TESSERA_MISSING:
        assert status.startswith("missing feature: ") and \
            TESSERA_MISSING[name] in status, status
        return
    assert status.startswith("translates, matches"), status
