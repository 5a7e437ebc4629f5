"""The ``fixels`` job kind: an SH FOD image → an MRtrix3 fixel directory, as ``fod2fixel``
makes it (:func:`gpu.fixels.segment.segment_fods`): ``index``, ``directions``, ``afd`` (the
lobe integrals), ``peak_amp`` and ``disp``, with a JSON sidecar.

The directory's images are in the input's format: ``.mif`` (``.mif.gz`` from a compressed
input) or ``.nii`` (as ``fod2fixel -nii``; ``.nii.gz`` from a compressed input), except that
more fixels than NIfTI-1 holds (its dimensions are 16-bit) go to ``.mif``, with a warning.
The CLI (``fibertensor fixels``) writes the directory; the service's job writes it as one
``fixels.tar``, since its results are files.
"""

from __future__ import annotations

import shutil
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from worker.errors import InputError
from worker.io.atomic import atomic_path, write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind, UploadedInput
from worker.params.fixels import FixelsParams

# The engine (numba) and the image readers are imported inside the functions that use
# them, so that the job-kind registry, and with it the API, loads without them.

__all__ = ["check_fixels_inputs", "fixel_format", "FixelsRead", "read_fixels_inputs", "segment_fixels",
           "write_fixels_outputs", "run_fixels", "fixels_memory_bytes", "JOB_KINDS"]

_IMAGE_SUFFIXES = (".nii", ".nii.gz", ".mif", ".mif.gz")


def check_fixels_inputs(fod: Path, mask: Path | None = None) -> tuple["ImageInfo", "ImageInfo | None"]:
    """Header-only checks of a fixels job's inputs; raises :class:`InputError` saying what
    to fix."""
    from gpu.sh_basis import lmax_from_ncoeffs
    from worker.io.images import read_image_header

    info = read_image_header(fod, "FOD")
    if len(info.shape) != 4:
        raise InputError("Not a 4D volume", f"the FOD file {info.path.name!r} has shape {info.shape}; fixels need a "
                         "4D volume of SH coefficients (x, y, z, coefficients), e.g. the output of dwi2fod")
    try:
        lmax_from_ncoeffs(info.shape[3])
    except ValueError as exc:
        raise InputError("Wrong number of volumes", f"the FOD file {info.path.name!r} has {info.shape[3]} volumes: "
                         f"{exc}. Pass an FOD image (e.g. from dwi2fod), not the DWI") from None
    mask_info = None
    if mask is not None:
        mask_info = read_image_header(mask, "mask")
        spatial = mask_info.shape[:3] if len(mask_info.shape) == 4 and mask_info.shape[3] == 1 else mask_info.shape
        if spatial != info.shape[:3] or not np.allclose(mask_info.affine, info.affine, atol=1e-3):
            raise InputError("Mask grid mismatch", f"the mask {mask_info.path.name!r} (shape {mask_info.shape}) is "
                             f"not on the FOD grid (shape {info.shape[:3]}); resample it onto the FOD grid "
                             "(e.g. mrgrid … regrid -template)")
    return info, mask_info


def fixel_format(fod_name: str, n_fixels: int) -> tuple[str, str | None]:
    """The fixel directory's image format for an input named ``fod_name``, and a warning when a
    NIfTI input's fixels do not fit NIfTI-1 and go to MRtrix images instead."""
    from worker.io.fixels import NIFTI1_MAX_FIXELS

    gz = ".gz" if fod_name.endswith(".gz") else ""
    if not fod_name.endswith((".nii", ".nii.gz")):
        return f"mif{gz}", None
    if n_fixels <= NIFTI1_MAX_FIXELS:
        return f"nii{gz}", None
    return f"mif{gz}", (f"{n_fixels} fixels do not fit NIfTI-1 fixel images (at most {NIFTI1_MAX_FIXELS}); the fixel "
                        "directory is in MRtrix format (.mif), which every MRtrix3 fixel command reads")


@dataclass(frozen=True)
class FixelsRead:
    """A fixels job's inputs read: the FOD's header and (X, Y, Z, C) float32 data, the mask
    (bool, or None), the input names and sha256 by name, and the seconds the read took."""

    info: "ImageInfo"
    fod: np.ndarray
    mask: np.ndarray | None
    names: dict[str, str]
    sha256: dict[str, str]
    seconds: float


def read_fixels_inputs(fod: Path, mask: Path | None = None,
                       uploaded: dict[str, UploadedInput] | None = None, *, inflate_threads: int = 1) -> FixelsRead:
    """Check the inputs from their headers (:func:`check_fixels_inputs`) and read them;
    ``uploaded``: the inputs' names and sha256 as uploaded, by slot, where the service stored
    them in another form; ``inflate_threads``: threads that inflate a large ``.nii.gz``."""
    from worker.io.images import load_job_images

    started = time.perf_counter()
    info, mask_info = check_fixels_inputs(fod, mask)
    arrays, names, sha256 = load_job_images({"fod": info, "mask": mask_info}, uploaded, threads=inflate_threads)
    mask_array = None if mask_info is None else arrays["mask"].reshape(info.shape[:3]) != 0
    if mask_array is not None and not mask_array.any():
        raise InputError("Empty mask", "the mask selects no voxel; pass a mask with non-zero voxels, or none")
    return FixelsRead(info, arrays["fod"], mask_array, names, sha256, time.perf_counter() - started)


def segment_fixels(read: FixelsRead, params: FixelsParams = FixelsParams(),
                   progress: Callable[[float], None] | None = None) -> tuple["FixelSet", str]:
    """The fixels of the FOD read (:func:`gpu.fixels.segment.segment_fods`) and the backend
    that segmented them; ``progress(fraction)`` is called between chunks of voxels."""
    from gpu.cuda.backend import resolve_backend
    from gpu.fixels.segment import FmlsOptions, segment_fods

    options = FmlsOptions(integral=params.fmls_integral, peak_value=params.fmls_peak_value,
                          no_thresholds=params.fmls_no_thresholds, lobe_merge_ratio=params.fmls_lobe_merge_ratio,
                          maxnum=params.maxnum, dirpeak=params.dirpeak)
    backend = resolve_backend(params.backend)
    return segment_fods(read.fod, read.mask, options, backend, progress), backend


def write_fixels_outputs(read: FixelsRead, fixels: "FixelSet", backend: str, out_dir: Path,
                         params: FixelsParams = FixelsParams(), *, archive: bool = False,
                         segment_seconds: float = 0.0) -> dict:
    """Write the fixel directory ``out_dir`` (or, with ``archive``, ``out_dir`` as one tar
    holding the directory) and, last, the sidecar ``out_dir.json`` (``.tar`` swapped for
    ``.json``); returns the sidecar content."""
    from worker.io.fixels import FMLS_QUANTITIES, write_fixel_images
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    out_dir = Path(out_dir)
    fmt, warning = fixel_format(read.names["fod"], fixels.afd.size)
    quantities = {name: getattr(fixels, name) for name in FMLS_QUANTITIES}
    if archive:
        staging = out_dir.with_name(f".{out_dir.name}.staging")
        folder = write_fixel_images(staging / "fixels", fixels.index, fixels.directions, quantities, read.info.affine,
                                    fmt=fmt)
        try:
            with atomic_path(out_dir) as temporary, tarfile.open(temporary, "w") as tar:
                tar.add(folder, arcname=folder.name)
        finally:
            shutil.rmtree(staging)
    else:
        write_fixel_images(out_dir, fixels.index, fixels.directions, quantities, read.info.affine, fmt=fmt)
    finished = time.perf_counter()
    sidecar = {
        "job": "fixels",
        "generated_by": generated_by(),
        "input": {"fod": read.names["fod"], "mask": read.names.get("mask"), "shape": list(read.info.shape),
                  "sha256": read.sha256},
        "parameters": params.model_dump(),
        "method": "FMLS segmentation as MRtrix3 fod2fixel (Smith et al. 2013, NeuroImage 67:298, Appendix 2) on its "
                  "1281-direction set; afd = lobe integral, peak_amp = FOD amplitude at the lobe's largest peak, "
                  "disp = afd / peak_amp",
        "outputs": {"fixels": out_dir.name, "format": fmt, "files": ["index", "directions", *FMLS_QUANTITIES]},
        "fixels": int(fixels.afd.size),
        "voxels_with_fixels": int((fixels.index[..., 0] > 0).sum()),
        "most_fixels_in_a_voxel": int(fixels.index[..., 0].max(initial=0)),
        "backend": backend,
        "warnings": [warning] if warning else [],
        "versions": package_versions("nibabel", "isal"),
        "seconds": {"read": read.seconds, "segment": segment_seconds, "write": finished - started,
                    "total": read.seconds + segment_seconds + finished - started},
    }
    write_json_atomic(out_dir.with_name(out_dir.name.removesuffix(".tar") + ".json"), sidecar)
    return sidecar


def run_fixels(fod: Path, out_dir: Path, params: FixelsParams = FixelsParams(), mask: Path | None = None,
               progress: Callable[[float], None] | None = None, *, archive: bool = False,
               uploaded: dict[str, UploadedInput] | None = None, inflate_threads: int = 1) -> dict:
    """Segment the FOD image ``fod`` and write its fixel directory ``out_dir`` (or, with
    ``archive``, ``out_dir`` as one tar holding the directory) and the sidecar
    ``out_dir.json`` (``.tar`` swapped for ``.json``); returns the sidecar content.
    ``progress(fraction)`` is called between chunks of voxels; an exception it raises
    (cancellation) stops the run before any output. ``uploaded``: the inputs' names and
    sha256 as uploaded, by slot, where the service stored them in another form;
    ``inflate_threads``: threads that inflate a large ``.nii.gz`` FOD (one job alone on a
    machine; a service worker keeps one). The three
    stages (:func:`read_fixels_inputs`, :func:`segment_fixels`, :func:`write_fixels_outputs`)
    are what a batch overlaps across inputs."""
    read = read_fixels_inputs(fod, mask, uploaded, inflate_threads=inflate_threads)
    started = time.perf_counter()
    fixels, backend = segment_fixels(read, params, progress)
    return write_fixels_outputs(read, fixels, backend, out_dir, params, archive=archive,
                                segment_seconds=time.perf_counter() - started)


def fixels_memory_bytes(fod: Path, mask: Path | None = None) -> int:
    """Most host memory :func:`run_fixels` holds at once, from the headers, in bytes: with N
    voxels and C coefficients, the FOD as float32 (N·C·4), the mask, and what segmenting
    holds (:func:`gpu.fixels.segment.segment_memory_bytes`), more than writing the fixels
    does once the segmentation has let go of its float64 fixels."""
    return _memory_of_headers(*check_fixels_inputs(fod, mask))


def _memory_of_headers(info: "ImageInfo", mask_info: "ImageInfo | None") -> int:
    from gpu.fixels.segment import segment_memory_bytes

    n, c = info.n_voxels, info.shape[3]
    return n * c * 4 + (0 if mask_info is None else 5 * n) + segment_memory_bytes(n, c)


def _validate(inputs: dict[str, Path], params: FixelsParams) -> tuple["ImageInfo", "ImageInfo | None"]:
    return check_fixels_inputs(inputs["fod"], inputs.get("mask"))


def _memory(inputs: dict[str, Path], params: FixelsParams, headers: tuple["ImageInfo", "ImageInfo | None"]) -> int:
    return _memory_of_headers(*headers)


def _run(ctx: JobContext) -> list[Path]:
    def report(fraction: float) -> None:
        ctx.check_cancelled()
        ctx.progress(fraction)

    tar = ctx.out_dir / "fixels.tar"
    sidecar = run_fixels(ctx.inputs["fod"], tar, ctx.params, mask=ctx.inputs.get("mask"), progress=report,
                         archive=True, uploaded=ctx.uploaded)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    return [tar, ctx.out_dir / "fixels.json"]


JOB_KINDS = [
    JobKind(
        name="fixels",
        summary="Fixels of an SH FOD as MRtrix3 fod2fixel: FMLS lobes with AFD (integral), peak amplitude and "
                "dispersion, as an MRtrix3 fixel directory",
        params_model=FixelsParams,
        inputs=(
            InputSlot("fod", True, _IMAGE_SUFFIXES,
                      "4D NIfTI or MRtrix image of even-order SH coefficients in MRtrix3's basis (6, 15, 28, 45, 66 "
                      "or 91 volumes)"),
            InputSlot("mask", False, _IMAGE_SUFFIXES, "3D NIfTI or MRtrix mask on the FOD grid (non-zero = process)"),
        ),
        validate=_validate,
        memory_bytes=_memory,
        run=_run,
        result_names=("fixels.tar", "fixels.json"),
    )
]
