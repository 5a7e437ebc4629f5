"""The ``fod`` job as three stages, so that a batch can overlap them across inputs
(:mod:`worker.batch`): read the DWI (:func:`read_fod_inputs`), fit the FODs
(:func:`fit_fods`: responses estimated first when none are given), and write the outputs
(:func:`write_fod_outputs`). One input through the three gives the files
:func:`worker.jobs.fod.run_fod` writes, byte for byte, and the same sidecar but for its
timings.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from worker.errors import InputError
from worker.jobs.fod import FodPlan, plan_fod
from worker.jobs.fod_inputs import DwiData, image_suffix, output_path, read_dwi
from worker.jobs.fod_response import TISSUES, estimate_responses, gradient_source
from worker.params.fod import FodParams, ResponseParams

__all__ = ["FodJob", "FodRead", "FodFit", "read_fod_inputs", "fit_fods", "write_fod_outputs"]


@dataclass(frozen=True)
class FodJob:
    """One fod job's inputs, as :func:`worker.jobs.fod.run_fod` takes them: the DWI, its
    gradients (FSL ``bval``/``bvec``, an MRtrix ``grad`` file, or none for a ``.mif``'s
    ``dw_scheme``), a mask, response files by tissue (none: estimated with
    ``response_params``), and the output prefix (:func:`worker.jobs.fod_inputs.output_path`)."""

    dwi: Path
    prefix: Path
    bval: Path | None = None
    bvec: Path | None = None
    grad: Path | None = None
    mask: Path | None = None
    responses: tuple[Path, ...] = ()
    response_params: ResponseParams = field(default_factory=ResponseParams)

    @property
    def response_files(self) -> dict[str, Path]:
        """The response files by tissue: WM, then GM and CSF, in the order given."""
        return dict(zip(TISSUES, self.responses))

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
    """A job's checked plan (:func:`worker.jobs.fod.plan_fod`) and its DWI read."""

    job: FodJob
    params: FodParams
    plan: FodPlan
    data: DwiData
    seconds: float


@dataclass(frozen=True)
class FodFit:
    """The fitted volumes (WM FOD in the basis asked for, then GM and CSF for msmt_csd), the
    responses used by tissue, the estimate (None where responses were given), the backend."""

    volumes: list[np.ndarray]
    responses: dict[str, np.ndarray]
    estimated: object | None
    backend: str
    seconds: float


def read_fod_inputs(job: FodJob, params: FodParams = FodParams()) -> FodRead:
    """Check ``job``'s inputs from their headers (:func:`worker.jobs.fod.plan_fod`; raises
    :class:`InputError` saying what to fix) and read the DWI and mask."""
    started = time.perf_counter()
    plan = plan_fod(job.dwi, params, bval=job.bval, bvec=job.bvec, grad=job.grad, mask=job.mask,
                    responses=job.response_files)
    return FodRead(job, params, plan, read_dwi(plan.dwi), time.perf_counter() - started)


def fit_fods(read: FodRead) -> FodFit:
    """Estimate the responses when none were given (dhollander), then fit the FODs
    (:func:`gpu.fod.msmt_csd` or :func:`gpu.fod.csd`) on ``read.params.backend``."""
    from gpu.cuda.backend import resolve_backend
    from gpu.fod import csd, msmt_csd
    from gpu.sh_basis import convert_sh_basis

    started = time.perf_counter()
    params, plan, data = read.params, read.plan.dwi, read.data
    responses, estimated = dict(read.plan.responses), None
    if not responses:
        try:
            estimated = estimate_responses(data, plan, read.job.response_params)
        except InputError as exc:
            raise InputError(exc.title, f"{exc.detail}. Estimate the responses with fibertensor response (its "
                             "--erode, --sfwm, --gm and --csf options) and pass them with --response") from None
        responses = {tissue: getattr(estimated, tissue) for tissue in TISSUES}
    backend = resolve_backend(params.backend)
    bvals, bvecs = plan.scheme[:, 3], plan.scheme[:, :3]
    try:
        if params.algorithm == "csd":
            volumes = [csd(data.dwi, bvals, bvecs, responses["wm"], read.plan.lmax[0], data.mask, backend=backend)]
        else:
            volumes = msmt_csd(data.dwi, bvals, bvecs, list(responses.values()), list(read.plan.lmax), data.mask,
                               backend=backend)
    except ValueError as exc:
        raise InputError("FODs cannot be fitted", str(exc)) from None
    volumes[0] = convert_sh_basis(volumes[0], "mrtrix", params.basis)
    return FodFit(volumes, responses, estimated, backend, time.perf_counter() - started)


def write_fod_outputs(read: FodRead, fit: FodFit) -> dict:
    """Write the FOD images (``wmfod``, ``gm``, ``csf`` in the DWI's format), the estimated
    responses and, last, the sidecar ``<prefix>_fod.json``; returns the sidecar content. A
    failed write removes what it had written."""
    from worker.io.atomic import write_json_atomic
    from worker.io.images import write_image
    from worker.io.response_files import write_response
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    job, params, plan, data = read.job, read.params, read.plan, read.data
    suffix = image_suffix(data.names["dwi"])
    names = ("wmfod", *list(fit.responses)[1:])
    paths = {name: output_path(job.prefix, f"{name}{suffix}") for name in names}
    if fit.estimated is not None:
        paths.update({f"{tissue}_response": output_path(job.prefix, f"{tissue}.txt") for tissue in TISSUES})
    sidecar_path = job.sidecar
    try:
        if fit.estimated is not None:
            for tissue in TISSUES:
                write_response(paths[f"{tissue}_response"], fit.responses[tissue], fit.estimated.bvalues)
        for name, volume in zip(names, fit.volumes):
            write_image(paths[name], np.ascontiguousarray(volume, dtype=np.float32), plan.dwi.info.affine)
        written = time.perf_counter()
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
                      + (" with responses by dwi2response dhollander" if fit.estimated is not None else ""),
            "shells": [round(float(b), 1) for b in plan.dwi.shell_bvalues],
            "lmax": dict(zip(names, plan.lmax)),
            "sh_basis": params.basis,
            "voxels_fitted": int(data.mask.sum()),
            "outputs": {name: path.name for name, path in paths.items()},
            "backend": fit.backend,
            "warnings": [*plan.warnings, *data.warnings()],
            "versions": package_versions("nibabel", "numba", "scipy"),
            "seconds": {"read": read.seconds, "fit": fit.seconds, "write": written - started,
                        "total": read.seconds + fit.seconds + written - started},
        }
        write_json_atomic(sidecar_path, sidecar)
    except BaseException:
        for path in (*paths.values(), sidecar_path):
            path.unlink(missing_ok=True)
        raise
    return sidecar
