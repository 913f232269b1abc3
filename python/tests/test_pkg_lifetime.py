"""Lifetimes of contexts and executables against a hostile caller: closed
while a run is in progress (from another thread or from the run's own
callback), collected together in a reference cycle in any order, and
callbacks that run kernels themselves."""

from __future__ import annotations

import ctypes
import gc
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import tessera

PRINTING_DOUBLE = """kernel @double
  grid(2)
  in %x: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: f32[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{
  %i = program_id 0 : i32
  print "step {}", %i
  %v = load %x[:, :] : f32[8, 128]
  %w = add %v, %v : f32[8, 128]
  store %y[:, :], %w
}
"""

# How long a test waits for what must happen at once: a guard against a
# hang, never a measure.
PATIENCE = 120


def printing_double() -> tessera.Kernel:
    return tessera.Module.parse(PRINTING_DOUBLE, "d.tsr")["double"]


class QuarantineAllocator:
    """Memory from libc, counted; released blocks are kept (not freed) until
    free_all(), so that a test that fails by freeing under a run reports an
    assertion instead of crashing the process."""

    def __init__(self) -> None:
        self.libc = ctypes.CDLL(None)
        self.libc.aligned_alloc.restype = ctypes.c_void_p
        self.libc.aligned_alloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
        self.libc.free.argtypes = [ctypes.c_void_p]
        self.lock = threading.Lock()
        self.live: dict[int, int] = {}
        self.order: list[int] = []     # every block, in the order allocated
        self.released: list[int] = []  # in the order released

    def allocate(self, size: int, alignment: int) -> int:
        rounded = (size + alignment - 1) // alignment * alignment
        p = self.libc.aligned_alloc(alignment, rounded or alignment)
        with self.lock:
            self.live[p] = size
            self.order.append(p)
        return p

    def release(self, block: int, size: int) -> None:
        with self.lock:
            self.live.pop(block, None)
            self.released.append(block)

    def free_all(self) -> None:
        with self.lock:
            for p in self.released:
                self.libc.free(p)
            self.released = []


@pytest.mark.parametrize("closed", ["executable", "context"])
@pytest.mark.parametrize("from_where", ["another thread", "the run's callback"])
def test_close_during_a_run_frees_nothing_under_it(backend, closed, from_where):
    alloc = QuarantineAllocator()
    ctx = tessera.Context(allocator=alloc)
    exe = tessera.compile(printing_double(), backend, context=ctx)
    x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    target = exe if closed == "executable" else ctx
    inside, go = threading.Event(), threading.Event()
    under_the_run: list[int] = []

    def on_print(text: str) -> None:
        if inside.is_set():
            return
        inside.set()
        if from_where == "the run's callback":
            before = len(alloc.released)
            target.close()
            under_the_run.append(len(alloc.released) - before)
        else:
            go.wait(PATIENCE)

    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["y"] = exe(x, on_print=on_print)
        except BaseException as e:  # noqa: BLE001 - looked at below
            outcome["error"] = e

    runner = threading.Thread(target=run)
    runner.start()
    try:
        assert inside.wait(PATIENCE)
        if from_where == "another thread":
            before = len(alloc.released)
            target.close()
            under_the_run.append(len(alloc.released) - before)
    finally:
        go.set()
        runner.join()
    try:
        assert under_the_run == [0]  # nothing of the context or executable freed
        assert "error" not in outcome, outcome.get("error")
        np.testing.assert_array_equal(outcome["y"], 2 * x)
        with pytest.raises(ValueError, match="closed"):
            exe(x)
        ctx.close()  # the context's caches kept the program
        assert alloc.live == {}
    finally:
        alloc.free_all()


def test_context_and_executable_in_a_cycle_free_the_context_last():
    """Finalized together (a reference cycle here, or the interpreter's exit),
    the Context's __del__ may run before its Executable's: the context's C
    object must outlive the executable's, whose destroy reads it."""
    alloc = QuarantineAllocator()
    ctx = tessera.Context(allocator=alloc)
    context_block = alloc.order[0]  # tsr_context_create allocates the context first
    exe = tessera.compile(printing_double(), context=ctx, on_print=lambda t: None)
    x = np.ones((16, 128), np.float32)
    np.testing.assert_array_equal(exe(x), 2 * x)
    ctx.cycle = exe  # exe.context is ctx: a cycle only the collector frees
    del ctx, exe
    try:
        gc.collect()
        assert alloc.live == {}
        assert alloc.released[-1] == context_block
    finally:
        alloc.free_all()


def test_a_run_inside_on_print_does_not_block_printing_runs():
    """A callback that runs a printing kernel itself, on its thread and on
    another, and printing runs after it: all finish (in a child process, so
    that a deadlock fails this test instead of hanging the session)."""
    script = textwrap.dedent(f"""
        import threading
        import numpy as np
        import tessera

        k = tessera.Module.parse({PRINTING_DOUBLE!r}, "d.tsr")["double"]
        x = np.ones((16, 128), np.float32)
        inner_text = []
        inner = tessera.compile(k, on_print=inner_text.append)
        outer_text = []

        def outer_print(text):
            inner(x)
            t = threading.Thread(target=inner, args=(x,))
            t.start()
            t.join()
            outer_text.append(text)

        y = tessera.compile(k)(x, on_print=outer_print)
        assert (y == 2).all()
        inner(x)
        t = threading.Thread(target=inner, args=(x,))
        t.start()
        t.join()
        print("outer", "".join(outer_text).count("step"), "inner",
              "".join(inner_text).count("step"))
        """)
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=PATIENCE)
    except subprocess.TimeoutExpired:
        pytest.fail("a run inside on_print deadlocked")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["outer", "2", "inner", "12"]
