"""Multi-device Pallas kernels through tessera.jax: a kernel called under
`shard_map` over N devices runs as one tessera run with devices=N
(tessera/jax/_multi.py, docs/jax.md "Several devices").

Several CPU devices must be asked for before jax starts, so the cases that
need them run in ONE subprocess (this file as a script, with
XLA_FLAGS=--xla_force_host_platform_device_count=4) that prints each case's
outcome as JSON; each test asserts one case. The oracle is JAX's TPU
interpret mode (all_gather with dma_execution_mode="eager": its default mode
returns rows never copied, see docs/jax.md). The rendezvous itself and the
option checks are tested in this process.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading

if __name__ == "__main__":
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") +
                               " --xla_force_host_platform_device_count=4").strip()
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

NDEV = 4


# ---- The subprocess: every case that needs several devices -----------------------


def _jax_call(**params):
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu
    return functools.partial(pl.pallas_call, interpret=pltpu.InterpretParams(**params))


def _tessera_call(**options):
    import tessera.jax as tj
    return functools.partial(tj.pallas_call, **options)


def _same(got, want) -> str:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, want {want.shape}"
    if not np.array_equal(got, want, equal_nan=True):
        bad = np.argwhere(~((got == want) | (np.isnan(got) & np.isnan(want))))
        return f"{len(bad)} elements differ, first at {tuple(bad[0])}: {got[tuple(bad[0])]} vs " \
               f"{want[tuple(bad[0])]}"
    return ""


def _all_gather(n, mode):
    import jax
    from jax.experimental.pallas.ops.tpu import all_gather

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:n]), ("x",))
    x = np.random.default_rng(n).standard_normal((n * 8, 128), dtype=np.float32)
    jax.clear_caches()
    with mode:
        return np.asarray(all_gather.all_gather(x, mesh=mesh, axis_name="x")), x


def _cases():
    """name -> function returning "" (passed) or what went wrong."""
    import jax
    import jax.numpy as jnp
    from jax.experimental.pallas import tpu as pltpu

    import tessera.jax as tj
    from pallas_kernels import multidev_ring as R

    devs = jax.devices()
    cases = {}

    for n in (2, 4):
        for backend in ("interp", "cpu"):
            def ag(n=n, backend=backend):
                want, x = _all_gather(n, pltpu.force_tpu_interpret_mode(
                    pltpu.InterpretParams(dma_execution_mode="eager")))
                if _same(want, x):
                    return "JAX (eager DMAs) is not the identity: " + _same(want, x)
                got, _ = _all_gather(n, tj.interpret(backend=backend))
                return _same(got, want)
            cases[f"all_gather_{n}_{backend}"] = ag

    def ag_races():
        # tessera's lazy DMAs complete most recent first, like JAX's on_wait;
        # with race detection and several schedules the kernel is clean
        want, _ = _all_gather(NDEV, pltpu.force_tpu_interpret_mode(
            pltpu.InterpretParams(dma_execution_mode="eager")))
        for seed in (0, 1, 2):
            got, _ = _all_gather(NDEV, tj.interpret(detect_races=True, dma_mode="lazy",
                                                    schedule_seed=seed))
            if _same(got, want):
                return f"schedule_seed={seed}: " + _same(got, want)
        return ""
    cases["all_gather_4_races"] = ag_races

    x = np.random.default_rng(5).standard_normal((NDEV * 8, 128), dtype=np.float32)
    for n in (2, 4):
        mesh = jax.sharding.Mesh(np.array(devs[:n]), (R.AXIS,))
        xs = x[:n * 8]
        for backend in ("interp", "cpu"):
            def ring(mesh=mesh, xs=xs, n=n, backend=backend):
                want = np.asarray(R.ring(_jax_call(), mesh, xs))
                if _same(want, R.ring_reference(xs, n)):
                    return "JAX vs reference: " + _same(want, R.ring_reference(xs, n))
                return _same(np.asarray(R.ring(_tessera_call(backend=backend), mesh, xs)),
                             want)
            cases[f"ring_{n}_{backend}"] = ring

    mesh4 = jax.sharding.Mesh(np.array(devs[:NDEV]), (R.AXIS,))

    def ring_repeated():
        # the same jitted kernel called three times: the rendezvous pairs the
        # devices' k-th calls
        pc = _tessera_call(detect_races=True)
        first = np.asarray(R.ring(pc, mesh4, x))
        again = [np.asarray(R.ring(pc, mesh4, x)) for _ in range(2)]
        want = np.asarray(R.ring(_jax_call(), mesh4, x))
        return _same(first, want) or _same(again[0], want) or _same(again[1], want)
    cases["ring_repeated"] = ring_repeated

    def ring_twice_in_one_program():
        # two calls of one kernel in one shard_map body: two rendezvous
        from jax.sharding import PartitionSpec as P
        from jax.experimental import pallas as pl

        def twice(pallas_call):
            def local(xs):
                call = pallas_call(
                    R.ring_kernel, out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
                    in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                    out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                    scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                    pltpu.SemaphoreType.REGULAR],
                    compiler_params=pltpu.CompilerParams(collective_id=0))
                return call(call(xs) - 1.0)
            return np.asarray(jax.jit(jax.shard_map(
                local, mesh=mesh4, in_specs=P(R.AXIS), out_specs=P(R.AXIS),
                check_vma=False))(x))
        return _same(twice(_tessera_call()), twice(_jax_call()))
    cases["ring_twice_in_one_program"] = ring_twice_in_one_program

    def ring_check_vma():
        # shard_map with check_vma=True: the kernel's out_shape says how the
        # output varies (JAX's TPU interpret mode itself fails on this one:
        # "Primitive add requires varying manual axes to match")
        from jax.sharding import PartitionSpec as P
        from jax.experimental import pallas as pl

        def local(xs):
            out = jax.ShapeDtypeStruct(xs.shape, xs.dtype,
                                       manual_axis_type=jax.typeof(xs).manual_axis_type)
            return tj.pallas_call(
                R.ring_kernel, out_shape=out,
                in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.REGULAR],
                compiler_params=pltpu.CompilerParams(collective_id=0))(xs)
        got = np.asarray(jax.jit(jax.shard_map(local, mesh=mesh4, in_specs=P(R.AXIS),
                                               out_specs=P(R.AXIS)))(x))
        return _same(got, R.ring_reference(x, NDEV))
    cases["ring_check_vma"] = ring_check_vma

    def ring_eager_shard_map():
        # shard_map without jax.jit
        got = R.ring(_tessera_call(), mesh4, x, jit=False)
        return _same(np.asarray(got), R.ring_reference(x, NDEV))
    cases["ring_eager_shard_map"] = ring_eager_shard_map

    def ring_lower_to_tsr():
        # the .tsr of a kernel called under shard_map (what `tessera run
        # --devices 4` would run)
        from jax.sharding import PartitionSpec as P
        from jax.experimental import pallas as pl
        texts = []

        def local(xs):
            texts.append(tj.pallas_call(
                R.ring_kernel, out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
                in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.REGULAR],
                compiler_params=pltpu.CompilerParams(collective_id=0)).lower_to_tsr(xs))
            return xs
        jax.make_jaxpr(jax.shard_map(local, mesh=mesh4, in_specs=P(R.AXIS),
                                     out_specs=P(R.AXIS), check_vma=False))(x)
        want = ["scratch %barrier: sem", "sem_signal %barrier", "= device_id : i32",
                "send %send_sem device"]
        missing = [w for w in want if not texts or w not in texts[0]]
        return f"missing {missing} in:\n{texts[0] if texts else ''}" if missing else ""
    cases["ring_lower_to_tsr"] = ring_lower_to_tsr

    mesh2d = jax.sharding.Mesh(np.array(devs[:NDEV]).reshape(2, 2), ("a", "b"))
    for backend in ("interp", "cpu"):
        def m2(backend=backend):
            want = np.asarray(R.mesh2d(_jax_call(), mesh2d, x))
            if _same(want, R.mesh2d_reference(x, 2, 2)):
                return "JAX vs reference: " + _same(want, R.mesh2d_reference(x, 2, 2))
            return _same(np.asarray(R.mesh2d(_tessera_call(backend=backend), mesh2d, x)),
                         want)
        cases[f"mesh2d_{backend}"] = m2

    for backend in ("interp", "cpu"):
        def ca(backend=backend):
            want = np.asarray(R.combined_axes(_jax_call(), mesh2d, x))
            if _same(want, R.combined_axes_reference(x, 2, 2)):
                return "JAX vs reference: " + _same(want, R.combined_axes_reference(x, 2, 2))
            return _same(np.asarray(R.combined_axes(_tessera_call(backend=backend), mesh2d,
                                                    x)), want)
        cases[f"combined_axes_{backend}"] = ca

    def unknown_combined_axis_refused():
        try:
            np.asarray(R.unknown_combined_axis(_tessera_call(), mesh2d, x))
        except tj.TranslationError as e:
            if (e.file.endswith("multidev_ring.py")
                    and e.line == R.UNKNOWN_COMBINED_AXIS_LINE
                    and "'z' is not an axis" in str(e)):
                return ""
            return f"TranslationError at {e.file}:{e.line}: {e}"
        return "no TranslationError"
    cases["unknown_combined_axis_refused"] = unknown_combined_axis_refused

    for backend in ("interp", "cpu"):
        def dl(backend=backend):
            # JAX's TPU interpret mode hangs on this kernel (it has no
            # deadlock detection): tessera alone
            try:
                np.asarray(R.deadlock(_tessera_call(backend=backend), mesh4, x))
            except Exception as e:  # noqa: BLE001 - the error is the result
                text = str(e)
                where = f"multidev_ring.py:{R.DEADLOCK_LINE}:"
                missing = [d for d in range(NDEV)
                           if f"{where}5: error: kernel @deadlock_kernel, device {d}," not in text]
                if "deadlock" not in text or missing:
                    return f"no deadlock at {where} for device(s) {missing}: {text[-600:]}"
                return ""
            return "no error"
        cases[f"deadlock_{backend}"] = dl

    def skipped_invocation_does_not_poison_the_next():
        # device 1 skips the kernel in one invocation (a cond on axis_index):
        # that invocation fails with the rendezvous error on the devices that
        # came; the next ones, where every device calls the kernel, must pair
        # the devices' calls again and succeed
        from jax.sharding import PartitionSpec as P
        from jax.experimental import pallas as pl
        from tessera.jax import _multi

        traces = []

        def local(xs, skip):
            traces.append(1)
            call = tj.pallas_call(
                R.ring_kernel, out_shape=jax.ShapeDtypeStruct(xs.shape, xs.dtype),
                in_specs=[pl.BlockSpec(memory_space=pltpu.VMEM)],
                out_specs=pl.BlockSpec(memory_space=pltpu.VMEM),
                scratch_shapes=[pltpu.SemaphoreType.DMA, pltpu.SemaphoreType.DMA,
                                pltpu.SemaphoreType.REGULAR],
                compiler_params=pltpu.CompilerParams(collective_id=0))
            absent = jnp.logical_and(skip[0], jax.lax.axis_index(R.AXIS) == 1)
            return jax.lax.cond(absent, lambda v: v, call, xs)

        saved = _multi.RENDEZVOUS_TIMEOUT
        _multi.RENDEZVOUS_TIMEOUT = 1.0           # read when the call site is traced
        try:
            f = jax.jit(jax.shard_map(local, mesh=mesh4, in_specs=(P(R.AXIS), P()),
                                      out_specs=P(R.AXIS), check_vma=False))
            want = R.ring_reference(x, NDEV)
            first = np.asarray(f(x, np.array([False])))
            if _same(first, want):
                return "before the failure: " + _same(first, want)
            try:
                np.asarray(f(x, np.array([True])))
                return "the invocation device 1 skipped did not fail"
            except Exception as e:  # noqa: BLE001 - the error is the result
                if "device(s) 1 of 4 did not call it within 1 s" not in str(e):
                    return f"skipped invocation: {type(e).__name__}: {str(e)[-600:]}"
            traced = len(traces)
            for attempt in range(2):
                try:
                    got = np.asarray(f(x, np.array([False])))
                except Exception as e:  # noqa: BLE001 - reported
                    return f"good invocation {attempt + 1}: {type(e).__name__}: {str(e)[-600:]}"
                if _same(got, want):
                    return f"good invocation {attempt + 1}: " + _same(got, want)
            # not traced again: the good invocations met at the rendezvous
            # that failed
            if len(traces) != traced:
                return f"traced again ({len(traces) - traced} times) after the failure"
            return ""
        finally:
            _multi.RENDEZVOUS_TIMEOUT = saved
    cases["skipped_invocation_does_not_poison_the_next"] = \
        skipped_invocation_does_not_poison_the_next

    def devices_mismatch():
        try:
            np.asarray(R.ring(_tessera_call(devices=2), mesh4, x))
        except ValueError as e:
            return "" if "devices=2" in str(e) and "4 devices" in str(e) else str(e)
        return "no error"
    cases["devices_mismatch"] = devices_mismatch

    for backend in ("interp", "cpu"):
        def mesh_kernel(backend=backend):
            # pl.kernel over two TensorCores inside shard_map over NDEV
            # devices: one tessera run, each (device, core) its own rows
            from jax import lax
            from jax._src import shard_map
            from jax.experimental import pallas as pl
            P = jax.sharding.PartitionSpec
            mesh = jax.sharding.Mesh(np.array(devs[:NDEV]), ("x",))
            xs = np.random.default_rng(11).standard_normal((NDEV * 16, 128)).astype(np.float32)
            xd = jax.device_put(xs, jax.sharding.NamedSharding(mesh, P("x")))
            with tj.interpret(backend=backend):
                @pl.kernel(mesh=pltpu.TensorCoreMesh(axis_name="core", num_cores=2),
                           out_type=jax.ShapeDtypeStruct((16, 128), jnp.float32),
                           scratch_types=[pltpu.VMEM((8, 128), jnp.float32),
                                          pltpu.SemaphoreType.DMA])
                def k(x_ref, o_ref, v, sem):
                    c, d = lax.axis_index("core"), lax.axis_index("x")
                    pltpu.async_copy(x_ref.at[pl.ds(c * 8, 8)], v, sem).wait()
                    v[...] = v[...] * 2 + (d * 10 + c).astype(jnp.float32)
                    pltpu.async_copy(v, o_ref.at[pl.ds(c * 8, 8)], sem).wait()
                got = jax.jit(shard_map.shard_map(k, mesh=mesh, in_specs=P("x"),
                                                  out_specs=P("x"), check_vma=False))(xd)
            row = np.arange(NDEV * 16)
            want = xs * 2 + ((row // 16) * 10 + (row % 16) // 8)[:, None].astype(np.float32)
            return _same(np.asarray(got), want)
        cases[f"mesh_kernel_{backend}"] = mesh_kernel

    for backend in ("interp", "cpu"):
        def remote_future(backend=backend):
            # a remote copy to the right neighbour started by one call, its
            # send and receive semaphores the call's outputs; the next two
            # calls wait for the send and for the receive (docs/semantics.md,
            # "Semaphores between kernels")
            from jax.sharding import PartitionSpec as P
            from jax.experimental import pallas as pl
            any_, sem = (pl.BlockSpec(memory_space=pl.ANY),
                         pl.BlockSpec(memory_space=pltpu.SEMAPHORE))
            call = functools.partial(tj.pallas_call, backend=backend)

            def start_kernel(x_ref, o_ref, send, recv):
                me = jax.lax.axis_index(R.AXIS)
                right = jax.lax.rem(me + 1, NDEV)
                left = jax.lax.rem(me + NDEV - 1, NDEV)
                barrier = pltpu.get_barrier_semaphore()
                pl.semaphore_signal(barrier, device_id=left)
                pl.semaphore_wait(barrier, 1)
                pltpu.make_async_remote_copy(x_ref, o_ref, send, recv, device_id=right).start()

            def wait_kernel(x_ref, o_ref, s, aliased):
                del aliased
                pltpu.make_async_copy(x_ref, o_ref, s).wait()

            def local(xs):
                o, send, recv = call(
                    start_kernel, out_shape=(jax.ShapeDtypeStruct.like(xs),
                                             pltpu.SemaphoreType.DMA(()),
                                             pltpu.SemaphoreType.DMA(())),
                    in_specs=[any_], out_specs=(any_, sem, sem),
                    compiler_params=pltpu.CompilerParams(collective_id=0))(xs)
                xs = call(wait_kernel, out_shape=jax.ShapeDtypeStruct.like(xs),
                          in_specs=[any_, any_, sem], out_specs=any_,
                          input_output_aliases={0: 0})(xs, xs, send)
                return call(wait_kernel, out_shape=jax.ShapeDtypeStruct.like(xs),
                            in_specs=[any_, any_, sem], out_specs=any_,
                            input_output_aliases={1: 0})(xs, o, recv)
            got = jax.jit(jax.shard_map(local, mesh=mesh4, in_specs=P(R.AXIS),
                                        out_specs=P(R.AXIS), check_vma=False))(x)
            return _same(np.asarray(got), np.roll(x, 8, axis=0))
        cases[f"remote_future_{backend}"] = remote_future
    return cases


def _worker(names) -> dict:
    cases = _cases()
    out = {}
    for name in names or list(cases):
        try:
            out[name] = cases[name]()
        except Exception as e:  # noqa: BLE001 - reported per case
            out[name] = f"{type(e).__name__}: {str(e)[-1500:]}"
    return out


CASES = (["all_gather_2_interp", "all_gather_2_cpu", "all_gather_4_interp", "all_gather_4_cpu",
          "all_gather_4_races", "ring_2_interp", "ring_2_cpu", "ring_4_interp", "ring_4_cpu",
          "ring_repeated", "ring_twice_in_one_program", "ring_check_vma",
          "ring_eager_shard_map", "ring_lower_to_tsr", "mesh2d_interp", "mesh2d_cpu",
          "combined_axes_interp", "combined_axes_cpu",
          "unknown_combined_axis_refused", "deadlock_interp", "deadlock_cpu", "devices_mismatch",
          "skipped_invocation_does_not_poison_the_next", "mesh_kernel_interp",
          "mesh_kernel_cpu", "remote_future_interp", "remote_future_cpu"])

_RESULTS: dict = {}


def _results() -> dict:
    if not _RESULTS:
        env = dict(os.environ, JAX_PLATFORMS="cpu")
        env.pop("XLA_FLAGS", None)
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), *CASES],
                              capture_output=True, text=True, timeout=900, env=env)
        assert proc.returncode == 0, proc.stderr[-4000:]
        _RESULTS.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return _RESULTS


import pytest  # noqa: E402


@pytest.mark.parametrize("case", CASES)
def test_multidev(case):
    outcome = _results()[case]
    assert outcome == "", f"{case}: {outcome}"


# ---- In this process: the rendezvous and the option checks -------------------------


def _rendezvous(n, run, timeout=30.0):
    from tessera.jax import _multi
    return _multi.Rendezvous(n, run, "test kernel", timeout=timeout)


def _threads(rv, calls):
    """Runs rv.call(device, inputs) for each (device, inputs) in its own
    thread; returns the results (or exceptions) in order."""
    results = [None] * len(calls)

    def one(i, device, inputs):
        try:
            results[i] = rv.call(device, inputs)
        except BaseException as e:  # noqa: BLE001
            results[i] = e
    threads = [threading.Thread(target=one, args=(i, d, x)) for i, (d, x) in enumerate(calls)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return results


def test_rendezvous_stacks_and_slices():
    runs = []

    def run(inputs):  # outputs: a stacked sum over devices, and the stacked input * 10
        runs.append([list(x) for x in inputs])
        stacked = np.stack([x[0] for x in inputs])
        return [np.broadcast_to(stacked.sum(axis=0), stacked.shape), stacked * 10]

    rv = _rendezvous(3, run)
    res = _threads(rv, [(d, [np.full(2, d + 1.0)]) for d in (2, 0, 1)])
    assert len(runs) == 1                      # one run for the three calls
    for (d, r) in zip((2, 0, 1), res):
        assert isinstance(r, list), r
        np.testing.assert_array_equal(r[0], [6.0, 6.0])
        np.testing.assert_array_equal(r[1], [10.0 * (d + 1)] * 2)


def test_rendezvous_pairs_kth_calls_of_each_device():
    def run(inputs):
        return [np.stack([x[0] for x in inputs])]

    rv = _rendezvous(2, run)
    # device 0 makes its two calls before device 1 makes any
    calls = [(0, [np.array([1.0])]), (0, [np.array([2.0])])]
    results = [None, None]

    def dev0():
        results[0] = [rv.call(d, x)[0][0] for d, x in calls]

    t = threading.Thread(target=dev0)
    t.start()
    out1 = [rv.call(1, [np.array([10.0])])[0][0], rv.call(1, [np.array([20.0])])[0][0]]
    t.join(60)
    assert results[0] == [1.0, 2.0] and out1 == [10.0, 20.0]


def test_rendezvous_error_reaches_every_device():
    def run(inputs):
        raise RuntimeError("kernel failed")

    res = _threads(_rendezvous(3, run), [(d, [np.zeros(1)]) for d in range(3)])
    assert all(isinstance(r, RuntimeError) and "kernel failed" in str(r) for r in res), res


def test_rendezvous_times_out_naming_the_missing_device():
    from tessera.jax import _multi

    ran = []
    rv = _rendezvous(3, lambda inputs: ran.append(1) or [], timeout=0.5)
    res = _threads(rv, [(0, [np.zeros(1)]), (2, [np.zeros(1)])])
    assert not ran
    for r in res:
        assert isinstance(r, _multi.RendezvousError), r
        assert "device(s) 1 of 3 did not call it" in str(r), str(r)


def test_rendezvous_failed_invocation_does_not_poison_the_next():
    # device 1 skips call 1; every device makes call 2, which must pair the
    # devices' second calls with device 1's first (its count moved past the
    # failed invocation) and run
    from tessera.jax import _multi

    runs = []

    def run(inputs):
        runs.append([float(x[0][0]) for x in inputs])
        return [np.stack([x[0] for x in inputs])]

    rv = _rendezvous(3, run, timeout=0.5)
    failed = _threads(rv, [(0, [np.array([1.0])]), (2, [np.array([3.0])])])
    assert all(isinstance(r, _multi.RendezvousError) and "call 1 of the kernel: device(s) 1 "
               "of 3" in str(r) for r in failed), failed
    rv._timeout = 30.0
    for k in (2, 3):
        res = _threads(rv, [(d, [np.array([10.0 * k + d])]) for d in (1, 0, 2)])
        assert [r if isinstance(r, BaseException) else float(r[0][0]) for r in res] == \
            [10.0 * k + 1, 10.0 * k, 10.0 * k + 2]
    assert runs == [[20.0, 21.0, 22.0], [30.0, 31.0, 32.0]]
    assert not rv._open                        # nothing left behind


def test_rendezvous_waits_for_a_run_longer_than_its_timeout():
    # the timeout bounds the wait for the other devices, not the kernel's
    # run: device 0 arrives first and waits while device 1 runs the kernel
    # for 0.6 s, three times the timeout
    def run(inputs):
        threading.Event().wait(0.6)
        return [np.stack([x[0] for x in inputs])]

    rv = _rendezvous(2, run, timeout=0.2)
    results = [None]

    def dev0():
        try:
            results[0] = rv.call(0, [np.array([1.0])])
        except BaseException as e:  # noqa: BLE001
            results[0] = e
    t = threading.Thread(target=dev0)
    t.start()
    with rv._cond:                             # nothing notifies an arrival: poll
        for _ in range(6000):
            if 0 in rv._open:
                break
            rv._cond.wait(0.01)
        assert 0 in rv._open
    out1 = rv.call(1, [np.array([2.0])])
    t.join(60)
    assert isinstance(results[0], list), results[0]
    assert float(results[0][0][0]) == 1.0 and float(out1[0][0]) == 2.0


def test_rendezvous_rejects_a_device_out_of_range():
    from tessera.jax import _multi

    with pytest.raises(_multi.RendezvousError, match="device index 3 is not in 0..1"):
        _rendezvous(2, lambda inputs: []).call(3, [])


def test_devices_outside_shard_map_is_an_error():
    import jax
    import jax.numpy as jnp
    import tessera.jax as tj

    def copy(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    out = jax.ShapeDtypeStruct((8, 128), jnp.float32)
    with pytest.raises(ValueError, match="inside shard_map"):
        tj.pallas_call(copy, out, devices=2)(np.zeros((8, 128), np.float32))
    with pytest.raises(ValueError, match="devices"):
        tj.pallas_call(copy, out, devices=0)


if __name__ == "__main__":
    print(json.dumps(_worker(sys.argv[1:])))
