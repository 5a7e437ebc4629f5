"""FOD image → fixels, as MRtrix3's ``fod2fixel`` makes them: FMLS lobes (Smith et al. 2013,
NeuroImage 67:298, Appendix 2) with their integral (AFD; Raffelt et al. 2012, NeuroImage
59:3976), peak amplitude and dispersion.

Order of the fixels: voxel by voxel with x fastest, then y, then z (the loop over MRtrix3's
index image), and within a voxel in lobe order, the order in which FMLS seeded the lobes,
which is by each lobe's largest sampled amplitude, descending (``fod2fixel`` keeps the
segmenter's order and sorts nothing). Two runs on the same backend give identical arrays.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import cycle
from typing import Callable

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.fixels.fmls_tables import fmls_tables
from gpu.sh_basis import lmax_from_ncoeffs

__all__ = ["FmlsOptions", "FixelSet", "segment_fods", "segment_memory_bytes", "DEFAULT_PEAK_VALUE", "FIRST_CAPACITY"]

#: MRtrix3's FMLS defaults: no integral threshold, peak amplitude ≥ 0.1, lobes never merged.
DEFAULT_PEAK_VALUE = 0.1
#: Fixels a voxel has room for in a backend's first pass; a voxel with more is redone on the CPU.
FIRST_CAPACITY = 16
_CHUNK_VOXELS = 65536
# A fixel's float64 direction, integral and peak amplitude, kept until the end, and its float32
# direction, integral, peak amplitude and dispersion in the result.
_FIXEL_BYTES = 5 * 8 + 6 * 4


@dataclass(frozen=True)
class FmlsOptions:
    """FMLS settings, named after ``fod2fixel``'s options.

    integral : drop lobes whose integral is below this (``-fmls_integral``).
    peak_value : drop lobes whose peak amplitude is below this (``-fmls_peak_value``).
    no_thresholds : keep every positive lobe; overrides both thresholds (``-fmls_no_thresholds``).
    lobe_merge_ratio : in [0, 1]; two lobes meeting at a sample merge when its amplitude over
        the smaller lobe's peak exceeds this; 1 never merges (``-fmls_lobe_merge_ratio``).
    maxnum : at most this many fixels per voxel, the first in lobe order; 0: all (``-maxnum``).
    dirpeak : fixel direction = the lobe's largest peak instead of its amplitude-weighted mean
        direction (``-dirpeak``).
    """

    integral: float = 0.0
    peak_value: float = DEFAULT_PEAK_VALUE
    no_thresholds: bool = False
    lobe_merge_ratio: float = 1.0
    maxnum: int = 0
    dirpeak: bool = False

    def __post_init__(self) -> None:
        if not (np.isfinite(self.integral) and self.integral >= 0.0):
            raise ValueError(f"integral must be a finite number ≥ 0, not {self.integral}")
        if not (np.isfinite(self.peak_value) and self.peak_value >= 0.0):
            raise ValueError(f"peak_value must be a finite number ≥ 0, not {self.peak_value}")
        if not 0.0 <= self.lobe_merge_ratio <= 1.0:
            raise ValueError(f"lobe_merge_ratio must lie in [0, 1], not {self.lobe_merge_ratio}")
        if self.maxnum < 0:
            raise ValueError(f"maxnum must be ≥ 0 (0: no limit), not {self.maxnum}")

    @property
    def thresholds(self) -> tuple[float, float]:
        """(integral, peak value) thresholds in effect."""
        return (0.0, 0.0) if self.no_thresholds else (float(self.integral), float(self.peak_value))


@dataclass(frozen=True)
class FixelSet:
    """Fixels of an image.

    index : (X, Y, Z, 2) uint32, per voxel its number of fixels and its first fixel.
    directions : (N, 3) float32 unit vectors, in the frame of the SH coefficients.
    afd : (N,) float32 lobe integrals; peak_amp : (N,) float32 peak amplitudes;
    disp : (N,) float32 afd / peak_amp (computed in float32, as ``fod2fixel``).
    """

    index: np.ndarray
    directions: np.ndarray
    afd: np.ndarray
    peak_amp: np.ndarray
    disp: np.ndarray


def _chunk_runner(backend: str, n_voxels: int, n_coeffs: int, in_flight: int) -> Callable:
    """``start(coeffs, args)``: begin segmenting voxel rows ``coeffs`` (up to ``n_voxels``)
    with the backend and return a function that waits for their counts and padded fixels.
    The GPU's keeps up to ``in_flight`` chunks under way, each on its own workspace, so the
    host finishes one chunk while the device runs the next; the CPU's computes at once."""
    if backend == "cuda":
        from gpu.fixels.backend_cuda import FmlsWorkspace, start_segment_cuda

        workspaces = cycle([FmlsWorkspace(n_voxels, n_coeffs, FIRST_CAPACITY) for _ in range(in_flight)])
        return lambda coeffs, args: start_segment_cuda(coeffs, *args, next(workspaces))
    from gpu.fixels.fmls import segment_voxels_cpu

    def start(coeffs: np.ndarray, args: tuple) -> Callable[[], tuple]:
        result = segment_voxels_cpu(np.ascontiguousarray(coeffs, np.float64), *args, FIRST_CAPACITY)
        return lambda: result

    return start


def _redo_overflow(coeffs: np.ndarray, result: tuple[np.ndarray, ...], args: tuple) -> tuple[np.ndarray, ...]:
    """Counts and padded fixels of voxel rows ``coeffs`` from a backend's ``result``, where
    rows that overflowed the first capacity (or the CUDA kernel's lobe scratch) are run again
    on the CPU with room for all."""
    counts, dirs, afd, amp = result
    redo = np.flatnonzero((counts < 0) | (counts > FIRST_CAPACITY))
    if redo.size:
        from gpu.fixels.fmls import segment_voxels_cpu

        rows = np.ascontiguousarray(coeffs[redo], np.float64)
        again = segment_voxels_cpu(rows, *args, FIRST_CAPACITY)
        capacity = int(again[0].max())
        if capacity > FIRST_CAPACITY:
            again = segment_voxels_cpu(rows, *args, capacity)
            grow = ((0, 0), (0, capacity - FIRST_CAPACITY))
            dirs, afd, amp = np.pad(dirs, grow + ((0, 0),)), np.pad(afd, grow), np.pad(amp, grow)
        width = again[1].shape[1]
        counts[redo] = again[0]
        dirs[redo, :width], afd[redo, :width], amp[redo, :width] = again[1], again[2], again[3]
    return counts, dirs, afd, amp


def _rows_of(rows: np.ndarray, voxels: np.ndarray) -> np.ndarray:
    """The rows ``voxels`` of ``rows`` (N, n_coeffs), gathered along the image's runs: a
    coefficient at a time where the image stores a volume per coefficient (NIfTI, and .mif
    written so), a voxel at a time where it stores a voxel's coefficients together."""
    if rows.strides[0] < rows.strides[1]:
        # np.take along one coefficient's run (contiguous) is faster than indexing the 2-D view
        gathered = np.empty((rows.shape[1], voxels.size), rows.dtype)
        for run, out in zip(rows.T, gathered):
            np.take(run, voxels, out=out)
        return gathered.T
    return rows[voxels]


def segment_fods(fod: np.ndarray, mask: np.ndarray | None = None, options: FmlsOptions = FmlsOptions(),
                 backend: str = "auto", progress: Callable[[float], None] | None = None) -> FixelSet:
    """Fixels of an SH FOD image (MRtrix3 basis), as ``fod2fixel``.

    Parameters
    ----------
    fod : ndarray, shape (X, Y, Z, n_coeffs)
        SH coefficients in MRtrix3's basis, n_coeffs = (lmax+1)(lmax+2)/2, lmax ≤ 12.
    mask : ndarray, shape (X, Y, Z), optional
        Voxels where it is non-zero are segmented; the others get no fixel.
    options : FmlsOptions
    backend : {"auto", "cpu", "cuda"}
    progress : callable, optional
        Called with the fraction done after each chunk of voxels.

    A voxel gets no fixel when its l=0 coefficient is ≤ 0 or any coefficient is not finite,
    or when its largest |amplitude| is negative.
    """
    fod = np.asarray(fod)
    if fod.ndim != 4:
        raise ValueError(f"fod must be (X, Y, Z, n_coeffs), not of shape {fod.shape}")
    tables = fmls_tables(lmax_from_ncoeffs(fod.shape[3]))
    grid = fod.shape[:3]
    if mask is not None and np.shape(mask) != grid:
        raise ValueError(f"mask has shape {np.shape(mask)}, the FOD's grid is {grid}")
    chosen = resolve_backend(backend)
    # x fastest: the transposed grid in C order (a view of NIfTI's layout and of dwi2fod's)
    rows = fod.transpose(2, 1, 0, 3).reshape(-1, fod.shape[3])
    selected = np.arange(rows.shape[0]) if mask is None else np.flatnonzero(np.asarray(mask).transpose(2, 1, 0) != 0)
    counts = np.zeros(rows.shape[0], np.int64)
    parts: list[tuple[np.ndarray, ...]] = []
    integral, peak = options.thresholds
    args = (tables, integral, peak, options.lobe_merge_ratio, options.maxnum, options.dirpeak)
    start = _chunk_runner(chosen, max(1, min(selected.size, _CHUNK_VOXELS)), fod.shape[3],
                          in_flight=2 if selected.size > _CHUNK_VOXELS else 1)

    def collect(voxels: np.ndarray, chunk: np.ndarray, started: Callable[[], tuple], done: int) -> None:
        n, dirs, afd, amp = _redo_overflow(chunk, started(), args)
        counts[voxels] = n
        # the kept slots' flat positions once, then a take per array: cheaper than indexing
        # each array with the boolean mask
        keep = np.flatnonzero(np.arange(dirs.shape[1])[None, :] < n[:, None])
        parts.append((np.take(dirs.reshape(-1, 3), keep, axis=0), np.take(afd.reshape(-1), keep),
                      np.take(amp.reshape(-1), keep)))
        if progress is not None:
            progress(min(1.0, done / selected.size))

    pending = None
    for first in range(0, selected.size, _CHUNK_VOXELS):
        voxels = selected[first:first + _CHUNK_VOXELS]
        # without a mask the chunk is a run of rows: a slice, not a gathered copy
        chunk = rows[first:first + voxels.size] if mask is None else _rows_of(rows, voxels)
        started = start(chunk, args)
        # the chunk before is finished on the host while this one runs on the device
        if pending is not None:
            try:
                collect(*pending)
            except BaseException:
                started()  # the chunk under way is done before its buffers go
                raise
        pending = (voxels, chunk, started, first + voxels.size)
    if pending is not None:
        collect(*pending)
    directions, afd, peak_amp = (np.concatenate([p[k] for p in parts], dtype=np.float32, casting="same_kind") if parts
                                 else np.zeros((0, 3) if k == 0 else 0, np.float32) for k in range(3))
    index = np.empty((*grid, 2), np.uint32)
    index[..., 0] = counts.reshape(grid[::-1]).transpose(2, 1, 0)
    index[..., 1] = (np.cumsum(counts) - counts).reshape(grid[::-1]).transpose(2, 1, 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        disp = afd / peak_amp
    return FixelSet(index=index, directions=directions, afd=afd, peak_amp=peak_amp, disp=disp)


def segment_memory_bytes(n_voxels: int, n_coeffs: int) -> int:
    """Most bytes :func:`segment_fods` holds beside its float32 input, with up to FIRST_CAPACITY fixels a
    voxel (a CSD FOD has a few; a chunk's voxels with more are redone apart).

    Parameters
    ----------
    n_voxels : int
        Voxels of the FOD's grid.
    n_coeffs : int
        SH coefficients per voxel.

    Returns
    -------
    int
        The voxel-ordered copy of the coefficients, the fixels while segmented and as results,
        and each voxel's fixel count and first fixel (int64 while counted).
    """
    return n_voxels * (n_coeffs * 4 + FIRST_CAPACITY * _FIXEL_BYTES + 16)
