"""The peaks job's one call of the engine (:func:`gpu.peaks.search.sshopm_peaks`), and the
engine's preparation, which runs on a thread of its own while the inputs are read."""

from __future__ import annotations

from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable

from worker.params.peaks import PeaksParams

if TYPE_CHECKING:
    from gpu.peaks.search import PeaksOptions, PeaksResult, PreparedPeaks
    from worker.jobs.peaks.plan import PeaksPlan
    from worker.jobs.peaks.read import PeaksInputs

__all__ = ["engine_options", "prepare_engine", "compute_peaks"]


def engine_options(params: PeaksParams) -> "PeaksOptions":
    """The engine's options for validated job parameters (no second set of limits: the
    model's come from :mod:`gpu.peaks.limits`, as the engine's do)."""
    from gpu.peaks.search import PeaksOptions

    return PeaksOptions(npeaks=params.npeaks, threshold=params.threshold, relative_threshold=params.relative_threshold,
                        starts=params.starts, seeding=params.seeding)


def prepare_engine(plan: "PeaksPlan") -> "Future[PreparedPeaks]":
    """Start preparing the engine for ``plan`` (the CUDA context and kernels, or the CPU
    backend's compiled loops) on a thread of its own, so that it overlaps reading the
    inputs; :func:`compute_peaks` waits for it."""
    from gpu.peaks.search import start_preparing

    params = plan.params
    return start_preparing(plan.lmax, params.basis, engine_options(params), params.backend)


def compute_peaks(plan: "PeaksPlan", inputs: "PeaksInputs", prepared: "Future[PreparedPeaks] | None" = None,
                  progress: Callable[[float], None] | None = None) -> "PeaksResult":
    """The engine's peaks of read inputs; ``prepared``: :func:`prepare_engine` of the same
    plan, if started; ``progress(fraction)`` is called between chunks, and an exception it
    raises (cancellation) stops the run."""
    from gpu.peaks.search import sshopm_peaks

    params = plan.params
    return sshopm_peaks(inputs.sh, basis=params.basis, mask=inputs.mask, options=engine_options(params),
                        backend=params.backend, progress=progress, prepared=prepared, finite=inputs.finite)
