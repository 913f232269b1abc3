"""Runs through tessera.compile / Executable on numpy arrays, on both
backends: results, every dtype, input checking, options, output callbacks."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

import tessera

COPY = """kernel @copy
  grid(2) semantics(parallel)
  in %x: {dt}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: {dt}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{{
  %v = load %x[:, :] : {dt}[8, 128]
  store %y[:, :], %v
}}
"""

DOUBLE = """kernel @double
  grid(2) semantics(parallel)
  in %x: {dt}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %y: {dt}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
{{
  %v = load %x[:, :] : {dt}[8, 128]
  %w = add %v, %v : {dt}[8, 128]
  store %y[:, :], %w
}}
"""

CORES = """kernel @cores
  grid(4) semantics(parallel)
  out %y: i32[4, 128] vmem block[1, 128] map(%i) -> (%i, 0)
{
  %c = core_id : i32
  store %y[:, :], %c
}
"""

PRINTS = """kernel @prints
  grid(3)
  out %y: i32[8, 128] vmem
{
  %i = program_id 0 : i32
  print "step {}", %i
  store %y[:, :], %i
}
"""

DEVICES = """kernel @dev
  out %y: i32[8, 128] vmem
{
  %d = device_id : i32
  store %y[:, :], %d
}
"""


def sample(name: str, shape=(16, 128)) -> np.ndarray:
    rng = np.random.default_rng(7)
    dt = tessera.numpy_dtype(name)
    if name == "i1":
        return rng.integers(0, 2, shape).astype(bool)
    if name in ("f32", "bf16", "f16", "f8e4m3fn", "f8e5m2"):
        return rng.uniform(-8, 8, shape).astype(np.float32).astype(dt)
    info = ml_dtypes.iinfo(dt)
    return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dt)


def test_add_example_matches_numpy(root, backend):
    k = tessera.Module.load(root / "kernels" / "examples" / "add.tsr")["add"]
    a, b = (sample("f32", k.inputs[0].shape) for _ in range(2))
    c = tessera.run(k, a, b, backend=backend)
    assert c.dtype == np.float32 and c.shape == a.shape
    np.testing.assert_array_equal(c, a + b)


ALL_DTYPES = ["f32", "bf16", "f16", "i32", "u32", "i16", "u16", "i8", "u8", "i1",
              "i4", "u4", "i2", "u2", "f8e4m3fn", "f8e5m2"]


@pytest.mark.parametrize("dt", ALL_DTYPES)
def test_dtype_round_trip(dt, backend):
    assert dt in tessera.dtypes()
    x = sample(dt)
    y = tessera.run(tessera.Module.parse(COPY.format(dt=dt), f"copy_{dt}.tsr"), x,
                    backend=backend)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y, x)


def test_every_library_dtype_is_round_tripped():
    # the parametrization above covers the library's whole list
    assert set(tessera.dtypes()) == set(ALL_DTYPES)


@pytest.mark.parametrize("dt", ["bf16", "f16", "i8", "u16"])
def test_arithmetic_in_the_declared_dtype(dt, backend):
    x = sample(dt)
    y = tessera.run(tessera.Module.parse(DOUBLE.format(dt=dt), "d.tsr"), x, backend=backend)
    assert y.dtype == x.dtype
    if dt in ("bf16", "f16"):
        expected = (x.astype(np.float32) * 2).astype(x.dtype)  # exact: a doubling
    else:
        expected = x + x  # wraps as the kernel's integer add does
    np.testing.assert_array_equal(y, expected)


def test_bf16_is_passed_as_bit_patterns():
    bits = np.array([0x3F80, 0xC000, 0x7F80, 0x0001], dtype=np.uint16)  # 1, -2, inf, tiny
    x = np.zeros((16, 128), dtype=ml_dtypes.bfloat16)
    x.view(np.uint16)[0, :4] = bits
    y = tessera.run(tessera.Module.parse(COPY.format(dt="bf16"), "c.tsr"), x)
    assert list(y.view(np.uint16)[0, :4]) == list(bits)
    assert float(y[0, 0]) == 1.0 and float(y[0, 1]) == -2.0


def test_inputs_are_not_copied_or_changed():
    exe = tessera.compile(tessera.Module.parse(DOUBLE.format(dt="f32"), "d.tsr"))
    x = sample("f32")
    before = x.copy()
    y = exe(x)
    np.testing.assert_array_equal(x, before)
    assert not np.shares_memory(x, y)


def test_non_contiguous_and_list_inputs_are_converted():
    exe = tessera.compile(tessera.Module.parse(COPY.format(dt="i32"), "c.tsr"))
    big = np.arange(16 * 256, dtype=np.int32).reshape(16, 256)
    view = big[:, ::2]
    assert not view.flags.c_contiguous
    np.testing.assert_array_equal(exe(view), view)
    as_list = view.tolist()
    np.testing.assert_array_equal(exe(as_list), view)


def test_wrong_number_of_inputs_names_them():
    exe = tessera.compile(tessera.Module.parse(COPY.format(dt="f32"), "c.tsr"))
    with pytest.raises(TypeError, match=r"kernel @copy takes 1 input \(%x\), got 2"):
        exe(sample("f32"), sample("f32"))
    with pytest.raises(TypeError, match=r"takes 1 input \(%x\), got 0"):
        exe()


def test_wrong_shape_names_the_operand():
    exe = tessera.compile(tessera.Module.parse(COPY.format(dt="f32"), "c.tsr"))
    with pytest.raises(ValueError, match=r"operand %x has shape \[16, 128\], got an array of "
                                         r"shape \[8, 128\]"):
        exe(np.zeros((8, 128), np.float32))


def test_wrong_dtype_names_the_operand():
    exe = tessera.compile(tessera.Module.parse(COPY.format(dt="bf16"), "c.tsr"))
    with pytest.raises(TypeError, match=r"operand %x is bf16 .*ml_dtypes.bfloat16.*got an array "
                                        r"of dtype float32"):
        exe(np.zeros((16, 128), np.float32))
    with pytest.raises(TypeError, match="operand %x is bf16"):
        exe(np.zeros((16, 128), np.uint16))  # bit patterns must be viewed as bfloat16


def test_unknown_options_are_named():
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")["copy"]
    with pytest.raises(TypeError, match=r"unknown option 'detect_race'; did you mean "
                                        r"'detect_races'\?"):
        tessera.compile(k, detect_race=True)
    exe = tessera.compile(k)
    with pytest.raises(TypeError, match=r"unknown option 'cores'"):
        exe(sample("f32"), cores=2)  # an executable's option, not a run's
    with pytest.raises(ValueError, match=r"backend must be one of 'interp', 'cpu'"):
        tessera.compile(k, backend="tpu")
    with pytest.raises(ValueError, match=r"dma_mode must be one of 'lazy', 'eager'"):
        tessera.compile(k, dma_mode="fast")
    with pytest.raises(ValueError, match="unknown chip 'v9'"):
        tessera.compile(k, chip="v9")
    with pytest.raises(ValueError, match="cores must be >= 1"):
        tessera.compile(k, cores=0)


def test_cores_option_reaches_the_run(backend):
    k = tessera.Module.parse(CORES, "cores.tsr")["cores"]
    one = tessera.run(k, backend=backend)
    two = tessera.run(k, backend=backend, cores=2)
    assert (one == 0).all()
    # grid(4) over 2 cores: contiguous chunks, steps 0-1 on core 0, 2-3 on core 1
    assert list(two[:, 0]) == [0, 0, 1, 1]


def test_devices_option_adds_a_leading_dimension(backend):
    exe = tessera.compile(tessera.Module.parse(DEVICES, "dev.tsr"), backend, devices=3)
    y = exe()
    assert y.shape == (3, 8, 128)
    assert list(y[:, 0, 0]) == [0, 1, 2]
    copy = tessera.compile(tessera.Module.parse(COPY.format(dt="f32"), "c.tsr"), backend,
                           devices=2)
    with pytest.raises(ValueError, match="a leading dimension of 2 devices"):
        copy(sample("f32"))
    x = sample("f32", (2, 16, 128))
    np.testing.assert_array_equal(copy(x), x)


def test_run_returns_stats_and_options_change_them():
    k = tessera.Module.parse(PRINTS, "p.tsr")["prints"]
    r = tessera.compile(k, on_print=lambda t: None).run()
    assert r.stats.grid_steps == 3
    assert r.outputs[0].shape == (8, 128) and (r.outputs[0] == 2).all()
    r2 = tessera.compile(k, on_print=lambda t: None, uninit="zero", check=False).run()
    assert r2.stats.grid_steps == 3 and r2.warnings == ()


def test_print_goes_to_stdout_by_default(capsys, backend):
    k = tessera.Module.parse(PRINTS, "p.tsr")["prints"]
    tessera.run(k, backend=backend)
    out = capsys.readouterr().out
    assert out.splitlines() == ["step 0", "step 1", "step 2"]


def test_print_callback_levels():
    k = tessera.Module.parse(PRINTS, "p.tsr")["prints"]
    seen_exe, seen_run, seen_ctx = [], [], []
    exe = tessera.compile(k, on_print=seen_exe.append)
    exe()
    exe(on_print=seen_run.append)  # the run's callback wins
    assert "".join(seen_exe) == "step 0\nstep 1\nstep 2\n"
    assert "".join(seen_run) == "step 0\nstep 1\nstep 2\n"
    ctx = tessera.Context(on_print=seen_ctx.append)
    tessera.run(k, context=ctx)  # the context's is the last default
    assert "".join(seen_ctx).count("step") == 3
    assert len(seen_exe) <= 6  # no duplicates from the other levels


def test_print_callback_from_several_cpu_cores(cpu_backend):
    k = tessera.Module.parse(PRINTS.replace("grid(3)", "grid(4) semantics(parallel)"),
                             "p.tsr")["prints"]
    seen = []
    tessera.run(k, backend=cpu_backend, cores=2, on_print=seen.append)
    assert sorted("".join(seen).splitlines()) == ["step 0", "step 1", "step 2", "step 3"]


def test_callback_exception_stops_the_run_and_is_raised(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]

    def boom(text):
        raise RuntimeError("callback failed on " + text.strip())

    with pytest.raises(RuntimeError, match="callback failed on spinning"):
        tessera.run(spin, on_print=boom, timeout_seconds=30)


def test_trace_is_written(tmp_path):
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    path = tmp_path / "run.json"
    tessera.compile(k)(sample("f32"), trace_path=path)
    trace = json.loads(path.read_text())
    assert trace  # a Chrome trace: a list or an object with traceEvents
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    assert len(events) > 0


def test_trace_replaces_its_file_by_a_rename(tmp_path):
    """As --out writes: a temporary file renamed into place (another name of
    the old file keeps its bytes), not the old file truncated in place."""
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    path = tmp_path / "run.json"
    path.write_text("old")
    os.link(path, tmp_path / "hardlink")
    tessera.compile(k)(sample("f32"), trace_path=path, overwrite=True)
    assert (tmp_path / "hardlink").read_text() == "old"
    assert json.loads(path.read_text())["traceEvents"]


def test_trace_never_overwrites_a_file_silently(tmp_path):
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    path = tmp_path / "run.json"
    path.write_text("old")
    with pytest.raises(FileExistsError, match="the file exists; pass overwrite=True"):
        tessera.compile(k)(sample("f32"), trace_path=path)
    assert path.read_text() == "old"
    # an executable's trace_path: its first run writes the file, the second
    # would replace it
    exe = tessera.compile(k, trace_path=tmp_path / "exe.json")
    exe(sample("f32"))
    assert json.loads((tmp_path / "exe.json").read_text())["traceEvents"]
    with pytest.raises(FileExistsError, match="exe.json"):
        exe(sample("f32"))
    exe(sample("f32"), overwrite=True)
    tessera.compile(k, trace_path=tmp_path / "exe.json", overwrite=True)(sample("f32"))


def test_trace_into_a_directory_gets_a_new_file_per_run(tmp_path):
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    exe = tessera.compile(k, trace_path=tmp_path)
    for _ in range(3):
        exe(sample("f32"))
    names = sorted(p.name for p in tmp_path.iterdir())
    assert len(names) == 3, names
    assert all(re.fullmatch(r"trace-\d{8}-\d{6}(-\d+)?\.json", n) for n in names), names
    for n in names:
        assert json.loads((tmp_path / n).read_text())["traceEvents"]


PROGRESS = """kernel @progress
  grid(16, 64) semantics(parallel, arbitrary)
  out %o: i32[1] smem
{
  %zero = const 0 : i32
  %eight = const 8 : i32
  %one = const 1 : i32
  for %k = %zero to %eight step %one {
    store %o[%zero], %k
  }
}
"""


def test_on_progress(backend):
    """Called (every bounds check with progress_interval=0), never going
    back, the last call with every grid step of every device and core."""
    k = tessera.Module.parse(PROGRESS, "p.tsr")["progress"]
    seen = []
    exe = tessera.compile(k, backend=backend, devices=2, cores=2, uninit="zero", check=False,
                          on_warning=lambda t: None, on_progress=lambda d, t: seen.append((d, t)),
                          progress_interval=0)
    exe()
    assert len(seen) >= 2
    assert all(t == 2 * 16 * 64 for _, t in seen)
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert seen[-1] == (2048, 2048)
    # per run: another callback, then none
    other = []
    exe(on_progress=lambda d, t: other.append(d))
    assert other and other[-1] == 2048
    seen.clear()
    exe(on_progress=None)
    assert seen == []
    # the default interval (0.25 s) for a short run: only the last call
    short = []
    tessera.compile(k, backend=backend, uninit="zero", check=False,
                    on_progress=lambda d, t: short.append((d, t)))()
    assert short == [(1024, 1024)]


def test_progress_callback_exception_cancels_the_run_and_is_raised(root, backend):
    """As an on_print callback's: kept, the run cancelled (through the
    run's own flag), the exception raised after the run."""
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    calls = []

    def boom(done, total):
        calls.append(done)
        raise ValueError(f"progress failed at {done}/{total}")

    # (the first check comes as the first step begins: the interpreter has
    # not counted it yet, the cpu backend has)
    with pytest.raises(ValueError, match=r"progress failed at [01]/3"):
        tessera.run(spin, backend=backend, on_print=lambda t: None, on_progress=boom,
                    progress_interval=0, timeout_seconds=60)
    assert len(calls) == 1  # no call after the exception


def test_progress_line_is_quiet_under_pytest(capfd):
    """on_progress=True draws tessera run's line only on a terminal and
    not under pytest."""
    k = tessera.Module.parse(PROGRESS, "p.tsr")["progress"]
    tessera.compile(k, uninit="zero", check=False, on_progress=True, progress_interval=0)()
    assert "grid step" not in capfd.readouterr().err
    # the line itself, as a terminal gets it
    from tessera._output import ProgressLine
    out = io.StringIO()
    line = ProgressLine(after=0, stream=out)
    line(250, 1000)
    assert re.fullmatch(r"\r\033\[Ktessera: grid step 250/1000 \(25%\), [\d,]+ steps/s, ETA \d+s",
                        out.getvalue()), out.getvalue()
    line(1000, 1000)  # the last call: nothing to draw
    line.end()
    assert out.getvalue().endswith("\r\033[K") and out.getvalue().count("grid step") == 1
    assert not ProgressLine.wanted(out)  # not a terminal
    late = ProgressLine(after=3600, stream=io.StringIO())
    late(1, 2)
    assert late.stream.getvalue() == "" and not late.shown


def test_trace_to_a_fifo_without_reader_fails_at_once(tmp_path):
    """(In a child process: before, the run waited for a reader forever.)"""
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    script = textwrap.dedent(f"""
        import numpy as np, tessera
        k = tessera.Module.parse({COPY.format(dt="f32")!r}, "c.tsr")
        try:
            tessera.compile(k)(np.zeros((16, 128), np.float32), trace_path={str(fifo)!r})
        except tessera.KernelError as e:
            print(e.message)
        """)
    try:
        r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                           timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the run waited for the FIFO's reader")
    assert "no process reads the FIFO" in r.stdout, r.stdout + r.stderr


@pytest.mark.skipif(not hasattr(os, "lchown"), reason="needs lchown")
def test_trace_does_not_follow_a_link_another_user_planted(tmp_path):
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    victim = tmp_path / "victim"
    victim.write_text("victim")
    planted = sticky / "trace.json"
    planted.symlink_to(victim)
    try:
        os.lchown(planted, 4242, 4242)
    except PermissionError:
        pytest.skip("making a link of another user needs chown")
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    with pytest.raises(FileExistsError):  # it names an existing file
        tessera.compile(k)(sample("f32"), trace_path=planted)
    with pytest.raises(tessera.KernelError, match="not following the symbolic link"):
        tessera.compile(k)(sample("f32"), trace_path=planted, overwrite=True)
    assert victim.read_text() == "victim"


@pytest.mark.parametrize("option, value, error", [
    ("max_steps", 2**64 + 1, OverflowError),
    ("shuffle_seed", 2**64, OverflowError),
    ("schedule_seed", -1, ValueError),
    ("max_errors", 2**32 + 1, OverflowError),
    ("devices", 2**32 + 1, OverflowError),
    ("cores", 2**32 + 1, OverflowError),
    ("opt_level", 2**31, OverflowError),
    ("cores", 2.0, TypeError),
    ("trace_path", "/tmp/a\0/etc/x", ValueError),
    ("chip", "v5e\0junk", ValueError),
])
def test_options_c_cannot_hold_are_refused(option, value, error):
    """ctypes would keep an integer's low bits (2**64 + 1 runs with a bound of
    1) and C would stop a string at its NUL: refused as open() refuses."""
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    with pytest.raises(error, match=option):
        tessera.compile(k, **{option: value})


@pytest.mark.parametrize("option, value, error", [
    ("max_steps", 2**64 + 1, OverflowError),
    ("trace_path", "/tmp/a\0/etc/x", ValueError),
])
def test_run_options_c_cannot_hold_are_refused(option, value, error):
    k = tessera.Module.parse(COPY.format(dt="f32"), "c.tsr")
    exe = tessera.compile(k)
    with pytest.raises(error, match=option):
        exe(sample("f32"), **{option: value})


@pytest.mark.parametrize("where", ["cache_dir", "cache_key_file", "lower_library",
                                   "cache_max_bytes", "Module.load", "Module.parse",
                                   "vmem_budget_bytes"])
def test_values_c_cannot_hold_are_refused_everywhere(tmp_path, where):
    nul = str(tmp_path / "a\0b")
    with pytest.raises((ValueError, OverflowError)):
        if where == "cache_max_bytes":
            tessera.Context(cache_max_bytes=2**64)
        elif where.startswith("cache") or where == "lower_library":
            tessera.Context(**{where: nul})
        elif where == "Module.load":
            tessera.Module.load(nul)
        elif where == "Module.parse":
            tessera.Module.parse(COPY.format(dt="f32"), nul)
        else:
            tessera.sort(np.zeros((8, 128), np.float32), target="tpu",
                         vmem_budget_bytes=2**64 + 2**20)


def test_executable_describes_itself():
    exe = tessera.compile(tessera.Module.parse(COPY.format(dt="u8"), "c.tsr"), cores=1)
    assert exe.backend == "interp" and exe.kernel_name == "copy"
    assert [o.name for o in exe.inputs] == ["x"] and [o.name for o in exe.outputs] == ["y"]
    assert "copy" in repr(exe)
    exe.close()
    with pytest.raises(ValueError, match="closed"):
        exe(sample("u8"))


UNINIT = """kernel @u
  out %y: f32[8, 128] vmem
  scratch %s: vmem f32[8, 128]
{
  %v = load %s[:, :] : f32[8, 128]
  store %y[:, :], %v
}
"""

ORDER = """kernel @order
  grid(8) semantics(parallel)
  out %y: i32[8, 128] vmem block[1, 128] map(%i) -> (%i, 0)
  scratch %n: smem i32[1]
{
  %c = load %n[0] : i32
  store %y[:, :], %c
  %one = const 1 : i32
  %c1 = add %c, %one : i32
  store %n[0], %c1
}
"""


def test_uninit_and_check_options_reach_the_run():
    k = tessera.Module.parse(UNINIT, "u.tsr")["u"]
    with pytest.warns(tessera.KernelWarning, match="uninitialized"):
        nan = tessera.run(k)
    assert np.isnan(nan).all()
    with pytest.warns(tessera.KernelWarning, match="uninitialized"):
        zero = tessera.run(k, uninit="zero")
    assert (zero == 0).all()
    r = tessera.compile(k, uninit="zero", check=False).run()
    assert r.warnings == () and (r.outputs[0] == 0).all()


# Every way a kernel meets fresh memory: an output element no grid step's
# block covers (%never: 2 blocks, 1 step), an output block loaded and stored
# back before anything wrote it (%back), and a scratch buffer (%fresh).
UNINIT_EVERYWHERE = """kernel @u
  grid(1) semantics(arbitrary)
  out %never: {dt}[16, 128] vmem block[8, 128] map(%i) -> (%i, 0)
  out %back: {dt}[8, 128] vmem block[8, 128] map(%i) -> (0, 0)
  out %fresh: {dt}[8, 128] vmem block[8, 128] map(%i) -> (0, 0)
  scratch %s: vmem {dt}[8, 128]
{{
  %z = const {zero} : {dt}[8, 128]
  store %never[:, :], %z
  %b = load %back[:, :] : {dt}[8, 128]
  store %back[:, :], %b
  %v = load %s[:, :] : {dt}[8, 128]
  store %fresh[:, :], %v
}}
"""

# The uninitialized value of each dtype under uninit="nan" (docs/semantics.md,
# "Memory and checks"), as bits: JAX's TPU interpret mode's (NaN, the
# integer maximum, True).
UNINIT_BITS = {"f32": 0x7FC00000, "bf16": 0x7FC0, "f16": 0x7E00, "i32": 2**31 - 1,
               "u32": 2**32 - 1, "i16": 2**15 - 1, "u16": 2**16 - 1, "i8": 127, "u8": 255,
               "i1": 1}


@pytest.mark.parametrize("dt", sorted(UNINIT_BITS))
@pytest.mark.parametrize("check", [True, False])
def test_every_dtype_uninitialized_value_on_both_backends(backend, dt, check):
    import warnings
    zero = "false" if dt == "i1" else "0.0" if dt in ("f32", "bf16", "f16") else "0"
    k = tessera.Module.parse(UNINIT_EVERYWHERE.format(dt=dt, zero=zero), "u.tsr")["u"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tessera.KernelWarning)
        never, back, fresh = tessera.compile(k, backend, check=check)()
    want = UNINIT_BITS[dt]

    def bits(a):
        a = np.ascontiguousarray(a)
        return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.itemsize]).astype(np.int64)
    assert (bits(never[:8]) == 0).all()
    for name, got in (("never-covered block", never[8:]), ("block stored back", back),
                      ("scratch", fresh)):
        got = np.unique(bits(got))
        assert list(got) == [want], f"{dt} {name}: {[hex(g) for g in got]}, want {want:#x}"


def test_shuffle_options_reach_the_run():
    k = tessera.Module.parse(ORDER, "order.tsr")["order"]
    plain = tessera.run(k, uninit="zero", check=False)[:, 0]
    assert list(plain) == list(range(8))  # steps in order: step i saw i before it
    orders = {tuple(tessera.run(k, uninit="zero", check=False, shuffle_parallel=True,
                                shuffle_seed=seed)[:, 0]) for seed in (1, 2, 3, 4)}
    assert all(sorted(o) == list(range(8)) for o in orders)
    assert len(orders) > 1 and orders != {tuple(range(8))}


def test_concurrent_runs_of_one_executable(backend):
    import threading
    exe = tessera.compile(tessera.Module.parse(DOUBLE.format(dt="i32"), "d.tsr"), backend)
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(25):
            x = rng.integers(-1000, 1000, (16, 128)).astype(np.int32)
            y = exe(x)
            if not np.array_equal(y, 2 * x):
                failures.append(seed)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert 1 <= len(exe._slots) <= 4  # slots were made as needed and kept


def test_run_options_do_not_stick(root):
    spin = tessera.Module.load(root / "tests" / "cli" / "spin.tsr")["spin"]
    exe = tessera.compile(spin, on_print=lambda t: None, max_steps=40)
    with pytest.raises(tessera.KernelError, match="10 steps"):
        exe(max_steps=10)
    with pytest.raises(tessera.KernelError, match="40 steps"):
        exe()  # back to the executable's own bound
