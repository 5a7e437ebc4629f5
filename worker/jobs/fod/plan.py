"""A fod job's plan: its inputs checked from their headers and text files alone
(:func:`plan_fod`), the lmax per tissue, whether the DWI is fitted a slab at a time from a
memory map (a volume too large to hold: :data:`FIT_IN_MEMORY_BYTES`), and the most host
memory the job holds (:func:`fod_memory_bytes`), before any data is read."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from worker.errors import InputError
from worker.jobs.fod.inputs import DwiPlan, check_dwi_inputs
from worker.jobs.fod.response import TISSUES
from worker.params.fod import FodParams

__all__ = ["FodPlan", "plan_fod", "fod_memory_bytes", "FIT_IN_MEMORY_BYTES", "SLAB_VOXELS"]

#: A fit whose whole-volume estimate (:func:`fod_memory_bytes`) is above this runs a slab of
#: the DWI's last spatial axis at a time from a memory map of its file (given responses: the
#: estimation needs the whole brain), each slab about :data:`SLAB_VOXELS` voxels.
FIT_IN_MEMORY_BYTES = 2 << 30
SLAB_VOXELS = 1 << 17


@dataclass(frozen=True)
class FodPlan:
    """A fod job's checked inputs: the DWI's ``dwi`` plan, the ``responses`` read (by tissue,
    none when they are to be estimated), the ``lmax`` per tissue, ``warnings``, the most
    host memory the peaks step holds (``peaks_bytes``, 0 without peaks), the ``algorithm``,
    ``slab_planes``: planes of the last spatial axis fitted at a time from a memory map of
    the DWI (0: the DWI is read whole), whether the compartments are normalised
    (``normalise``, :mod:`worker.jobs.fod.normalise`) and whether the signal they predict is
    written (``predict``)."""

    dwi: DwiPlan
    responses: dict[str, np.ndarray]
    lmax: tuple[int, ...]
    warnings: tuple[str, ...]
    peaks_bytes: int = 0
    algorithm: str = "msmt_csd"
    slab_planes: int = 0
    normalise: bool = False
    predict: bool = False


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
        subset = ""
        if bvalues is not None and all(np.abs(data_b - b).min() <= SHELL_EPSILON for b in bvalues):
            subset = f", or fit the shells it is for alone (shells {','.join(f'{b:.0f}' for b in bvalues)})"
        raise InputError("Response does not match the data's shells",
                         f"the {name} response {path.name!r} is for b = {theirs} but the DWI has shells b = "
                         f"{plan.shells_text()}; pass responses estimated from this DWI (fibertensor response), or "
                         f"none to estimate them{subset}")
    return response, []


def plan_fod(dwi: Path, params: FodParams = FodParams(), *, bval: Path | None = None, bvec: Path | None = None,
             grad: Path | None = None, mask: Path | None = None,
             responses: dict[str, Path] | None = None) -> FodPlan:
    """Header-only checks of a fod job (:func:`worker.jobs.fod.inputs.check_dwi_inputs`, the
    response files against the data's shells) and the lmax per tissue: the one asked for,
    lowered with a warning where the response's degree or (msmt_csd) the number of
    diffusion-weighted volumes is below it. csd may exceed the data's degree (super-resolution,
    as ``dwi2fod csd``)."""
    from gpu.fod.response import response_lmax, trim_response

    plan = check_dwi_inputs(dwi, bval=bval, bvec=bvec, grad=grad, mask=mask, shells=params.shells,
                            single_shell=params.algorithm == "csd")
    given = {tissue: Path(path) for tissue, path in (responses or {}).items() if path is not None}
    if given and "wm" not in given:
        raise InputError("No WM response", "responses are given without the WM one; pass WM [GM CSF] in this order")
    if params.algorithm == "csd" and len(given) > 1:
        raise InputError("Too many responses for csd", "csd takes the WM response alone; drop GM and CSF, or use "
                         "msmt_csd")
    if params.algorithm == "msmt_csd" and set(given) == {"wm", "gm"}:
        raise InputError("Incomplete responses", "msmt_csd takes the WM response alone, WM and CSF (a two-tissue fit, "
                         "for single-shell data) or WM, GM and CSF; pass the CSF response too")
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
    weighted_shells = sum(not shell.is_bzero for shell in plan.shells)
    if params.algorithm == "msmt_csd" and weighted_shells == 1 and (not given or len(given) == 3):
        warnings.append("one b > 0 shell and b = 0 determine two compartments: GM and CSF trade off in a three-tissue "
                        "fit; for single-shell data fit WM and CSF (two response files, WM CSF)")
    if params.mtnormalise and params.algorithm == "csd":
        from worker.jobs.fod.normalise import ONE_COMPARTMENT

        warnings.append(f"mtnormalise of {ONE_COMPARTMENT}")
    fod = FodPlan(plan, arrays, (wm_lmax, *others), tuple(warnings), _peaks_bytes(plan, wm_lmax, params),
                  params.algorithm, normalise=params.mtnormalise, predict=params.predicted_signal)
    if arrays and fod_memory_bytes(fod) - fod.peaks_bytes > FIT_IN_MEMORY_BYTES:
        plane = int(np.prod(plan.info.shape[:2]))
        fod = replace(fod, slab_planes=max(1, SLAB_VOXELS // plane))
        if params.mtnormalise and plan.mask is None:
            raise InputError("No mask to normalise within", "the DWI is too large to hold, so it is fitted a slab at "
                             "a time and no brain mask can be made from it to normalise within; give a brain mask "
                             "(fibertensor mask makes one, from the DWI before it was upsampled)")
    return fod


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


def fod_memory_bytes(plan: FodPlan) -> int:
    """Most host memory :func:`worker.jobs.fod.run_fod` holds, in bytes, from the headers,
    each voxel counted as masked: the DWI as float32 (N·V·4 for N voxels and V volumes), the
    fitted voxels' signals as float32 and float64 (N·V·12), the solution in float64 and the
    outputs in float32 (N·C·12 with C coefficients in all), the solver's matrices 32 MiB;
    where responses are estimated first (dhollander for msmt_csd, tournier for csd), the
    estimation's (:func:`worker.jobs.fod.response.response_memory_bytes`) if larger; with
    peaks, the peaks step's on top (docs/decisions/fod-memory-estimates.md). Fitted a slab at
    a time, N is a slab's voxels, the stored values of a slab (up to 8 bytes each) count too,
    and the outputs are in files the kernel writes back: the mask and the unusable voxels
    (2·N bytes of the whole grid) stay. Normalised, the field's tables and the field come on
    top of the fit's: 400 bytes a voxel of the grid, each counted as masked (measured: 392 a
    masked voxel). With the predicted signal, its image and its masked voxels' values in float32
    (N·V·8, V the DWI's volumes) and a block of rows a core
    (:func:`gpu.fod.deconvolution.prediction_bytes`)."""
    from gpu.sh_basis import n_coeffs
    from worker.jobs.fod.response import response_memory_bytes

    shape = plan.dwi.info.shape
    volumes = shape[3]
    coeffs = sum(n_coeffs(l) for l in plan.lmax)
    if plan.slab_planes:
        n = int(np.prod(shape[:2])) * min(plan.slab_planes, shape[2])
        return (2 * int(np.prod(shape[:3])) + n * volumes * 24 + n * coeffs * 12 + (32 << 20)
                + _predict_bytes(plan, n) + _normalise_bytes(plan) + plan.peaks_bytes)
    n = int(np.prod(shape[:3]))
    fit = n * volumes * 4 + n * volumes * 12 + n * coeffs * 12 + (32 << 20) + _predict_bytes(plan, n)
    if not plan.responses:
        fit = max(fit, response_memory_bytes(plan.dwi, "tournier" if plan.algorithm == "csd" else "dhollander"))
    return fit + _normalise_bytes(plan) + plan.peaks_bytes


def _predict_bytes(plan: FodPlan, n: int) -> int:
    import os

    from gpu.fod.deconvolution import prediction_bytes
    from gpu.sh_basis import n_coeffs

    if not plan.predict:
        return 0
    return prediction_bytes(n, sum(n_coeffs(l) for l in plan.lmax), plan.dwi.info.shape[3],
                            len(os.sched_getaffinity(0)))


def _normalise_bytes(plan: FodPlan) -> int:
    return 400 * int(np.prod(plan.dwi.info.shape[:3])) if plan.normalise else 0
