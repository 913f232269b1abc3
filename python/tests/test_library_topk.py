"""tessera.top_k and tessera.jax.top_k on rows longer than a block (the
kernel library's grid over a row's blocks with a running top-k,
kernels/topk.c) and on the column network's one-block rows, against
jax.lax.top_k (the oracle): exact values (bit patterns) and exact indices,
on both backends, with NaNs of both signs, signed zeros and heavy ties."""

import ml_dtypes
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import tessera
import tessera.jax as tj

jax.config.update("jax_platforms", "cpu")

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), BF16, np.dtype(np.float16), np.dtype(np.int32),
          np.dtype(np.uint32), np.dtype(np.int16), np.dtype(np.uint8)]


def random_array(rng, shape, dt, distinct=None):
    if dt == BF16 or dt.kind == "f":
        span = distinct or 1 << 20
        a = (rng.integers(-span, span, size=shape) / 4).astype(np.float32).astype(dt)
        flat = a.reshape(-1)
        specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], np.float32).astype(dt)
        pos = rng.integers(0, flat.size, size=min(flat.size, 24))
        flat[pos] = np.resize(specials, len(pos))
        return a
    info = np.iinfo(dt)
    lo, hi = (-distinct, distinct) if distinct else (int(info.min), int(info.max))
    lo, hi = max(lo, int(info.min)), min(hi, int(info.max))
    return rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dt)


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def check(x, k, **kw):
    v, i = tessera.top_k(x, k, **kw)
    rv, ri = jax.lax.top_k(jnp.asarray(x), k)
    np.testing.assert_array_equal(i, np.asarray(ri))
    np.testing.assert_array_equal(bits(v), bits(np.asarray(rv)))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("shape,k", [((1, 100000), 16), ((100000,), 5), ((3, 70001), 16),
                                     ((3, 70001), 300), ((2, 40000), 1)], ids=str)
def test_long_rows_match_lax(shape, k, backend):
    rng = np.random.default_rng(shape[-1] + k)
    check(random_array(rng, shape, np.dtype(np.float32)), k, backend=backend)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_long_rows_with_heavy_ties(backend):
    rng = np.random.default_rng(5)
    x = random_array(rng, (3, 70001), np.dtype(np.float32), distinct=3)
    check(x, 40, backend=backend)


@pytest.mark.parametrize("dt", DTYPES, ids=str)
@pytest.mark.parametrize("shape,k,budget", [((3, 5000), 9, 8192), ((2, 3000), 300, 8192),
                                            ((4, 2000), 2000, 1 << 15),
                                            ((5, 20000), 16, 1 << 16)], ids=str)
def test_blocks_every_dtype(dt, shape, k, budget):
    """Small budgets force many blocks: k below a block, above one (300 >
    128), the whole row, several steps of long blocks."""
    rng = np.random.default_rng(k)
    x = random_array(rng, shape, dt, distinct=50)
    check(x, k, vmem_budget_bytes=budget)


@pytest.mark.parametrize("shape,k", [((128, 4096), 16), ((9, 2048), 16), ((8, 8192), 64),
                                     ((16, 1024), 8)], ids=str)
def test_column_network_rows(shape, k):
    rng = np.random.default_rng(1)
    x = random_array(rng, shape, np.dtype(np.float32), distinct=200)
    check(x, k, backend="cpu")


def test_smallest_in_blocks():
    rng = np.random.default_rng(2)
    x = random_array(rng, (3, 9000), np.dtype(np.int32), distinct=100)
    v, i = tessera.top_k(x, 12, smallest=True, vmem_budget_bytes=8192)
    ref = np.argsort(x, -1, kind="stable")[:, :12]
    np.testing.assert_array_equal(i, ref)
    np.testing.assert_array_equal(v, np.take_along_axis(x, ref, -1))


def test_jax_top_k_long_row():
    rng = np.random.default_rng(3)
    x = jnp.asarray(random_array(rng, (2, 50000), np.dtype(np.float32)))
    rv, ri = jax.lax.top_k(x, 10)
    v, i = jax.jit(lambda a: tj.top_k(a, 10, backend="cpu"))(x)
    np.testing.assert_array_equal(np.asarray(i), np.asarray(ri))
    np.testing.assert_array_equal(bits(v), bits(rv))
