"""A developer's check of the Mosaic emitter (docs/tpu.md), not a test of
the suite: `tessera lower --target tpu --chip C` for each kernel, then
jaxlib's MLIR with the TPU dialect parses and verifies the text, and libtpu
compiles it ahead of time (deviceless) for each chip, wrapped with
jax._src.tpu_custom_call.as_tpu_kernel. Prints one line per kernel and chip:
OK (with the compile time) or EMIT-FAIL / PARSE-FAIL / COMPILE-FAIL and why.

  JAX_PLATFORMS=cpu CHIPS=v5e:1x1,v6e:1x1 TESSERA=build/tools/tessera \
    /work/venv312/bin/python bench/tpu/verify_mosaic.py kernels/examples/add.tsr \
    kernels/examples/reduce.tsr:colsum

Needs jax/jaxlib and libtpu (pip install libtpu). Operand shapes are read
from the kernel's header lines with a regex (i1 operands are passed as
int32, as Pallas stores bools)."""
import os, re, sys, subprocess, time
os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1"); os.environ.setdefault("JAX_PLATFORMS", "cpu"); os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
import jax, jax.numpy as jnp, numpy as np
import jax.experimental.topologies
from jax._src.interpreters import mlir as jmlir
from jax._src.lib import tpu as tpu_lib
from jaxlib.mlir import ir
from jax._src import tpu_custom_call
from jax.sharding import SingleDeviceSharding
TESSERA = os.environ.get("TESSERA", os.path.join(os.path.dirname(__file__), "..", "..", "build", "tools", "tessera"))
CHIPS = os.environ.get("CHIPS", "v5e:1x1,v6e:1x1").split(",")
DT = {"f32": jnp.float32, "bf16": jnp.bfloat16, "f16": jnp.float16, "i32": jnp.int32, "u32": jnp.uint32,
      "i16": jnp.int16, "u16": jnp.uint16, "i8": jnp.int8, "u8": jnp.uint8, "i1": jnp.int32}

def operands(path, kernel):
    text = open(path).read()
    blocks = re.split(r'^kernel @', text, flags=re.M)[1:]
    for b in blocks:
        name = b.split()[0]
        if kernel and name != kernel: continue
        ins, outs = [], []
        for m in re.finditer(r'^\s+(prefetch|in|out)\s+%\w+:\s*(\w+)(?:\[([^\]]*)\])?', b, re.M):
            shape = tuple(int(x) for x in m.group(3).split(",")) if m.group(3) else ()
            (outs if m.group(1) == "out" else ins).append(jax.ShapeDtypeStruct(shape, DT[m.group(2)]))
        return name, ins, outs
    raise SystemExit(f"no kernel {kernel} in {path}")

topos = {}
fail = 0
for arg in sys.argv[1:]:
    path, _, kernel = arg.partition(":")
    cmd = [TESSERA, "lower", "--target", "tpu", path] + (["--kernel", kernel] if kernel else [])
    p = subprocess.run(cmd, capture_output=True, text=True)
    def emit_for(chip):
        return subprocess.run(cmd + ["--chip", chip.split(":")[0]], capture_output=True, text=True).stdout
    if p.returncode:
        print(f"EMIT-FAIL {arg}: {p.stderr.strip()[:400]}"); fail += 1; continue
    name, ins, outs = operands(path, kernel)
    ctx = jmlir.make_ir_context(); tpu_lib.register_dialect(ctx)
    try:
        with ctx, ir.Location.unknown():
            mod = ir.Module.parse(p.stdout)
            assert mod.operation.verify()
    except Exception as e:
        print(f"PARSE-FAIL {arg}: {str(e)[:1500]}"); fail += 1; continue
    for chip in CHIPS:
        if chip not in topos:
            topos[chip] = jax.experimental.topologies.get_topology_desc(chip, platform="tpu")
        dev = topos[chip].devices[0]
        try:
            with ctx, ir.Location.unknown():
                mod = ir.Module.parse(emit_for(chip))
                k = tpu_custom_call.as_tpu_kernel(mod, tuple(outs) if len(outs) != 1 else outs[0], kernel_name=name)
            args = [jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=SingleDeviceSharding(dev)) for s in ins]
            t = time.time()
            # Outputs placed on the chip too: a kernel without inputs is compiled
            # for the topology, not for the host.
            outs_sh = [SingleDeviceSharding(dev)] * len(outs)
            jit = jax.jit(lambda *a: k(*a), out_shardings=outs_sh[0] if len(outs) == 1 else tuple(outs_sh))
            jit.trace(*args).lower().compile()
            print(f"OK {arg} {chip} {1000*(time.time()-t):.0f} ms")
        except Exception as e:
            print(f"COMPILE-FAIL {arg} {chip}: {str(e)[:1500]}"); fail += 1
sys.exit(1 if fail else 0)
