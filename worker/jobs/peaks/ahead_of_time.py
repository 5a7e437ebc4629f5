"""The ahead-of-time builds of a peaks job's compiled CPU functions (:mod:`gpu.ahead_of_time`).
``fibertensor warmup --backend cpu`` builds the SS-HOPM loops this process has run and the
writers' passes (fODF metrics, QC picture): a later job of any size runs without loading
numba, the loops on the host's threads. A warm-up
for the GPU builds the writers' passes alone, under a name of their own (so that it leaves a
CPU build's loops in place): a GPU job, whose kernels launch from cubins, then writes its
outputs without loading numba either.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILD_NAME", "WRITERS_BUILD_NAME", "build_peaks_ahead_of_time"]

#: The builds' names in :func:`gpu.ahead_of_time.build_folder`: the CPU loops with the
#: writers' passes, and the writers' passes alone.
BUILD_NAME = "peaks"
WRITERS_BUILD_NAME = "peaks_writers"


def build_peaks_ahead_of_time(loops: bool = True) -> Path:
    """Build every SS-HOPM CPU loop that this process has loaded or compiled, and the fODF
    metrics' and QC picture's passes (:func:`worker.jobs.peaks.warm_up_writers` loads them)
    into one extension module, :data:`BUILD_NAME`; without ``loops``, the passes alone,
    :data:`WRITERS_BUILD_NAME`. Returns its path."""
    from gpu.ahead_of_time import build
    from gpu.peaks import fodf_metrics_compiled, sshopm_generated_cpu
    from gpu.sh_basis import SUPPORTED_LMAX
    from worker import qc_raster

    passes = [fodf_metrics_compiled._voxel_metrics, fodf_metrics_compiled._colour, qc_raster.rasterize]
    if not loops:
        return build(WRITERS_BUILD_NAME, passes)
    cpu_loops = [getattr(sshopm_generated_cpu, f"sshopm_cpu_m{lmax}") for lmax in SUPPORTED_LMAX]
    return build(BUILD_NAME, [loop for loop in cpu_loops if loop.overloads] + passes)
