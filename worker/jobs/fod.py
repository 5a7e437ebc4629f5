"""The ``fod`` job kind: a DWI → fibre orientation distributions by constrained spherical
deconvolution, as MRtrix3's ``dwi2fod`` (:func:`gpu.fod.msmt_csd`, :func:`gpu.fod.csd`).

``msmt_csd`` writes ``wmfod``, ``gm`` and ``csf`` (with WM, GM and CSF responses; ``wmfod``
alone with a WM response alone), ``csd`` writes ``wmfod``, in the DWI's image format, with a
JSON sidecar. Without response files they are estimated first (:mod:`worker.jobs.fod_response`)
and written too: for ``msmt_csd`` as ``dwi2response dhollander`` does, for ``csd`` as
``dwi2response tournier``. Nothing is written before all is computed. With ``peaks``, the WM
FOD's peaks follow, from the FOD in memory: the outputs ``fibertensor peaks`` writes of the
written FOD (:func:`worker.jobs.peaks.run_peaks_of_sh`), named ``peaks``, ``amplitudes``, …,
``peaks.json`` after the same prefix. Also registers the ``response`` job kind.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.jobs.fod_inputs import DWI_SLOTS, DwiPlan, check_dwi_inputs, image_suffix, output_path, read_dwi
from worker.jobs.fod_response import RESPONSE_KIND, TISSUES, estimate_responses, gradient_source
from worker.params.fod import FodParams, ResponseParams

__all__ = ["FodPlan", "plan_fod", "run_fod", "fod_memory_bytes", "JOB_KINDS"]


@dataclass(frozen=True)
class FodPlan:
    """A fod job's checked inputs: the DWI's ``dwi`` plan, the ``responses`` read (by tissue,
    none when they are to be estimated), the ``lmax`` per tissue, ``warnings``, and the most
    host memory the peaks step holds (``peaks_bytes``, 0 without peaks)."""

    dwi: DwiPlan
    responses: dict[str, np.ndarray]
    lmax: tuple[int, ...]
    warnings: tuple[str, ...]
    peaks_bytes: int = 0


def _data_lmax(plan: DwiPlan) -> int:
    """Highest even degree the diffusion-weighted volumes determine: (l+1)(l+2)/2 ≤ their count."""
    count = sum(shell.volumes.size for shell in plan.shells if not shell.is_bzero)
    degree = 0
    while (degree + 3) * (degree + 4) // 2 <= count:
        degree += 2
    return degree


def _check_response(name: str, path: Path, plan: DwiPlan, algorithm: str) -> tuple[np.ndarray, list[str]]:
    from gpu.fod.shells import SHELL_EPSILON
    from worker.io.response_files import read_response

    response, bvalues = read_response(path)
    if algorithm == "csd":
        if response.shape[0] == 1:
            return response, []
        if response.shape[0] != len(plan.shells):
            raise InputError("Response does not match the data's shells",
                             f"the {name} response {path.name!r} has {response.shape[0]} rows; csd takes one row (the "
                             f"highest shell's response) or one per shell of the DWI (b = {plan.shells_text()})")
        return response[-1:], [f"csd uses the highest shell (b = {plan.shell_bvalues[-1]:.0f}) of the multi-shell "
                                f"{name} response {path.name!r}"]
    data_b = plan.shell_bvalues
    if response.shape[0] != len(plan.shells) or (
            bvalues is not None and np.abs(bvalues - data_b).max() > SHELL_EPSILON):
        theirs = (", ".join(f"{b:.0f}" for b in bvalues) if bvalues is not None else f"{response.shape[0]} shells")
        raise InputError("Response does not match the data's shells",
                         f"the {name} response {path.name!r} is for b = {theirs} but the DWI has shells b = "
                         f"{plan.shells_text()}; pass responses estimated from this DWI (fibertensor response), or "
                         "none to estimate them")
    return response, []


def plan_fod(dwi: Path, params: FodParams = FodParams(), *, bval: Path | None = None, bvec: Path | None = None,
             grad: Path | None = None, mask: Path | None = None,
             responses: dict[str, Path] | None = None) -> FodPlan:
    """Header-only checks of a fod job (:func:`worker.jobs.fod_inputs.check_dwi_inputs`, the
    response files against the data's shells) and the lmax per tissue: the one asked for,
    lowered with a warning where the response's degree or (msmt_csd) the number of
    diffusion-weighted volumes is below it. csd may exceed the data's degree (super-resolution,
    as ``dwi2fod csd``)."""
    from gpu.fod.response import response_lmax, trim_response

    plan = check_dwi_inputs(dwi, bval=bval, bvec=bvec, grad=grad, mask=mask)
    given = {tissue: Path(path) for tissue, path in (responses or {}).items() if path is not None}
    if given and "wm" not in given:
        raise InputError("No WM response", "responses are given without the WM one; pass WM [GM CSF] in this order")
    if params.algorithm == "csd" and len(given) > 1:
        raise InputError("Too many responses for csd", "csd takes the WM response alone; drop GM and CSF, or use "
                         "msmt_csd")
    if params.algorithm == "msmt_csd" and len(given) == 2:
        raise InputError("Incomplete responses", "msmt_csd takes the WM response alone or WM, GM and CSF; pass "
                         "the CSF response too")
    warnings, arrays = [], {}
    for tissue in (t for t in TISSUES if t in given):
        arrays[tissue], notes = _check_response(tissue, given[tissue], plan, params.algorithm)
        warnings += notes
    wm_lmax = params.lmax
    if "wm" in arrays:
        degree = response_lmax(trim_response(arrays["wm"]))
        if degree < wm_lmax:
            warnings.append(f"lmax {wm_lmax} lowered to {degree}, the WM response's degree")
            wm_lmax = degree
    elif wm_lmax > 10:
        warnings.append(f"lmax {wm_lmax} lowered to 10, the estimated WM response's degree")
        wm_lmax = 10
    if params.algorithm == "msmt_csd":
        data_lmax = _data_lmax(plan)
        if data_lmax < wm_lmax:
            count = sum(s.volumes.size for s in plan.shells if not s.is_bzero)
            warnings.append(f"lmax {wm_lmax} lowered to {data_lmax}: {count} diffusion-weighted volumes determine "
                            f"at most {(data_lmax + 1) * (data_lmax + 2) // 2} SH coefficients")
            wm_lmax = data_lmax
        if wm_lmax < 2:
            raise InputError("Too few directions", f"the DWI has too few diffusion-weighted volumes for even lmax 2 "
                             "(6 coefficients); acquire more directions")
    others = [min(params.lmax, response_lmax(trim_response(arrays[t]))) if t in arrays else 0
              for t in TISSUES[1:] if params.algorithm == "msmt_csd" and (t in arrays or not arrays)]
    return FodPlan(plan, arrays, (wm_lmax, *others), tuple(warnings), _peaks_bytes(plan, wm_lmax, params))


def _peaks_bytes(plan: DwiPlan, lmax: int, params: FodParams) -> int:
    """The peaks step's memory (:func:`worker.jobs.peaks.memory.peaks_memory_bytes` of the WM
    FOD as an MRtrix image it need not read); 0 without peaks. Refuses pam5 without DIPY."""
    from types import SimpleNamespace

    from gpu.sh_basis import n_coeffs
    from worker.jobs.peaks.memory import peaks_memory_bytes

    if not params.peaks:
        return 0
    if "pam5" in params.peaks_format:
        from worker.io.pam5 import require_dipy

        require_dipy()
    shape = (*plan.info.shape[:3], n_coeffs(lmax))
    fod = SimpleNamespace(n_voxels=int(np.prod(shape[:3])), shape=shape, dtype=np.dtype(np.float32))
    return peaks_memory_bytes(fod, plan.mask, params.peaks_npeaks, params.peaks_qc)


def _peaks_outputs(prefix: Path):
    """Where the peaks step writes: ``<prefix>_peaks.<ext>``, … and ``<prefix>_peaks.json``
    (plain names inside a folder prefix, as the peaks job's)."""
    from worker.jobs.peaks import PeaksOutputs

    sidecar = output_path(prefix, "peaks.json")
    return PeaksOutputs(folder=sidecar.parent, stem=sidecar.name.removesuffix("peaks.json"), sidecar=sidecar)


def run_fod(dwi: Path, prefix: Path, params: FodParams = FodParams(), *, bval: Path | None = None,
            bvec: Path | None = None, grad: Path | None = None, mask: Path | None = None,
            responses: dict[str, Path] | None = None, uploaded: dict | None = None,
            response_params: ResponseParams = ResponseParams(), fixel_archive: bool = False,
            check_cancelled: Callable[[], None] = lambda: None) -> dict:
    """Fit FODs to ``dwi`` and write ``<prefix>_wmfod.<ext>`` (and ``_gm``, ``_csf`` for
    msmt_csd; ``_wm.txt``, ``_gm.txt``, ``_csf.txt`` where responses were estimated) and
    ``<prefix>_fod.json`` (:func:`worker.jobs.fod_inputs.output_path`: plain names inside a
    folder prefix). ``responses``: response files by tissue (``wm``, ``gm``, ``csf``);
    without them, they are estimated with ``response_params``, its algorithm dhollander for
    msmt_csd and tournier for csd, on the fod job's backend. With ``params.peaks``, the peaks
    outputs follow (the fixel directory as one ``.tar`` with ``fixel_archive``, as the peaks
    job's). Returns the sidecar content."""
    from gpu.cuda.backend import resolve_backend
    from gpu.fod import csd, msmt_csd
    from gpu.sh_basis import convert_sh_basis
    from worker.io.images import write_image
    from worker.io.response_files import write_response
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    fod_plan = plan_fod(dwi, params, bval=bval, bvec=bvec, grad=grad, mask=mask, responses=responses)
    plan = fod_plan.dwi
    data = read_dwi(plan, uploaded)
    read = time.perf_counter()
    check_cancelled()
    arrays = dict(fod_plan.responses)
    estimated = None
    if not arrays:
        algorithm = "tournier" if params.algorithm == "csd" else "dhollander"
        try:
            estimated = estimate_responses(data, plan, response_params.model_copy(
                update={"algorithm": algorithm, "backend": params.backend}))
        except InputError as exc:
            raise InputError(exc.title, f"{exc.detail}. Estimate the responses with fibertensor response "
                             f"--algorithm {algorithm} (and its options) and pass them with --response") from None
        arrays = dict(estimated.responses)
    check_cancelled()
    backend = resolve_backend(params.backend)
    bvals, bvecs = plan.scheme[:, 3], plan.scheme[:, :3]
    try:
        if params.algorithm == "csd":
            fods = [csd(data.dwi, bvals, bvecs, arrays["wm"], fod_plan.lmax[0], data.mask, backend=backend)]
        else:
            fods = msmt_csd(data.dwi, bvals, bvecs, list(arrays.values()), list(fod_plan.lmax), data.mask,
                            backend=backend)
    except ValueError as exc:
        raise InputError("FODs cannot be fitted", str(exc)) from None
    fitted = time.perf_counter()
    fods[0] = convert_sh_basis(fods[0], "mrtrix", params.basis)

    suffix = image_suffix(data.names["dwi"])
    names = ("wmfod", *list(arrays)[1:])
    paths = {name: output_path(prefix, f"{name}{suffix}") for name in names}
    if estimated is not None:
        for tissue, response in estimated.responses.items():
            paths[f"{tissue}_response"] = output_path(prefix, f"{tissue}.txt")
            write_response(paths[f"{tissue}_response"], response, estimated.bvalues)
    written = {name: np.ascontiguousarray(volume, dtype=np.float32) for name, volume in zip(names, fods)}
    for name, volume in written.items():
        write_image(paths[name], volume, plan.info.affine)
    written_at = time.perf_counter()
    warnings = [*fod_plan.warnings, *data.warnings()]
    peaks = None
    if params.peaks:
        from worker.jobs.peaks import run_peaks_of_sh
        from worker.provenance import file_sha256

        check_cancelled()
        peaks = run_peaks_of_sh(paths["wmfod"], written["wmfod"], {paths["wmfod"].name: file_sha256(paths["wmfod"])},
                                _peaks_outputs(prefix), params.peaks_params(), mask, lambda _: check_cancelled(),
                                fixel_archive=fixel_archive,
                                uploaded={role: form for role, form in (uploaded or {}).items() if role == "mask"})
        warnings += peaks["warnings"]
    sidecar = {
        "job": "fod",
        "generated_by": generated_by(),
        "input": {**{role: data.names.get(role) for role in ("dwi", "mask")},
                  "gradients": gradient_source(bval, grad),
                  "responses": {t: Path(p).name for t, p in (responses or {}).items() if p is not None},
                  "shape": list(plan.info.shape), "sha256": data.sha256},
        "parameters": params.model_dump(),
        "method": ("dwi2fod csd (Tournier et al. 2007, NeuroImage 35:1459)" if params.algorithm == "csd" else
                   "dwi2fod msmt_csd (Jeurissen et al. 2014, NeuroImage 103:411, Eq. 3)")
                  + (f" with responses by {estimated.method}" if estimated is not None else ""),
        "shells": [round(float(b), 1) for b in plan.shell_bvalues],
        "lmax": dict(zip(names, fod_plan.lmax)),
        "sh_basis": params.basis,
        "voxels_fitted": int(data.mask.sum()),
        "outputs": {name: path.name for name, path in paths.items()},
        **({"peaks": {"sidecar": _peaks_outputs(prefix).sidecar.name, "outputs": peaks["outputs"]}} if peaks else {}),
        "backend": backend,
        "warnings": warnings,
        "versions": package_versions("nibabel", "numba", "scipy"),
        "seconds": {"read": read - started, "fit": fitted - read, "write": written_at - fitted,
                    **({"peaks": peaks["seconds"]["total"]} if peaks else {}), "total": time.perf_counter() - started},
    }
    write_json_atomic(output_path(prefix, "fod.json"), sidecar)
    return sidecar


def fod_memory_bytes(plan: FodPlan) -> int:
    """Most host memory :func:`run_fod` holds, in bytes, from the headers: the DWI as float32
    and the signals of the voxels fitted (2·N·V·4), the outputs (N·C·4 with C coefficients in
    all), the solver's float64 work per voxel (8·(V + 4C)) and its matrices 32 MiB; when
    responses are estimated, the estimation's
    (:func:`worker.jobs.fod_response.response_memory_bytes`) if larger; with peaks, the peaks
    step's on top."""
    from gpu.sh_basis import n_coeffs
    from worker.jobs.fod_response import response_memory_bytes

    n = int(np.prod(plan.dwi.info.shape[:3]))
    volumes = plan.dwi.info.shape[3]
    coeffs = sum(n_coeffs(l) for l in plan.lmax)
    fit = 2 * n * volumes * 4 + n * coeffs * 4 + n * 8 * (volumes + 4 * coeffs) + (32 << 20)
    fit = fit if plan.responses else max(fit, response_memory_bytes(plan.dwi) + n * coeffs * 4)
    return fit + plan.peaks_bytes


_RESPONSE_SLOTS = tuple(InputSlot(tissue, False, (".txt",), f"{label} response (MRtrix3 text file, as dwi2response "
                                  "writes it)") for tissue, label in (("wm", "WM"), ("gm", "GM"), ("csf", "CSF")))


def _fod_inputs(inputs: dict[str, Path]) -> dict:
    return {**{slot: inputs.get(slot) for slot in ("bval", "bvec", "grad", "mask")},
            "responses": {tissue: inputs[tissue] for tissue in TISSUES if tissue in inputs}}


def _validate(inputs: dict[str, Path], params: FodParams) -> FodPlan:
    return plan_fod(inputs["dwi"], params, **_fod_inputs(inputs))


def _memory(inputs: dict[str, Path], params: FodParams, plan: FodPlan | None = None) -> int:
    return fod_memory_bytes(plan or _validate(inputs, params))


def _run(ctx: JobContext) -> list[Path]:
    sidecar = run_fod(ctx.inputs["dwi"], ctx.out_dir, ctx.params, **_fod_inputs(ctx.inputs), uploaded=ctx.uploaded,
                      fixel_archive=True, check_cancelled=ctx.check_cancelled)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    peaks = sidecar.get("peaks", {"sidecar": None, "outputs": {}})
    return ([ctx.out_dir / name for name in sidecar["outputs"].values()]
            + [ctx.out_dir / name for names in peaks["outputs"].values() for name in names]
            + [ctx.out_dir / name for name in (peaks["sidecar"], "fod.json") if name])


JOB_KINDS = [
    RESPONSE_KIND,
    JobKind(
        name="fod",
        summary="FODs of a DWI by constrained spherical deconvolution as MRtrix3 dwi2fod (msmt_csd: WM FOD, GM, "
                "CSF; csd: WM FOD), responses estimated when not given (dwi2response dhollander for msmt_csd, "
                "tournier for csd); with peaks, the peaks job's outputs of the WM FOD",
        params_model=FodParams,
        inputs=DWI_SLOTS + _RESPONSE_SLOTS,
        validate=_validate,
        memory_bytes=_memory,
        run=_run,
        result_names=("wmfod.nii.gz", "gm.nii.gz", "csf.nii.gz", "fod.json"),
    ),
]
