"""Kernel errors and warnings through the numpy-level API: KernelError with
Diagnostic records, KernelWarning through `warnings`, strict, races,
deadlocks, bounded and cancelled runs, Ctrl-C."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import warnings

import numpy as np
import pytest

import tessera

OOB = """kernel @oob
  grid(2)
  in %x: f32[8, 128] vmem
  out %y: f32[8, 128] vmem
{
  %i = program_id 0 : i32
  %seven = const 7 : i32
  %j = add %i, %seven : i32
  %v = load %x[ds(%j, 1), :] : f32[1, 128]
  store %y[0:1, :], %v
  %z = const 0.0 : f32[7, 128]
  store %y[1:8, :], %z
}
"""

HALF = """kernel @half
  out %y: f32[16, 128] vmem
{
  %z = const 1.0 : f32[8, 128]
  store %y[0:8, :], %z
}
"""


def test_out_of_bounds_is_a_kernel_error_with_its_line():
    k = tessera.Module.parse(OOB, "oob.tsr")["oob"]
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, np.zeros((8, 128), np.float32))
    e = info.value
    assert e.code == "kernel error"
    oob = [d for d in e.diagnostics if d.kind == "out_of_bounds"]
    assert oob, e.diagnostics
    d = oob[0]
    assert (d.severity, d.file, d.line, d.op, d.buffer, d.kernel) == \
        ("error", "oob.tsr", 9, "load", "x", "oob")
    assert d.grid_point == (1,)
    assert d.index_lo == (8, 0) and d.index_hi == (9, 128)
    assert d.index_range == (slice(8, 9), slice(0, 128))
    assert d.core is None and d.device is None
    assert "oob.tsr:9:" in d.text and d.text in str(e)
    assert e.errors == tuple(x for x in e.diagnostics if x.severity == "error")


def test_diagnostic_is_frozen():
    d = tessera.Diagnostic(kind="other", severity="note", message="m", text="t")
    with pytest.raises(Exception):
        d.kind = "race"  # type: ignore[misc]
    assert str(d) == "t" and d.index_range is None


def test_warning_is_a_kernel_warning():
    k = tessera.Module.parse(HALF, "half.tsr")["half"]
    with pytest.warns(tessera.KernelWarning, match="1024 of 2048 output elements were never "
                                                   "written") as record:
        y = tessera.run(k)
    assert y.shape == (16, 128) and (y[:8] == 1).all()
    w = record[0].message
    assert w.diagnostic.kind == "output_unwritten" and w.diagnostic.severity == "warning"
    assert w.diagnostic.buffer == "y"
    # attributed to this file, not to the package
    assert record[0].filename == __file__


def test_warnings_in_the_result_and_on_warning_callback():
    k = tessera.Module.parse(HALF, "half.tsr")["half"]
    text = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a callback takes the text: nothing is warned
        r = tessera.compile(k, on_warning=text.append).run()
    assert "never written" in "".join(text)
    assert [d.kind for d in r.warnings] == ["output_unwritten"]
    assert r.stats.warnings == 1


def test_strict_makes_warnings_errors():
    k = tessera.Module.parse(HALF, "half.tsr")["half"]
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, strict=True)
    assert [d.kind for d in info.value.errors] == ["output_unwritten"]
    # per run, on an executable made without strict
    exe = tessera.compile(k)
    with pytest.raises(tessera.KernelError):
        exe(strict=True)
    with pytest.warns(tessera.KernelWarning):
        exe()


def test_race_found_with_detect_races(root):
    k = tessera.Module.load(root / "tests" / "diagnostics" / "bugs" /
                            "read_dst_before_wait.tsr")["read_dst_before_wait"]
    x = np.zeros((32, 128), np.float32)
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, x, detect_races=True)
    races = [d for d in info.value.diagnostics if d.kind == "race"]
    assert races, info.value.diagnostics
    d = races[0]
    assert d.buffer == "buf" and d.index_lo == (0, 0) and d.index_hi == (8, 128)
    assert {d.op, d.other_op} == {"dma_start", "load"}
    assert {d.line, d.other_line} == {11, 12}


def test_deadlock_between_cores(root):
    k = tessera.Module.load(root / "tests" / "diagnostics" / "bugs" /
                            "deadlock_never_signalled.tsr")["deadlock_never_signalled"]
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, np.ones((16, 128), np.float32), cores=2)
    d = [d for d in info.value.diagnostics if d.kind == "deadlock"][0]
    assert d.op == "sem_wait" and d.core == 1 and "every core is blocked" in d.message


@pytest.mark.parametrize("dma_mode", ["lazy", "eager"])
def test_dma_mode_changes_what_a_missing_wait_reports(root, dma_mode):
    k = tessera.Module.load(root / "tests" / "diagnostics" / "bugs" /
                            "missing_wait.tsr")["missing_wait"]
    args = [np.zeros(o.shape, o.dtype) for o in k.inputs]
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(k, *args, dma_mode=dma_mode)
    kinds = {d.kind for d in info.value.diagnostics}
    assert ("dma_in_flight" if dma_mode == "lazy" else "semaphore_leftover") in kinds


def test_max_steps_stops_the_run(root, backend):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(spin, backend=backend, max_steps=50, on_print=lambda t: None)
    d = info.value.errors[0]
    assert d.kind == "run_stopped" and "50 steps" in d.message and d.line == 9


def test_timeout_stops_the_run(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    exe = tessera.compile(spin, on_print=lambda t: None)
    with pytest.raises(tessera.KernelError) as info:
        exe(timeout_seconds=0.2)
    d = info.value.errors[0]
    assert d.kind == "run_stopped" and "timeout" in d.message


def test_cancel_token_from_another_thread(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    token = tessera.CancelToken()
    timer = threading.Timer(0.2, token.cancel)
    timer.start()
    try:
        with pytest.raises(tessera.KernelError) as info:
            tessera.run(spin, cancel=token, timeout_seconds=30, on_print=lambda t: None)
    finally:
        timer.cancel()
    assert token.cancelled
    assert "cancelled" in info.value.errors[0].message
    token.reset()
    assert not token.cancelled


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_stops_the_run_with_keyboard_interrupt(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT has a handler of the test runner's")
    exe = tessera.compile(spin, on_print=lambda t: None)
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            # the timeout only bounds a broken cancellation: it would end in
            # a KernelError, not KeyboardInterrupt
            exe(timeout_seconds=20)
    finally:
        timer.cancel()


@pytest.mark.skipif(not hasattr(signal, "pthread_kill"), reason="needs POSIX signals")
def test_ctrl_c_between_runs_does_not_stop_the_next_run(root):
    """A Ctrl-C outside a run (at a prompt, in an except clause) raised its
    KeyboardInterrupt then; the byte it left for the run watcher is not a
    cancel of the next run. That run ends at its step bound instead."""
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT has a handler of the test runner's")
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    exe = tessera.compile(spin, on_print=lambda t: None)
    with pytest.raises(tessera.KernelError):
        exe(max_steps=10)  # a run on the main thread: the watcher is armed since
    # The watcher thread gets the signal's byte only when this thread lets go
    # of the GIL. raise(3) through PyDLL keeps it (signal.raise_signal does
    # not), and a long switch interval keeps it until the next run releases
    # it: the byte is read during that run, not whenever the scheduler
    # switches, as at a prompt that kept the GIL.
    raise_ = getattr(ctypes.PyDLL(None), "raise")
    raise_.argtypes = [ctypes.c_int]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        for _ in range(2):
            with pytest.raises(KeyboardInterrupt):
                raise_(signal.SIGINT)
            with pytest.raises(tessera.KernelError) as info:
                exe(max_steps=20_000_000)
            assert "run stopped after 20000000 steps" in info.value.errors[0].message
    finally:
        sys.setswitchinterval(interval)


@pytest.mark.parametrize("given_to", ["run", "executable"])
def test_callback_exception_leaves_the_cancel_token_alone(root, given_to):
    """A callback's exception stops its run through the package's own flag:
    the user's CancelToken stays unset and later runs with it run."""
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    token = tessera.CancelToken()

    def boom(text):
        raise RuntimeError("callback failed")

    # The step bound only ends a run the exception failed to stop.
    options = {"cancel": token, "on_print": boom, "max_steps": 50_000_000}
    exe = tessera.compile(spin, **(options if given_to == "executable" else {}))
    with pytest.raises(RuntimeError, match="callback failed"):
        exe(**(options if given_to == "run" else {}))
    assert not token.cancelled
    full = tessera.Module.parse(HALF.replace("0:8", "0:16").replace("[8, 128]", "[16, 128]"),
                                "full.tsr")["half"]
    assert (tessera.run(full, cancel=token) == 1).all()
    with pytest.raises(tessera.KernelError) as info:
        exe(max_steps=1000, on_print=lambda t: None, cancel=token)
    assert "1000 steps" in info.value.errors[0].message


def test_cancelled_token_stops_a_run_it_is_given_later(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    token = tessera.CancelToken()
    token.cancel()
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(spin, cancel=token, timeout_seconds=60, on_print=lambda t: None)
    assert "cancelled" in info.value.errors[0].message
    token.reset()
    with pytest.raises(tessera.KernelError) as info:
        tessera.run(spin, cancel=token, max_steps=1000, on_print=lambda t: None)
    assert "1000 steps" in info.value.errors[0].message


def test_another_wakeup_fd_is_left_in_place():
    """An asyncio loop's wakeup fd is not replaced by a run's Ctrl-C arming."""
    k = tessera.Module.parse(HALF.replace("0:8", "0:16").replace("[8, 128]", "[16, 128]"),
                             "full.tsr")["half"]
    r, w = os.pipe()
    os.set_blocking(w, False)
    old = signal.set_wakeup_fd(w)
    try:
        assert (tessera.run(k) == 1).all()
        assert signal.set_wakeup_fd(old) == w
    finally:
        os.close(r)
        os.close(w)


def test_vmem_over_budget_at_compile(root):
    k = tessera.Module.load(root / "tests" / "diagnostics" / "bugs" /
                            "vmem_over_budget.tsr").kernels[0]
    with pytest.raises(tessera.CompileError) as info:
        tessera.compile(k, chip="v4")
    assert info.value.diagnostics[0].kind == "vmem_budget"
    tessera.compile(k, chip="v5e")  # 128 MiB: fits
