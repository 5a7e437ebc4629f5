"""The ``mtnormalise`` job: multi-tissue intensity normalisation of a multi-tissue fit's
compartments, as MRtrix3's ``mtnormalise`` (:func:`gpu.fod.mtnormalise.mtnormalise`): each
compartment (the WM FOD, GM, CSF) divided by the field, written in its input's format beside
a JSON sidecar with the balance factors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.jobs.fod.inputs import image_suffix, output_path
from worker.params.fod import MtNormaliseParams

if TYPE_CHECKING:
    from gpu.fod.mtnormalise import MtNormalisation

__all__ = ["run_mtnormalise", "normalisation_field", "divisor", "ONE_COMPARTMENT", "MTNORMALISE_KIND"]

_IMAGE_SUFFIXES = (".nii", ".nii.gz", ".mif", ".mif.gz")
#: The compartments, in mtnormalise's order of a 3-tissue fit; GM and CSF optional.
COMPARTMENTS = ("wmfod", "gm", "csf")
SLOTS = (
    InputSlot("wmfod", True, _IMAGE_SUFFIXES, "WM FOD (SH coefficients; its first volume, l = 0, is normalised "
              "on), as dwi2fod msmt_csd writes it"),
    InputSlot("gm", False, _IMAGE_SUFFIXES, "GM compartment (one volume)"),
    InputSlot("csf", False, _IMAGE_SUFFIXES, "CSF compartment (one volume)"),
    InputSlot("mask", True, _IMAGE_SUFFIXES, "brain mask on the compartments' grid (fibertensor mask, dwi2mask)"),
)


#: The warning for a normalisation of one compartment.
ONE_COMPARTMENT = ("one compartment alone: a multi-tissue fit's compartments (WM FOD, GM, CSF) normalise together far "
                   "better")


def normalisation_field(compartments: list[np.ndarray], mask: np.ndarray, affine: np.ndarray,
                        params: MtNormaliseParams = MtNormaliseParams()) -> "MtNormalisation":
    """:func:`gpu.fod.mtnormalise.mtnormalise` of the compartments (WM FOD (X, Y, Z, C) and GM,
    CSF, (X, Y, Z) or (X, Y, Z, 1)) within ``mask`` with ``params``; :class:`InputError` when
    the compartments cannot be balanced."""
    from gpu.fod.mtnormalise import mtnormalise

    try:
        return mtnormalise([c.reshape(mask.shape + (-1,))[..., 0] for c in compartments], mask, affine,
                           order=params.order, iterations=params.niter, balance_iterations=params.balance_niter,
                           reference=params.reference)
    except ValueError as exc:
        raise InputError("Cannot normalise", str(exc)) from None


def divisor(result: "MtNormalisation", tissue: int, params: MtNormaliseParams = MtNormaliseParams()) -> np.ndarray:
    """What compartment ``tissue`` (its index) is divided by, (X, Y, Z) float32: the field, over
    the tissue's balance factor with ``params.balanced``, formed in float64, so that each value
    takes one float32 division."""
    factor = float(result.balance[tissue]) if params.balanced else 1.0
    return (result.field.astype(np.float64) / factor).astype(np.float32)


def _check(images: dict[str, Path]) -> dict:
    """The headers of the compartments and mask, on one grid; raises :class:`InputError`."""
    from worker.io.images import read_image_header

    infos = {role: read_image_header(path, role) for role, path in images.items() if path is not None}
    reference = infos["wmfod"]
    for role, info in infos.items():
        spatial = tuple(info.shape[:3])
        if len(info.shape) < 3 or (len(info.shape) > 3 and role != "wmfod" and int(np.prod(info.shape[3:])) != 1):
            raise InputError("Not a compartment image", f"the {role} image {info.path.name!r} has shape "
                             f"{tuple(info.shape)}; give a 3-D image (a 4-D one for the WM FOD)")
        if spatial != tuple(reference.shape[:3]) or not np.allclose(info.affine, reference.affine, atol=1e-3):
            raise InputError("Images on different grids", f"the {role} image {info.path.name!r} (shape {spatial}) "
                             f"is not on the WM FOD's grid (shape {tuple(reference.shape[:3])}); give the "
                             "compartments of one fit and a mask on their grid")
    return infos


def run_mtnormalise(prefix: Path, params: MtNormaliseParams = MtNormaliseParams(), *, wmfod: Path, mask: Path,
                    gm: Path | None = None, csf: Path | None = None, uploaded: dict | None = None) -> dict:
    """Normalise the compartments and write ``<prefix>_wmfod.<ext>`` (``_gm``, ``_csf``) and
    ``_mtnormalise.json`` (:func:`output_path`); returns the sidecar content."""
    from worker.io.images import load_job_images, write_image
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    infos = _check({"wmfod": wmfod, "gm": gm, "csf": csf, "mask": mask})
    arrays, names, sha256 = load_job_images(infos, uploaded)
    shape = tuple(infos["wmfod"].shape[:3])
    brain = arrays["mask"].reshape(shape) != 0
    if not brain.any():
        raise InputError("Empty mask", "the mask selects no voxel; give a brain mask (fibertensor mask)")
    tissues = [role for role in COMPARTMENTS if role in infos]
    images = {role: arrays[role].reshape(shape + (-1,)) for role in tissues}
    read = time.perf_counter()
    result = normalisation_field([images[role] for role in tissues], brain, infos["wmfod"].affine, params)
    fitted = time.perf_counter()
    paths = {}
    for index, (role, factor) in enumerate(zip(tissues, result.balance)):
        out = images[role] / divisor(result, index, params)[..., None]
        if len(infos[role].shape) == 3:
            out = out[..., 0]
        paths[role] = write_image(output_path(prefix, f"{role}{image_suffix(names[role])}"), out,
                                  infos[role].affine, keyval={"lognorm_scale": str(result.lognorm_scale),
                                                              **({"lognorm_balance": str(factor)}
                                                                 if params.balanced else {})})
    warnings = [] if len(tissues) > 1 else [ONE_COMPARTMENT]
    sidecar = {
        "job": "mtnormalise",
        "generated_by": generated_by(),
        "input": {**{role: names.get(role) for role in (*tissues, "mask")}, "sha256": sha256},
        "parameters": params.model_dump(),
        "method": "log-domain multi-tissue intensity normalisation as MRtrix3 mtnormalise (Raffelt et al. 2017; "
                  "Dhollander et al. 2021)",
        "balance_factors": {role: float(f) for role, f in zip(tissues, result.balance)},
        "lognorm_scale": result.lognorm_scale,
        "voxels": {"mask": int(brain.sum()), "kept": int(result.kept.sum())},
        "outputs": {role: path.name for role, path in paths.items()},
        "warnings": warnings,
        "versions": package_versions("nibabel", "numpy"),
        "seconds": {"read": read - started, "normalise": fitted - read, "total": time.perf_counter() - started},
    }
    write_json_atomic(output_path(prefix, "mtnormalise.json"), sidecar)
    return sidecar


def _images(inputs: dict[str, Path]) -> dict[str, Path | None]:
    return {role: inputs.get(role) for role in (*COMPARTMENTS, "mask")}


def _validate(inputs: dict[str, Path], params: MtNormaliseParams):
    return _check(_images(inputs))


def _memory(inputs: dict[str, Path], params: MtNormaliseParams, infos=None) -> int:
    """The compartments twice as float32 and once as float64 while each is scaled, the field,
    the mask's voxels' tables (each 30 doubles), and 32 MiB."""
    infos = infos or _validate(inputs, params)
    values = sum(int(np.prod(info.shape)) for role, info in infos.items() if role != "mask")
    voxels = int(np.prod(infos["wmfod"].shape[:3]))
    return 16 * values + 8 * voxels + 240 * voxels + (32 << 20)


def _run(ctx: JobContext) -> list[Path]:
    ctx.check_cancelled()
    sidecar = run_mtnormalise(ctx.out_dir, ctx.params, **_images(ctx.inputs), uploaded=ctx.uploaded)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    return [ctx.out_dir / name for name in sidecar["outputs"].values()] + [ctx.out_dir / "mtnormalise.json"]


MTNORMALISE_KIND = JobKind(
    name="mtnormalise",
    summary="Multi-tissue intensity normalisation of a multi-tissue fit's WM FOD, GM and CSF, as MRtrix3 "
            "mtnormalise",
    params_model=MtNormaliseParams,
    inputs=SLOTS,
    validate=_validate,
    memory_bytes=_memory,
    run=_run,
    result_names=("wmfod.nii.gz", "gm.nii.gz", "csf.nii.gz", "mtnormalise.json"),
)
