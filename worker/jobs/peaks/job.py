"""The peaks job, step by step: check the inputs and plan the job from their headers, read
them, compute the peaks, write the outputs; and its registration as a job kind."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from worker.io.image_names import SINGLE_FILE_IMAGE_SUFFIXES
from worker.job_kinds import InputSlot, JobContext, JobKind, UploadedInput
from worker.jobs.peaks.compute import compute_peaks, prepare_engine
from worker.jobs.peaks.names import PeaksOutputs
from worker.jobs.peaks.plan import PeaksPlan, plan_peaks
from worker.jobs.peaks.read import peaks_inputs_of_sh, read_peaks_inputs
from worker.jobs.peaks.write import write_peaks_outputs
from worker.params.peaks import PeaksParams

__all__ = ["run_peaks", "run_peaks_of_sh", "JOB_KINDS"]


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
    """Check, read, compute, write; returns the sidecar content
    (:func:`worker.jobs.peaks.write.write_peaks_outputs`). An exception ``progress`` raises
    (cancellation) stops the run before any output. ``inflate_threads``: see
    :func:`worker.jobs.peaks.read.read_peaks_inputs`; ``uploaded``: see
    :class:`worker.jobs.peaks.plan.PeaksPlan`."""
    plan = plan_peaks(fod, mask, params, uploaded=uploaded)
    preparing = prepare_engine(plan)
    try:
        inputs = read_peaks_inputs(plan, inflate_threads=inflate_threads)
    except BaseException:
        # A job that fails here ends with its background work: nothing keeps running on
        # after the caller has moved on.
        preparing.join()
        raise
    result = compute_peaks(plan, inputs, preparing, progress)
    return write_peaks_outputs(plan, inputs, result, outputs, fixel_archive=fixel_archive)


def run_peaks_of_sh(fod: Path, sh: np.ndarray, sha256: dict[str, str], outputs: PeaksOutputs,
                    params: PeaksParams = PeaksParams(), mask: Path | None = None,
                    progress: Callable[[float], None] | None = None, *, fixel_archive: bool = False,
                    uploaded: dict[str, UploadedInput] | None = None) -> dict:
    """:func:`run_peaks` of the FOD file ``fod`` with its SH volume given in memory, ``sh``
    (x, y, z, coeffs) float32, the values the file holds, and its ``sha256`` by file name:
    the same outputs, not read again (a job that has just written the FOD). ``uploaded``: as
    :func:`run_peaks`' (the mask's, where it was uploaded in another form)."""
    plan = plan_peaks(fod, mask, params, uploaded=uploaded)
    preparing = prepare_engine(plan)
    try:
        inputs = peaks_inputs_of_sh(plan, sh, sha256)
    except BaseException:
        preparing.join()
        raise
    result = compute_peaks(plan, inputs, preparing, progress)
    return write_peaks_outputs(plan, inputs, result, outputs, fixel_archive=fixel_archive)


def _validate(inputs: dict[str, Path], params: PeaksParams) -> PeaksPlan:
    return plan_peaks(inputs["fod"], inputs.get("mask"), params)


def _memory(inputs: dict[str, Path], params: PeaksParams, plan: PeaksPlan) -> int:
    return plan.memory_bytes


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
            InputSlot("fod", True, SINGLE_FILE_IMAGE_SUFFIXES,
                      "4D NIfTI or MRtrix image of even-order SH coefficients (6, 15, 28, 45, 66 or 91 volumes)"),
            InputSlot("mask", False, SINGLE_FILE_IMAGE_SUFFIXES,
                      "3D NIfTI or MRtrix mask on the FOD grid (non-zero = process)"),
        ),
        validate=_validate,
        memory_bytes=_memory,
        run=_run,
        result_names=("peaks.nii.gz", "amplitudes.nii.gz", "count.nii.gz", "afd_max.nii.gz", "afd_total.nii.gz",
                      "afd_sum.nii.gz", "peak_fraction.nii.gz", "rgb.nii.gz", "qc.png", "peaks.json"),
    )
]
