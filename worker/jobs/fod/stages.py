"""The ``fod`` job as three stages, so that a batch can overlap them across inputs
(:mod:`worker.batch`): read the DWI (:func:`read_fod_inputs`), fit the FODs
(:func:`fit_fods`: responses estimated first when none are given), and write the outputs
(:func:`write_fod_outputs`: with ``peaks``, the peaks job's outputs of the WM FOD in memory
too). :func:`worker.jobs.fod.run_fod` is the three in a row, so one input through them
gives its files byte for byte and its sidecar but for the timings.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from worker.errors import InputError
from worker.jobs.fod.inputs import DwiData, image_suffix, map_dwi, output_path, read_dwi
from worker.jobs.fod.plan import FodPlan, plan_fod
from worker.jobs.fod.response import (TISSUES, EstimatedResponses, estimate_responses, estimation_warnings,
                                      gradient_source)
from worker.params.fod import FodParams, ResponseParams

if TYPE_CHECKING:
    from worker.jobs.peaks import PeaksOutputs

__all__ = ["FodJob", "FodRead", "FodFit", "read_fod_inputs", "fit_fods", "write_fod_outputs"]


@dataclass(frozen=True)
class FodJob:
    """One fod job's inputs: the DWI, its gradients (FSL ``bval``/``bvec``, an MRtrix ``grad``
    file, or none for a ``.mif``'s ``dw_scheme``), a mask, response files WM, GM, CSF in this
    order (None for one not given; none at all: estimated with ``response_params``), and the
    output prefix (:func:`worker.jobs.fod.inputs.output_path`)."""

    dwi: Path
    prefix: Path
    bval: Path | None = None
    bvec: Path | None = None
    grad: Path | None = None
    mask: Path | None = None
    responses: tuple[Path | None, ...] = ()
    response_params: ResponseParams = field(default_factory=ResponseParams)

    @property
    def response_files(self) -> dict[str, Path]:
        """The response files given, by tissue."""
        return {tissue: Path(path) for tissue, path in zip(TISSUES, self.responses) if path is not None}

    @property
    def files(self) -> dict[str, Path]:
        """The input files by the fod job kind's slot (the API's form fields)."""
        slots = {"dwi": self.dwi, "bval": self.bval, "bvec": self.bvec, "grad": self.grad, "mask": self.mask}
        return {**{slot: path for slot, path in slots.items() if path is not None}, **self.response_files}

    @property
    def sidecar(self) -> Path:
        return output_path(self.prefix, "fod.json")


@dataclass(frozen=True)
class FodRead:
    """A job's checked plan (:func:`worker.jobs.fod.plan.plan_fod`), its DWI read, and the
    inputs ``uploaded`` in another form than they are stored in, by slot."""

    job: FodJob
    params: FodParams
    plan: FodPlan
    data: DwiData
    uploaded: dict
    seconds: float


@dataclass(frozen=True)
class FodFit:
    """The fitted volumes (WM FOD in the basis asked for, then GM and CSF for msmt_csd), the
    responses used by tissue, the estimate (None where responses were given), the backend;
    the stage's seconds, of which ``estimate_seconds`` estimating the responses; with
    ``mtnormalise``, the volumes are normalised and ``normalisation`` says how (None without);
    with ``predicted_signal``, ``predicted`` the signal the fit predicts, one volume per DWI
    volume (None without)."""

    volumes: list[np.ndarray]
    responses: dict[str, np.ndarray]
    estimated: EstimatedResponses | None
    backend: str
    seconds: float
    estimate_seconds: float = 0.0
    normalisation: dict | None = None
    predicted: np.ndarray | None = None


def read_fod_inputs(job: FodJob, params: FodParams = FodParams(), uploaded: dict | None = None, *,
                    inflate_threads: int = 1) -> FodRead:
    """Check ``job``'s inputs from their headers (:func:`worker.jobs.fod.plan.plan_fod`; raises
    :class:`InputError` saying what to fix) and read the DWI and mask; ``uploaded`` and
    ``inflate_threads``: as :func:`worker.jobs.fod.inputs.read_dwi` takes them."""
    started = time.perf_counter()
    plan = plan_fod(job.dwi, params, bval=job.bval, bvec=job.bvec, grad=job.grad, mask=job.mask,
                    responses=job.response_files)
    if plan.slab_planes:
        data = map_dwi(plan.dwi, job.sidecar.parent, uploaded, plan.slab_planes, inflate_threads=inflate_threads)
    else:
        data = read_dwi(plan.dwi, uploaded, inflate_threads=inflate_threads)
    return FodRead(job, params, plan, data, dict(uploaded or {}), time.perf_counter() - started)


def fit_fods(read: FodRead, check_cancelled: Callable[[], None] = lambda: None) -> FodFit:
    """Estimate the responses when none were given (``read.job.response_params`` with the
    algorithm ``dwi2fod`` pairs with: dhollander for msmt_csd, tournier for csd), then fit the
    FODs (:func:`gpu.fod.msmt_csd` or :func:`gpu.fod.csd`), both on ``read.params.backend``,
    and with ``predicted_signal`` the signal they predict (:func:`gpu.fod.msmt_predicted_signal`,
    :func:`gpu.fod.csd_predicted_signal`). ``check_cancelled`` raises to stop the job; it is
    called before each of the two."""
    from gpu.cuda.backend import resolve_backend
    from gpu.fod import csd, csd_predicted_signal, msmt_csd, msmt_predicted_signal
    from gpu.sh_basis import convert_sh_basis, n_coeffs

    started = time.perf_counter()
    params, plan, data = read.params, read.plan.dwi, read.data
    check_cancelled()
    responses, estimated, estimate_seconds = dict(read.plan.responses), None, 0.0
    # the brain mask dwi2mask would make, where a step needs one and none was given
    brain = None
    if plan.mask is None and (params.mtnormalise or not responses):
        from gpu.fod.brain_mask import dwi_brain_mask

        brain = data.mask & dwi_brain_mask(data.dwi, plan.scheme[:, 3])
    if not responses:
        algorithm = "tournier" if params.algorithm == "csd" else "dhollander"
        try:
            estimated = estimate_responses(data, plan, read.job.response_params.model_copy(
                update={"algorithm": algorithm, "backend": params.backend}), brain=brain)
        except InputError as exc:
            raise InputError(exc.title, f"{exc.detail}. Estimate the responses with fibertensor response "
                             f"--algorithm {algorithm} (and its options) and pass them with --response") from None
        responses = dict(estimated.responses)
        estimate_seconds = time.perf_counter() - started
        check_cancelled()
    backend = resolve_backend(params.backend)
    bvals, bvecs = plan.scheme[:, 3], plan.scheme[:, :3]

    lmax, all_volumes = list(read.plan.lmax), plan.info.shape[3]

    def fit(dwi: np.ndarray, mask: np.ndarray) -> list[np.ndarray]:
        try:
            if params.algorithm == "csd":
                volumes = [csd(dwi, bvals, bvecs, responses["wm"], lmax[0], mask, backend=backend)]
                if params.predicted_signal:
                    volumes.append(csd_predicted_signal(volumes[0], bvals, bvecs, responses["wm"], lmax[0], mask))
            else:
                volumes = msmt_csd(dwi, bvals, bvecs, list(responses.values()), lmax, mask, backend=backend)
                if params.predicted_signal:
                    volumes.append(msmt_predicted_signal(volumes, bvals, bvecs, list(responses.values()), lmax,
                                                         mask))
        except ValueError as exc:
            raise InputError("FODs cannot be fitted", str(exc)) from None
        if params.predicted_signal and plan.volumes is not None:
            volumes[-1] = _every_volume(volumes[-1], plan.volumes, all_volumes)
        return [convert_sh_basis(volumes[0], "mrtrix", params.basis), *volumes[1:]]

    widths = [n_coeffs(degree) for degree in lmax] + ([all_volumes] if params.predicted_signal else [])
    if read.plan.slab_planes:
        volumes = _fit_in_slabs(fit, read, widths, check_cancelled)
    else:
        volumes = fit(data.dwi, data.mask)
    predicted = volumes.pop() if params.predicted_signal else None
    normalisation = None
    if params.mtnormalise:
        check_cancelled()
        normalisation = _normalise(volumes, list(responses), data.mask if brain is None else brain, plan.info.affine)
        normalisation["mask"] = "the mask given" if brain is None else "the brain mask dwi2mask would make"
    return FodFit(volumes, responses, estimated, backend, time.perf_counter() - started, estimate_seconds,
                  normalisation, predicted)


def _every_volume(predicted: np.ndarray, volumes: np.ndarray, count: int) -> np.ndarray:
    """The signal predicted in the chosen ``volumes`` (``--shells``) as ``count`` volumes, 0 in
    those the fit left out, as ``dwi2fod -shells -predicted_signal`` writes it; laid out as
    ``predicted``."""
    every = np.zeros((*predicted.shape[:-1], count), np.float32,
                     order="F" if np.isfortran(predicted) else "C")
    every[..., volumes] = predicted
    return every


def _normalise(volumes: list[np.ndarray], tissues: list[str], mask: np.ndarray, affine: np.ndarray) -> dict:
    """Divide the fitted volumes (of ``tissues``) in place by ``mtnormalise``'s field within
    ``mask`` (its defaults, :mod:`worker.jobs.fod.normalise`); returns what the sidecar records
    of it."""
    from worker.jobs.fod.normalise import divisor, normalisation_field

    result = normalisation_field(volumes, mask, affine)
    for index, volume in enumerate(volumes):
        # the divisor in the volume's memory order: across orders the division walks one of them
        # strided, ten times slower
        by_volume = np.asarray(divisor(result, index), order="F" if np.isfortran(volume) else "C")
        np.divide(volume, by_volume.reshape(mask.shape + (1,) * (volume.ndim - 3)), out=volume)
    return {"balance_factors": dict(zip(tissues, map(float, result.balance))),
            "lognorm_scale": result.lognorm_scale,
            "voxels": {"mask": int(mask.sum()), "kept": int(result.kept.sum())}}


def _fit_in_slabs(fit: Callable[[np.ndarray, np.ndarray], list[np.ndarray]], read: FodRead, widths: list[int],
                  check_cancelled: Callable[[], None]) -> list[np.ndarray]:
    """``fit`` of a mapped DWI (:func:`worker.jobs.fod.inputs.map_dwi`) ``read.plan.slab_planes``
    planes of its last spatial axis at a time, into outputs of ``widths`` values a voxel backed
    by unnamed files beside the job's (:func:`worker.io.mapped_images.scratch_array`): every
    voxel's FOD is fitted alone, so these are the bytes of the whole-volume fit."""
    from worker.io.mapped_images import scratch_array

    data, planes = read.data, read.plan.slab_planes
    shape = data.mask.shape
    volumes = [scratch_array((*shape, width), scratch=read.job.sidecar.parent) for width in widths]
    for start in range(0, shape[2], planes):
        mask = data.mask[:, :, start:start + planes]
        if mask.any():
            check_cancelled()
            for volume, part in zip(volumes, fit(data.dwi.slab(start, start + planes), mask)):
                volume[:, :, start:start + planes] = part
    return volumes


def _peaks_outputs(prefix: Path) -> "PeaksOutputs":
    """Where the peaks step writes: ``<prefix>_peaks.<ext>``, … and ``<prefix>_peaks.json``
    (plain names inside a folder prefix, as the peaks job's)."""
    from worker.jobs.peaks import PeaksOutputs

    sidecar = output_path(prefix, "peaks.json")
    return PeaksOutputs(folder=sidecar.parent, stem=sidecar.name.removesuffix("peaks.json"), sidecar=sidecar)


def _peaks_of_wm_fod(read: FodRead, wmfod: Path, sh: np.ndarray, fixel_archive: bool,
                     check_cancelled: Callable[[], None]) -> dict:
    """The peaks job's outputs of the WM FOD just written to ``wmfod``, from its values ``sh``
    in memory (:func:`worker.jobs.peaks.run_peaks_of_sh`); returns the peaks sidecar."""
    from worker.jobs.peaks import run_peaks_of_sh
    from worker.provenance import file_sha256

    check_cancelled()
    return run_peaks_of_sh(wmfod, sh, {wmfod.name: file_sha256(wmfod)}, _peaks_outputs(read.job.prefix),
                           read.params.peaks_params(), read.job.mask, lambda _: check_cancelled(),
                           fixel_archive=fixel_archive,
                           uploaded={role: form for role, form in read.uploaded.items() if role == "mask"})


def write_fod_outputs(read: FodRead, fit: FodFit, *, fixel_archive: bool = False,
                      check_cancelled: Callable[[], None] = lambda: None) -> dict:
    """Write the estimated responses, the FOD images (``wmfod``, ``gm``, ``csf`` in the DWI's
    format), the predicted signal where there is one (``predicted_signal``, on the DWI's
    header), with ``read.params.peaks`` the peaks job's outputs of the WM FOD (the fixel
    directory as one ``.tar`` with ``fixel_archive``) and, last, the sidecar
    ``<prefix>_fod.json``; returns the sidecar content. Each file appears whole or not at
    all (:mod:`worker.io.atomic`), and a failure, cancellation (``check_cancelled``) included,
    removes every file the job had written, as the peaks job's writer does."""
    from worker.io.atomic import write_json_atomic
    from worker.io.images import save_image, write_image
    from worker.io.response_files import write_response
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    job, params, plan, data = read.job, read.params, read.plan, read.data
    suffix = image_suffix(data.names["dwi"])
    names = ("wmfod", *list(fit.responses)[1:])
    paths = {name: output_path(job.prefix, f"{name}{suffix}") for name in names}
    if fit.predicted is not None:
        paths["predicted_signal"] = output_path(job.prefix, f"predicted_signal{suffix}")
    if fit.estimated is not None:
        paths.update({f"{tissue}_response": output_path(job.prefix, f"{tissue}.txt")
                      for tissue in fit.estimated.responses})
    # a NIfTI is written a volume at a time whatever the array's order (the fit's follows the
    # DWI's); a .mif takes its layout from the array's, kept voxel-major as before, except for
    # the file-backed outputs of a fit in slabs (a voxel-major copy would be held whole)
    as_written = np.asarray if suffix.startswith(".nii") or plan.slab_planes else np.ascontiguousarray
    volumes = {name: as_written(volume, dtype=np.float32) for name, volume in zip(names, fit.volumes)}
    peaks = None
    try:
        if fit.estimated is not None:
            for tissue, response in fit.estimated.responses.items():
                write_response(paths[f"{tissue}_response"], response, fit.estimated.bvalues)
        keyval = {"lognorm_scale": str(fit.normalisation["lognorm_scale"])} if fit.normalisation else None
        for name, volume in volumes.items():
            write_image(paths[name], volume, plan.dwi.info.affine, keyval=keyval)
        if fit.predicted is not None:
            # on the DWI's header: a .mif keeps its dw_scheme, so the prediction reads as the DWI does
            save_image(plan.dwi.info, as_written(fit.predicted, dtype=np.float32), paths["predicted_signal"])
        written = time.perf_counter()
        warnings = [*plan.warnings, *data.warnings()]
        if fit.estimated is not None:
            warnings += estimation_warnings(fit.estimated, job.response_params, masked=plan.dwi.mask is not None)
        if params.peaks:
            peaks = _peaks_of_wm_fod(read, paths["wmfod"], volumes["wmfod"], fixel_archive, check_cancelled)
            warnings += peaks["warnings"]
        sidecar = {
            "job": "fod",
            "generated_by": generated_by(),
            "input": {**{role: data.names.get(role) for role in ("dwi", "mask")},
                      "gradients": gradient_source(job.bval, job.grad),
                      "responses": {tissue: path.name for tissue, path in job.response_files.items()},
                      "shape": list(plan.dwi.info.shape), "sha256": data.sha256},
            "parameters": params.model_dump(),
            "method": ("dwi2fod csd (Tournier et al. 2007, NeuroImage 35:1459)" if params.algorithm == "csd" else
                       "dwi2fod msmt_csd (Jeurissen et al. 2014, NeuroImage 103:411, Eq. 3)")
                      + (f" with responses by {fit.estimated.method}" if fit.estimated is not None else "")
                      + (", normalised as mtnormalise (Raffelt et al. 2017; Dhollander et al. 2021)"
                         if fit.normalisation else ""),
            **({"estimated_responses": {"voxels": fit.estimated.counts, **fit.estimated.details}}
               if fit.estimated is not None else {}),
            "shells": [round(float(b), 1) for b in plan.dwi.shell_bvalues],
            "lmax": dict(zip(names, plan.lmax)),
            "sh_basis": params.basis,
            "voxels_fitted": int(data.mask.sum()),
            **({"mtnormalise": fit.normalisation} if fit.normalisation else {}),
            "outputs": {name: path.name for name, path in paths.items()},
            **({"peaks": {"sidecar": _peaks_outputs(job.prefix).sidecar.name, "outputs": peaks["outputs"]}}
               if peaks else {}),
            "backend": fit.backend,
            "warnings": warnings,
            "versions": package_versions("nibabel", "numba", "scipy"),
            "seconds": {"read": read.seconds,
                        **({"responses": fit.estimate_seconds} if fit.estimated is not None else {}),
                        "fit": fit.seconds - fit.estimate_seconds, "write": written - started,
                        **({"peaks": peaks["seconds"]["total"]} if peaks else {}),
                        "total": read.seconds + fit.seconds + time.perf_counter() - started},
        }
        write_json_atomic(job.sidecar, sidecar)
    except BaseException:
        _remove([*paths.values(), job.sidecar], job.prefix, peaks)
        raise
    return sidecar


def _remove(files: list[Path], prefix: Path, peaks: dict | None) -> None:
    """Remove a failed job's files: ``files`` (each written whole or not at all), and where
    the peaks step had finished, its outputs (``peaks["outputs"]``, a fixel directory among
    them) and sidecar; a failed peaks step removed its own."""
    for path in files:
        path.unlink(missing_ok=True)
    if peaks is None:
        return
    peaks_outputs = _peaks_outputs(prefix)
    for name in (name for names in peaks["outputs"].values() for name in names):
        path = peaks_outputs.folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    peaks_outputs.sidecar.unlink(missing_ok=True)
