"""The ``fod`` job kind: :func:`run_fod`, the plan's checks, then the stages of
:mod:`worker.jobs.fod.stages` in a row; and the registry entries of the ``fod`` and
``response`` job kinds (:data:`JOB_KINDS`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Callable

from worker.job_kinds import InputSlot, JobContext, JobKind
from worker.jobs.fod.inputs import DWI_SLOTS
from worker.jobs.fod.plan import FodPlan, fod_memory_bytes, plan_fod
from worker.jobs.fod.mask import MASK_KIND
from worker.jobs.fod.normalise import MTNORMALISE_KIND
from worker.jobs.fod.response import RESPONSE_KIND, TISSUES
from worker.jobs.fod.stages import FodJob, fit_fods, read_fod_inputs, write_fod_outputs
from worker.params.fod import FodParams, ResponseParams

__all__ = ["run_fod", "JOB_KINDS"]


def run_fod(dwi: Path, prefix: Path, params: FodParams = FodParams(), *, bval: Path | None = None,
            bvec: Path | None = None, grad: Path | None = None, mask: Path | None = None,
            responses: dict[str, Path] | None = None, uploaded: dict | None = None,
            response_params: ResponseParams = ResponseParams(), fixel_archive: bool = False,
            check_cancelled: Callable[[], None] = lambda: None, inflate_threads: int = 1) -> dict:
    """Fit FODs to ``dwi`` and write ``<prefix>_wmfod.<ext>`` (and ``_gm``, ``_csf`` for
    msmt_csd; ``_wm.txt``, ``_gm.txt``, ``_csf.txt`` where responses were estimated;
    ``_predicted_signal.<ext>`` with ``params.predicted_signal``) and
    ``<prefix>_fod.json`` (:func:`worker.jobs.fod.inputs.output_path`: plain names inside a
    folder prefix). ``responses``: response files by tissue (``wm``, ``gm``, ``csf``);
    without them, they are estimated with ``response_params``, its algorithm dhollander for
    msmt_csd and tournier for csd, on the fod job's backend. With ``params.peaks``, the peaks
    outputs follow (the fixel directory as one ``.tar`` with ``fixel_archive``, as the peaks
    job's). ``inflate_threads``: threads that inflate a large ``.nii.gz`` DWI (one job alone on
    a machine: its cores). The stages of :mod:`worker.jobs.fod.stages` in a row; a failure
    leaves none of the files behind. Returns the sidecar content."""
    given = responses or {}
    job = FodJob(dwi, prefix, bval, bvec, grad, mask, tuple(given.get(tissue) for tissue in TISSUES),
                 response_params)
    read = read_fod_inputs(job, params, uploaded, inflate_threads=inflate_threads)
    return write_fod_outputs(read, fit_fods(read, check_cancelled), fixel_archive=fixel_archive,
                             check_cancelled=check_cancelled)


_RESPONSE_SLOTS = tuple(InputSlot(tissue, False, (".txt",), f"{label} response (MRtrix3 text file, as dwi2response "
                                  "writes it)") for tissue, label in (("wm", "WM"), ("gm", "GM"), ("csf", "CSF")))


def _fod_inputs(inputs: dict[str, Path]) -> dict:
    return {**{slot: inputs.get(slot) for slot in ("bval", "bvec", "grad", "mask")},
            "responses": {tissue: inputs[tissue] for tissue in TISSUES if tissue in inputs}}


def _validate(inputs: dict[str, Path], params: FodParams) -> FodPlan:
    return plan_fod(inputs["dwi"], params, **_fod_inputs(inputs))


def _memory(inputs: dict[str, Path], params: FodParams, plan: FodPlan | None = None) -> int:
    return fod_memory_bytes(plan or _validate(inputs, params))


def _memory_advice(params: FodParams, plan: FodPlan, limit: int) -> str | None:
    """Response estimation needs the whole brain in memory; a fit from given responses reads a
    DWI too large to hold a slab at a time. The peaks step holds the whole grid's FOD."""
    if not plan.responses:
        return ("estimate the responses first, with a response job on this DWI before it was upsampled or on "
                "a crop of it (responses need no more), and give them: from given responses a DWI too large "
                "to hold is fitted a slab at a time")
    if plan.peaks_bytes and fod_memory_bytes(replace(plan, peaks_bytes=0)) <= limit and plan.peaks_bytes <= limit:
        return "leave out peaks and run a peaks job on the written WM FOD"
    return None


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
    MASK_KIND,
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
        memory_advice=_memory_advice,
        run=_run,
        result_names=("wmfod.nii.gz", "gm.nii.gz", "csf.nii.gz", "fod.json"),
    ),
    MTNORMALISE_KIND,
]
