"""The transcendental functions, each in its own output with its own ulp
bound (docs/jax.md, "Validated against JAX"): exp, exp2, log, log1p, expm1,
tanh, logistic, rsqrt, sin, cos, pow (erf is in prim_extra)."""

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental import pallas as pl

KIND = "primitives"
PRIMITIVES = ("exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic",
              "rsqrt", "sin", "cos", "pow")

# name -> (function of (x, y) with y > 0, its tolerance). The ulp bounds are
# JAX's largest error on these inputs (measured against a float64 result:
# exp 0.8, exp2 2.1, log 1.0, log1p 2.0, expm1 0.6, tanh 3.3, logistic 1.7,
# rsqrt 1.1, sin 0.6, cos 0.5, pow 0.5 ulp) plus up to 2 ulp for
# tessera's (the C library's), rounded up: docs/jax.md.
TRANSCENDENTAL = {
    "exp": (lambda x, y: jnp.exp(x), ("ulp", 2)),
    "exp2": (lambda x, y: jnp.exp2(x), ("ulp", 4)),
    "log": (lambda x, y: jnp.log(y), ("ulp", 2)),
    "log1p": (lambda x, y: jnp.log1p(y), ("ulp", 4)),
    "expm1": (lambda x, y: jnp.expm1(x), ("ulp", 2)),
    "tanh": (lambda x, y: jnp.tanh(x), ("ulp", 6)),
    "logistic": (lambda x, y: jax.nn.sigmoid(x), ("ulp", 4)),
    "rsqrt": (lambda x, y: lax.rsqrt(y), ("ulp", 2)),
    "sin": (lambda x, y: jnp.sin(x), ("ulp", 2)),
    "cos": (lambda x, y: jnp.cos(x), ("ulp", 2)),
    "pow": (lambda x, y: jnp.power(y, x), ("ulp", 2)),
}

OUTPUTS = list(TRANSCENDENTAL)
TOLERANCE = [tol for _, tol in TRANSCENDENTAL.values()]


def transcendental_kernel(x_ref, y_ref, *out_refs):
    x, y = x_ref[...], y_ref[...]
    for out_ref, (func, _) in zip(out_refs, TRANSCENDENTAL.values()):
        out_ref[...] = func(x, y)


def build(m: int = 8, n: int = 128):
    shape = (m, n)

    def fn(pallas_call, x, y):
        return pallas_call(
            transcendental_kernel,
            out_shape=[jax.ShapeDtypeStruct(shape, jnp.float32)] * len(OUTPUTS),
        )(x, y)

    rng = np.random.default_rng(12)
    x = (rng.standard_normal(shape) * 1.5).astype(np.float32)
    x[0, :4] = [0.0, -0.0, 0.125, -0.375]
    y = rng.uniform(0.1, 4.0, shape).astype(np.float32)
    return fn, (x, y)
