"""The job kinds the batch pipeline (:mod:`worker.batch`) runs: each kind's item (its input
files and where its outputs go) and its three stages, read, compute and write, each the
step of the kind's own job function, so that an input's files are those the job writes
for it alone.

* ``peaks``: :class:`BatchItem`, the steps of :func:`worker.jobs.peaks.run_peaks`;
* ``fod``: :class:`FodItem`, those of :func:`worker.jobs.fod.run_fod`
  (:mod:`worker.jobs.fod.stages`; with ``peaks``, the peaks of each WM FOD in memory in
  the write stage);
* ``fixels``: :class:`FixelsItem`, those of :func:`worker.jobs.fixels.run_fixels`.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar

from pydantic import BaseModel

from worker.jobs.fod.stages import FodJob
from worker.jobs.peaks import PeaksOutputs

if TYPE_CHECKING:
    from worker.input_limits import InputLimits

__all__ = ["BatchItem", "FodItem", "FixelsItem", "BatchStages", "batch_stages"]


class _FodImageItem:
    """What the items whose input is an SH FOD image (``fod``) with an optional ``mask``
    share."""

    fod: Path
    mask: Path | None

    @property
    def input(self) -> Path:
        return self.fod

    @property
    def files(self) -> dict[str, Path]:
        return {"fod": self.fod, **({"mask": self.mask} if self.mask else {})}


@dataclass(frozen=True)
class BatchItem(_FodImageItem):
    """A peaks input, where its outputs go (the names ``fibertensor peaks IN DIR/<name>``
    uses), and its brain mask if any (non-zero = compute, as ``fibertensor peaks --mask``)."""

    kind: ClassVar[str] = "peaks"
    fod: Path
    outputs: PeaksOutputs
    mask: Path | None = None


@dataclass(frozen=True)
class FodItem(FodJob):
    """A DWI with its gradients, mask and responses, and the output prefix
    (``fibertensor fod DWI PREFIX``)."""

    kind: ClassVar[str] = "fod"

    @property
    def input(self) -> Path:
        return self.dwi


@dataclass(frozen=True)
class FixelsItem(_FodImageItem):
    """An SH FOD image, the fixel directory it gets (``fibertensor fixels FOD OUT_DIR``; the
    sidecar ``OUT_DIR.json`` beside it), and its mask if any."""

    kind: ClassVar[str] = "fixels"
    fod: Path
    out_dir: Path
    mask: Path | None = None

    @property
    def sidecar(self) -> Path:
        return self.out_dir.with_name(self.out_dir.name + ".json")


@dataclass(frozen=True)
class BatchStages:
    """One kind's stages. ``read(item, inflate_threads)``: header checks, then the read (a large
    ``.nii.gz`` inflated on that many threads); ``compute(loaded)``:
    the engine, on the pipeline's one computing thread; ``write(item, loaded, result,
    compute_seconds)``: every output, the sidecar last, none left behind on failure; returns
    the seconds of ``read``, ``compute``, ``kernel`` (GPU kernels, where reported), ``estimate``
    (fod: the part of ``compute`` that estimated the responses) and ``write``."""

    read: Callable[[object], object]
    compute: Callable[[object], object]
    write: Callable[[object, object, object, float], dict[str, float]]


def _peaks_stages(params) -> BatchStages:
    from worker.jobs.peaks import compute_peaks, plan_peaks, read_peaks_inputs, write_peaks_outputs

    def read(item: BatchItem, inflate_threads: int):
        plan = plan_peaks(item.fod, item.mask, params)
        return plan, read_peaks_inputs(plan, inflate_threads=inflate_threads)

    def write(item: BatchItem, loaded, result, compute_seconds: float) -> dict[str, float]:
        plan, inputs = loaded
        # Each image on one thread: this stage's parallelism is across inputs.
        seconds = write_peaks_outputs(plan, inputs, result, item.outputs, compress_threads=1)["seconds"]
        return {"read": seconds["read"], "compute": compute_seconds, "kernel": seconds.get("peaks_kernel", 0.0),
                "write": seconds["write"]}

    return BatchStages(read, lambda loaded: compute_peaks(*loaded), write)


def _fod_stages(params) -> BatchStages:
    from worker.jobs.fod.stages import fit_fods, read_fod_inputs, write_fod_outputs

    def write(item: FodItem, read, fit, compute_seconds: float) -> dict[str, float]:
        # with peaks, the peaks job's steps of the WM FOD in memory are part of this stage
        seconds = write_fod_outputs(read, fit)["seconds"]
        return {"read": seconds["read"], "compute": compute_seconds, "estimate": fit.estimate_seconds,
                "write": seconds["write"] + seconds.get("peaks", 0.0)}

    def read(item: FodItem, inflate_threads: int):
        return read_fod_inputs(item, params, inflate_threads=inflate_threads)

    return BatchStages(read, fit_fods, write)


def _fixels_stages(params) -> BatchStages:
    from worker.jobs.fixels import read_fixels_inputs, segment_fixels, write_fixels_outputs

    def compute(read):
        started = time.perf_counter()
        return (*segment_fixels(read, params), time.perf_counter() - started)

    def write(item: FixelsItem, read, segmented, compute_seconds: float) -> dict[str, float]:
        fixels, backend, seconds = segmented
        # An earlier run's directory is replaced whole, not mixed with this one's files.
        shutil.rmtree(item.out_dir, ignore_errors=True)
        try:
            sidecar = write_fixels_outputs(read, fixels, backend, item.out_dir, params, segment_seconds=seconds)
        except BaseException:
            shutil.rmtree(item.out_dir, ignore_errors=True)
            raise
        return {"read": sidecar["seconds"]["read"], "compute": compute_seconds, "write": sidecar["seconds"]["write"]}

    def read(item: FixelsItem, inflate_threads: int):
        return read_fixels_inputs(item.fod, item.mask, inflate_threads=inflate_threads)

    return BatchStages(read, compute, write)


_STAGES = {"peaks": _peaks_stages, "fod": _fod_stages, "fixels": _fixels_stages}


def batch_stages(kind: str, params: BaseModel, limits: "InputLimits | None" = None) -> BatchStages:
    """The stages of job kind ``kind`` with ``params``. With ``limits``, each input first
    passes the service's checks, from its header (:func:`worker.input_limits.check_job_inputs`;
    the read that follows refuses what a pass over the data would: a .nii.gz is inflated once)."""
    stages = _STAGES[kind](params)
    if limits is None:
        return stages
    from worker.input_limits import check_job_inputs
    from worker.job_kinds import get_job_kind

    job_kind = get_job_kind(kind)

    def read(item, inflate_threads: int):
        check_job_inputs(job_kind, item.files, params, limits, read_through=False)
        return stages.read(item, inflate_threads)

    return BatchStages(read, stages.compute, stages.write)
