"""Limits the peaks kernels impose on their parameters, declared once: the kernels, the
engine's :class:`gpu.peaks.search.PeaksOptions` and the job's parameter schema
(:mod:`worker.params.peaks`) all read them from here. Imports nothing, so the schema and
the API stay free of numba."""

__all__ = ["MAX_STARTS", "MAX_NPEAKS"]

#: Start vectors per voxel: one thread each in a block whose shared per-start arrays have
#: this length (``seed_cuda_m*`` in :mod:`gpu.peaks.sshopm_generated_cuda`).
MAX_STARTS = 256

#: Peaks per voxel: the count volume is uint8.
MAX_NPEAKS = 255
