"""The implementation of tessera.jax (imported on first use: see __init__.py)."""

from __future__ import annotations

import contextlib
import contextvars
import math
import sys
import threading
from typing import Any, Callable, Mapping

import jax
import numpy as np
from jax.experimental import pallas as pl

from .. import _capi
from . import _jax_internal as ji
from . import _multi
from . import _params
from . import _run
from . import _tpu_target
from .translate import TranslationError, dtype_name, supported_primitives, translate

__all__ = ["pallas_call", "interpret", "TesseraPallasCall", "TranslationError",
           "KernelError", "lower_to_tsr", "cache_info", "cache_clear", "supported_primitives",
           "option_names", "enable_globally", "InterpretParams", "collected_warnings",
           "clear_collected_warnings"]

KernelError = _run.KernelError
option_names = _run.option_names

# ---- The cache of translated and prepared kernels ------------------------------


class _Prepared:
    """A translated kernel made ready to run: the runner and what a call needs."""

    def __init__(self, runner: _run.Runner, out_avals, text: str, ffi_able: bool):
        self.runner = runner
        self.out_avals = out_avals
        # a semaphore output crosses the call as its counts (int32)
        self.out_structs = tuple(jax.ShapeDtypeStruct(a.shape, ji.physical_dtype(a.dtype))
                                 for a in out_avals)
        self.text = text
        self._ffi: Callable | None = None
        self._ffi_error: BaseException | None = None if ffi_able else ValueError(
            "operands tessera stores in another dtype (a widened prefetch table)")

    def ffi(self) -> Callable | None:
        """The kernel as an XLA FFI custom call (made on first use), or None
        when it cannot be one (then jax.pure_callback is used)."""
        if self._ffi is None and self._ffi_error is None:
            with _cache_lock:
                if self._ffi is None and self._ffi_error is None:
                    try:
                        from . import _ffi
                        on_run = _count_run
                        if self.runner.jax_state:
                            before = self.runner.before_run

                            def on_run() -> None:
                                _count_run()
                                before()
                        # A run that needs Python before it (JAX's state) or
                        # during it (a print's text, as it comes) goes
                        # through Python; the others may run in C alone.
                        direct = not self.runner.jax_state and not _ffi.PRINT_OP.search(self.text)
                        self._ffi = _ffi.ffi_callable(self.runner.executable, self.out_structs,
                                                      on_run, direct)
                    except Exception as e:  # an XLA without this FFI: pure_callback
                        self._ffi_error = e
        return self._ffi

    def host(self, *arrays):
        """Runs on numpy arrays (the pure_callback's host function)."""
        _stats["runs"] += 1
        try:
            return tuple(self.runner(*[np.asarray(a) for a in arrays]))
        except KeyboardInterrupt:  # JAX would show it as an empty traceback line
            raise RuntimeError(_run.INTERRUPTED) from None


_cache_lock = threading.RLock()
_prepared: dict[Any, _Prepared] = {}
_stats = {"hits": 0, "misses": 0, "traces": 0, "runs": 0}
# The library's count of the FFI runs it made without Python, when `runs`
# was last cleared.
_direct_runs_base = [0]


def _direct_runs() -> int:
    h = _capi.lib()
    return h.tsr_xla_direct_runs() if hasattr(h, "tsr_xla_direct_runs") else 0


def _count_run() -> None:
    _stats["runs"] += 1


# ---- Warnings JAX's interpret mode would not give ---------------------------------
#
# Under interpret() and `pytest --tessera` (option warnings="collect", their
# default) a run's warnings are kept here instead of going through Python's
# `warnings`: JAX's suites run with warnings as errors, and a warning JAX's own
# interpret mode does not give would fail a test that passes under JAX. The
# pytest plugin shows them in its terminal summary. warnings="python" (and
# strict=True, which makes them errors) restores the usual behaviour.

_collected: dict[str, int] = {}
_collected_lock = threading.Lock()


def _collect_warning(text: str) -> None:
    for line in text.splitlines():
        if line.strip():
            with _collected_lock:
                _collected[line] = _collected.get(line, 0) + 1


def collected_warnings() -> dict[str, int]:
    """The warnings collected under warnings="collect" (each line of text
    with how many times it was given), oldest first."""
    with _collected_lock:
        return dict(_collected)


def clear_collected_warnings() -> None:
    with _collected_lock:
        _collected.clear()


def _report_notes(notes: list[str], options: Mapping[str, Any]) -> None:
    """The bridge's own warnings (JAX InterpretParams fields not honoured):
    collected or warned as the run's warnings would be."""
    for n in _params.unreported(notes):
        text = f"tessera.jax: InterpretParams.{n}"
        if options.get("warnings", "python") == "collect":
            _collect_warning(text)
        else:
            import warnings
            warnings.warn(text, T_KernelWarning, stacklevel=4)


T_KernelWarning = _run.KernelWarning


def cache_info() -> dict:
    """Counters of the bridge's cache: `misses` (kernels translated and
    prepared), `hits` (a traced kernel found prepared), `traces` (calls that
    had to trace the kernel), `runs` (kernel runs, approximate under
    threads), `entries`."""
    with _cache_lock:
        return dict(_stats, runs=_stats["runs"] + _direct_runs() - _direct_runs_base[0],
                    entries=len(_prepared))


def cache_clear() -> None:
    """Forgets every prepared kernel (and the per-callable caches' entries
    see a new generation)."""
    global _generation
    with _cache_lock:
        # Runners are not closed here: a jitted function may still hold one
        # (through its FFI handler or callback); they go with their last user.
        _prepared.clear()
        _generation += 1
        for k in _stats:
            _stats[k] = 0
        _direct_runs_base[0] = _direct_runs()


_generation = 0


def _options_key(options: Mapping[str, Any]) -> tuple:
    return tuple(sorted((k, repr(v)) for k, v in options.items()))


def _prepare(jax_fn: Callable, args, options: Mapping[str, Any],
             name: str | None, mesh: tuple | None = None) -> tuple[_Prepared, Any]:
    """Traces `jax_fn` (a pallas_call made with interpret=False) on the shapes
    of `args`, and translates + prepares its kernel unless an identical one
    (same kernel jaxpr and source lines, grid mapping, shapes, dtypes,
    options) is already prepared. Returns it with this call's output tree
    (two calls of one kernel may structure their outputs differently)."""
    __tracebackhide__ = True  # pytest: the report starts at the user's call
    try:
        call = ji.trace_pallas_call(jax_fn, args, str(options.get("chip") or "v5e"),
                                    int(options.get("cores") or 1))
    except TranslationError:
        raise
    except NotImplementedError as e:  # a pallas_call form tessera cannot take
        file, line, _ = ji.caller_location()
        message = str(e).removeprefix("tessera.jax: ")
        raise TranslationError(message, "pallas_call", file, line) from None
    params = call.eqn.params
    key = (ji.jaxpr_key_text(call.jaxpr), ji.grid_mapping_key_text(call.grid_mapping),
           repr(call.in_avals), repr(call.out_avals),
           repr(getattr(params.get("compiler_params"), "dimension_semantics", None)),
           # the scoped VMEM limit the TPU checks apply (_tpu_target.py)
           _tpu_target.vmem_limit_bytes(params.get("compiler_params")),
           repr(params.get("input_output_aliases")), _options_key(options), name, mesh)
    with _cache_lock:
        _stats["traces"] += 1
        hit = _prepared.get(key)
        if hit is not None:
            _stats["hits"] += 1
            return hit, call.out_tree
        # Both backends check every access when it runs: a static index
        # outside its ref is reported there, in program order, as JAX does.
        try:
            tk = translate(call, name, mesh, numerics=str(options.get("numerics") or "cpu"),
                           bounds_at_run=True,
                           refuse_scoped_hbm=bool(options.get("jax_refuse_scoped_hbm")),
                           skip_float_ops=bool(options.get("jax_skip_float_ops")))
        except TranslationError as e:
            # It names the user's line; the translator's frames say nothing
            # more (but do for a translator's own bug: "internal: ...").
            if "tessera.jax: internal:" in str(e):
                raise
            raise e.with_traceback(None) from None
        run_options = {k: v for k, v in options.items() if k not in _run.BRIDGE_OPTIONS}
        # JAX's InterpretParams: its order of the parallel steps, unless
        # tessera's own shuffle_parallel was asked for; its recorder.
        seed = options.get("jax_random_seed")
        if seed is not None and "shuffle_parallel" not in options:
            order = _params.jax_parallel_order(
                tuple(None if ji.is_dynamic_grid_dim(g) else int(g)
                      for g in call.grid_mapping.grid),
                _semantics(params, len(call.grid_mapping.grid)), seed)
            if order:
                run_options["parallel_order"] = order
        if options.get("jax_grid_recorder") is not None:
            run_options["on_grid_step"] = _params.recorder_hook(options["jax_grid_recorder"])
        if options.get("jax_state"):
            run_options["jax_state"] = True  # taken by the Runner
        if options.get("warnings") == "collect" and run_options.get("on_warning") is None:
            run_options["on_warning"] = _collect_warning
        if mesh is not None:  # one run on every device of the mesh
            run_options["devices"] = math.prod(size for _, size in mesh)
        try:
            text = tk.module.text()
            in_dtypes = [ji.physical_dtype(a.dtype) for a in call.in_avals]
            runner = _run.Runner(tk.module, in_dtypes, run_options, tk.operand_locs,
                                 ji.call_location(call), tk.prims_at,
                                 _tpu_target.checker(call, options, tk.operand_locs,
                                                     _collect_warning))
        finally:
            tk.module.close()  # a no-op once the runner took it
        runner.executable._warnings_hook = _tpu_target.promote_run_diagnostics(options)
        ffi_able = not runner._convert
        prep = _Prepared(runner, call.out_avals, text, ffi_able)
        _prepared[key] = prep
        _stats["misses"] += 1
        return prep, call.out_tree


# ---- The callable ----------------------------------------------------------------


def _canonical(args: tuple, flat: list) -> tuple[tuple, list]:
    """args (and their leaves, flat) with each 64-bit numpy array or Python
    scalar in the dtype JAX takes it as: with jax_enable_x64 off, JAX
    canonicalizes an operand's int64 to int32, uint64 to uint32, float64 to
    float32 and complex128 to complex64 (wrapping and rounding as numpy's
    conversion does), and so a Pallas kernel called with them sees the
    narrow dtype. Unchanged (the same objects) when no leaf is converted."""
    changed = False
    for i, x in enumerate(flat):
        dt = getattr(x, "dtype", None)
        if dt is None:  # a Python scalar (int -> int64, float -> float64 in numpy)
            dt = np.asarray(x).dtype
        elif not isinstance(dt, np.dtype) or dt.itemsize != 8:
            continue
        want = jax.dtypes.canonicalize_dtype(dt)
        if want != dt:
            if not changed:
                flat, changed = list(flat), True
            flat[i] = np.asarray(x, dtype=want)
    if changed:
        args = tuple(jax.tree_util.tree_unflatten(
            jax.tree_util.tree_structure(list(args)), flat))
    return args, flat


class TesseraPallasCall:
    """What `tessera.jax.pallas_call` returns: call it like the function
    `pl.pallas_call` returns. Keeps its prepared kernels by argument shapes
    and dtypes, so a warm call neither traces nor translates."""

    def __init__(self, jax_fn: Callable, options: Mapping[str, Any], name: str | None = None):
        self._jax_fn = jax_fn
        self._options = dict(options)
        self._name = name
        self._by_shape: dict[Any, tuple[int, _Prepared, Any]] = {}
        self._numpy_outputs = bool(self._options.get("numpy_outputs", False))
        self._jit_callback = self._options.get("jit_callback", "ffi")
        self._jvps: dict[Any, TesseraPallasCall] = {}
        # set for what JAX does not differentiate although tessera runs it
        # as a pallas_call (a kernel over a mesh): the JVP raises it
        self.jvp_error: Callable[[], BaseException] | None = None

    def _get(self, args, flat) -> tuple[_Prepared, Any]:
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        if len(flat) == len(args):  # flat positional arrays: the common case
            key = tuple((x.shape, x.dtype) if hasattr(x, "dtype") else
                        (np.shape(x), ji._dtype_of(x)) for x in flat)
        else:
            key = (tuple((np.shape(x), ji._dtype_of(x)) for x in flat),
                   jax.tree_util.tree_structure(list(args)))
        hit = self._by_shape.get(key)
        if hit is not None and hit[0] == _generation:
            return hit[1], hit[2]
        prep, out_tree = _prepare(self._jax_fn, args, self._options, self._name)
        self._by_shape[key] = (_generation, prep, out_tree)
        return prep, out_tree

    def _mesh(self) -> tuple | None:
        """The mesh the kernel runs on when several devices run it (inside
        shard_map, or with the devices option), else None."""
        mesh = _multi.mesh_axes()
        wanted = self._options.get("devices")
        if mesh or (wanted or 1) != 1:
            _multi.devices_of(mesh, wanted)
            return mesh
        return None

    def __call__(self, *args):
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        args, flat = _canonical(args, jax.tree_util.tree_leaves(list(args)))
        if any(ji.is_tracer(x) for x in flat) and not any(
                jax.dtypes.issubdtype(getattr(x, "dtype", None), jax.dtypes.extended)
                for x in flat):  # semaphores and keys have no tangent type
            return self._differentiable(args, flat)
        try:
            return self._call(args, flat)
        except (_run.KernelError, _run.CompileError) as e:
            # The kernel's fault, at the user's call: the bridge's frames in
            # between say nothing about it (a short traceback, as pytest
            # shows it with __tracebackhide__).
            raise e.with_traceback(None)  # noqa: B904 - the same exception

    # ---- Differentiation ----
    #
    # A pallas_call run here is a host run (eager), an XLA custom call or a
    # callback (traced): none has a JVP rule. JAX differentiates a pallas_call
    # by its primitive's JVP rule, which builds another pallas_call (the
    # kernel's JVP); so under a transformation the call is a jax.custom_jvp
    # whose JVP traces that rule and runs the pallas_call it makes here too,
    # with every check (itself a custom_jvp: higher orders follow). Eager
    # calls skip the wrapper: nothing differentiates them.

    def _differentiable(self, args, flat):
        treedef = jax.tree_util.tree_structure(list(args))

        def primal(*leaves):
            __tracebackhide__ = True  # pytest: the report starts at the user's call
            return self._call(tuple(jax.tree_util.tree_unflatten(treedef, list(leaves))),
                              list(leaves))

        def jvp(primals, tangents):
            if self.jvp_error is not None:
                raise self.jvp_error()
            nonzero = tuple(not _is_zero_tangent(t) for t in tangents)
            call = self._jvp_call(treedef, nonzero)
            try:
                outs, out_tangents = call(*primals,
                                          *[t for t, nz in zip(tangents, nonzero) if nz])
            except ji.JaxRuleError as e:  # what Pallas refuses: JAX's own error
                raise e.error from None
            # an integer output's tangent is float0, as JAX types it
            out_tangents = jax.tree_util.tree_map(_tangent_of, outs, out_tangents)
            return outs, out_tangents

        f = jax.custom_jvp(primal)
        f.defjvp(jvp, symbolic_zeros=True)
        return f(*flat)

    def _jvp_call(self, treedef, nonzero: tuple[bool, ...]) -> "TesseraPallasCall":
        """The call of the kernel's JVP (the pallas_call JAX's rule makes) for
        operands in `treedef` with these nonzero tangents: it takes the flat
        operands then the nonzero tangents and returns (outputs, tangents)."""
        key = (treedef, nonzero)
        hit = self._jvps.get(key)
        if hit is not None:
            return hit
        jax_fn, n = self._jax_fn, len(nonzero)
        chip = str(self._options.get("chip") or "v5e")
        cores = int(self._options.get("cores") or 1)

        def flat_fn(*leaves):
            return jax_fn(*jax.tree_util.tree_unflatten(treedef, list(leaves)))

        def jvp_fn(*operands):
            rest = iter(operands[n:])
            return ji.pallas_call_jvp(flat_fn, operands[:n],
                                      [next(rest) if nz else None for nz in nonzero],
                                      chip, cores)

        hit = self._jvps[key] = TesseraPallasCall(jvp_fn, self._options, self._name)
        return hit

    def _call(self, args, flat):
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        mesh = self._mesh()
        if mesh is not None:
            prep, out_tree = _prepare(self._jax_fn, args, self._options, self._name, mesh)
            return _multi.call(prep.runner, prep.out_avals, out_tree, flat, mesh, self._name,
                               _count_run)
        prep, out_tree = self._get(args, flat)
        if any(ji.is_tracer(x) for x in flat):
            # semaphores cross the call as their counts (int32)
            flat = [ji.to_physical(x) for x in flat]
            ffi = prep.ffi() if self._jit_callback == "ffi" else None
            if ffi is not None:
                outs = ffi(*flat)
            else:
                outs = jax.pure_callback(prep.host, prep.out_structs, *flat,
                                         vmap_method="sequential")
            outs = [ji.from_physical(o, a.dtype) for o, a in zip(outs, prep.out_avals)]
            return jax.tree_util.tree_unflatten(out_tree, outs)
        _stats["runs"] += 1
        outs = prep.runner(*flat)
        if not self._numpy_outputs:
            outs = ji.adopt_host_arrays(outs)
        return jax.tree_util.tree_unflatten(out_tree, outs)

    def lower_to_tsr(self, *args) -> str:
        """The tessera IR (.tsr text) this call runs for arguments like `args`."""
        __tracebackhide__ = True  # pytest: the report starts at the user's call
        args, flat = _canonical(args, jax.tree_util.tree_leaves(list(args)))
        mesh = self._mesh()
        if mesh is not None:
            return _prepare(self._jax_fn, args, self._options, self._name, mesh)[0].text
        return self._get(args, flat)[0].text


def _is_zero_tangent(t) -> bool:
    return (isinstance(t, jax.custom_derivatives.SymbolicZero)
            or getattr(t, "dtype", None) == jax.dtypes.float0)


def _tangent_of(primal, tangent):
    if jax.numpy.issubdtype(primal.dtype, jax.numpy.inexact):
        return tangent
    return np.zeros(np.shape(primal), jax.dtypes.float0)


_bypass = contextvars.ContextVar("tessera_jax_bypass", default=False)


def pallas_call(kernel: Callable[..., None], out_shape: Any, *,
                grid_spec: Any = None, grid: Any = (), in_specs: Any = pl.no_block_spec,
                out_specs: Any = pl.no_block_spec, scratch_shapes: Any = (),
                input_output_aliases: Mapping[int, int] = {}, debug: bool = False,
                interpret: Any = False, name: str | None = None,
                compiler_params: Any = None, cost_estimate: Any = None,
                metadata: dict[str, str] | None = None,
                **tessera_options: Any) -> TesseraPallasCall:
    """`pl.pallas_call` run by tessera. Takes pl.pallas_call's arguments
    (`interpret` is ignored: tessera is the interpreter) and tessera's
    options: backend ("interp", the default, with every check; or "cpu"),
    detect_races, uninit ("nan"/"zero"), shuffle_parallel, shuffle_seed,
    cores, devices, dma_mode ("eager"/"lazy"), schedule_seed, chip,
    max_errors, strict, timeout_seconds, max_steps, trace_path, opt_level,
    out_blocks_copied_in (output blocks copied in from the output array, as
    JAX's generic interpret=True does; default False, a TPU's blocks);
    warnings ("python", the default here: KernelWarnings; or "collect",
    interpret mode's default: kept for collected_warnings());
    target ("tpu": what `chip` refuses, Pallas's TPU block rules, VMEM, no
    Mosaic form, is a located CompileError; default: a collected warning)
    and tpu_compile_check (libtpu compiles the kernel for the chip too;
    docs/jax.md, "Fails where the TPU fails");
    and numpy_outputs=True, which makes an eager call return numpy arrays
    instead of jax arrays (saving JAX's ~70 us per output array), and
    jit_callback ("ffi", the default: an XLA FFI custom call on CPU; or
    "pure_callback"), how a call inside jax.jit runs.

    Returns a callable taking the kernel's operands (as the function
    pl.pallas_call returns does). Raises TranslationError (naming the
    primitive and the user's file:line) for what tessera cannot express, and
    KernelError (with `.diagnostics`) when the kernel misbehaves."""
    del interpret
    _check_options(tessera_options)
    kwargs = dict(grid_spec=grid_spec, grid=grid, in_specs=in_specs,
                  out_specs=out_specs, scratch_shapes=scratch_shapes,
                  input_output_aliases=input_output_aliases, debug=debug,
                  interpret=False, name=name, compiler_params=compiler_params,
                  cost_estimate=cost_estimate, metadata=metadata)
    dynamic = ji.split_dynamic_grid(kwargs)
    if dynamic is not None:
        def original(kernel, out_shape, **kw):
            token = _bypass.set(True)
            try:
                return pl.pallas_call(kernel, out_shape, **kw)
            finally:
                _bypass.reset(token)
        return _dynamic_grid_call(original, kernel, out_shape, kwargs, tessera_options,
                                  *dynamic)
    token = _bypass.set(True)
    try:
        jax_fn = pl.pallas_call(
            kernel, out_shape, grid_spec=grid_spec, grid=grid, in_specs=in_specs,
            out_specs=out_specs, scratch_shapes=scratch_shapes,
            input_output_aliases=input_output_aliases, debug=debug, interpret=False,
            name=name, compiler_params=compiler_params, cost_estimate=cost_estimate,
            metadata=metadata)
    finally:
        _bypass.reset(token)
    return TesseraPallasCall(jax_fn, tessera_options, name)


def _check_options(options: Mapping[str, Any]) -> None:
    unknown = set(options) - set(_run.option_names())
    if unknown:
        raise TypeError(f"tessera.jax: unknown option(s) {', '.join(sorted(unknown))} "
                        f"(options: {', '.join(_run.option_names())})")
    if options.get("warnings", "python") not in ("python", "collect"):
        raise ValueError("tessera.jax: warnings is 'python' or 'collect'")
    if options.get("jit_callback", "ffi") not in ("ffi", "pure_callback"):
        raise ValueError("tessera.jax: jit_callback is 'ffi' or 'pure_callback'")
    if options.get("numerics", "cpu") not in ("cpu", "tpu"):
        raise ValueError("tessera.jax: numerics is 'cpu' (f32 dots exact in f32, as XLA:CPU) "
                         "or 'tpu' (f32 dot operands rounded as a TPU's MXU does)")
    _tpu_target.check_options(options)
    if options.get("devices") is not None and int(options["devices"]) < 1:
        raise ValueError("tessera.jax: devices is the number of devices of the mesh (>= 1)")


# ---- interpret(): every pl.pallas_call through tessera ------------------------------

_active: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "tessera_jax_interpret", default=None)
# A value in jax.jit's cache key: a function jitted outside interpret() is
# traced again inside (and the other way round), so a cached compilation
# never runs the wrong pallas_call.
_jit_key = jax.make_user_context(None)
_global_options: dict | None = None  # set by the pytest plugin for a whole run


class InterpretParams:
    """A value for `pl.pallas_call(..., interpret=...)` that runs that one
    pallas_call through tessera with these options:
    `pl.pallas_call(k, shape, interpret=tessera.jax.InterpretParams(backend="cpu"))`.
    Creating one patches JAX's `_pallas_call` for the rest of the process
    (calls with other `interpret=` values go to JAX unchanged)."""

    _hooked = False
    _lock = threading.Lock()

    def __init__(self, **tessera_options: Any):
        _check_options(tessera_options)
        self.options = dict(tessera_options)
        with InterpretParams._lock:
            if not InterpretParams._hooked:
                ji.install_pallas_call_hook(_hook, _mpmd_hook)
                InterpretParams._hooked = True

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in sorted(self.options.items()))
        return f"tessera.jax.InterpretParams({args})"

    def __eq__(self, other) -> bool:
        return isinstance(other, InterpretParams) and self.options == other.options

    def __hash__(self) -> int:
        return hash(_options_key(self.options))


def _hook(original, kernel, out_shape, **kwargs):
    if isinstance(kwargs.get("interpret"), InterpretParams) and not _bypass.get():
        options = kwargs["interpret"].options
        kwargs["interpret"] = False
        dynamic = ji.split_dynamic_grid(kwargs)
        if dynamic is not None:
            return _dynamic_grid_call(original, kernel, out_shape, kwargs, options, *dynamic)
        return TesseraPallasCall(original(kernel, out_shape, **kwargs), options,
                                 kwargs.get("name"))
    options = _active.get()
    if options is None:
        options = _global_options
    if options is None or _bypass.get():
        return original(kernel, out_shape, **kwargs)
    options = _interpret_options(options, kwargs.get("interpret"))
    kwargs["interpret"] = False
    _check_jax_grid(options, kwargs)
    dynamic = ji.split_dynamic_grid(kwargs)
    if dynamic is not None:
        return _dynamic_grid_call(original, kernel, out_shape, kwargs, options, *dynamic)
    jax_fn = original(kernel, out_shape, **kwargs)
    return TesseraPallasCall(jax_fn, options, kwargs.get("name"))


def _semantics(params: Mapping[str, Any], rank: int) -> list[str] | None:
    """The dims' semantics a pallas_call's compiler_params give (a TPU
    CompilerParams, or a dict of them by platform)."""
    cp = params.get("compiler_params")
    sem = ji.dimension_semantics(cp, rank)
    if sem is None and isinstance(cp, dict):
        for v in cp.values():
            sem = sem or ji.dimension_semantics(v, rank)
    return sem


def _check_jax_grid(options: Mapping[str, Any], kwargs: Mapping[str, Any]) -> None:
    """A call made with JAX's InterpretParams: a traced extent of a leading
    parallel dim is JAX's ConcretizationTypeError (_params.py)."""
    if options.get("jax_random_seed") is None or "shuffle_parallel" in options:
        return
    spec = kwargs.get("grid_spec")
    grid = spec.grid if spec is not None else kwargs.get("grid", ())
    if grid is None:
        return
    if not isinstance(grid, (tuple, list)):
        grid = (grid,)
    _params.check_static_parallel(tuple(grid), _semantics(kwargs, len(grid)))


def _dynamic_grid_call(original, kernel, out_shape, kwargs, options, bounds, rebuild):
    """A pallas_call whose grid has dynamic bounds (values not known when
    the call is made: traced under jax.jit, or arrays): the bounds become
    the call's leading operands, int32 scalars, as Pallas passes them to
    its primitive; the kernel reads them when a run starts (docs/jax.md,
    "What is translated")."""
    n = len(bounds)

    def jax_fn(*args):
        return original(kernel, out_shape, **rebuild(args[:n]))(*args[n:])

    tpc = TesseraPallasCall(jax_fn, options, kwargs.get("name"))
    values = tuple(jax.numpy.asarray(b, jax.numpy.int32) for b in bounds)

    class _Call:
        def __call__(self, *args):
            __tracebackhide__ = True  # pytest: the report starts at the user's call
            return tpc(*values, *args)

        def lower_to_tsr(self, *args) -> str:
            return tpc.lower_to_tsr(*values, *args)
    return _Call()


def _mpmd_hook(original_bind, *args, **params):
    """A kernel over a mesh (`pl.kernel`, `pl.core_map`) run by tessera
    when a pallas_call made here would be: as the pallas_call JAX lowers it
    to on a CPU (docs/jax.md, "Kernels over a mesh"), on as many simulated
    cores as the mesh's core axis has."""
    __tracebackhide__ = True  # pytest: the report starts at the user's call
    interp = params.get("interpret")
    if isinstance(interp, InterpretParams) and not _bypass.get():
        options = interp.options
    else:
        options = _active.get()
        if options is None:
            options = _global_options
    if options is None or _bypass.get():
        return original_bind(*args, **params)
    if not isinstance(interp, InterpretParams):
        options = _interpret_options(options, interp)
    try:
        mk = ji.mesh_kernel(args, params)
    except NotImplementedError as e:
        file, line, _ = ji.caller_location()
        raise TranslationError(str(e).removeprefix("tessera.jax: "), "pl.kernel", file,
                               line) from None
    # A kernel over a TensorCoreMesh: JAX's interpret mode divides its grid
    # between the cores in a fixed way, never drawing an order.
    options = {k: v for k, v in options.items() if k != "jax_random_seed"}
    call = TesseraPallasCall(mk.fn, dict(options, cores=mk.cores), mk.name)
    call.jvp_error = ji.mesh_kernel_jvp_error
    outs = call(*mk.values)
    for ref, k in mk.written:
        ji.write_ref(ref, outs[k])
    return list(outs[:mk.num_outputs])


def _interpret_options(options: Mapping[str, Any], jax_interpret: Any) -> dict:
    """The options of a pallas_call under interpret mode: warnings are
    collected unless asked otherwise, and what the call's JAX
    `pltpu.InterpretParams` asks for (races, uninitialized memory, cores,
    DMA mode, seed: _params.py), or for `interpret=True` what JAX's generic
    interpreter does (output blocks copied in), under tessera's own options,
    which win."""
    merged: dict[str, Any] = {"warnings": "collect"}
    if _params.is_generic_interpret(jax_interpret) and not ji.tpu_interpret_forced():
        # JAX's generic interpreter copies every block in, outputs too: a
        # kernel reading an output block before writing it sees the array
        # (docs/semantics.md, "Output blocks copied in")
        merged["out_blocks_copied_in"] = True
    if _params.is_jax_params(jax_interpret):
        mapped, notes = _params.options_of(jax_interpret)
        merged.update(mapped)
        merged["jax_state"] = True
        if notes:
            _report_notes(notes, {**merged, **options})
    merged.update(options)
    return merged


class interpret(contextlib.ContextDecorator):
    """`with tessera.jax.interpret(**tessera_options):` every `pl.pallas_call`
    made inside (in this thread, or in tasks that copied its context) runs
    through tessera, whatever its `interpret=` says. Also a decorator.

    The pallas_call must be created inside the block; a function jitted
    outside is traced again inside (the options are part of jax.jit's cache
    key). JAX's own `_pallas_call` is patched while any interpret() is
    active and restored when the last one exits."""

    def __init__(self, **tessera_options: Any):
        _check_options(tessera_options)
        self.options = tessera_options
        self._local = threading.local()  # a decorator may be entered by several threads

    def _tokens(self) -> list:
        tokens = getattr(self._local, "tokens", None)
        if tokens is None:
            tokens = self._local.tokens = []
        return tokens

    def __enter__(self) -> "interpret":
        ji.install_pallas_call_hook(_hook, _mpmd_hook)
        key = _jit_key(("tessera",) + _options_key(self.options))
        key.__enter__()
        # The outermost block shows, when it ends, what it collected.
        before = collected_warnings() if _active.get() is None else None
        self._tokens().append((_active.set(dict(self.options)), key, before))
        return self

    def __exit__(self, *exc) -> None:
        token, key, before = self._tokens().pop()
        key.__exit__(None, None, None)
        _active.reset(token)
        ji.remove_pallas_call_hook()
        if before is not None:
            _show_collected(before)


def _show_collected(before: Mapping[str, int]) -> None:
    """Prints to stderr the warnings collected since `before`: outside
    pytest (whose plugin shows them in its summary) nothing else would show
    them, and a finding the user never sees is a finding lost."""
    new = {line: n - before.get(line, 0) for line, n in collected_warnings().items()
           if n > before.get(line, 0)}
    if not new:
        return
    total = sum(new.values())
    out = [f"tessera: {total} warning{'s' if total != 1 else ''} in kernels run under "
           "tessera.jax.interpret() (JAX's interpret mode does not give them; "
           "warnings='python' raises them as KernelWarning):"]
    out += [f"  {line}" + (f"  [{n}x]" if n > 1 else "") for line, n in new.items()]
    print("\n".join(out), file=sys.stderr)


def enable_globally(**tessera_options: Any) -> Callable[[], None]:
    """Makes every pl.pallas_call in every thread run through tessera until
    the returned function is called (what `pytest --tessera` uses)."""
    global _global_options
    _check_options(tessera_options)
    ji.install_pallas_call_hook(_hook, _mpmd_hook)
    _global_options = dict(tessera_options)
    previous_key = _jit_key.get_global()
    _jit_key.set_global(("tessera-global",) + _options_key(tessera_options))

    def disable() -> None:
        global _global_options
        _global_options = None
        _jit_key.set_global(previous_key)
        ji.remove_pallas_call_hook()
    return disable


def lower_to_tsr(kernel: Callable[..., None], out_shape: Any, *args, **pallas_kwargs) -> str:
    """The .tsr text tessera runs for `pl.pallas_call(kernel, out_shape,
    **pallas_kwargs)(*args)` (args may be arrays or jax.ShapeDtypeStructs)."""
    return pallas_call(kernel, out_shape, **pallas_kwargs).lower_to_tsr(*args)
