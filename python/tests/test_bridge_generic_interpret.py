"""Output blocks copied in (the run option out_blocks_copied_in,
docs/semantics.md "Output blocks copied in"), as JAX's generic interpreter
runs a pallas_call made with `interpret=True`: every block is copied in at
each step, outputs too, so a kernel reading an output block before writing
it sees the output array (an aliased input's values, or JAX's
uninitialized value for a fresh output: NaN, the integer minimum), and the
padding of a block past its array's end holds that value too. The bridge
asks for it for `interpret=True` only; JAX's TPU interpret mode
(`pltpu.InterpretParams`) and tessera.jax.pallas_call keep a TPU's
uninitialized output blocks. Each expectation is JAX's own result, computed
here by running the same call outside tessera; both backends."""

from __future__ import annotations

import pathlib
import sys
from contextlib import nullcontext

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
jax = pytest.importorskip("jax")

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import pallas as pl  # noqa: E402
from jax.experimental.pallas import tpu as pltpu  # noqa: E402

import tessera  # noqa: E402
import tessera.jax as tj  # noqa: E402

BACKENDS = ["interp", "cpu"]

pytestmark = pytest.mark.filterwarnings("error")  # as JAX's own suites run


def accumulate_kernel(acc_ref, x_ref, o_ref):
    # reads the output block before writing it, never initializing it
    o_ref[...] = o_ref[...] + x_ref[...]


def accumulate_call(interpret, **kw):
    make = kw.pop("make", pl.pallas_call)
    return make(
        accumulate_kernel, jax.ShapeDtypeStruct((16, 128), jnp.float32), grid=(2, 3),
        in_specs=[pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
                  pl.BlockSpec((8, 128), lambda i, j: (i, j))],
        out_specs=pl.BlockSpec((8, 128), lambda i, j: (i, 0)),
        input_output_aliases={0: 0}, interpret=interpret, **kw)


def accumulate_inputs():
    acc = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
    x = (np.arange(16 * 384) % 7 - 3).astype(np.float32).reshape(16, 384)  # exact sums
    return acc, x


def uninitialized_reads() -> list[str]:
    return [t for t in tj.collected_warnings() if "read of uninitialized memory" in t]


@pytest.mark.parametrize("backend", BACKENDS)
def test_interpret_true_copies_an_aliased_output_block_in(backend):
    acc, x = accumulate_inputs()
    want = np.asarray(accumulate_call(True)(acc, x))
    np.testing.assert_array_equal(want, acc + x.reshape(16, 3, 128).sum(1))
    tj.clear_collected_warnings()
    with tj.interpret(backend=backend):
        got = np.asarray(accumulate_call(True)(acc, x))
    np.testing.assert_array_equal(got, want)
    assert uninitialized_reads() == []  # JAX gives none: the block's values are defined


@pytest.mark.parametrize("backend", BACKENDS)
def test_tpu_interpret_mode_keeps_output_blocks_uninitialized(backend):
    acc, x = accumulate_inputs()
    want = np.asarray(accumulate_call(pltpu.InterpretParams())(acc, x))
    assert np.isnan(want).all()  # JAX's TPU interpret mode: not copied in
    tj.clear_collected_warnings()
    with tj.interpret(backend=backend):
        got = np.asarray(accumulate_call(pltpu.InterpretParams())(acc, x))
    assert np.isnan(got).all()
    if backend == "interp":  # the cpu backend does not check reads
        assert uninitialized_reads(), tj.collected_warnings()


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_tessera_option_wins_over_interpret_true(backend):
    acc, x = accumulate_inputs()
    with tj.interpret(backend=backend, out_blocks_copied_in=False):
        got = np.asarray(accumulate_call(True)(acc, x))
    assert np.isnan(got).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_direct_pallas_call_copies_in_only_when_asked(backend):
    acc, x = accumulate_inputs()
    # the interpreter warns at the read (the cpu backend does not check reads)
    with pytest.warns(tessera.KernelWarning) if backend == "interp" else nullcontext():
        got = np.asarray(accumulate_call(True, make=tj.pallas_call, backend=backend)(acc, x))
    assert np.isnan(got).all()  # `interpret` is ignored: a TPU's blocks
    got = np.asarray(accumulate_call(True, make=tj.pallas_call, backend=backend,
                                     out_blocks_copied_in=True)(acc, x))
    np.testing.assert_array_equal(got, np.asarray(accumulate_call(True)(acc, x)))


def copy_kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int32, np.uint8, np.float32])
def test_interpret_true_pads_blocks_with_jax_uninitialized_value(backend, dtype):
    # a (6,) block of a (3,) input: its padding is JAX's uninitialized value
    def call():
        return pl.pallas_call(copy_kernel, jax.ShapeDtypeStruct((6,), dtype), grid=(1,),
                              in_specs=[pl.BlockSpec((6,), lambda i: 0)],
                              interpret=True)(np.full((3,), 42, dtype))
    want = np.asarray(call())
    if np.issubdtype(dtype, np.integer):
        assert (want[3:] == np.iinfo(dtype).min).all()
    with tj.interpret(backend=backend):
        got = np.asarray(call())
    np.testing.assert_array_equal(got, want)


def read_fresh_kernel(o_ref, p_ref):
    # a fresh output read before it is written: JAX's uninitialized value
    p_ref[...] = o_ref[...]
    o_ref[...] = jnp.zeros_like(o_ref)


@pytest.mark.parametrize("backend", BACKENDS)
def test_interpret_true_fresh_output_holds_jax_uninitialized_value(backend):
    def call():
        shape = jax.ShapeDtypeStruct((16, 128), jnp.int32)
        return pl.pallas_call(read_fresh_kernel, (shape, shape), grid=(2,),
                              out_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))] * 2,
                              interpret=True)()
    want = [np.asarray(a) for a in call()]
    assert (want[1] == np.iinfo(np.int32).min).all()
    with tj.interpret(backend=backend):
        got = [np.asarray(a) for a in call()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


# ---- the run option through tessera.compile --------------------------------------

ACCUMULATE = """kernel @acc
  grid(2, 3) semantics(parallel, arbitrary)
  in %a: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0)
  in %x: f32[16, 384] vmem block[8, 128] map(%i, %j) -> (%i, %j)
  out %o: f32[16, 128] vmem block[8, 128] map(%i, %j) -> (%i, 0) alias %a
{
  %v = load %x[:, :] : f32[8, 128]
  %b = load %o[:, :] : f32[8, 128]
  %s = add %b, %v : f32[8, 128]
  store %o[:, :], %s
}
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_option_out_blocks_copied_in(backend):
    k = tessera.Module.parse(ACCUMULATE, "acc.tsr")
    acc, x = accumulate_inputs()
    got = tessera.run(k, acc, x, backend=backend, out_blocks_copied_in=True)
    np.testing.assert_array_equal(got, np.asarray(accumulate_call(True)(acc, x)))
    default = tessera.run(k, acc, x, backend=backend, on_warning=lambda text: None)
    assert np.isnan(default).all()


# ---- masked swap: the lanes the mask leaves out ------------------------------------

def masked_swap_kernel(mask_ref, x_ref, y_ref, o_ref, r_ref):
    from jax._src.pallas import primitives as pallas_primitives
    o_ref[...] = y_ref[...]
    # both of JAX's interpreters give the value stored where the mask is off
    r_ref[...] = pallas_primitives.swap(o_ref, (slice(None),), x_ref[...], mask=mask_ref[...])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["generic", "tpu"])
def test_masked_swap_result_as_jax(backend, mode):
    interpret = True if mode == "generic" else pltpu.InterpretParams()

    def call():
        shape = jax.ShapeDtypeStruct((16, 128), jnp.float32)
        mask = (np.arange(16 * 128).reshape(16, 128) % 3) == 0
        x = np.full((16, 128), 7.0, np.float32)
        y = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
        return pl.pallas_call(masked_swap_kernel, (shape, shape), interpret=interpret)(
            mask, x, y)
    want = [np.asarray(a) for a in call()]
    assert not np.isnan(want[1]).any()
    with tj.interpret(backend=backend):
        got = [np.asarray(a) for a in call()]
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", BACKENDS)
def test_forced_tpu_interpret_mode_wins_over_interpret_true(backend):
    # pltpu.force_tpu_interpret_mode() makes JAX run interpret=True calls in
    # its TPU interpret mode: output blocks are not copied in there
    acc, x = accumulate_inputs()
    with pltpu.force_tpu_interpret_mode():
        want = np.asarray(accumulate_call(True)(acc, x))
        with tj.interpret(backend=backend):
            got = np.asarray(accumulate_call(True)(acc, x))
    assert np.isnan(want).all() and np.isnan(got).all()
