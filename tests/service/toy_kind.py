"""A small job kind for testing the job machinery without a science engine.

``scale`` multiplies a NIfTI volume by ``factor`` in ``chunks`` slabs, reporting progress,
honouring cancellation and sleeping ``delay`` seconds per slab (so tests can catch a job
while it runs). ``fail`` makes it raise the errors the machinery must classify.
"""

from __future__ import annotations

import importlib.util
import json
import os
import time
from pathlib import Path
from typing import Literal

import nibabel as nib
import numpy as np
from pydantic import BaseModel, Field

from worker.errors import InputError
from worker.job_kinds import InputSlot, JobContext, JobKind

__all__ = ["ScaleParams", "JOB_KINDS", "TOY_MODULE", "register_toy_kind", "write_volume"]

TOY_MODULE = "tests.service.toy_kind"


class ScaleParams(BaseModel):
    factor: float = 2.0
    chunks: int = Field(4, ge=1, le=64)
    delay: float = Field(0.0, ge=0.0, le=30.0)
    fail: Literal["none", "input", "crash", "transient"] = "none"


def register_toy_kind(job_kinds_module) -> tuple[str, ...]:
    """Family modules with the toy kind added; families that do not import yet are left
    out, so the machinery's tests do not wait for every engine to land."""
    present = tuple(m for m in job_kinds_module._FAMILY_MODULES if importlib.util.find_spec(m))
    return (*present, TOY_MODULE)


def write_volume(path: Path, data: np.ndarray) -> Path:
    nib.save(nib.Nifti1Image(np.asarray(data), np.eye(4)), str(path))
    return path


def _validate(inputs: dict[str, Path], params: BaseModel) -> None:
    header = nib.load(inputs["volume"]).header
    if len(header.get_data_shape()) not in (3, 4):
        raise InputError("Wrong dimensions", "volume: must be 3D or 4D")
    if "mask" in inputs:
        mask_shape = nib.load(inputs["mask"]).header.get_data_shape()[:3]
        if mask_shape != header.get_data_shape()[:3]:
            raise InputError("Mask grid mismatch", f"mask grid {mask_shape} differs from the volume's")


def _run(ctx: JobContext) -> list[Path]:
    params: ScaleParams = ctx.params  # type: ignore[assignment]
    if params.fail == "input":
        raise InputError("Bad values", "volume: contains values this job cannot use")
    if params.fail == "crash":
        raise RuntimeError("engine exploded")
    if params.fail == "transient":
        marker = ctx.out_dir.parent / "transient-seen"
        if not marker.exists():
            marker.touch()
            raise ConnectionError("GPU node unreachable for now")
    image = nib.load(ctx.inputs["volume"])
    data = np.asarray(image.dataobj, dtype=np.float64)
    out = np.empty_like(data)
    slabs = np.array_split(np.arange(data.shape[0]), params.chunks)
    for done, slab in enumerate(slabs, start=1):
        ctx.check_cancelled()
        out[slab] = data[slab] * params.factor
        time.sleep(params.delay)
        ctx.progress(done / len(slabs))
    ctx.log(f"scaled {data.size} values by {params.factor}")
    result = ctx.out_dir / "scaled.nii.gz"
    tmp = ctx.out_dir / ".scaled.tmp.nii.gz"
    nib.save(nib.Nifti1Image(out, image.affine), str(tmp))
    os.replace(tmp, result)
    sidecar = ctx.out_dir / "scaled.json"
    sidecar.write_text(json.dumps({"factor": params.factor, "pid": os.getpid()}))
    return [result, sidecar]


JOB_KINDS = [
    JobKind(
        name="scale",
        summary="Multiply a volume by a factor (test job kind)",
        params_model=ScaleParams,
        inputs=(
            InputSlot("volume", True, (".nii", ".nii.gz"), "the volume"),
            InputSlot("mask", False, (".nii", ".nii.gz"), "optional mask"),
        ),
        validate=_validate,
        run=_run,
    )
]
