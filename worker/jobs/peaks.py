"""The fiber-peaks job: FOD NIfTI in, peaks in MRtrix3 ``sh2peaks`` layout out.

Outputs, on the input's grid (same affine and spatial header):

* peaks — float32 4D with 3·K volumes; triplet k is amplitude_k × unit direction_k, NaN
  where a voxel has fewer than K peaks, is masked out, or had non-finite coefficients
  (as ``sh2peaks`` writes them);
* amplitudes — float32 4D, K volumes, the FOD value at each peak, descending;
* count — uint8 3D, the number of peaks per voxel;
* a JSON sidecar — parameters, SH basis, lmax, backend, device, versions, timings, counts
  and ``warnings`` (voxels whose coefficients are NaN or infinite).

A volume with no voxel to compute (every selected voxel non-finite, or an empty mask) fails
before computing.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
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
    from gpu.peaks.search import PeaksOptions
    from worker.io.nifti import NiftiInfo

# The engine (numba) and nibabel are imported inside the functions that use them, so that
# the job-kind registry, and with it the API, loads without them.

__all__ = ["PeaksOutputs", "engine_options", "check_peaks_inputs", "peaks_memory_bytes", "run_peaks", "JOB_KINDS"]


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
        raise InputError(
            "Wrong number of volumes",
            f"the FOD file {info.path.name!r} has {info.shape[3]} volumes: {exc}. Pass an FOD image "
            "(e.g. from dwi2fod), not the DWI",
        ) from None
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


def run_peaks(
    fod: Path,
    outputs: PeaksOutputs,
    params: PeaksParams = PeaksParams(),
    mask: Path | None = None,
    progress: Callable[[float], None] | None = None,
) -> dict:
    """Read, compute, write. Returns the sidecar content. ``progress(fraction)`` is called
    between chunks; an exception it raises (cancellation) stops the run before any output."""
    from gpu.peaks.search import sshopm_peaks
    from worker.io.nifti import derived_image, load_nifti_data, save_nifti_atomic

    started = time.perf_counter()
    info, mask_info = check_peaks_inputs(fod, mask)
    sh = load_nifti_data(info)
    mask_array = None
    if mask_info is not None:
        mask_array = load_nifti_data(mask_info).reshape(info.shape[:3]) > 0
    warnings = _finite_voxels_warnings(sh, mask_array, info.path.name)
    loaded = time.perf_counter()
    result = sshopm_peaks(sh, basis=params.basis, mask=mask_array, options=engine_options(params),
                          backend=params.backend, progress=progress)
    computed = time.perf_counter()

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
        list(pool.map(lambda item: save_nifti_atomic(item[1], item[0]), images.items()))
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
        "warnings": warnings,
        "versions": package_versions("nibabel", "isal"),
        "seconds": {"read": loaded - started, **{f"peaks_{k_}": v for k_, v in seconds.items()},
                    "write": written - computed, "total": time.perf_counter() - started},
    }
    write_json_atomic(outputs.sidecar, sidecar)
    return sidecar


def peaks_memory_bytes(fod: Path, mask: Path | None = None, npeaks: int = 3) -> int:
    """Most host memory :func:`run_peaks` holds at once, from the headers, in bytes.

    With N voxels, C coefficients and K peaks, the largest of three phases: reading (the
    SH volume as float32, N·C·4, plus what reading the mask takes); computing (the SH volume,
    a copy of its selected voxels, per-voxel sums, flags and shifts, the backend's peaks
    (float64 on the CPU, float32 to and from the GPU) and the float32 results,
    N·(2·C·4 + 48·K + 64)); writing (the SH volume, the results, the
    peaks image and its copy, and each image's bytes and their compression, N·(C·4 + 72·K + 3)).
    """
    from worker.io.nifti import load_memory_bytes

    info, mask_info = check_peaks_inputs(fod, mask)
    n, c, k = info.n_voxels, info.shape[3], npeaks
    sh = n * c * 4
    reading = load_memory_bytes(info)
    if mask_info is not None:
        reading = max(reading, sh + load_memory_bytes(mask_info) + n)
    computing = n * (2 * c * 4 + 48 * k + 64)
    writing = n * (c * 4 + 72 * k + 3)
    return max(reading, computing, writing)


def _memory(inputs: dict[str, Path], params: PeaksParams) -> int:
    return peaks_memory_bytes(inputs["fod"], inputs.get("mask"), params.npeaks)


def _finite_voxels_warnings(sh: np.ndarray, mask: np.ndarray | None, name: str) -> list[str]:
    """Warnings about voxels with non-finite coefficients; :class:`InputError` when no voxel is
    left to compute."""
    # a float64 sum per voxel is non-finite exactly when a coefficient is (float32 inputs)
    finite = np.isfinite(sh.sum(axis=-1, dtype=np.float64))
    where = "" if mask is None else " inside the mask"
    if mask is not None:
        if not mask.any():
            raise InputError("Empty mask", "the mask selects no voxel; pass a mask with non-zero voxels, or none")
        finite &= mask
        selected = int(mask.sum())
    else:
        selected = finite.size
    computable = int(finite.sum())
    if computable == 0:
        raise InputError(
            "No finite voxels",
            f"every voxel{where} of {name!r} has NaN or infinite SH coefficients, so there is nothing "
            "to compute; check how the FOD was made (e.g. mrstats, or rerun dwi2fod with a brain mask)",
        )
    if computable == selected:
        return []
    return [
        f"{selected - computable} of {selected} voxels{where} of {name!r} have NaN or infinite SH "
        "coefficients; their peaks are NaN and their count 0"
    ]


def _validate(inputs: dict[str, Path], params: PeaksParams) -> None:
    check_peaks_inputs(inputs["fod"], inputs.get("mask"))


def _run(ctx: JobContext) -> list[Path]:
    def report(fraction: float) -> None:
        ctx.check_cancelled()
        ctx.progress(fraction)

    outputs = PeaksOutputs.in_folder(ctx.out_dir)
    sidecar = run_peaks(ctx.inputs["fod"], outputs, ctx.params, mask=ctx.inputs.get("mask"), progress=report)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
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
        memory_bytes=_memory,
    )
]
