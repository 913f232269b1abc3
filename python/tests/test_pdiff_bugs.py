"""Differential tests of behaviour on kernels that are wrong on a TPU
(docs/jax.md, "Behaviour on bugs"): out of bounds (index map, pl.ds), a revisited output
block, races (two cores on one output block, a read under an in-flight DMA;
race detection on), a deadlock, an uninitialized read.

Each kernel module's EXPECT says what JAX's TPU interpret mode (jax
0.12.0.1) does and what tessera must do; the tests check both, so a change on
either side shows. Where JAX reports an error, tessera must report an error
of the same kind; where tessera reports more (a deadlock JAX hangs on, an
uninitialized read JAX is silent about, two cores on one block without race
detection), the test asserts tessera's report. Bug detection is the
interpreter's (docs/semantics.md: the cpu backend checks deadlocks only).

A missing tessera.jax fails the tessera tests; with
TESSERA_PDIFF_ALLOW_MISSING_BRIDGE=1 they skip (only while developing)."""

import os
import subprocess
import sys
import time

import pytest

import pallas_kernels as pk
from pallas_kernels import _harness as H
from pallas_kernels import _pdiff as D

CASES = list(pk.BUGS)
JAX_RUNNABLE = [c for c in CASES if pk.attr(c, "EXPECT")["jax"] != "hang"]


@pytest.mark.parametrize("case", JAX_RUNNABLE)
def test_jax_tpu_interpret_behaviour(case):
    outs, outcome = D.oracle(case)
    want = pk.attr(case, "EXPECT")["jax"]
    assert D.outcome_matches(outcome, want), f"{case}: JAX gave {outcome}, recorded {want}"


@pytest.mark.parametrize("case", CASES)
def test_tessera_behaviour(case):
    expect = pk.attr(case, "EXPECT")
    got, outcome, detail = D.tessera_outcome(case, "interp")
    assert D.outcome_matches(outcome, expect["tessera"]), (
        f"{case}: tessera gave {outcome}, want {expect['tessera']}\n{detail}")
    if expect["jax"].startswith("error:"):
        # the same kind as JAX's error (D.SAME_KIND)
        assert D.same_kind_as_jax(outcome, expect["jax"]), outcome
    ref = D.reference_outputs(case)
    if got is not None and ref is not None:
        H.assert_outputs_match(got, ref, pk.attr(case, "TOLERANCE", "exact"),
                               f"{case} (tessera vs numpy)")


def test_tessera_cpu_backend_reports_deadlock():
    _, outcome, detail = D.tessera_outcome("bug_deadlock", "cpu")
    assert D.outcome_matches(outcome, "error:deadlock"), f"{outcome}\n{detail}"


def test_jax_tpu_interpret_hangs_on_deadlock():
    """JAX's TPU interpret mode has no deadlock detection: the kernel prints
    a marker just before its semaphore wait, and the process is still
    running 3 s after the marker (then it is killed)."""
    mod = pk.module("bug_deadlock")
    env = dict(os.environ, PYTHONUNBUFFERED="1", JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pallas_kernels.bug_deadlock"],
        cwd=os.path.dirname(os.path.abspath(__file__)), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = []
        for line in proc.stdout:          # until the marker (or exit)
            lines.append(line)
            if mod.MARKER in line:
                break
        assert any(mod.MARKER in ln for ln in lines), "".join(lines)[-2000:]
        time.sleep(3)
        assert proc.poll() is None, "JAX's TPU interpret mode returned:\n" + \
            "".join(lines)[-2000:]
    finally:
        proc.kill()
        proc.wait()
