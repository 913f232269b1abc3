"""The kernel library's sort and top-k kernels (kernels/sort.c,
kernels/topk.c) emitted as Mosaic and compiled by libtpu for v5e and v6e,
one case per kernel class the generators make (docs/kernels.md): rows on
the lanes (one block, many rows, padded lengths, rank 1), other axes on
the sublanes or a leading block dim, every dtype class, several keys with
stability and indices, descending, top-k, rows longer than a block (whole
and ragged: lengths not a multiple of 128, a partial last row group); and
what tessera.jax's sort, argsort and top_k export for a TPU."""

from __future__ import annotations

import pytest

import tpu_proof

CHIPS = ("v5e", "v6e")

#: name -> (entry, params) of tessera._library.generate.
CASES = {
    "sort_f32_row128": ("sort", dict(shape=(1, 128), dtypes=["f32"])),
    "sort_f32_rows": ("sort", dict(shape=(64, 256), dtypes=["f32"])),
    "sort_f32_tiles": ("sort", dict(shape=(16, 4096), dtypes=["f32"])),
    "sort_kv_tiles_rank1": ("sort", dict(shape=(8192,), dtypes=["i32", "bf16"], stable=True,
                                         return_indices=True)),
    "sort_f32_rank1": ("sort", dict(shape=(1024,), dtypes=["f32"])),
    "sort_f32_rank1_padded": ("sort", dict(shape=(1000,), dtypes=["f32"])),
    "sort_f32_padded": ("sort", dict(shape=(16, 300), dtypes=["f32"])),
    "sort_f32_short_rows": ("sort", dict(shape=(16, 5), dtypes=["f32"])),
    "sort_f32_descending": ("sort", dict(shape=(8, 128), dtypes=["f32"], descending=True)),
    "sort_f32_stable_argsort": ("sort", dict(shape=(8, 128), dtypes=["f32"], stable=True,
                                             return_indices=True)),
    "sort_bf16": ("sort", dict(shape=(8, 128), dtypes=["bf16"])),
    "sort_i32": ("sort", dict(shape=(8, 128), dtypes=["i32"])),
    "sort_u32": ("sort", dict(shape=(8, 128), dtypes=["u32"])),
    "sort_i16": ("sort", dict(shape=(16, 128), dtypes=["i16"])),
    "sort_u8": ("sort", dict(shape=(32, 128), dtypes=["u8"])),
    "sort_i8": ("sort", dict(shape=(32, 128), dtypes=["i8"])),
    "sort_key_value": ("sort", dict(shape=(8, 512), dtypes=["f32", "i32"])),
    "sort_two_keys_stable": ("sort", dict(shape=(8, 128), dtypes=["f32", "i32", "bf16"],
                                          num_keys=2, stable=True, return_indices=True)),
    "sort_axis0": ("sort", dict(shape=(256, 128), dtypes=["f32"], axis=0)),
    "sort_axis0_rank3": ("sort", dict(shape=(16, 8, 128), dtypes=["f32"], axis=0)),
    "sort_multiblock": ("sort", dict(shape=(2, 5120), dtypes=["f32"],
                                     vmem_budget_bytes=1 << 16)),
    "sort_multiblock_rank1_stable": ("sort", dict(shape=(40960,), dtypes=["f32", "i32"],
                                                  stable=True, return_indices=True)),
    "sort_multiblock_row_groups": ("sort", dict(shape=(24, 2048), dtypes=["f32"],
                                                descending=True, vmem_budget_bytes=1 << 18)),
    "sort_multiblock_bf16_rank3": ("sort", dict(shape=(2, 16, 4096), dtypes=["bf16", "i32"],
                                                return_indices=True,
                                                vmem_budget_bytes=1 << 19)),
    "sort_multiblock_default_budget": ("sort", dict(shape=(8, 65536), dtypes=["f32"])),
    "sort_multiblock_1m": ("sort", dict(shape=(1 << 20,), dtypes=["f32"])),
    "sort_multiblock_ragged_length": ("sort", dict(shape=(2, 5000), dtypes=["f32"],
                                                   vmem_budget_bytes=1 << 16)),
    "sort_multiblock_19_rows": ("sort", dict(shape=(19, 2048), dtypes=["f32"],
                                             vmem_budget_bytes=1 << 16)),
    "sort_multiblock_ragged_rows": ("sort", dict(shape=(67, 1024), dtypes=["f32"],
                                                 vmem_budget_bytes=1 << 16)),
    "sort_multiblock_ragged_both": ("sort", dict(shape=(67, 5000), dtypes=["f32"],
                                                 vmem_budget_bytes=1 << 16)),
    "sort_multiblock_ragged_stable_indices": ("sort", dict(shape=(3, 70001), dtypes=["f32"],
                                                           stable=True, return_indices=True)),
    "sort_multiblock_ragged_bf16_descending": ("sort", dict(shape=(100, 9000), dtypes=["bf16"],
                                                            descending=True)),
    "sort_multiblock_ragged_rank1_i32": ("sort", dict(shape=(100003,), dtypes=["i32"])),
    "sort_multiblock_ragged_rows_u8": ("sort", dict(shape=(67, 2048), dtypes=["u8"],
                                                    vmem_budget_bytes=1 << 16)),
    "sort_multiblock_ragged_kv_i8": ("sort", dict(shape=(70, 3000), dtypes=["i16", "i8"],
                                                  return_indices=True,
                                                  vmem_budget_bytes=1 << 16)),
    # top-k cases that test_library_topk.py does not have (its own are not repeated)
    "topk_tiles": ("topk", dict(shape=(8, 2048), dtype="f32", k=300)),
    "topk_fold": ("topk", dict(shape=(8, 1024), dtype="f32", k=8)),
    "topk_rank1": ("topk", dict(shape=(1024,), dtype="f32", k=16)),
    "topk_bf16_smallest": ("topk", dict(shape=(16, 256), dtype="bf16", k=5, smallest=True)),
}


def prove(name: str, chip: str) -> tpu_proof.Outcome:
    return tpu_proof.prove_library(*CASES[name], chip)


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_library_sort_compiles(name, chip):
    out = prove(name, chip)
    assert out.stage == "ok", f"{out.stage}: {out.message[:2000]}"


#: What tessera.jax's sort, argsort and top_k send to a TPU for rows
#: longer than a block (the default budget) whose length is not a multiple
#: of 128, or whose rows are more than 64 and not whole tiles: name ->
#: (function, shape, dtype, keyword arguments).
JAX_CASES = {
    "sort_3x70001_f32": ("sort", (3, 70001), "float32", {}),
    "argsort_67x9000_f32_stable": ("argsort", (67, 9000), "float32", dict(stable=True)),
    "sort_100x9000_bf16_descending": ("sort", (100, 9000), "bfloat16", dict(descending=True)),
    "sort_100003_i32": ("sort", (100003,), "int32", {}),
    "top_k_8x100000_f32": ("top_k", (8, 100000), "float32", dict(k=16)),
    "top_k_67x70000_f32": ("top_k", (67, 70000), "float32", dict(k=8)),
}


@pytest.mark.parametrize("chip", CHIPS)
@pytest.mark.parametrize("name", sorted(JAX_CASES))
def test_jax_sort_exports_and_compiles(name, chip):
    """jax.export(platforms=["tpu"]) of the tessera.jax function holds one
    tpu_custom_call, the library's kernel over blocks (DMAs for the sort,
    a grid over the row's blocks for top-k), and libtpu compiles the
    export for the chip."""
    import jax
    import numpy as np
    import tessera.jax as tj
    from tessera.jax import _jax_internal as ji
    fn, shape, dtype, kwargs = JAX_CASES[name]
    kwargs = dict(kwargs)
    k = kwargs.pop("k", None)
    call = getattr(tj, fn)
    f = (lambda x: call(x, k, chip=chip)) if fn == "top_k" else \
        (lambda x: call(x, chip=chip, **kwargs))
    struct = jax.ShapeDtypeStruct(shape, np.dtype(dtype) if dtype != "bfloat16"
                                  else jax.numpy.bfloat16)
    exported = jax.export.export(jax.jit(f), platforms=["tpu"])(struct)
    calls = ji.tpu_custom_calls(exported.mlir_module())
    assert len(calls) == 1, [c["kernel_name"] for c in calls]
    text = ji.mosaic_text(ji.parse_mosaic(calls[0]["body"], serialized=True))
    if fn == "top_k":
        assert "iteration_bounds" in text and "arbitrary" in text, text[:2000]
    else:
        assert "tpu.enqueue_dma" in text, text[:2000]
    compiled = ji.compile_for_device(exported.call, [struct], ji.tpu_device(chip))
    assert compiled.as_text() is not None


if __name__ == "__main__":
    tpu_proof.report(CASES, prove, CHIPS)
