"""The fiber-peaks job: FOD NIfTI in, peaks in MRtrix3 ``sh2peaks`` layout out.

Outputs, on the input's grid (same affine and spatial header):

* peaks — float32 4D with 3·K volumes; triplet k is amplitude_k × unit direction_k, NaN
  where a voxel has fewer than K peaks, is masked out, or had non-finite coefficients
  (as ``sh2peaks`` writes them);
* amplitudes — float32 4D, K volumes, the FOD value at each peak, descending;
* count — uint8 3D, the number of peaks per voxel;
* a JSON sidecar — parameters, SH basis, lmax, backend, device, versions, timings and counts.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
from pydantic import BaseModel

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.params.peaks import PeaksParams
from worker.provenance import package_versions

if TYPE_CHECKING:
    from gpu.peaks.search import PeaksOptions, PeaksResult
    from worker.io.nifti import NiftiInfo

# The engine (numba) and nibabel are imported inside the functions that use them, so that
# the job-kind registry, and with it the API, loads without them.

__all__ = ["PeaksOutputs", "PeaksInputs", "engine_options", "check_peaks_inputs", "read_peaks_inputs", "compute_peaks",
           "write_peaks_outputs", "run_peaks", "JOB_KINDS"]


def engine_options(params: PeaksParams) -> "PeaksOptions":
    """The engine's options for validated job parameters (no second set of limits: the
    model's come from :mod:`gpu.peaks.limits`, as the engine's do)."""
    from gpu.peaks.search import PeaksOptions

    return PeaksOptions(npeaks=params.npeaks, threshold=params.threshold, relative_threshold=params.relative_threshold,
                        starts=params.starts, seeding=params.seeding)


class PeaksOutputs(BaseModel):
    """Where a peaks run writes its four files."""

    peaks: Path
    amplitudes: Path
    count: Path
    sidecar: Path

    @classmethod
    def with_prefix(cls, prefix: Path) -> "PeaksOutputs":
        """The CLI naming: ``PREFIX_peaks.nii.gz``, ``_amplitudes.nii.gz``, ``_count.nii.gz``, ``PREFIX.json``."""
        prefix = Path(prefix)
        return cls(peaks=prefix.with_name(prefix.name + "_peaks.nii.gz"),
                   amplitudes=prefix.with_name(prefix.name + "_amplitudes.nii.gz"),
                   count=prefix.with_name(prefix.name + "_count.nii.gz"),
                   sidecar=prefix.with_name(prefix.name + ".json"))

    @classmethod
    def in_folder(cls, folder: Path) -> "PeaksOutputs":
        """The job naming: ``peaks.nii.gz``, ``amplitudes.nii.gz``, ``count.nii.gz``, ``peaks.json``."""
        folder = Path(folder)
        return cls(peaks=folder / "peaks.nii.gz", amplitudes=folder / "amplitudes.nii.gz",
                   count=folder / "count.nii.gz", sidecar=folder / "peaks.json")


def check_peaks_inputs(fod: Path, mask: Path | None = None) -> tuple["NiftiInfo", "NiftiInfo | None"]:
    """Header-only checks of a peaks job's inputs; raises :class:`InputError` saying what to fix."""
    from gpu.peaks.sh_basis import lmax_from_ncoeffs
    from worker.io.nifti import read_nifti_header

    info = read_nifti_header(fod, "FOD")
    if len(info.shape) != 4:
        raise InputError(
            "Not a 4D volume",
            f"the FOD file {info.path.name!r} has shape {info.shape}; peaks need a 4D volume of SH "
            "coefficients (x, y, z, coefficients), e.g. the output of dwi2fod",
        )
    try:
        lmax_from_ncoeffs(info.shape[3])
    except ValueError as exc:
        raise InputError("Wrong number of volumes", f"the FOD file {info.path.name!r} has {exc}") from None
    mask_info = None
    if mask is not None:
        mask_info = read_nifti_header(mask, "mask")
        spatial = mask_info.shape[:3] if len(mask_info.shape) == 4 and mask_info.shape[3] == 1 else mask_info.shape
        if spatial != info.shape[:3]:
            raise InputError(
                "Mask grid mismatch",
                f"the mask {mask_info.path.name!r} has shape {mask_info.shape} but the FOD grid is {info.shape[:3]}; "
                "resample the mask onto the FOD grid (e.g. mrgrid … regrid -template)",
            )
        if not np.allclose(mask_info.affine, info.affine, atol=1e-3):
            raise InputError(
                "Mask grid mismatch",
                f"the mask {mask_info.path.name!r} has the FOD's shape {info.shape[:3]} but a different affine; "
                "resample the mask onto the FOD grid",
            )
    return info, mask_info


@dataclass
class PeaksInputs:
    """A peaks job's inputs in memory: the checked headers, the SH volume (x, y, z, coeffs)
    float32 and the mask (x, y, z) bool or None; ``seconds`` it took to read them."""

    info: "NiftiInfo"
    mask_info: "NiftiInfo | None"
    sh: np.ndarray
    mask: np.ndarray | None
    seconds: float


def read_peaks_inputs(fod: Path, mask: Path | None = None) -> PeaksInputs:
    """Check and read a peaks job's inputs (:class:`InputError` saying what to fix)."""
    from worker.io.nifti import load_nifti_data

    started = time.perf_counter()
    info, mask_info = check_peaks_inputs(fod, mask)
    sh = load_nifti_data(info)
    mask_array = None
    if mask_info is not None:
        mask_array = load_nifti_data(mask_info).reshape(info.shape[:3]) > 0
    return PeaksInputs(info, mask_info, sh, mask_array, time.perf_counter() - started)


def compute_peaks(inputs: PeaksInputs, params: PeaksParams,
                  progress: Callable[[float], None] | None = None) -> "PeaksResult":
    """The engine's peaks of read inputs."""
    from gpu.peaks.search import sshopm_peaks

    return sshopm_peaks(inputs.sh, basis=params.basis, mask=inputs.mask, options=engine_options(params),
                        backend=params.backend, progress=progress)


def write_peaks_outputs(inputs: PeaksInputs, result: "PeaksResult", params: PeaksParams, outputs: PeaksOutputs,
                        compress_threads: int | None = None) -> dict:
    """Write the three images (compressed in parallel) and the sidecar last; returns the
    sidecar content. ``compress_threads`` per image: see :func:`worker.io.nifti.save_nifti_atomic`."""
    from worker.io.nifti import derived_image, save_nifti_atomic

    started = time.perf_counter()
    info, mask_info = inputs.info, inputs.mask_info
    k = params.npeaks
    peaks = (result.directions * result.amplitudes[..., None]).reshape(*info.shape[:3], 3 * k).astype(np.float32)
    for path in (outputs.peaks, outputs.amplitudes, outputs.count, outputs.sidecar):
        path.parent.mkdir(parents=True, exist_ok=True)
    images = {
        outputs.peaks: derived_image(info, peaks),
        outputs.amplitudes: derived_image(info, result.amplitudes.astype(np.float32)),
        outputs.count: derived_image(info, result.count.astype(np.uint8)),
    }
    # Compression releases the GIL: the three files compress in parallel.
    with ThreadPoolExecutor(max_workers=len(images)) as pool:
        list(pool.map(lambda item: save_nifti_atomic(item[1], item[0], compress_threads), images.items()))
    written = time.perf_counter()

    stats = dict(result.stats)
    seconds = stats.pop("seconds")
    sidecar = {
        "job": "peaks",
        "input": {"fod": info.path.name, "mask": mask_info.path.name if mask_info else None,
                  "shape": list(info.shape), "dtype": str(info.dtype)},
        "parameters": params.model_dump(),
        "sh_basis": params.basis,
        "outputs": {name: Path(path).name for name, path in outputs.model_dump().items() if name != "sidecar"},
        "layout": "MRtrix3 sh2peaks: volumes 3k..3k+2 = amplitude_k * unit direction_k, in the frame the SH "
                  "coefficients are expressed in; NaN where absent",
        **stats,
        "voxels_with_peaks": int((result.count > 0).sum()),
        "versions": package_versions("nibabel", "isal"),
        "seconds": {"read": inputs.seconds, **{f"peaks_{k_}": v for k_, v in seconds.items()},
                    "write": written - started, "total": inputs.seconds + seconds["total"] + written - started},
    }
    write_json_atomic(outputs.sidecar, sidecar)
    return sidecar


def run_peaks(
    fod: Path,
    outputs: PeaksOutputs,
    params: PeaksParams = PeaksParams(),
    mask: Path | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Read, compute, write. Returns the sidecar content. ``progress(fraction)`` is called
    between chunks; an exception it raises (cancellation) stops the run before any output."""
    inputs = read_peaks_inputs(fod, mask)
    result = compute_peaks(inputs, params, progress)
    return write_peaks_outputs(inputs, result, params, outputs)


def _validate(inputs: dict[str, Path], params: PeaksParams) -> None:
    check_peaks_inputs(inputs["fod"], inputs.get("mask"))


def _run(ctx: JobContext) -> list[Path]:
    def report(fraction: float) -> None:
        ctx.check_cancelled()
        ctx.progress(fraction)

    outputs = PeaksOutputs.in_folder(ctx.out_dir)
    run_peaks(ctx.inputs["fod"], outputs, ctx.params, mask=ctx.inputs.get("mask"), progress=report)
    return [outputs.peaks, outputs.amplitudes, outputs.count, outputs.sidecar]


_NIFTI = (".nii", ".nii.gz")

JOB_KINDS = [
    JobKind(
        name="peaks",
        summary="Fiber directions (local maxima) of an SH fiber orientation distribution by SS-HOPM",
        params_model=PeaksParams,
        inputs=(
            InputSlot("fod", True, _NIFTI, "4D NIfTI of even-order SH coefficients (6, 15, 28, 45, 66 or 91 volumes)"),
            InputSlot("mask", False, _NIFTI, "3D NIfTI mask on the FOD grid (non-zero = process)"),
        ),
        validate=_validate,
        run=_run,
        result_names=("peaks.nii.gz", "amplitudes.nii.gz", "count.nii.gz", "peaks.json"),
    )
]
