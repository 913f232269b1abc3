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
from typing import Any, Callable, Mapping, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import _jax_internal as ji
from . import _run
from .translate import TranslationError, dtype_name, translate

#: seconds a device's call waits for the others of its invocation before the
#: invocation fails for all of them (TESSERA_JAX_RENDEZVOUS_TIMEOUT overrides)
RENDEZVOUS_TIMEOUT = float(os.environ.get("TESSERA_JAX_RENDEZVOUS_TIMEOUT", "60"))

_BRIDGE_OPTIONS = {"numpy_outputs", "jit_callback"}  # not run options (as in _api)


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
    gets `outputs[i][d]`. A call waits at most `timeout` seconds; then the
    invocation fails for every device, naming the ones that never came.
    Thread-safe."""

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
            if not inv.done:
                inv.inputs[device] = inputs
                inv.arrived += 1
            last = inv.arrived == self.n and not inv.done
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
                if not self._cond.wait_for(lambda: inv.done, self._timeout):
                    missing = [d for d in range(self.n) if inv.inputs[d] is None]
                    inv.error = RendezvousError(
                        f"tessera.jax: {self._what}: call {k + 1} of the kernel: device(s) "
                        f"{', '.join(map(str, missing))} of {self.n} did not call it within "
                        f"{self._timeout:g} s (every device of the mesh must run the "
                        "kernel the same number of times)")
                    inv.done = True
                    inv.inputs = []
                    self._cond.notify_all()
        with self._cond:
            inv.taken += 1
            if inv.taken == self.n:
                self._open.pop(k, None)
        if inv.error is not None:
            raise inv.error
        assert inv.outputs is not None
        return [o[device] for o in inv.outputs]


# ---- Prepared multi-device kernels -------------------------------------------------


def _struct(aval) -> Any:
    """The callback's result type for an output: its shape and dtype, and how
    it varies over the mesh axes when the kernel's out_shape said (shard_map
    with check_vma=True needs it)."""
    mat = getattr(aval, "manual_axis_type", None)
    if mat is not None and not getattr(mat, "empty", True):
        try:
            return jax.ShapeDtypeStruct(aval.shape, aval.dtype, manual_axis_type=mat)
        except TypeError:  # a jax without it
            pass
    return jax.ShapeDtypeStruct(aval.shape, aval.dtype)


class _MultiPrepared:
    """A kernel translated for a mesh and prepared for `devices=N` on
    operands stacked along a leading device dimension."""

    def __init__(self, runner: _run.Runner, n: int, out_avals, text: str):
        self.runner = runner
        self.n = n
        self.out_structs = tuple(_struct(a) for a in out_avals)
        self.text = text

    def run(self, inputs_by_device: list) -> list[np.ndarray]:
        """One run on every device's operands (a list per device)."""
        with _lock:
            _stats["runs"] += 1
        try:
            if self.n == 1:  # tessera's operands have no device dimension on one device
                return [o[None] for o in self.runner(*inputs_by_device[0])]
            nin = len(inputs_by_device[0])
            stacked = [np.stack([np.asarray(inputs_by_device[d][i]) for d in range(self.n)])
                       for i in range(nin)]
            return self.runner(*stacked)
        except _run.KernelError as e:
            # under jax.jit the caller sees XLA's error text only; keep the
            # error with its diagnostics where the FFI path keeps its own
            # (the pytest plugin's "tessera diagnostics" section reads it)
            from . import _ffi
            _ffi._last_error[0] = e
            raise


_lock = threading.RLock()
_prepared: dict[Any, _MultiPrepared] = {}
_stats = {"misses": 0, "hits": 0, "runs": 0}


def cache_info() -> dict:
    with _lock:
        return dict(_stats, entries=len(_prepared))


def _prepare(jax_fn: Callable, args, options: Mapping[str, Any], name: str | None,
             mesh: tuple) -> tuple[_MultiPrepared, Any]:
    n = math.prod(s for _, s in mesh)
    try:
        call = ji.trace_pallas_call(jax_fn, args, str(options.get("chip") or "v5e"),
                                    int(options.get("cores") or 1))
    except TranslationError:
        raise
    except NotImplementedError as e:
        file, line, _ = ji.caller_location()
        raise TranslationError(str(e).removeprefix("tessera.jax: "), "pallas_call",
                               file, line) from None
    params = call.eqn.params
    key = (ji.jaxpr_key_text(call.jaxpr), ji.grid_mapping_key_text(call.grid_mapping),
           repr(call.in_avals), repr(call.out_avals),
           repr(getattr(params.get("compiler_params"), "dimension_semantics", None)),
           repr(params.get("input_output_aliases")),
           tuple(sorted((k, repr(v)) for k, v in options.items())), name, repr(mesh))
    with _lock:
        hit = _prepared.get(key)
        if hit is not None:
            _stats["hits"] += 1
            return hit, call.out_tree
        tk = translate(call, name, mesh)
        try:
            text = tk.module.text()
            lead = (n,) if n > 1 else ()  # the device dimension (none on one device)
            in_specs = [((*lead, *a.shape), a.dtype, dtype_name(a.dtype))
                        for a in call.in_avals]
            for i, td in enumerate(tk.prefetch_dtypes):  # widened prefetch tables
                if td != in_specs[i][2]:
                    in_specs[i] = (in_specs[i][0], np.dtype(np.int32), td)
            out_specs = [((*lead, *a.shape), a.dtype, dtype_name(a.dtype))
                         for a in call.out_avals]
            run_options = {k: v for k, v in options.items() if k not in _BRIDGE_OPTIONS}
            run_options["devices"] = n
            runner = _run.Runner(tk.module.first_kernel(), in_specs, out_specs, tk.aliases,
                                 run_options, tk.operand_locs)
        finally:
            tk.module.close()
        prep = _MultiPrepared(runner, n, call.out_avals, text)
        _prepared[key] = prep
        _stats["misses"] += 1
        return prep, call.out_tree


def _logical_device_id(mesh: tuple) -> Any:
    """This device's logical id (row-major over the mesh axes, as JAX's TPU
    interpret mode numbers devices), as a traced int32."""
    dev = jnp.int32(0)
    stride = 1
    for axis, size in reversed(mesh):
        dev = dev + lax.axis_index(axis).astype(jnp.int32) * jnp.int32(stride)
        stride *= size
    return dev


def _mesh_checked(options: Mapping[str, Any]) -> tuple[tuple, int]:
    """The mesh being traced under and its device count; ValueError when
    there is none or the `devices` option says another count."""
    mesh = mesh_axes()
    n = math.prod(s for _, s in mesh) if mesh else 1
    wanted = options.get("devices")
    if not mesh:
        raise ValueError(
            f"tessera.jax: devices={wanted} needs the kernel to be called inside shard_map "
            "over a mesh of that many devices (a pallas_call sees one device's operands)")
    if wanted is not None and int(wanted) != n:
        raise ValueError(f"tessera.jax: devices={wanted}, but the kernel is called under a "
                         f"mesh of {n} devices ({', '.join(f'{a}={s}' for a, s in mesh)})")
    return mesh, n


def call(jax_fn: Callable, args: Sequence[Any], options: Mapping[str, Any],
         name: str | None) -> Any:
    """Runs a pallas_call (made with interpret=False) on the mesh being traced
    under: each device's operands go, with the device's logical id, to a
    host callback that meets the other devices' at a rendezvous made for this
    call site."""
    mesh, n = _mesh_checked(options)
    flat = jax.tree_util.tree_leaves(list(args))
    prep, out_tree = _prepare(jax_fn, args, options, name, mesh)
    where = ji.caller_location()
    what = f"kernel {name or 'pallas_call'}" + (f" at {where[0]}:{where[1]}" if where[0] else "")
    rendezvous = Rendezvous(n, prep.run, what)

    def host(*arrays):
        *inputs, device = arrays
        return tuple(rendezvous.call(int(np.asarray(device)), inputs))

    outs = jax.pure_callback(host, prep.out_structs, *flat, _logical_device_id(mesh),
                             vmap_method="sequential")
    return jax.tree_util.tree_unflatten(out_tree, list(outs))


def lower_to_tsr(jax_fn: Callable, args: Sequence[Any], options: Mapping[str, Any],
                 name: str | None) -> str:
    """The .tsr text `call` runs (with `tessera run --devices N`)."""
    return _prepare(jax_fn, args, options, name, _mesh_checked(options)[0])[0].text
