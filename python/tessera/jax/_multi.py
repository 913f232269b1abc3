"""Multi-device kernels through the bridge: a pallas_call made inside
`shard_map` (or any trace with named mesh axes) runs as ONE tessera run with
`devices=N` over the whole mesh, so remote DMAs, remote signals and barrier
semaphores reach the other devices (docs/jax.md, "Several devices").

Under shard_map XLA runs the kernel's host callback once per device, each on
its own thread. The N calls of one invocation meet here (a rendezvous), their
operands are stacked into tessera's leading device dimension, the last to
arrive runs the kernel, and each call returns its own device's slice; an error
(or a device that never arrives) is raised in every call.
"""

from __future__ import annotations

import math
import os
import threading
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _jax_internal as ji
from . import _run

#: seconds a device's call waits for the others of its invocation before the
#: invocation fails for all of them (TESSERA_JAX_RENDEZVOUS_TIMEOUT overrides)
RENDEZVOUS_TIMEOUT = float(os.environ.get("TESSERA_JAX_RENDEZVOUS_TIMEOUT", "60"))


class RendezvousError(RuntimeError):
    """The devices of one multi-device kernel invocation did not all call it."""


def mesh_axes() -> tuple[tuple[Any, int], ...]:
    """((axis name, size), ...) of the named axes being traced under: the
    mesh the kernel runs on. () outside shard_map."""
    return ji.axis_env_sizes()


# ---- The rendezvous ---------------------------------------------------------------


class _Invocation:
    """One kernel invocation: what each device brought, and the result."""

    __slots__ = ("inputs", "arrived", "taken", "done", "outputs", "error")

    def __init__(self, n: int):
        self.inputs: list = [None] * n
        self.arrived = 0
        self.taken = 0
        self.done = False
        self.outputs: list | None = None
        self.error: BaseException | None = None


class Rendezvous:
    """Where the N per-device calls of one kernel call site meet.

    Device d's k-th call belongs to invocation k (a device runs its calls of
    one call site in order, and every device of an SPMD program makes the
    same calls), so invocations need no id from XLA. The last device to
    arrive runs `run(inputs_by_device)` in its own thread and every call
    gets `outputs[i][d]`. A call waits at most `timeout` seconds for the
    others to arrive (the run itself is bounded by its own options); then
    the invocation fails for every device that came, naming the ones that
    did not, and the count of each device that did not is moved past it, so
    that its next call belongs to the next invocation: a device that skipped
    the kernel (a `lax.cond` on `axis_index`) fails that one invocation, not
    every later one. Thread-safe."""

    def __init__(self, n: int, run: Callable[[list], Sequence[np.ndarray]],
                 what: str, timeout: float | None = None):
        self.n = n
        self._run = run
        self._what = what
        self._timeout = RENDEZVOUS_TIMEOUT if timeout is None else float(timeout)
        self._cond = threading.Condition()
        self._calls = [0] * n                       # calls seen per device
        self._open: dict[int, _Invocation] = {}     # invocation number -> state

    def call(self, device: int, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
        if not 0 <= device < self.n:
            raise RendezvousError(f"tessera.jax: {self._what}: device index {device} is not "
                                  f"in 0..{self.n - 1}")
        with self._cond:
            k = self._calls[device]
            self._calls[device] += 1
            inv = self._open.get(k)
            if inv is None:
                inv = self._open[k] = _Invocation(self.n)
            inv.inputs[device] = inputs
            inv.arrived += 1
            last = inv.arrived == self.n
        if last:
            try:
                inv.outputs = list(self._run(inv.inputs))
            except BaseException as e:  # noqa: BLE001 - given to every device
                inv.error = e
            with self._cond:
                inv.done = True
                inv.inputs = []
                self._cond.notify_all()
        else:
            with self._cond:
                complete = lambda: inv.done or inv.arrived == self.n  # noqa: E731
                if self._cond.wait_for(complete, self._timeout):
                    # every device came: the last one is running the kernel
                    self._cond.wait_for(lambda: inv.done)
                else:
                    self._fail(k, inv)
        with self._cond:
            inv.taken += 1
            if inv.taken == inv.arrived:
                self._open.pop(k, None)
        if inv.error is not None:
            raise inv.error
        assert inv.outputs is not None
        return [o[device] for o in inv.outputs]

    def _fail(self, k: int, inv: _Invocation) -> None:
        """Invocation k timed out with devices missing: it fails for the ones
        that came, and no device joins it any more (called with the lock
        held). Each missing device's next call is counted in invocation k + 1:
        XLA gives no invocation id to tell a device that skipped the kernel
        from one later than the timeout, and a skipped call (a cond on
        axis_index) is the case that must not fail every later invocation."""
        missing = [d for d in range(self.n) if inv.inputs[d] is None]
        inv.error = RendezvousError(
            f"tessera.jax: {self._what}: call {k + 1} of the kernel: device(s) "
            f"{', '.join(map(str, missing))} of {self.n} did not call it within "
            f"{self._timeout:g} s (every device of the mesh must run the "
            "kernel the same number of times)")
        for d in missing:
            self._calls[d] = max(self._calls[d], k + 1)
        inv.done = True
        inv.inputs = []
        self._cond.notify_all()


# ---- Prepared multi-device kernels -------------------------------------------------


def _struct(aval) -> Any:
    """The callback's result type for an output: its shape and dtype, and how
    it varies over the mesh axes when the kernel's out_shape said (shard_map
    with check_vma=True needs it)."""
    mat = getattr(aval, "manual_axis_type", None)
    dtype = ji.physical_dtype(aval.dtype)  # a semaphore: its counts
    if mat is not None and not getattr(mat, "empty", True):
        try:
            return jax.ShapeDtypeStruct(aval.shape, dtype, manual_axis_type=mat)
        except TypeError:  # a jax without it
            pass
    return jax.ShapeDtypeStruct(aval.shape, dtype)


def run_on_devices(runner: _run.Runner, n: int, inputs_by_device: list) -> list[np.ndarray]:
    """One run of a kernel prepared for `devices=n` on every device's
    operands (a list per device), stacked along tessera's leading device
    dimension (none on one device)."""
    try:
        if n == 1:
            return [o[None] for o in runner(*inputs_by_device[0])]
        stacked = [np.stack([np.asarray(by_device[i]) for by_device in inputs_by_device])
                   for i in range(len(inputs_by_device[0]))]
        return list(runner(*stacked))
    except _run.KernelError as e:
        # Under jax.jit the caller sees XLA's error text only; keep the error
        # with its diagnostics where the FFI path keeps its own (the pytest
        # plugin's "tessera diagnostics" section reads it).
        from . import _ffi
        _ffi._last_error[0] = e
        raise


def devices_of(mesh: tuple, wanted: Any) -> int:
    """The number of devices of `mesh`, checked against the `devices`
    option."""
    if not mesh:
        raise ValueError(
            f"tessera.jax: devices={wanted} needs the kernel to be called inside shard_map "
            "over a mesh of that many devices (a pallas_call sees one device's operands)")
    n = math.prod(s for _, s in mesh)
    if wanted is not None and int(wanted) != n:
        raise ValueError(f"tessera.jax: devices={wanted}, but the kernel is called under a "
                         f"mesh of {n} devices ({', '.join(f'{a}={s}' for a, s in mesh)})")
    return n


def _logical_device_id(mesh: tuple) -> Any:
    """This device's logical id (row-major over the mesh axes, as JAX's TPU
    interpret mode numbers devices), as a traced int32."""
    dev = jnp.int32(0)
    stride = 1
    for axis, size in reversed(mesh):
        dev = dev + lax.axis_index(axis).astype(jnp.int32) * jnp.int32(stride)
        stride *= size
    return dev


def call(runner: _run.Runner, out_avals: Sequence[Any], out_tree: Any, flat: Sequence[Any],
         mesh: tuple, name: str | None, on_run: Callable[[], None]) -> Any:
    """Runs a kernel prepared for the mesh being traced under: each device's
    operands go, with the device's logical id, to a host callback that meets
    the other devices' at a rendezvous made for this call site."""
    n = math.prod(s for _, s in mesh)
    where = ji.caller_location()
    what = f"kernel {name or 'pallas_call'}" + (f" at {where[0]}:{where[1]}" if where[0] else "")

    def run(inputs_by_device: list) -> list[np.ndarray]:
        on_run()
        return run_on_devices(runner, n, inputs_by_device)
    rendezvous = Rendezvous(n, run, what)

    def host(*arrays):
        *inputs, device = arrays
        try:
            return tuple(rendezvous.call(int(np.asarray(device)), inputs))
        except KeyboardInterrupt:  # every device gets the run's error
            raise RuntimeError(_run.INTERRUPTED) from None

    outs = jax.pure_callback(host, tuple(_struct(a) for a in out_avals),
                             *[ji.to_physical(x) for x in flat],
                             _logical_device_id(mesh), vmap_method="sequential")
    outs = [ji.from_physical(o, a.dtype) for o, a in zip(outs, out_avals)]
    return jax.tree_util.tree_unflatten(out_tree, outs)
