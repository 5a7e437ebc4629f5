"""The peaks job's one call of the engine (:func:`gpu.peaks.search.sshopm_peaks`), and the
engine's preparation, which runs on a thread of its own while the inputs are read."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from worker.params.peaks import PeaksParams

if TYPE_CHECKING:
    from gpu.peaks.search import PeaksOptions, PeaksResult
    from worker.jobs.peaks.plan import PeaksPlan
    from worker.jobs.peaks.read import PeaksInputs

__all__ = ["engine_options", "prepare_engine", "compute_peaks"]


def engine_options(params: PeaksParams) -> "PeaksOptions":
    """The engine's options for validated job parameters (no second set of limits: the
    model's come from :mod:`gpu.peaks.limits`, as the engine's do)."""
    from gpu.peaks.search import PeaksOptions

    return PeaksOptions(npeaks=params.npeaks, threshold=params.threshold, relative_threshold=params.relative_threshold,
                        starts=params.starts, seeding=params.seeding)


def prepare_engine(plan: "PeaksPlan") -> threading.Thread:
    """Start preparing the engine for ``plan`` (:func:`gpu.peaks.search.prepare_peaks`: the
    CUDA context and kernels, or the CPU backend's compiled loops) on a thread of its own,
    so that it overlaps reading the inputs; the engine's call in :func:`compute_peaks` finds
    it prepared, or waits for it. Not a daemon: an interpreter that exits early waits for it
    rather than killing it inside a CUDA driver call."""
    thread = threading.Thread(target=_prepare, args=(plan,), name=f"prepare-peaks-lmax{plan.lmax}")
    thread.start()
    return thread


def _prepare(plan: "PeaksPlan") -> None:
    from gpu.peaks.search import prepare_peaks

    params = plan.params
    try:
        prepare_peaks(plan.lmax, params.basis, engine_options(params), params.backend)
    except Exception:  # kept nothing: the engine's call prepares again and raises it in the job
        pass


def compute_peaks(plan: "PeaksPlan", inputs: "PeaksInputs", preparing: threading.Thread | None = None,
                  progress: Callable[[float], None] | None = None) -> "PeaksResult":
    """The engine's peaks of read inputs; ``preparing``: :func:`prepare_engine` of the same
    plan, if started (the engine's statistics count the wait for it); ``progress(fraction)``
    is called between chunks, and an exception it raises (cancellation) stops the run. A
    masked volume's voxels are copied into page-locked memory for the GPU."""
    from gpu.cuda.host_memory import host_empty
    from gpu.peaks.search import sshopm_peaks

    params = plan.params
    try:
        return sshopm_peaks(inputs.sh, inputs.mask, engine_options(params), params.backend, basis=params.basis,
                            finite=inputs.finite, progress=progress, empty=host_empty(params.backend))
    finally:
        if preparing is not None:
            preparing.join()
