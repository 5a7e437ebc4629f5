"""The ``response`` job kind: a DWI → response functions, as MRtrix3's ``dwi2response``.

``dhollander`` (:func:`gpu.fod.response_dhollander.dhollander_response`) writes ``wm.txt``,
``gm.txt`` and ``csf.txt`` and the image of the voxels they came from (``voxels``: 3 volumes,
CSF, GM and single-fibre WM, as ``-voxels`` writes it); ``tournier``
(:func:`gpu.fod.response_tournier.tournier_response`) writes ``wm.txt`` (the highest shell's)
and its single-fibre voxels (3-D). Responses are in MRtrix3's format, the voxels in the DWI's
image format, beside a JSON sidecar. Nothing is written before all is computed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Sequence

import numpy as np

from worker.errors import InputError
from worker.io.atomic import write_json_atomic
from worker.job_kinds import JobContext, JobKind
from worker.jobs.fod.inputs import DWI_SLOTS, check_dwi_inputs, image_suffix, output_path, read_dwi
from worker.params.fod import ResponseParams

__all__ = ["TISSUES", "listed_responses", "EstimatedResponses", "fixel_lobe_peaks", "estimate_responses", "estimation_warnings",
           "gradient_source", "run_response", "response_memory_bytes", "RESPONSE_KIND"]

TISSUES = ("wm", "gm", "csf")


def listed_responses(files: Sequence[Path]) -> tuple[Path | None, ...]:
    """Response files as a user lists them, WM [GM CSF] or WM CSF (a two-tissue fit, as
    ``dwi2fod msmt_csd`` fits any of its tissues: single-shell data determine two), placed by
    :data:`TISSUES`, None where not given; :class:`InputError` for more than three."""
    if len(files) > len(TISSUES):
        raise InputError("Too many responses", f"{len(files)} response files were given; give WM [GM CSF], or WM "
                         "CSF for a two-tissue fit")
    tissues = ("wm", "csf") if len(files) == 2 else TISSUES[:len(files)]
    by_tissue = dict(zip(tissues, files))
    return tuple(by_tissue.get(tissue) for tissue in TISSUES) if files else ()

_METHODS = {
    "dhollander": "dwi2response dhollander (Dhollander et al. 2016, ISMRM Workshop on Breaking the Barriers of "
                  "Diffusion MRI p. 5; 2019, ISMRM 27 p. 555)",
    "tournier": "dwi2response tournier (Tournier et al. 2013, NMR Biomed 26:1775)",
}


@dataclass(frozen=True)
class EstimatedResponses:
    """Estimated ``responses`` by tissue (rows per shell of ``bvalues``), the ``voxels`` they
    came from ((X, Y, Z, 3) CSF, GM, WM for dhollander; (X, Y, Z) for tournier), the voxel
    ``counts`` by tissue, the ``method`` and, for the sidecar, its ``details``."""

    responses: dict[str, np.ndarray]
    bvalues: np.ndarray
    voxels: np.ndarray
    counts: dict[str, int]
    method: str
    details: dict


def fixel_lobe_peaks(fods: np.ndarray, backend: str = "cpu") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The first two FOD lobes' peak amplitudes (0 where absent) and the first lobe's direction of
    each row of ``fods`` (V, n_coeffs), as ``fod2fixel -fmls_no_thresholds`` and ``fixel2voxel
    none -number 2`` give them (:data:`gpu.fod.response_tournier.LobePeaks`), segmented on
    ``backend``."""
    from gpu.fixels.segment import FmlsOptions, segment_fods

    fixels = segment_fods(fods.reshape(-1, 1, 1, fods.shape[-1]), options=FmlsOptions(no_thresholds=True),
                          backend=backend)
    count, first = (fixels.index[:, 0, 0, k].astype(np.int64) for k in (0, 1))
    absent = fixels.peak_amp.size  # one zero row past the fixels
    amplitudes = np.append(fixels.peak_amp, np.float32(0))
    directions = np.vstack([fixels.directions, np.zeros((1, 3), np.float32)])
    return (amplitudes[np.where(count >= 1, first, absent)], amplitudes[np.where(count >= 2, first + 1, absent)],
            directions[np.where(count >= 1, first, absent)])


def _dhollander(data, plan, params: ResponseParams) -> EstimatedResponses:
    """dhollander, with the WM response fitted again at ``params.lmax`` where it is below
    dwi2response's 10."""
    from gpu.fod.amp2response import amp2response
    from gpu.fod.response_dhollander import dhollander_response
    from gpu.fod.response_tensor import tensor_fa_and_direction

    result = dhollander_response(data.dwi, plan.scheme, data.mask, partial(fixel_lobe_peaks, backend=params.backend),
                                 erode=params.erode, fa=params.fa, sfwm=params.sfwm, gm=params.gm, csf=params.csf,
                                 backend=params.backend)
    if params.lmax != 10:
        selected = data.dwi[result.voxels[..., 2]]
        _, directions = tensor_fa_and_direction(selected, plan.scheme)
        lmax = [0 if shell.is_bzero else params.lmax for shell in plan.shells]
        wm, _ = amp2response(selected, directions, plan.scheme, lmax=lmax)
        result = replace(result, wm=wm)
    counts = {tissue: int(result.voxels[..., index].sum()) for index, tissue in ((2, "wm"), (1, "gm"), (0, "csf"))}
    return EstimatedResponses({tissue: getattr(result, tissue) for tissue in TISSUES}, result.bvalues,
                              result.voxels, counts, _METHODS["dhollander"], {})


def _tournier(data, plan, params: ResponseParams) -> EstimatedResponses:
    from gpu.fod.response_tournier import tournier_response

    result = tournier_response(data.dwi, plan.scheme, data.mask, partial(fixel_lobe_peaks, backend=params.backend),
                               lmax=params.lmax, number=params.number, iter_voxels=params.iter_voxels,
                               dilate=params.dilate, max_iters=params.max_iters, backend=params.backend)
    return EstimatedResponses({"wm": result.wm}, np.array([result.bvalue]), result.voxels,
                              {"wm": int(result.voxels.sum())}, _METHODS["tournier"],
                              {"iterations": result.iterations, "converged": result.converged})


def estimate_responses(data, plan, params: ResponseParams, brain: np.ndarray | None = None) -> EstimatedResponses:
    """Responses of read DWI ``data`` (:class:`worker.jobs.fod.inputs.DwiData`) by
    ``params.algorithm``; :class:`InputError` when the data cannot give them. Without a mask
    the voxels are chosen within a brain mask made from the DWI, as ``dwi2response`` makes it
    with ``dwi2mask`` (:func:`gpu.fod.brain_mask.dwi_brain_mask`; ``brain``, that mask within
    the usable voxels, where the caller made it already); its voxel count goes to the details
    (``brain_mask_voxels``)."""
    from gpu.fod.brain_mask import dwi_brain_mask

    estimate = _tournier if params.algorithm == "tournier" else _dhollander
    made = {}
    if plan.mask is None:
        if brain is None:
            brain = data.mask & dwi_brain_mask(data.dwi, plan.scheme[:, 3])
        data = replace(data, mask=brain)
        made = {"brain_mask_voxels": int(data.mask.sum())}
    try:
        result = estimate(data, plan, params)
    except ValueError as exc:
        raise InputError("Responses cannot be estimated", f"{exc}") from None
    return replace(result, details={**result.details, **made})


def estimation_warnings(result: EstimatedResponses, params: ResponseParams, masked: bool) -> list[str]:
    """What qualifies ``result``, estimated with ``params`` from a DWI with a mask (``masked``)
    or without: the response and fod jobs' sidecars list the same."""
    warnings = []
    if not masked:
        warnings.append(f"no mask given: voxels were chosen within a brain mask made from the DWI as dwi2mask makes "
                        f"it ({result.details.get('brain_mask_voxels', 0)} voxels), as dwi2response does; pass a "
                        "brain mask to choose them within your own")
    if result.details.get("converged") is False:
        warnings.append(f"the single-fibre voxels still changed after {params.max_iters} iterations (max_iters); "
                        "the response is that of the last")
    return warnings


def run_response(dwi: Path, prefix: Path, params: ResponseParams = ResponseParams(), *, bval: Path | None = None,
                 bvec: Path | None = None, grad: Path | None = None, mask: Path | None = None,
                 uploaded: dict | None = None, inflate_threads: int = 1) -> dict:
    """Estimate the responses of ``dwi`` and write ``<prefix>_wm.txt`` (and ``_gm.txt``,
    ``_csf.txt`` for dhollander), ``_voxels.<ext>`` and ``_response.json``
    (:func:`output_path`: plain names inside a folder prefix); returns the sidecar content.
    ``inflate_threads``: as :func:`read_dwi` takes it."""
    from gpu.cuda.backend import resolve_backend
    from worker.io.images import write_image
    from worker.io.response_files import write_response
    from worker.provenance import generated_by, package_versions

    started = time.perf_counter()
    plan = _checked_plan(dwi, params, bval=bval, bvec=bvec, grad=grad, mask=mask)
    data = read_dwi(plan, uploaded, inflate_threads=inflate_threads)
    read = time.perf_counter()
    result = estimate_responses(data, plan, params)
    estimated = time.perf_counter()
    suffix = image_suffix(data.names["dwi"])
    paths = {tissue: output_path(prefix, f"{tissue}.txt") for tissue in result.responses}
    paths["voxels"] = output_path(prefix, f"voxels{suffix}")
    for tissue, response in result.responses.items():
        write_response(paths[tissue], response, result.bvalues)
    write_image(paths["voxels"], result.voxels.astype(np.uint8), plan.info.affine)
    warnings = [*data.warnings(), *estimation_warnings(result, params, masked=plan.mask is not None)]
    sidecar = {
        "job": "response",
        "generated_by": generated_by(),
        "input": {**{role: data.names.get(role) for role in ("dwi", "mask")},
                  "gradients": gradient_source(bval, grad), "shape": list(plan.info.shape), "sha256": data.sha256},
        "parameters": params.model_dump(),
        "method": f"{result.method}; responses by amp2response (Tournier et al. 2013, NeuroImage 76:49, Eq. 4)",
        "shells": [round(float(b), 1) for b in result.bvalues],
        "voxels": result.counts,
        **result.details,
        "outputs": {name: path.name for name, path in paths.items()},
        "warnings": warnings,
        "backend": resolve_backend(params.backend),
        "versions": package_versions("nibabel", "numba", "scipy"),
        "seconds": {"read": read - started, "estimate": estimated - read, "total": time.perf_counter() - started},
    }
    write_json_atomic(output_path(prefix, "response.json"), sidecar)
    return sidecar


def gradient_source(bval: Path | None, grad: Path | None) -> str:
    """Where the gradients came from: ``fsl`` (bval/bvec), ``grad`` (MRtrix file) or ``dw_scheme``."""
    return "fsl" if bval is not None else "grad" if grad is not None else "dw_scheme"


def response_memory_bytes(plan, algorithm: str = "dhollander") -> int:
    """Most host memory :func:`run_response` holds, in bytes, from the headers: with N voxels
    and V volumes, the DWI as float32 (N·V·4) and what ``algorithm`` works on beside it, each
    voxel of a full mask counted: dhollander's masked signals, tensor fit and single-fibre
    fits up to seven times the DWI again, tournier's CSD of every voxel on its first pass
    (float64 signals and FODs) up to five times; and the engine's tables, 32 MiB
    (docs/decisions/fod-memory-estimates.md)."""
    n = int(np.prod(plan.info.shape[:3]))
    copies = 6 if algorithm == "tournier" else 8
    return copies * n * plan.info.shape[3] * 4 + (32 << 20)


def _dwi_inputs(inputs: dict[str, Path]) -> dict[str, Path | None]:
    return {slot: inputs.get(slot) for slot in ("bval", "bvec", "grad", "mask")}


def _checked_plan(dwi: Path, params: ResponseParams, **gradients_and_mask: Path | None):
    """:func:`check_dwi_inputs` with the job's shells (tournier's: one b > 0 shell)."""
    return check_dwi_inputs(dwi, **gradients_and_mask, shells=params.shells,
                            single_shell=params.algorithm == "tournier")


def _validate(inputs: dict[str, Path], params: ResponseParams):
    return _checked_plan(inputs["dwi"], params, **_dwi_inputs(inputs))


def _memory(inputs: dict[str, Path], params: ResponseParams, plan=None) -> int:
    return response_memory_bytes(plan or _validate(inputs, params), params.algorithm)


def _memory_advice(params: ResponseParams, plan, limit: int) -> str:
    return ("estimate the responses on this DWI before it was upsampled, or on a crop of it to the brain "
            "(mrgrid … crop -mask): they need no more")


def _run(ctx: JobContext) -> list[Path]:
    ctx.check_cancelled()
    sidecar = run_response(ctx.inputs["dwi"], ctx.out_dir, ctx.params, **_dwi_inputs(ctx.inputs),
                           uploaded=ctx.uploaded)
    for warning in sidecar["warnings"]:
        ctx.warn(warning)
    return [ctx.out_dir / name for name in sidecar["outputs"].values()] + [ctx.out_dir / "response.json"]


RESPONSE_KIND = JobKind(
    name="response",
    summary="Response functions of a DWI as MRtrix3 dwi2response: dhollander (WM, GM, CSF) or tournier "
            "(single-fibre WM), with the voxels they came from",
    params_model=ResponseParams,
    inputs=DWI_SLOTS,
    validate=_validate,
    memory_bytes=_memory,
    memory_advice=_memory_advice,
    run=_run,
    result_names=("wm.txt", "gm.txt", "csf.txt", "voxels.nii.gz", "response.json"),
)
