"""tessera.sort / argsort / sort_multiple / top_k (the kernel library's sort
and top-k, kernels/sort.c, kernels/topk.c) against jax.lax.sort,
jax.numpy.argsort and jax.lax.top_k (the oracles) and numpy, on both
backends: exact values (bit patterns) and exact indices wherever the
order is defined (stable sorts, top-k); for unstable sorts, the sorted
keys are exact and equal elements are checked as multisets."""

import ml_dtypes
import numpy as np
import pytest

import jax
import jax.numpy as jnp

import tessera

jax.config.update("jax_platforms", "cpu")

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float32), BF16, np.dtype(np.float16)]
INTS = [np.dtype(t) for t in (np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8)]
ALL = FLOATS + INTS


def specials(dt):
    """NaNs of both signs with payloads, both zeros, infinities."""
    f = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], np.float32)
    a = f.astype(dt)
    if dt == np.float32:
        bits = a.view(np.uint32).copy()
        bits[0] = 0x7fc00001
        a = bits.view(np.float32)
    return a


def random_array(rng, shape, dt, special=True):
    if dt in FLOATS:
        # few distinct values, so ties are common
        a = (rng.integers(-6, 6, size=shape) / 2).astype(np.float32).astype(dt)
        if special and a.size:
            flat = a.reshape(-1)
            s = specials(dt)
            pos = rng.integers(0, flat.size, size=min(flat.size, 2 * len(s)))
            flat[pos] = np.resize(s, len(pos))
        return a
    info = np.iinfo(dt)
    lo, hi = int(info.min), int(info.max)
    a = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64).astype(dt)
    if a.size > 4:  # ties and extremes
        flat = a.reshape(-1)
        flat[: a.size // 3] = flat[a.size // 3: 2 * (a.size // 3)]
        flat[0], flat[-1] = lo, hi
    return a


def bits(a):
    a = np.asarray(a)
    return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


def canon(a):
    """jax.lax.sort's equality: -0.0 == +0.0, every NaN one value."""
    a = np.asarray(a)
    if a.dtype in FLOATS:
        f = a.astype(np.float32)
        f = np.where(np.isnan(f), np.float32(np.nan), f) + np.float32(0.0)
        return bits(f)
    return bits(a)


def check_unstable(got, x, axis, descending=False):
    ref = np.asarray(jax.lax.sort(jnp.asarray(x), dimension=axis, is_stable=True))
    if descending:
        ref = np.flip(ref, axis)
    np.testing.assert_array_equal(canon(got), canon(ref))
    # the same elements: bit patterns as multisets along the axis
    np.testing.assert_array_equal(np.sort(bits(got), axis), np.sort(bits(x), axis))


@pytest.fixture(params=["host", "tpu"])
def target(request):
    """Both kernels of a sort: the host one (the sort/argsort ops) and the
    network a TPU runs."""
    return request.param


SHAPES = [(1,), (7,), (128,), (300,), (1, 1), (5, 1), (3, 17), (16, 128), (9, 200),
          (2, 3, 33), (4, 5, 6), (2, 2100)]


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sort_stable_matches_lax(dt, shape, target):
    rng = np.random.default_rng(hash((str(dt), shape)) % 2**32)
    x = random_array(rng, shape, dt)
    got = tessera.sort(x, stable=True, target=target)
    ref = np.asarray(jax.lax.sort(jnp.asarray(x), is_stable=True))
    assert got.dtype == x.dtype and got.shape == x.shape
    np.testing.assert_array_equal(bits(got), bits(ref))


@pytest.mark.parametrize("dt", ALL, ids=str)
def test_sort_unstable_and_descending(dt, target):
    rng = np.random.default_rng(7)
    for shape in [(3, 17), (1000,), (8, 64)]:
        x = random_array(rng, shape, dt)
        check_unstable(tessera.sort(x, target=target), x, -1)
        check_unstable(tessera.sort(x, descending=True, target=target), x, -1, descending=True)


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_argsort_stable_matches_jnp(dt, descending, target):
    rng = np.random.default_rng(11)
    for shape in [(37,), (4, 100), (2, 3, 5)]:
        x = random_array(rng, shape, dt)
        got = tessera.argsort(x, stable=True, descending=descending, target=target)
        ref = np.asarray(jnp.argsort(jnp.asarray(x), stable=True, descending=descending))
        assert got.dtype == np.int32
        np.testing.assert_array_equal(got, ref)
        v = tessera.sort(x, stable=True, descending=descending, target=target)
        np.testing.assert_array_equal(bits(v), bits(np.take_along_axis(x, ref, -1)))


def test_argsort_unstable_is_a_sorting_permutation(target):
    rng = np.random.default_rng(3)
    x = random_array(rng, (6, 77), np.dtype(np.float32))
    idx = tessera.argsort(x, target=target)
    assert (np.sort(idx, -1) == np.arange(77)).all()
    check_unstable(np.take_along_axis(x, idx, -1), x, -1)


@pytest.mark.parametrize("axis", [0, 1, 2, -2])
def test_sort_other_axes(axis, target):
    rng = np.random.default_rng(5)
    for dt in [np.dtype(np.float32), np.dtype(np.int16), BF16]:
        x = random_array(rng, (9, 20, 130), dt)
        got = tessera.sort(x, axis=axis, stable=True, target=target)
        ref = np.asarray(jax.lax.sort(jnp.asarray(x), dimension=axis % 3, is_stable=True))
        np.testing.assert_array_equal(bits(got), bits(ref))
        idx = tessera.argsort(x, axis=axis, stable=True, descending=True, target=target)
        np.testing.assert_array_equal(
            idx, np.asarray(jnp.argsort(jnp.asarray(x), axis=axis, stable=True,
                                        descending=True)))


def test_sort_multiple_lexicographic_matches_lax(target):
    rng = np.random.default_rng(9)
    for shape in [(50,), (3, 129), (16, 8)]:
        k1 = random_array(rng, shape, np.dtype(np.float32))
        k2 = random_array(rng, shape, np.dtype(np.int8))
        v1 = random_array(rng, shape, BF16)
        v2 = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
        got = tessera.sort_multiple((k1, k2, v1, v2), num_keys=2, stable=True,
                                    return_indices=True, target=target)
        ref = jax.lax.sort((jnp.asarray(k1), jnp.asarray(k2), jnp.asarray(v1),
                            jnp.asarray(v2), jnp.broadcast_to(
                                jnp.arange(shape[-1], dtype=jnp.int32), shape)),
                           num_keys=2, is_stable=True)
        assert len(got) == 5
        for g, r in zip(got, ref):
            np.testing.assert_array_equal(bits(g), bits(np.asarray(r)))


def test_key_value_unstable_keeps_pairs(target):
    rng = np.random.default_rng(13)
    k = rng.integers(0, 20, size=(4, 333)).astype(np.int32)
    v = np.arange(4 * 333, dtype=np.float32).reshape(4, 333)
    sk, sv = tessera.sort_multiple((k, v), target=target)
    np.testing.assert_array_equal(sk, np.sort(k, -1))
    # each value still sits with its key
    flat_k = k.reshape(-1)
    np.testing.assert_array_equal(flat_k[sv.astype(np.int64)], sk)
    np.testing.assert_array_equal(np.sort(sv, -1), v)


def test_special_floats_placement(target):
    x = specials(np.dtype(np.float32))
    got = tessera.sort(x, stable=True, target=target)
    ref = np.asarray(jax.lax.sort(jnp.asarray(x), is_stable=True))
    np.testing.assert_array_equal(bits(got), bits(ref))
    # NaNs of both signs last, the zeros in input order
    assert np.isnan(got[-2:]).all() and not np.isnan(got[:-2]).any()
    d = tessera.sort(x, stable=True, descending=True, target=target)
    assert np.isnan(d[:2]).all() and not np.isnan(d[2:]).any()


@pytest.mark.parametrize("dt", ALL, ids=str)
@pytest.mark.parametrize("shape,k", [((10,), 1), ((10,), 10), ((3, 200), 7), ((128,), 64),
                                     ((2, 5, 9), 4), ((2, 1000), 9), ((3000,), 1),
                                     ((2, 4096), 100)], ids=str)
def test_top_k_matches_lax(dt, shape, k):
    rng = np.random.default_rng(17)
    x = random_array(rng, shape, dt)
    v, i = tessera.top_k(x, k)
    rv, ri = jax.lax.top_k(jnp.asarray(x), k)
    np.testing.assert_array_equal(bits(v), bits(np.asarray(rv)))
    np.testing.assert_array_equal(i, np.asarray(ri))


def test_top_k_smallest_and_axis():
    rng = np.random.default_rng(19)
    x = random_array(rng, (6, 40), np.dtype(np.int32))
    v, i = tessera.top_k(x, 5, smallest=True)
    ref = np.argsort(x, -1, kind="stable")[:, :5]
    np.testing.assert_array_equal(i, ref)
    np.testing.assert_array_equal(v, np.take_along_axis(x, ref, -1))
    v0, i0 = tessera.top_k(x, 3, axis=0)
    rv, ri = jax.lax.top_k(jnp.asarray(x).T, 3)
    np.testing.assert_array_equal(v0, np.asarray(rv).T)
    np.testing.assert_array_equal(i0, np.asarray(ri).T)


def test_errors_name_the_parameter():
    with pytest.raises(ValueError, match="k must be 1..10"):
        tessera.top_k(np.zeros(10, np.float32), 11)
    with pytest.raises(TypeError, match="float64"):
        tessera.sort(np.zeros(4))
    with pytest.raises(ValueError, match="axis 3"):
        tessera.sort(np.zeros((2, 2), np.float32), axis=3)
    with pytest.raises(ValueError, match="num_keys"):
        tessera.sort_multiple([np.zeros(3, np.float32)], num_keys=2)


def test_rows_longer_than_a_block():
    """A small vmem_budget_bytes makes the multi-block merge through HBM."""
    rng = np.random.default_rng(37)
    for dt in [np.dtype(np.float32), BF16, np.dtype(np.uint16)]:
        x = random_array(rng, (2, 3001), dt)
        got = tessera.sort(x, stable=True, vmem_budget_bytes=8192, target="tpu")
        ref = np.asarray(jax.lax.sort(jnp.asarray(x), is_stable=True))
        np.testing.assert_array_equal(bits(got), bits(ref))
        check_unstable(tessera.sort(x, descending=True, vmem_budget_bytes=8192, target="tpu"), x, -1,
                       descending=True)
    k = rng.integers(0, 50, size=5000).astype(np.int32)
    v = rng.standard_normal(5000).astype(np.float32)
    sk, sv, idx = tessera.sort_multiple((k, v), stable=True, return_indices=True,
                                        vmem_budget_bytes=8192, target="tpu")
    ref = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(idx, ref)
    np.testing.assert_array_equal(sv, v[ref])


RAGGED = [np.dtype(np.float32), BF16, np.dtype(np.int32), np.dtype(np.uint32)]


@pytest.mark.parametrize("dt, backend", [(dt, "interp") for dt in RAGGED] +
                         [(np.dtype(np.float32), "cpu")], ids=str)
def test_ragged_rows_longer_than_a_block_match_lax(dt, backend, request):
    """The network a TPU runs (target="tpu"), its multi-block form under a
    small budget, on ragged shapes: lengths not a multiple of 128 (the last
    block through transit buffers of its exact size), more than 64 rows
    that tiles do not divide (a partial last row group), rank 1. Exact
    against jax.lax.sort / jnp.argsort: stable values and indices bit for
    bit (NaNs of both signs, -0.0 and +0.0 in input order), unstable keys
    canonically equal and the same multiset, ascending and descending.
    The cpu backend (a compile per kernel) on one f32 shape only."""
    if backend == "cpu":
        request.getfixturevalue("cpu_backend")
    rng = np.random.default_rng(53)
    kw = dict(vmem_budget_bytes=8192, target="tpu", backend=backend)
    shapes = [(67, 300), (2, 1000), (1001,), (70, 129)] if backend == "interp" else [(67, 300)]
    for shape in shapes:
        x = random_array(rng, shape, dt)
        for descending in (False, True):
            ref = np.asarray(jnp.argsort(jnp.asarray(x), stable=True, descending=descending))
            got = tessera.argsort(x, stable=True, descending=descending, **kw)
            assert got.dtype == np.int32
            np.testing.assert_array_equal(got, ref)
            np.testing.assert_array_equal(bits(tessera.sort(x, stable=True,
                                                            descending=descending, **kw)),
                                          bits(np.take_along_axis(x, ref, -1)))
            check_unstable(tessera.sort(x, descending=descending, **kw), x, -1,
                           descending=descending)
            idx = tessera.argsort(x, descending=descending, **kw)
            assert (np.sort(idx, -1) == np.arange(shape[-1])).all()
            check_unstable(np.take_along_axis(x, idx, -1), x, -1, descending=descending)


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_host_target_sorts_long_rows(backend, request):
    """The host kernel is one block of any size: 100001 positions, no merge."""
    if backend == "cpu":
        request.getfixturevalue("cpu_backend")
    rng = np.random.default_rng(41)
    x = random_array(rng, (2, 100001), np.dtype(np.float32))
    got = tessera.sort(x, stable=True, backend=backend)
    ref = np.asarray(jax.lax.sort(jnp.asarray(x), is_stable=True))
    np.testing.assert_array_equal(bits(got), bits(ref))
    idx = tessera.argsort(x, stable=True, descending=True, backend=backend)
    np.testing.assert_array_equal(
        idx, np.asarray(jnp.argsort(jnp.asarray(x), stable=True, descending=True)))
    k = rng.integers(0, 9, size=70001).astype(np.uint8)
    v = rng.standard_normal(70001).astype(np.float32)
    sk, sv = tessera.sort_multiple((k, v), stable=True, backend=backend)
    ref = np.argsort(k, kind="stable")
    np.testing.assert_array_equal(sk, k[ref])
    np.testing.assert_array_equal(bits(sv), bits(v[ref]))


def test_target_must_be_host_or_tpu():
    with pytest.raises(ValueError, match="target must be 'host' or 'tpu'"):
        tessera.sort(np.zeros(4, np.float32), target="gpu")
    with pytest.raises(ValueError, match="vmem_budget_bytes sizes the blocks of target='tpu'"):
        tessera.sort(np.zeros(4, np.float32), vmem_budget_bytes=8192)


def test_other_axes_over_budget_are_unimplemented_not_wrong():
    with pytest.raises(tessera.CompileError, match="vmem_budget_bytes"):
        tessera.sort(np.zeros((4096, 2), np.float32), axis=0, vmem_budget_bytes=1024,
                     target="tpu")


@pytest.fixture(scope="module")
def cpu_backend():
    try:
        tessera.sort(np.zeros(4, np.float32), backend="cpu")
    except tessera.CompileError as e:
        if "no cpu backend" in str(e):
            pytest.skip("no cpu backend in this build")
        raise
    return "cpu"


def test_cpu_backend_matches_interpreter(cpu_backend, target):
    rng = np.random.default_rng(23)
    for dt, shape in [(np.dtype(np.float32), (5, 300)), (BF16, (128,)),
                      (np.dtype(np.uint8), (3, 17))]:
        x = random_array(rng, shape, dt)
        for kw in [dict(stable=True), dict(descending=True)]:
            a = tessera.sort(x, backend="cpu", **kw, target=target)
            b = tessera.sort(x, backend="interp", **kw, target=target)
            np.testing.assert_array_equal(bits(a), bits(b))
        np.testing.assert_array_equal(tessera.argsort(x, stable=True, backend="cpu", target=target),
                                      np.asarray(jnp.argsort(jnp.asarray(x), stable=True)))
    x = random_array(rng, (4, 50), np.dtype(np.float32))
    v, i = tessera.top_k(x, 6, backend="cpu")
    rv, ri = jax.lax.top_k(jnp.asarray(x), 6)
    np.testing.assert_array_equal(bits(v), bits(np.asarray(rv)))
    np.testing.assert_array_equal(i, np.asarray(ri))


# ---- tessera.jax.sort / argsort / top_k ----

def test_jax_sort_eager_and_jit():
    import tessera.jax as tj
    rng = np.random.default_rng(29)
    x = jnp.asarray(random_array(rng, (4, 300), np.dtype(np.float32)))
    ref = np.asarray(jax.lax.sort(x, is_stable=True))
    np.testing.assert_array_equal(bits(tj.sort(x, stable=True)), bits(ref))
    got = jax.jit(lambda a: tj.sort(a, stable=True, descending=True))(x)
    ref_idx = np.asarray(jnp.argsort(x, stable=True, descending=True))
    np.testing.assert_array_equal(bits(got), bits(np.take_along_axis(np.asarray(x), ref_idx, -1)))
    np.testing.assert_array_equal(jax.jit(lambda a: tj.argsort(a, stable=True,
                                                               descending=True))(x), ref_idx)


def test_jax_top_k_both_backends():
    import tessera.jax as tj
    rng = np.random.default_rng(31)
    x = jnp.asarray(random_array(rng, (3, 77), BF16))
    rv, ri = jax.lax.top_k(x, 9)
    for backend in ["interp", "cpu"]:
        try:
            v, i = jax.jit(lambda a: tj.top_k(a, 9, backend=backend))(x)
        except tessera.CompileError as e:
            if backend == "cpu" and "no cpu backend" in str(e):
                continue
            raise
        np.testing.assert_array_equal(bits(v), bits(np.asarray(rv)))
        np.testing.assert_array_equal(i, np.asarray(ri))


def test_jax_sort_exports_for_tpu():
    import tessera.jax as tj
    x = jnp.zeros((8, 128), jnp.float32)
    exported = jax.export.export(jax.jit(lambda a: tj.sort(a)), platforms=["tpu"])(x)
    assert "tpu_custom_call" in exported.mlir_module()


@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 5)])
def test_empty_arrays_sort_to_empty_arrays(shape):
    x = np.zeros(shape, np.float32)
    assert tessera.sort(x).shape == shape and tessera.sort(x).dtype == np.float32
    i = tessera.argsort(x)
    assert i.shape == shape and i.dtype == np.int32
    a, b, idx = tessera.sort_multiple([x, x.astype(np.int32)], return_indices=True)
    assert a.shape == b.shape == idx.shape == shape
    with pytest.raises(ValueError, match="axis 2"):
        tessera.sort(x, axis=2)


def test_jax_sort_runs_the_host_kernel_on_cpu_and_the_network_for_tpu():
    from tessera.jax import _sort as js
    from tessera import _library
    params = (("shape", (4, 300)), ("dtypes", ("f32",)), ("axis", 1), ("descending", False),
              ("stable", True), ("return_indices", True))
    call = js._call("sort", "v5e", (), params)
    assert "argsort" in call.cpu_kernel.text
    assert "argsort" not in call.kernel.text and " sort " not in call.kernel.text
    assert call.kernel.text == _library.generate("sort", **dict(params)).text


# ---- where the sort ops write (store forwarding) ----

@pytest.mark.parametrize("backend", ["interp", "cpu"])
@pytest.mark.parametrize("finite", [False, True], ids=["specials", "finite"])
def test_sort_ops_write_into_their_store(backend, finite, root, request):
    """tests/lower/lower_sort_dest.tsr: sort and argsort results written
    straight into the stored block, a row range of a larger one, and, when
    the store is strided, the result used twice or the key a load of the ref
    stored to, through their own buffers; every output against jax.lax.sort
    and jnp.argsort. `finite`: no NaN or infinity, with zeros of both signs
    (vqsort sorts those as floats, sort.c puts the zeros back)."""
    if backend == "cpu":
        request.getfixturevalue("cpu_backend")
    kernel = tessera.Module.load(root / "tests" / "lower" / "lower_sort_dest.tsr")["sort_dest"]
    rng = np.random.default_rng(61)
    if finite:
        x = rng.standard_normal((8, 3000)).astype(np.float32)
        x.reshape(-1)[rng.integers(0, x.size, 200)] = np.float32(-0.0)
        x.reshape(-1)[rng.integers(0, x.size, 200)] = np.float32(0.0)
    else:
        x = random_array(rng, (8, 3000), np.dtype(np.float32))
    k = rng.integers(-40, 40, size=(8, 3000)).astype(np.int32)
    a, b, c, d, e, f, g, p, q = kernel.compile(backend)(x, k)

    def lax_sort(v, axis=1):
        return np.asarray(jax.lax.sort(jnp.asarray(v), dimension=axis, is_stable=True))

    s = lax_sort(x)
    for got in (a, b, c):
        np.testing.assert_array_equal(bits(got), bits(s))
    np.testing.assert_array_equal(bits(d), bits(-s))
    for blk in range(2):
        rows = slice(4 * blk, 4 * blk + 4)
        e_blk = e[8 * blk: 8 * blk + 8]
        np.testing.assert_array_equal(bits(e_blk[5:7]), bits(s[rows][2:4]))
        assert not e_blk[[0, 1, 2, 3, 4, 7]].any()
        np.testing.assert_array_equal(bits(f[rows, 3000:4500]), bits(lax_sort(x[rows, 0::2])))
        assert not f[rows, :3000].any() and not f[rows, 4500:].any()
        np.testing.assert_array_equal(bits(g[rows]), bits(lax_sort(x[rows], axis=0)))
        order = np.asarray(jax.lax.sort((jnp.asarray(x[rows]), jnp.asarray(k[rows]),
                                         jnp.broadcast_to(jnp.arange(3000, dtype=jnp.int32),
                                                          (4, 3000))),
                                        dimension=1, is_stable=True, num_keys=2)[2])
        np.testing.assert_array_equal(q[rows], order)
    np.testing.assert_array_equal(p, np.argsort(k, axis=1, kind="stable"))


@pytest.mark.parametrize("backend", ["interp", "cpu"])
def test_key_value_sort_reuses_its_buffers_across_calls_and_threads(backend, request):
    """The sort's temporaries are kept by the executable between calls
    (base/sort.c, the scratch): the same executable called again on other
    data, and from two threads at once, gives each call its own stable
    (key, value) order. Long rows (vqsort's path) with many ties."""
    if backend == "cpu":
        request.getfixturevalue("cpu_backend")
    import threading

    from tessera import _library

    n = 30001
    exe = _library.executable("sort", backend, shape=(n,), dtypes=["u32", "u32"],
                              target=_library.TARGETS["host"])
    rng = np.random.default_rng(43)
    inputs = [(rng.integers(0, r, size=n, dtype=np.uint64).astype(np.uint32),
               rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32))
              for r in (50, 2**32, 7, 1000)]

    def check(k, v, got):
        ref = np.argsort(k, kind="stable")
        np.testing.assert_array_equal(got[0], k[ref])
        np.testing.assert_array_equal(got[1], v[ref])

    for k, v in inputs + inputs[::-1]:
        check(k, v, exe(k, v))
    results = [[] for _ in range(2)]

    def worker(t):
        for _ in range(3):
            for k, v in inputs[t::2]:
                results[t].append((k, v, exe(k, v)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [len(r) for r in results] == [6, 6]
    for r in results:
        for k, v, got in r:
            check(k, v, got)
