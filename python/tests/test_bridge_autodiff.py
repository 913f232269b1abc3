"""Differentiating through a pallas_call run by tessera.jax (docs/jax.md,
"Differentiation"): the JVP of a pallas_call is the pallas_call JAX's own
JVP rule builds (the kernel's JVP), and that one runs in tessera too.
Expected values are JAX's own interpret mode's, computed in the test; both
backends. What Pallas refuses to differentiate fails with JAX's error."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]
SHAPE = (16, 128)


def _spec():
    return pl.BlockSpec((8, 128), lambda i: (i, 0))


def _make(kernel, n_in, out_shape=None, **kw):
    """The kernel as a pallas_call over a grid of two blocks (made inside
    the caller's tessera.jax.interpret() block, or JAX's with interpret=True)."""
    return pl.pallas_call(kernel, out_shape or jax.ShapeDtypeStruct(SHAPE, jnp.float32),
                          grid=(2,), in_specs=[_spec()] * n_in, out_specs=_spec(), **kw)


def _sin_times(x_ref, y_ref, o_ref):
    o_ref[...] = jnp.sin(x_ref[...]) * y_ref[...]


def _tanh_exp(x_ref, y_ref, o_ref):
    x = x_ref[...]
    o_ref[...] = jnp.tanh(x) + jnp.exp(-x * x) / (1.0 + y_ref[...] ** 2)


def _operands(seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(SHAPE).astype(np.float32) for _ in range(4)]


def _close(a, b, tol=2e-5):
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=tol, atol=tol)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kernel", [_sin_times, _tanh_exp], ids=["sin_times", "tanh_exp"])
def test_jvp_matches_jaxs_interpret_mode(backend, kernel):
    x, y, tx, ty = _operands()
    with tj.interpret(backend=backend):
        ours = jax.jvp(_make(kernel, 2), (x, y), (tx, ty))
    theirs = jax.jvp(_make(kernel, 2, interpret=True), (x, y), (tx, ty))
    _close(ours[0], theirs[0])
    _close(ours[1], theirs[1])


def _tanh_exp_ref(x, y):
    return jnp.tanh(x) + jnp.exp(-x * x) / (1.0 + y ** 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_order_jvp_and_jit(backend):
    """jvp of jvp differentiates the JVP kernel again (JAX's rule applied to
    the pallas_call it built), and a jvp under jax.jit runs the same.
    (The second order has zero tangents, with which JAX's own interpret mode
    fails: the reference is JAX's differentiation of the kernel's math.)"""
    x, y, tx, ty = _operands(1)

    def second(f):
        return jax.jvp(lambda x: jax.jvp(lambda x: f(x, y), (x,), (tx,))[1], (x,), (tx,))

    with tj.interpret(backend=backend):
        f = _make(_tanh_exp, 2)
        ours = second(f)
        jitted = jax.jit(lambda x, y, tx, ty: jax.jvp(f, (x, y), (tx, ty)))(x, y, tx, ty)
    theirs = second(_tanh_exp_ref)
    _close(ours[0], theirs[0], 1e-4)
    _close(ours[1], theirs[1], 1e-4)
    reference = jax.jvp(_make(_tanh_exp, 2, interpret=True), (x, y), (tx, ty))
    _close(jitted[0], reference[0])
    _close(jitted[1], reference[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_jvp_in_one_operand_and_an_integer_operand(backend):
    """A zero tangent is no operand of the JVP kernel (JAX's rule takes it
    symbolically), and an integer operand's tangent is float0. JAX's own
    interpret mode fails on these (its rule's grid mapping keeps a block
    for each zero tangent): the reference is JAX's differentiation of the
    kernel's math."""
    x, _, tx, _ = _operands(2)
    y, ty = x[:8] * 0.5, tx[8:] * 2  # one block, the same at every grid step
    n = np.arange(SHAPE[0] * SHAPE[1], dtype=np.int32).reshape(SHAPE) % 7

    def kernel(x_ref, n_ref, y_ref, o_ref):
        o_ref[...] = jnp.cos(x_ref[...]) * n_ref[...].astype(jnp.float32) + y_ref[...]

    def tangents(f):
        only_x = jax.jvp(lambda x: f(x, n, y), (x,), (tx,))
        only_y = jax.jvp(lambda y: f(x, n, y), (y,), (ty,))
        zero_n = np.zeros(SHAPE, jax.dtypes.float0)
        all_three = jax.jvp(f, (x, n, y), (tx, zero_n, ty))
        return only_x, only_y, all_three

    # y's block mapping differs from the others': a tangent given another
    # operand's block mapping would read past y's tangent
    specs = [_spec(), _spec(), pl.BlockSpec((8, 128), lambda i: (0, 0))]
    with tj.interpret(backend=backend):
        ours = tangents(pl.pallas_call(kernel, jax.ShapeDtypeStruct(SHAPE, jnp.float32),
                                       grid=(2,), in_specs=specs, out_specs=_spec()))
    theirs = tangents(lambda x, n, y: jnp.cos(x) * n.astype(jnp.float32) + jnp.tile(y, (2, 1)))
    for a, b in zip(ours, theirs):
        _close(a[0], b[0])
        _close(a[1], b[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_grad_inside_a_kernel(backend):
    """jax.grad of a function inside the kernel: its derivative's primitives
    (tanh's is `one_minus_square`) are translated like any other."""
    x, y, _, _ = _operands(3)
    x = x * 3  # also |x| near and past 1, where 1 - tanh^2 loses digits if computed naively

    def kernel(x_ref, y_ref, o_ref):
        d = jax.vmap(jax.vmap(jax.grad(lambda v, w: jnp.tanh(v) * jnp.sin(w))))
        o_ref[...] = d(x_ref[...], y_ref[...]) + lax.one_minus_square(y_ref[...])

    with tj.interpret(backend=backend):
        ours = _make(kernel, 2)(x, y)
    theirs = _make(kernel, 2, interpret=True)(x, y)
    _close(ours, theirs, 1e-5)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_jvp_kernel_runs_in_tessera(backend):
    """An eager jax.jvp translates and runs one kernel in tessera (the JVP
    pallas_call, not the primal one), and a warm one translates nothing."""
    x, y, tx, ty = _operands(4)
    tj.cache_clear()
    with tj.interpret(backend=backend):
        f = _make(_sin_times, 2)
        jax.jvp(f, (x, y), (tx, ty))
        first = tj.cache_info()
        jax.jvp(f, (x, y), (tx, ty))
        second = tj.cache_info()
    assert (first["misses"], first["runs"], first["entries"]) == (1, 1, 1)
    assert (second["misses"], second["runs"]) == (1, 2)


def test_a_check_fires_inside_the_jvp_kernel():
    """The interpreter's checks run on the JVP kernel: a read past the
    operand (a dynamic index the kernel computes) is a KernelError at the
    kernel's line, where JAX's interpret mode reads on."""
    x, _, tx, _ = _operands(5)

    def kernel(x_ref, o_ref):
        start = jnp.where(x_ref[0, 0] > -1e30, 12, 0)  # 12 + 8 > 16 rows
        o_ref[...] = jnp.sin(x_ref[pl.ds(start, 8), :])

    with tj.interpret(backend="interp"):
        f = pl.pallas_call(kernel, jax.ShapeDtypeStruct((8, 128), jnp.float32))
        with pytest.raises(tj.KernelError) as e:
            jax.jvp(f, (x,), (tx,))
    assert any("test_bridge_autodiff.py" in (getattr(d, "text", "") or "")
               for d in e.value.diagnostics), e.value.diagnostics


def _error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the error is what is compared
        return type(e), str(e).splitlines()[0]
    return None


@pytest.mark.parametrize("backend", BACKENDS)
def test_what_pallas_refuses_is_jaxs_error(backend):
    """Reverse mode (a pallas_call has no transpose) and the JVP of a call
    with input_output_aliases fail as under JAX's interpret mode: same
    exception type, same message."""
    x, y, tx, ty = _operands(6)

    def cases(make):
        f = make(_sin_times, 2)
        aliased = make(_sin_times, 2, input_output_aliases={0: 0})
        return [_error_of(lambda: jax.grad(lambda x: f(x, y).sum())(x)),
                _error_of(lambda: jax.jvp(aliased, (x, y), (tx, ty)))]

    with tj.interpret(backend=backend):
        ours = cases(_make)
    theirs = cases(lambda k, n, **kw: _make(k, n, interpret=True, **kw))
    assert all(t is not None for t in theirs), theirs
    assert ours == theirs


def _dynamic_grid_jvp(interpret):
    """jvp of a kernel whose grid extent is traced (a dynamic grid bound)."""
    x, _, tx, _ = _operands(7)

    def run(x, n):
        f = pl.pallas_call(_sin_kernel, jax.ShapeDtypeStruct(SHAPE, jnp.float32), grid=(n,),
                           in_specs=[_spec()], out_specs=_spec(), interpret=interpret)
        return f(x)
    return lambda: jax.jit(lambda x, t, n: jax.jvp(lambda x: run(x, n), (x,), (t,)))(x, tx, 2)


def _sin_kernel(x_ref, o_ref):
    o_ref[...] = jnp.sin(x_ref[...])


def _mesh_kernel_jvp():
    @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name="core", num_cores=1),
               out_type=jax.ShapeDtypeStruct((8, 128), jnp.float32),
               scratch_types=[pltpu.VMEM((8, 128), jnp.float32), pltpu.SemaphoreType.DMA])
    def kernel(x_ref, o_ref, v_ref, sem):
        pltpu.async_copy(x_ref, v_ref, sem).wait()
        v_ref[...] = jnp.sin(v_ref[...])
        pltpu.async_copy(v_ref, o_ref, sem).wait()

    x = np.ones((8, 128), np.float32)
    return lambda: jax.jvp(kernel, (x,), (x,))


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernels_jax_does_not_differentiate_fail_with_jaxs_error(backend):
    """A dynamic grid bound (refused by JAX's rule) and a kernel over a mesh
    (`pl.kernel`: its primitive has no JVP rule), which tessera runs as a
    pallas_call, fail as under JAX's interpret mode."""
    with tj.interpret(backend=backend):
        ours = [_error_of(_dynamic_grid_jvp(False)), _error_of(_mesh_kernel_jvp())]
    dynamic = _error_of(_dynamic_grid_jvp(True))
    with pltpu.force_tpu_interpret_mode():
        mesh = _error_of(_mesh_kernel_jvp())
    assert dynamic is not None and mesh is not None
    assert ours == [dynamic, mesh]
