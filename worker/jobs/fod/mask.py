"""The ``mask`` job: a brain mask from the DWI alone, as MRtrix3's ``dwi2mask`` (3.0) makes it
(:func:`gpu.fod.brain_mask.dwi_brain_mask`), written in the DWI's image format beside a JSON
sidecar; the mask ``fibertensor response`` and a fod job estimating its responses choose
voxels within when none is given."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from worker.io.atomic import write_json_atomic
from worker.job_kinds import JobContext, JobKind
from worker.jobs.fod.inputs import DWI_SLOTS, check_dwi_inputs, image_suffix, output_path, read_dwi
from worker.params.fod import MaskParams

__all__ = ["run_mask", "mask_memory_bytes", "MASK_KIND"]

#: The slots of the mask job: the DWI and its gradients.
MASK_SLOTS = tuple(slot for slot in DWI_SLOTS if slot.name != "mask")


def run_mask(dwi: Path, prefix: Path, params: MaskParams = MaskParams(), *, bval: Path | None = None,
             bvec: Path | None = None, grad: Path | None = None, uploaded: dict | None = None,
             inflate_threads: int = 1) -> dict:
    """Make the brain mask of ``dwi`` and write ``<prefix>_mask.<ext>`` (uint8, 1 in the
    brain) and ``_mask.json`` (:func:`worker.jobs.fod.inputs.output_path`: plain names inside
    a folder prefix); returns the sidecar content."""
    from gpu.fod.brain_mask import dwi_brain_mask
    from worker.io.images import write_image
    from worker.jobs.fod.response import gradient_source
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    plan = check_dwi_inputs(dwi, bval=bval, bvec=bvec, grad=grad)
    data = read_dwi(plan, uploaded, inflate_threads=inflate_threads)
    read = time.perf_counter()
    mask = dwi_brain_mask(data.dwi, plan.scheme[:, 3])
    made = time.perf_counter()
    path = output_path(prefix, f"mask{image_suffix(data.names['dwi'])}")
    write_image(path, mask.astype(np.uint8), plan.info.affine)
    sidecar = {
        "job": "mask",
        "generated_by": generated_by(),
        "input": {"dwi": data.names.get("dwi"), "gradients": gradient_source(bval, grad),
                  "shape": list(plan.info.shape), "sha256": data.sha256},
        "parameters": params.model_dump(),
        "method": "each shell's mean image (b=0 too) above its optimal threshold (Ridgway et al. 2009, NeuroImage "
                  "47:S98), their union's 3x3x3 median, largest 6-connected component and filled holes, as MRtrix3 "
                  "dwi2mask",
        "shells": [round(float(b), 1) for b in plan.shell_bvalues],
        "voxels": int(mask.sum()),
        "outputs": {"mask": path.name},
        "warnings": data.warnings(),
        "versions": package_versions("nibabel", "numpy"),
        "seconds": {"read": read - started, "mask": made - read, "total": time.perf_counter() - started},
    }
    write_json_atomic(output_path(prefix, "mask.json"), sidecar)
    return sidecar


def mask_memory_bytes(plan) -> int:
    """Most host memory :func:`run_mask` holds, in bytes, from the headers: the DWI as float32
    (N·V·4), its read's copy beside it, the shells' float64 sums and the masks (N·16), and 32 MiB."""
    n = int(np.prod(plan.info.shape[:3]))
    return 2 * n * plan.info.shape[3] * 4 + 16 * n + (32 << 20)


def _inputs(inputs: dict[str, Path]) -> dict[str, Path | None]:
    return {slot: inputs.get(slot) for slot in ("bval", "bvec", "grad")}


def _validate(inputs: dict[str, Path], params: MaskParams):
    return check_dwi_inputs(inputs["dwi"], **_inputs(inputs))


def _memory(inputs: dict[str, Path], params: MaskParams, plan=None) -> int:
    return mask_memory_bytes(plan or _validate(inputs, params))


def _run(ctx: JobContext) -> list[Path]:
    ctx.check_cancelled()
    sidecar = run_mask(ctx.inputs["dwi"], ctx.out_dir, ctx.params, **_inputs(ctx.inputs), uploaded=ctx.uploaded)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    return [ctx.out_dir / name for name in sidecar["outputs"].values()] + [ctx.out_dir / "mask.json"]


MASK_KIND = JobKind(
    name="mask",
    summary="Brain mask of a DWI from its shells alone, as MRtrix3 dwi2mask",
    params_model=MaskParams,
    inputs=MASK_SLOTS,
    validate=_validate,
    memory_bytes=_memory,
    run=_run,
    result_names=("mask.nii.gz", "mask.json"),
)
