"""The fiber-peaks job: an SH FOD image in, peaks in MRtrix3 ``sh2peaks`` layout and fODF
metrics out.

Outputs, on the input's grid (same affine and spatial header), named ``{stem}{name}{suffix}``
(:class:`PeaksOutputs`):

* ``peaks`` — float32 4D with 3·K volumes; triplet k is amplitude_k × unit direction_k, NaN
  where a voxel has fewer than K peaks, is masked out, or had non-finite coefficients
  (as ``sh2peaks`` writes them);
* ``amplitudes`` — float32 4D, K volumes, the FOD value at each peak, descending;
* ``count`` — uint8 3D, the number of peaks per voxel (NuFO);
* the fODF metrics chosen by ``metrics`` (:mod:`gpu.peaks.fodf_metrics`): ``afd_max``,
  ``afd_total``, ``afd_sum`` (float32 3D), ``peak_fraction`` (float32, K volumes), ``rgb``
  (uint8, 3 volumes);
* ``qc.png`` — the quality-control picture (:mod:`worker.qc_picture`), unless ``qc`` is off;
* on request (``format``) an MRtrix3 fixel directory ``fixels`` (MRtrix images) and a DIPY
  ``peaks.pam5``;
* a JSON sidecar — input checksums, parameters, SH basis, lmax, backend, device, versions,
  timings, counts, ``warnings`` (voxels whose coefficients are NaN or infinite), and
  ``generated_by`` as a BIDS ``GeneratedBy`` entry.

The images are NIfTI (``.nii.gz``) or MRtrix (``.mif``, or ``.mif.gz`` from a compressed
input), as the input is, unless ``format`` names image formats. A volume with no voxel to
compute (every selected voxel non-finite, or an empty mask) fails before computing.
"""

from __future__ import annotations

import importlib
import math
import os
import shutil
import sys
import tarfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np
from pydantic import BaseModel

from worker.errors import InputError
from worker.io.atomic import atomic_path, write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind, UploadedInput
from worker.params.peaks import METRICS, PeaksParams
from worker.provenance import generated_by, package_versions

#: The image files a peaks job reads (NIfTI or MRtrix), longest suffix of a kind last.
IMAGE_SUFFIXES = (".nii", ".nii.gz", ".mif", ".mif.gz")
#: The image outputs a peaks job can write, by name.
IMAGE_OUTPUTS = ("peaks", "amplitudes", "count") + METRICS
_jobs_written = 0  # by this process (see _compiled_writers)
# Voxels of a slab of the peaks image (_peaks_image): its results and image stay in the cache.
_SLAB_VOXELS = 1 << 16
_imports = threading.Lock()

if TYPE_CHECKING:
    from gpu.peaks.fodf_metrics import FodfMetrics
    from gpu.peaks.search import PeaksOptions, PeaksResult, PreparedPeaks
    from worker.io.images import ImageInfo

# The engine (numba) and nibabel are imported inside the functions that use them, so that
# the job-kind registry, and with it the API, loads without them.

__all__ = ["IMAGE_SUFFIXES", "IMAGE_OUTPUTS", "PeaksOutputs", "PeaksInputs", "engine_options", "check_peaks_inputs", "image_suffixes", "read_peaks_inputs",
           "compute_peaks", "write_peaks_outputs", "run_peaks", "peaks_memory_bytes", "warm_up_writers", "JOB_KINDS"]


def engine_options(params: PeaksParams) -> "PeaksOptions":
    """The engine's options for validated job parameters (no second set of limits: the
    model's come from :mod:`gpu.peaks.limits`, as the engine's do)."""
    from gpu.peaks.search import PeaksOptions

    return PeaksOptions(npeaks=params.npeaks, threshold=params.threshold, relative_threshold=params.relative_threshold,
                        starts=params.starts, seeding=params.seeding)


class PeaksOutputs(BaseModel):
    """Where a peaks run writes: output ``name`` with ``suffix`` goes to
    ``folder / f"{stem}{name}{suffix}"``, the JSON sidecar to ``sidecar``."""

    folder: Path
    stem: str
    sidecar: Path

    @classmethod
    def with_prefix(cls, prefix: Path) -> "PeaksOutputs":
        """The CLI naming: ``PREFIX_peaks.nii.gz``, ``PREFIX_count.nii.gz``, …, ``PREFIX.json``."""
        prefix = Path(prefix)
        return cls(folder=prefix.parent, stem=prefix.name + "_", sidecar=prefix.with_name(prefix.name + ".json"))

    @classmethod
    def in_folder(cls, folder: Path) -> "PeaksOutputs":
        """The job naming: ``peaks.nii.gz``, ``count.nii.gz``, …, ``peaks.json`` in ``folder``."""
        folder = Path(folder)
        return cls(folder=folder, stem="", sidecar=folder / "peaks.json")

    def path(self, name: str, suffix: str = "") -> Path:
        return self.folder / f"{self.stem}{name}{suffix}"


def image_suffixes(fod: Path, formats: list[str]) -> list[str]:
    """File suffixes of the output images: those of the image formats in ``formats``
    (``nifti`` → ``.nii.gz``; ``mif`` → ``.mif.gz`` from a gzip-compressed input, else
    ``.mif``), or the input's own format when ``formats`` names none."""
    from worker.io.images import image_format

    name = Path(fod).name
    named = [f for f in formats if f in ("nifti", "mif")] or [image_format(fod)]
    mif = ".mif.gz" if name.endswith(".gz") else ".mif"
    return [".nii.gz" if f == "nifti" else mif for f in named]


def check_peaks_inputs(fod: Path, mask: Path | None = None,
                       params: PeaksParams | None = None) -> tuple["ImageInfo", "ImageInfo | None"]:
    """Header-only checks of a peaks job's inputs (NIfTI or MRtrix images), and that the
    output formats ``params`` asks for can be written; raises :class:`InputError` saying
    what to fix."""
    from gpu.sh_basis import lmax_from_ncoeffs
    from worker.io.images import read_image_header

    info = read_image_header(fod, "FOD")
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
        mask_info = read_image_header(mask, "mask")
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
    if params is not None and "pam5" in params.format:
        from worker.io.pam5 import require_dipy

        require_dipy()
    return info, mask_info


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


def _scanner_to_image_axes(affine: np.ndarray) -> np.ndarray:
    """The rotation taking scanner-frame vectors to the image axes: the orthogonal factor
    R of the affine's 3×3 part M = R·P (polar decomposition; R = U·Vᵀ from M's SVD), so
    that a direction d in scanner space has components Rᵀd along the (mm-scaled) axes."""
    u, _, vt = np.linalg.svd(np.asarray(affine, np.float64)[:3, :3])
    return u @ vt


def _compiled_writers(params: PeaksParams) -> bool:
    """Whether this job's fODF metrics and QC picture run their compiled passes (the same
    numbers, without holding the interpreter lock): where numba is loaded already, where
    this job loads it anyway (fixel or ``.pam5`` output), and from a process's second job
    on; a process that writes one job (``fibertensor peaks`` on the GPU) spares numba's
    import (about 0.3–0.7 s). Every module a writer needs that imports numba is imported
    here, before the writers' threads start: two threads importing numba at once can
    find it half initialised (a batch failed on ``numba.core.config``)."""
    global _jobs_written
    loads = [name for fmt, name in (("pam5", "worker.io.pam5"), ("fixel", "worker.io.fixels")) if fmt in params.format]
    with _imports:  # jobs on threads of one process, too
        _jobs_written += 1
        compiled = "numba" in sys.modules or bool(loads) or _jobs_written > 1
        if compiled:
            # only the passes this job runs: a peaks-only batch never imports numba
            loads += [name for wanted, name in ((params.metrics or "fixel" in params.format,
                                                 "gpu.peaks.fodf_metrics_compiled"), (params.qc, "worker.qc_raster"))
                      if wanted]
        for name in loads:
            importlib.import_module(name)
    return compiled


def warm_up_writers() -> float:
    """Load the writers' compiled passes (the QC picture's rasterizer, the fODF metrics) from
    numba's cache, or compile them, so that a worker's first job waits for neither; returns
    the seconds taken."""
    from gpu.peaks.fodf_metrics import fodf_metrics
    from worker.qc_picture import warm_up_qc_picture

    started = time.perf_counter()
    warm_up_qc_picture()
    shape = (2, 2, 2)
    fodf_metrics(np.ones((*shape, 15), np.float32), np.zeros((*shape, 1, 3), np.float32), np.ones((*shape, 1), np.float32),
                 np.ones(shape, np.uint8), compiled=True)
    return time.perf_counter() - started


def _peaks_image(directions: np.ndarray, amplitudes: np.ndarray) -> np.ndarray:
    """The ``sh2peaks`` image (..., 3K) float32 of unit ``directions`` (..., K, 3) and
    ``amplitudes`` (..., K): volume 3k + i is amplitude_k × direction_k[i]. Made in the order
    NIfTI and our MRtrix writer store it (first axis fastest, volumes last), so that they take
    it without copying it into that order: a volume at a time, in slabs of the last spatial
    axis of about :data:`_SLAB_VOXELS` voxels, so that results with each voxel's peaks
    together (the engine's) are read 3K times from the cache rather than from memory."""
    spatial, k = amplitudes.shape[:-1], amplitudes.shape[-1]
    image = np.empty((*spatial, 3 * k), np.float32, order="F")
    slabs = [()]
    if spatial:
        step = max(1, _SLAB_VOXELS // max(1, math.prod(spatial[:-1])))
        slabs = [(slice(None),) * (len(spatial) - 1) + (slice(start, start + step),)
                 for start in range(0, spatial[-1], step)]
    for slab in slabs:
        slab_directions, slab_amplitudes, slab_image = directions[slab], amplitudes[slab], image[slab]
        for peak in range(k):
            for axis in range(3):
                np.multiply(slab_directions[..., peak, axis], slab_amplitudes[..., peak],
                            out=slab_image[..., 3 * peak + axis])
    return image


def _run_metrics(sh: np.ndarray, result: "PeaksResult", compiled: bool) -> "FodfMetrics":
    """:func:`gpu.peaks.fodf_metrics.fodf_metrics` of a run, computed with the spatial axes in
    the order in which the engine's voxels lie in memory (reversed for a NIfTI volume, whose
    first axis is fastest), so that its compiled pass reads the arrays without first copying
    them into C order; the maps come back as views on the input's axes, the 3D ones in
    NIfTI's order (written without a copy)."""
    from gpu.peaks.fodf_metrics import FodfMetrics, fodf_metrics

    arrays = (sh, result.directions, result.amplitudes, result.count)
    d = result.count.ndim
    if result.count.flags.c_contiguous or not result.count.T.flags.c_contiguous:
        return fodf_metrics(*arrays, compiled=compiled)

    def flipped(a: np.ndarray) -> np.ndarray:  # its own inverse
        return a.transpose(*range(d - 1, -1, -1), *range(d, a.ndim))

    maps = fodf_metrics(*map(flipped, arrays), compiled=compiled)
    return FodfMetrics(**{f.name: flipped(getattr(maps, f.name)) for f in fields(maps)})


def _write_outputs(info: "ImageInfo", sh: np.ndarray, result: "PeaksResult", params: PeaksParams,
                   outputs: PeaksOutputs, fixel_archive: bool, submit: Callable[[Callable[[], object]], Future],
                   paths: dict[str, list[Path]], compress_threads: int | None = None,
                   fod_name: str | None = None) -> list[Future]:
    """Start writing the outputs of a run with ``submit`` (a thread pool's, which starts tasks
    in the order given): records them in ``paths`` as ``{output: [paths]}`` before each write
    starts, and returns the futures of the writes and of the arrays they share (the fixel
    directory's gives the folder it made). ``fod_name``: the input's name as given (default:
    as read), whose format the outputs take."""
    from worker.io.images import save_image
    from worker.qc_picture import write_peaks_qc_png

    k = params.npeaks
    compiled = _compiled_writers(params)
    fod_name = fod_name or info.path.name
    suffixes = image_suffixes(Path(fod_name), params.format)
    for name in ("peaks", "amplitudes", "count", *params.metrics):
        paths[name] = [outputs.path(name, suffix) for suffix in suffixes]
    if params.qc:
        paths["qc"] = [outputs.path("qc", ".png")]
    folder = outputs.path("fixels")
    if "fixel" in params.format:
        paths["fixel"] = [folder.with_name(folder.name + ".tar") if fixel_archive else folder]
    if "pam5" in params.format:
        paths["pam5"] = [outputs.path("peaks", ".pam5")]

    def images(maps: dict[str, Callable[[], np.ndarray]]) -> list[Future]:
        return [submit(lambda data=data, path=path: save_image(info, data(), path, compress_threads))
                for name, data in maps.items() for path in paths[name]]

    def pam5() -> None:
        from worker.io.pam5 import write_pam5

        # DIPY keeps directions in the frame of its gradient table, the image axes; its
        # shm_coeff is in its own basis and frame: only a DIPY-basis input is that.
        rotation = _scanner_to_image_axes(info.affine) if params.basis == "mrtrix" else None
        shm = sh if params.basis == "dipy" else None
        write_pam5(paths["pam5"][0], result.directions, result.amplitudes, info.affine, rotation=rotation, shm_coeff=shm)

    def fixels() -> Path:
        from worker.io.fixels import write_fixel_directory

        # MRtrix format whatever the images' (as fod2fixel writes it): NIfTI-1 cannot hold
        # the N × 3 × 1 fixel images of more than 32767 fixels. A service result is one
        # file: there the directory goes into a tar (its images are compressed already
        # when the input was).
        fmt = "mif.gz" if fod_name.endswith(".gz") else "mif"
        staging = folder.with_name(f".{folder.name}.staging")
        target = staging / folder.name if fixel_archive else folder
        write_fixel_directory(target, result.directions, result.amplitudes, result.count, info.affine,
                              peak_fraction=metrics.result().peak_fraction, fmt=fmt)
        if fixel_archive:
            with atomic_path(paths["fixel"][0]) as temporary, tarfile.open(temporary, "w") as archive:
                archive.add(target, arcname=folder.name)
            shutil.rmtree(staging)
        return paths["fixel"][0]

    def qc() -> None:
        frame = "world" if params.basis == "mrtrix" else "voxel"  # MRtrix3 SH live in scanner space
        title = f"{fod_name}: lmax {result.stats['lmax']}, K = {k} peaks, {params.basis} basis"
        write_peaks_qc_png(paths["qc"][0], result.directions, result.amplitudes, result.count, info.zooms[:3], title,
                           affine=info.affine, directions_frame=frame, npeaks=k, rasterize=compiled)

    # Nothing waits for the fODF metrics but their maps and the fixel directory (its peak
    # fractions): the QC picture colours its three slices itself. The longest tasks start
    # first, so that on few cores the short ones fill in around them: the QC picture, the
    # metrics, the .pam5, the fixel directory, the
    # peaks. A task waiting for another's array is submitted after it (a pool starts tasks
    # in order: what it waits for runs), the metric maps last, so that few threads wait.
    futures = [submit(qc)] if "qc" in paths else []
    metrics: Future | None = None
    if params.metrics or "fixel" in paths:
        metrics = submit(lambda: _run_metrics(sh, result, compiled))
        futures.append(metrics)
    futures += [submit(task) for name, task in (("pam5", pam5), ("fixel", fixels)) if name in paths]
    peaks = submit(lambda: _peaks_image(result.directions, result.amplitudes))
    amplitudes, count = result.amplitudes.astype(np.float32, copy=False), result.count.astype(np.uint8, copy=False)
    futures += [peaks, *images({"peaks": peaks.result, "amplitudes": lambda: amplitudes, "count": lambda: count})]
    return futures + images({name: lambda name=name: getattr(metrics.result(), name) for name in params.metrics})


@dataclass
class PeaksInputs:
    """A peaks job's inputs in memory: the checked headers, the SH volume (x, y, z, coeffs)
    float32 and the mask (x, y, z) bool or None; ``seconds`` it took to read them,
    ``warnings`` about voxels left out (non-finite coefficients), ``finite``, which voxels
    have only finite coefficients (x, y, z) bool, for the engine, ``sha256``, the files'
    checksums by file name, taken in the read (none where the parameters turn ``checksums``
    off), ``prepared``, the engine's
    preparation started while they were read (a future, or None), and
    ``uploaded``: by role, the uploaded form of an input stored in another (a service's
    ``.nii.gz`` kept inflated), whose name and sha256 the outputs give."""

    info: "ImageInfo"
    mask_info: "ImageInfo | None"
    sh: np.ndarray
    mask: np.ndarray | None
    seconds: float
    warnings: list[str]
    finite: np.ndarray
    sha256: dict[str, str]
    prepared: "Future[PreparedPeaks] | None" = None
    uploaded: dict[str, UploadedInput] = field(default_factory=dict)

    def name(self, role: str) -> str | None:
        """The name of input ``role`` ("fod", "mask") as given: uploaded or read."""
        info = self.info if role == "fod" else self.mask_info
        return self.uploaded[role].name if role in self.uploaded else info and info.path.name


def read_peaks_inputs(fod: Path, mask: Path | None = None, params: PeaksParams | None = None, *,
                      prepare: bool = False, inflate_threads: int = 1,
                      uploaded: dict[str, UploadedInput] | None = None) -> PeaksInputs:
    """Check and read a peaks job's inputs (:class:`InputError` saying what to fix, also when
    no voxel is left to compute).

    ``prepare`` (with ``params``): once the header says lmax, start preparing the engine for
    :func:`compute_peaks` with the same ``params`` in a background thread (the CUDA context
    and kernels: :func:`gpu.peaks.search.start_preparing`) while this thread inflates the
    volume, on ``inflate_threads`` threads where it is a large .nii.gz (one job alone on a
    machine; a batch or a worker running several jobs keeps one each). The files' sha256
    for the sidecar is taken from the bytes the same read takes in. ``uploaded``: see
    :class:`PeaksInputs`.
    """
    from gpu.cuda_driver import host_empty
    from gpu.peaks.search import finite_voxels

    started = time.perf_counter()
    info, mask_info = check_peaks_inputs(fod, mask, params)
    prepared = None
    if prepare and params is not None:
        from gpu.peaks.search import start_preparing
        from gpu.sh_basis import lmax_from_ncoeffs

        prepared = start_preparing(lmax_from_ncoeffs(info.shape[3]), params.basis, engine_options(params),
                                   params.backend)
    uploaded = dict(uploaded or {})
    try:
        # For the GPU into page-locked memory, which it copies by DMA (plain memory while
        # this process has no CUDA context yet)
        empty = host_empty(params.backend if params is not None else "auto")
        checksums = params is None or params.checksums
        sh, sha256 = _read_input(info, "fod", uploaded, inflate_threads, empty, checksums)
        mask_array = None
        if mask_info is not None:
            mask_values, mask_sha256 = _read_input(mask_info, "mask", uploaded, checksums=checksums)
            mask_array = mask_values.reshape(info.shape[:3]) > 0
            sha256.update(mask_sha256)
        # One pass finds them for the warnings and the engine (compute_peaks).
        finite = finite_voxels(sh)
        inputs = PeaksInputs(info, mask_info, sh, mask_array, 0.0, [], finite, sha256, prepared, uploaded)
        inputs.warnings = _finite_voxels_warnings(finite, mask_array, inputs.name("fod"))
    except BaseException:
        # A job that fails here ends with its background work: nothing keeps running on
        # (the preparation's CPU loop) after the caller has moved on.
        if prepared is not None:
            wait([prepared])
        raise
    inputs.seconds = time.perf_counter() - started
    return inputs


def compute_peaks(inputs: PeaksInputs, params: PeaksParams,
                  progress: Callable[[float], None] | None = None) -> "PeaksResult":
    """The engine's peaks of read inputs (with the preparation :func:`read_peaks_inputs`
    started, which must be for the same ``params``); ``progress(fraction)`` is called
    between chunks."""
    from gpu.peaks.search import sshopm_peaks

    return sshopm_peaks(inputs.sh, basis=params.basis, mask=inputs.mask, options=engine_options(params),
                        backend=params.backend, progress=progress, prepared=inputs.prepared, finite=inputs.finite)


def write_peaks_outputs(inputs: PeaksInputs, result: "PeaksResult", params: PeaksParams, outputs: PeaksOutputs,
                        *, fixel_archive: bool = False, compress_threads: int | None = None) -> dict:
    """Write every output (in parallel: compression and most array work release the GIL),
    then the sidecar last, with the inputs' checksums :func:`read_peaks_inputs` took;
    returns the sidecar content, whose ``outputs`` lists the written files (names relative
    to ``outputs.folder``) by output. ``fixel_archive`` writes the fixel directory as one
    ``fixels.tar`` (for the service, whose results are files); ``compress_threads``: gzip
    threads per image (:func:`worker.io.nifti.save_nifti_atomic`)."""
    started = time.perf_counter()
    info = inputs.info
    outputs.folder.mkdir(parents=True, exist_ok=True)
    outputs.sidecar.parent.mkdir(parents=True, exist_ok=True)
    written: dict[str, list[Path]] = {}
    writes: list[Future] = []
    try:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as workers:
            writes = _write_outputs(info, inputs.sh, result, params, outputs, fixel_archive, workers.submit, written,
                                    compress_threads, inputs.name("fod"))
            try:
                for write in writes:
                    write.result()
            except BaseException:
                for write in writes:
                    write.cancel()  # those not started yet
                raise
    except BaseException:
        # No partial set of outputs stays behind. Each file appeared whole (atomic rename) or
        # not at all; so did the fixel directory, removed only where this run made it (its
        # writer refuses a folder that is there and not empty).
        for path in (path for paths in written.values() for path in paths):
            if not path.is_dir():
                path.unlink(missing_ok=True)
        for write in writes:
            made = None if write.cancelled() or write.exception() else write.result()
            if isinstance(made, Path) and made.is_dir():
                shutil.rmtree(made)
        raise
    finished = time.perf_counter()

    stats = dict(result.stats)
    seconds = stats.pop("seconds")
    sidecar = {
        "job": "peaks",
        "generated_by": generated_by(),
        "input": {"fod": inputs.name("fod"), "mask": inputs.name("mask"),
                  "shape": list(info.shape), "dtype": str(info.dtype), "sha256": inputs.sha256},
        "parameters": params.model_dump(),
        "sh_basis": params.basis,
        "outputs": {name: [str(path.relative_to(outputs.folder)) for path in paths] for name, paths in written.items()},
        "layout": "MRtrix3 sh2peaks: volumes 3k..3k+2 = amplitude_k * unit direction_k, in the frame the SH "
                  "coefficients are expressed in; NaN where absent",
        **stats,
        "warnings": inputs.warnings,
        "voxels_with_peaks": int((result.count > 0).sum()),
        "versions": package_versions("nibabel", "isal", "pillow"),
        "seconds": {"read": inputs.seconds, **{f"peaks_{k_}": v for k_, v in seconds.items()},
                    "write": finished - started, "total": inputs.seconds + seconds["total"] + finished - started},
    }
    write_json_atomic(outputs.sidecar, sidecar)
    return sidecar


def run_peaks(
    fod: Path,
    outputs: PeaksOutputs,
    params: PeaksParams = PeaksParams(),
    mask: Path | None = None,
    progress: Callable[[float], None] | None = None,
    *,
    fixel_archive: bool = False,
    inflate_threads: int = 1,
    uploaded: dict[str, UploadedInput] | None = None,
) -> dict:
    """Read, compute, write (see :func:`write_peaks_outputs`). Returns the sidecar content.
    An exception ``progress`` raises (cancellation) stops the run before any output.
    ``inflate_threads``, ``uploaded``: see :func:`read_peaks_inputs`."""
    inputs = read_peaks_inputs(fod, mask, params, prepare=True, inflate_threads=inflate_threads, uploaded=uploaded)
    result = compute_peaks(inputs, params, progress)
    return write_peaks_outputs(inputs, result, params, outputs, fixel_archive=fixel_archive)


# The QC picture's canvas, drawing buffers and PNG encoder: the rasterizer's numpy canvases,
# which tracemalloc sees (Pillow's own were not traced), took 10-14 MiB at 2k to 3.7M voxels;
# with 10 bytes a voxel on top, below.
_QC_FIXED_BYTES = 16 << 20
# Beside the read, the input's sha256 holds up to two 1 MiB blocks (a .nii's bytes past its
# data, read to be hashed; a file hashed beside a read on several threads); the images
# written at once hold their compressors' blocks (1.5 MB over the per-voxel terms at 2k
# voxels, tracemalloc; 3 MiB leaves room for thread timing).
_CHECKSUM_BLOCK_BYTES = 2 << 20
_WRITERS_FIXED_BYTES = 3 << 20


def peaks_memory_bytes(fod: Path, mask: Path | None = None, npeaks: int = 3, qc: bool = True) -> int:
    """Most host memory :func:`run_peaks` holds at once, from the headers, in bytes.

    With N voxels, C coefficients and K peaks, the largest of three phases: reading (the
    SH volume as float32, N·C·4, plus what reading the mask takes, plus the checksum's
    block); computing (the SH volume,
    a copy of its selected voxels, per-voxel sums, flags and shifts, the backend's peaks
    (float64 on the CPU, float32 to and from the GPU) and the float32 results,
    N·(2·C·4 + 48·K + 64)); writing (the SH volume, the results, the
    peaks image and its copy, the fODF metric maps, and each image's bytes and their
    compression, N·(C·4 + 76·K + 21), the compressors' fixed buffers, and with ``qc`` the
    picture's buffers).
    """
    info, mask_info = check_peaks_inputs(fod, mask)
    n, c, k = info.n_voxels, info.shape[3], npeaks
    sh = n * c * 4
    reading = _read_bytes(info)
    if mask_info is not None:
        reading = max(reading, sh + _read_bytes(mask_info) + n)
    reading += _CHECKSUM_BLOCK_BYTES
    computing = n * (2 * c * 4 + 48 * k + 64)
    writing = n * (c * 4 + 76 * k + 21) + _WRITERS_FIXED_BYTES + (_QC_FIXED_BYTES + 10 * n if qc else 0)
    return max(reading, computing, writing)


def _read_bytes(info: "ImageInfo") -> int:
    """Most bytes reading an image as float32 holds: the NIfTI reader's own bound, or for an
    MRtrix image its stored values and their float32 copy."""
    from worker.io.nifti import NiftiInfo, load_memory_bytes

    if isinstance(info, NiftiInfo):
        return load_memory_bytes(info)
    values = math.prod(info.shape)
    return values * (info.dtype.itemsize + 4)


def _memory(inputs: dict[str, Path], params: PeaksParams) -> int:
    return peaks_memory_bytes(inputs["fod"], inputs.get("mask"), params.npeaks, params.qc)


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


def _validate(inputs: dict[str, Path], params: PeaksParams) -> None:
    check_peaks_inputs(inputs["fod"], inputs.get("mask"), params)


def _run(ctx: JobContext) -> list[Path]:
    def report(fraction: float) -> None:
        ctx.check_cancelled()
        ctx.progress(fraction)

    outputs = PeaksOutputs.in_folder(ctx.out_dir)
    sidecar = run_peaks(ctx.inputs["fod"], outputs, ctx.params, mask=ctx.inputs.get("mask"), progress=report,
                        fixel_archive=True, uploaded=ctx.uploaded)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    return [outputs.folder / name for names in sidecar["outputs"].values() for name in names] + [outputs.sidecar]


JOB_KINDS = [
    JobKind(
        name="peaks",
        summary="Fiber directions (local maxima) of an SH fiber orientation distribution by SS-HOPM, with fODF metrics",
        params_model=PeaksParams,
        inputs=(
            InputSlot("fod", True, IMAGE_SUFFIXES,
                      "4D NIfTI or MRtrix image of even-order SH coefficients (6, 15, 28, 45, 66 or 91 volumes)"),
            InputSlot("mask", False, IMAGE_SUFFIXES, "3D NIfTI or MRtrix mask on the FOD grid (non-zero = process)"),
        ),
        validate=_validate,
        memory_bytes=_memory,
        run=_run,
        result_names=("peaks.nii.gz", "amplitudes.nii.gz", "count.nii.gz", "afd_max.nii.gz", "afd_total.nii.gz",
                      "afd_sum.nii.gz", "peak_fraction.nii.gz", "rgb.nii.gz", "qc.png", "peaks.json"),
    )
]
