"""Reading a planned peaks job's inputs: the SH volume and the mask as arrays, the files'
checksums, and which voxels the engine can compute."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from worker.errors import InputError
from worker.job_kinds import UploadedInput

if TYPE_CHECKING:
    from worker.io.images import ImageInfo
    from worker.jobs.peaks.plan import PeaksPlan

__all__ = ["PeaksInputs", "read_peaks_inputs", "peaks_inputs_of_sh"]


@dataclass
class PeaksInputs:
    """A peaks job's inputs in memory: the SH volume (x, y, z, coeffs) float32 and the mask
    (x, y, z) bool or None; ``finite``, which voxels have only finite coefficients
    (x, y, z) bool, for the engine; ``warnings`` about voxels left out (non-finite
    coefficients); ``sha256``, the files' checksums by file name, taken in the read (none
    where the parameters turn ``checksums`` off); ``seconds`` it took to read them."""

    sh: np.ndarray
    mask: np.ndarray | None
    finite: np.ndarray
    warnings: list[str]
    sha256: dict[str, str]
    seconds: float


def read_peaks_inputs(plan: "PeaksPlan", *, inflate_threads: int = 1) -> PeaksInputs:
    """Read the inputs of ``plan`` (:class:`InputError` saying what to fix, also when no
    voxel is left to compute).

    A large .nii.gz is inflated on ``inflate_threads`` threads (one job alone on a machine;
    a batch or a worker running several jobs keeps one each). For the GPU the volume goes
    into page-locked memory, which the GPU copies by DMA (plain memory while this process
    has no CUDA context yet). The files' sha256 for the sidecar is taken from the bytes the
    same read takes in.
    """
    from gpu.cuda.host_memory import host_empty

    started = time.perf_counter()
    params = plan.params
    empty = host_empty(params.backend)
    sh, sha256 = _read_input(plan.fod, "fod", plan.uploaded, inflate_threads, empty, params.checksums)
    return _with_mask(plan, sh, sha256, started)


def peaks_inputs_of_sh(plan: "PeaksPlan", sh: np.ndarray, sha256: dict[str, str]) -> PeaksInputs:
    """The inputs of ``plan`` with its SH volume given in memory, ``sh`` (x, y, z, coeffs)
    float32, the values its FOD file holds, and that file's ``sha256`` by name; the mask is
    read as :func:`read_peaks_inputs` reads it. For the GPU the volume is copied into
    page-locked memory, in its own layout (a NIfTI's volume at a time, as a read of the file
    gives it): a straight copy, where one into the other order moves every value apart."""
    from gpu.cuda.host_memory import host_empty

    started = time.perf_counter()
    order = "F" if sh.flags.f_contiguous and not sh.flags.c_contiguous else "C"
    held = host_empty(plan.params.backend)(sh.shape, np.float32, order=order)
    held[...] = sh
    return _with_mask(plan, held, dict(sha256), started)


def _with_mask(plan: "PeaksPlan", sh: np.ndarray, sha256: dict[str, str], started: float) -> PeaksInputs:
    """The inputs of ``plan`` given its SH volume: the mask read, the finite voxels found."""
    from gpu.peaks.search import finite_voxels

    params = plan.params
    mask = None
    if plan.mask is not None:
        mask_values, mask_sha256 = _read_input(plan.mask, "mask", plan.uploaded, checksums=params.checksums)
        mask = mask_values.reshape(plan.fod.shape[:3]) > 0
        sha256.update(mask_sha256)
    # One pass finds them for the warnings and the engine.
    finite = finite_voxels(sh)
    warnings = _finite_voxels_warnings(finite, mask, plan.name("fod"))
    return PeaksInputs(sh, mask, finite, warnings, sha256, time.perf_counter() - started)


def _read_input(info: "ImageInfo", role: str, uploaded: dict[str, UploadedInput], threads: int = 1,
                empty: Callable[..., np.ndarray] = np.empty, checksums: bool = True) -> tuple[np.ndarray, dict[str, str]]:
    """An input's data as float32, read into an array ``empty`` makes (as ``np.empty``), and
    its sha256 by file name (none without ``checksums``): of the files holding the image (an
    ``.mih`` header and its data file), taken in the read
    (:func:`worker.io.images.load_image_data_with_sha256`), or, for an image stored in another
    form than it was uploaded in (``uploaded``, by role), of the uploaded file (hashed when it
    was received)."""
    from worker.io.images import load_image_data, load_image_data_with_sha256

    if role in uploaded or not checksums:
        known = {uploaded[role].name: uploaded[role].sha256} if role in uploaded and checksums else {}
        return load_image_data(info, threads=threads, empty=empty), known
    return load_image_data_with_sha256(info, threads=threads, empty=empty)


def _finite_voxels_warnings(finite: np.ndarray, mask: np.ndarray | None, name: str) -> list[str]:
    """Warnings about voxels with non-finite coefficients (``finite`` False: see
    :func:`gpu.peaks.search.finite_voxels`); :class:`InputError` when no voxel is left to
    compute."""
    where = "" if mask is None else " inside the mask"
    if mask is not None:
        if not mask.any():
            raise InputError("Empty mask", "the mask selects no voxel; pass a mask with non-zero voxels, or none")
        finite = finite & mask  # not in place: the engine gets the flags too
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
