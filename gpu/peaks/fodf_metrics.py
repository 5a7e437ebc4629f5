"""fODF metrics from the peaks and the SH coefficients, as scilpy's ``scil_fodf_metrics``
writes them for TractoFlow users.

With a_1 ≥ … ≥ a_n the FOD amplitudes of a voxel's n reported peaks (the same absolute
and relative thresholds as the peaks) and d_1 its first peak's unit direction:

* ``nufo`` = n, the number of fiber orientations (Dell'Acqua et al. 2013, HBM 34:2464);
* ``afd_max`` = a_1, the apparent fiber density of the largest lobe, read as its peak
  amplitude (Raffelt et al. 2012, NeuroImage 59:3976; Dell'Acqua et al. 2013);
* ``afd_total`` = ∫_{S²} f(u) du = √(4π)·c_00: only Y_00 = 1/√(4π) has a non-zero integral,
  and it is the same function in both supported bases (MRtrix3 and DIPY descoteaux07), so
  the total AFD of Raffelt et al. 2012 (Sec. 2.3) is the l = 0 coefficient times √(4π);
* ``afd_sum`` = Σ_k a_k over the reported peaks;
* ``peak_fraction``_k = a_k / afd_sum;
* ``rgb`` = ⌊255 · |d_1| · a_1 / max_voxels a_1⌋ as uint8, the directionally encoded colour
  of the first peak (Pajevic & Pierpaoli 1999, Eq. 4: red = |x|, green = |y|, blue = |z|)
  weighted by afd_max normalised over the volume, truncated to uint8 as scilpy writes it;
  its channels follow the axes of the directions (scanner RAS+ for an MRtrix3 FOD).

Conventions are scilpy's: every map but ``afd_total`` is 0 where a voxel has no peak
(masked out, non-finite coefficients, or nothing above the thresholds), ``peak_fraction``
is 0 past a voxel's count, and ``afd_total`` is the l = 0 term wherever it is given (scilpy
writes it unmasked). scilpy itself computes its ``afd_sum`` as the L2 norm of the SH
coefficients and its ``rgb`` from the whole positive fODF, and writes ``afd_total`` as c_00
without the √(4π); here they follow the definitions above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.ahead_of_time import compiled
from gpu.cpu_blocks import run_in_blocks

__all__ = ["FodfMetrics", "METRIC_NAMES", "fodf_metrics", "largest_afd_max", "directional_colour"]

METRIC_NAMES = ("afd_max", "afd_total", "afd_sum", "peak_fraction", "rgb")


@dataclass
class FodfMetrics:
    """Maps on the spatial grid (...): ``afd_max``, ``afd_total``, ``afd_sum`` float32 (...),
    ``peak_fraction`` float32 (..., K), ``rgb`` uint8 (..., 3), ``nufo`` uint8 (...)."""

    afd_max: np.ndarray
    afd_total: np.ndarray
    afd_sum: np.ndarray
    peak_fraction: np.ndarray
    rgb: np.ndarray
    nufo: np.ndarray


def fodf_metrics(sh: np.ndarray, directions: np.ndarray, amplitudes: np.ndarray,
                 count: np.ndarray) -> FodfMetrics:
    """fODF metrics of one volume (see the module docstring for the formulas), in the
    compiled passes of :mod:`gpu.peaks.fodf_metrics_compiled`, float32 throughout.

    Parameters
    ----------
    sh : (..., n_coeffs) array
        SH coefficients of the fODF, MRtrix3 or DIPY basis (both share c_00's meaning).
    directions : (..., K, 3) array
        Unit peak directions, sorted by amplitude (:class:`gpu.peaks.search.PeaksResult`).
    amplitudes : (..., K) array
        FOD amplitude of each peak, descending; any value past ``count`` is ignored.
    count : (...) integer array
        Number of reported peaks per voxel.

    Returns
    -------
    FodfMetrics
    """
    sh = np.asarray(sh)
    amplitudes = np.asarray(amplitudes)
    directions = np.asarray(directions)
    count = np.asarray(count)
    spatial = count.shape
    k = amplitudes.shape[-1]
    if sh.shape[:-1] != spatial or amplitudes.shape != (*spatial, k) or directions.shape != (*spatial, k, 3):
        raise ValueError(
            f"shapes do not agree: sh {sh.shape}, directions {directions.shape}, amplitudes {amplitudes.shape}, "
            f"count {count.shape}; expected (..., n_coeffs), (..., K, 3), (..., K) and (...) on one grid"
        )
    n = count.size
    afd_max, afd_total, afd_sum = (np.empty(spatial, np.float32) for _ in range(3))
    peak_fraction = np.empty((*spatial, k), np.float32)
    counts = count.reshape(n)
    # the l = 0 volume alone: a read volume is often in file (Fortran) order
    largest = _voxel_metrics(sh[..., 0].reshape(n), amplitudes.reshape(n, k), counts, afd_max.reshape(n),
                             afd_total.reshape(n), afd_sum.reshape(n), peak_fraction.reshape(n, k))
    rgb = np.empty((*spatial, 3), np.uint8)
    _colour_rows(directions.reshape(n, k, 3), afd_max.reshape(n), counts, rgb.reshape(n, 3), _colour_scale(largest))
    return FodfMetrics(afd_max=afd_max, afd_total=afd_total, afd_sum=afd_sum, peak_fraction=peak_fraction, rgb=rgb,
                       nufo=count.astype(np.uint8))


def largest_afd_max(afd_max: np.ndarray, count: np.ndarray) -> np.float32:
    """The largest AFD_max of a volume, which scales :func:`directional_colour`: max over
    the voxels with a peak of ``afd_max`` (each voxel's first amplitude, e.g.
    ``amplitudes[..., 0]``; ignored where ``count`` is 0), 0 when no voxel has one."""
    return np.float32(np.max(afd_max, where=np.asarray(count) > 0, initial=0.0))


def directional_colour(first_directions: np.ndarray, afd_max: np.ndarray, count: np.ndarray,
                       largest: float) -> np.ndarray:
    """The ``rgb`` map, ⌊255 · |d_1| · a_1 / ``largest``⌋ as uint8, 0 where ``count`` is 0.

    Parameters
    ----------
    first_directions : (..., 3) array
        First peak's unit direction d_1 (any value where a voxel has no peak).
    afd_max : (...) array
        a_1, the first peak's amplitude (any value where a voxel has no peak).
    count : (...) integer array
        Number of reported peaks per voxel.
    largest : float
        The volume's largest a_1 (:func:`largest_afd_max`), so that a slice of a volume
        gets the colours of the same voxels of the whole.

    Returns
    -------
    (..., 3) uint8 array
    """
    count = np.ascontiguousarray(count)
    n = count.size
    colour = np.empty((*count.shape, 3), np.uint8)
    # the pass of fodf_metrics' rgb map, on contiguous rows of voxels: a flipped slice too, so
    # that one compiled signature serves both (a process loads it once)
    _colour_rows(np.ascontiguousarray(first_directions).reshape(n, 1, 3), np.ascontiguousarray(afd_max).reshape(n),
                 count.reshape(n), colour.reshape(n, 3), _colour_scale(largest))
    return colour


def _colour_scale(largest: float) -> np.float32:
    largest = float(largest)
    return np.float32(255.0 / largest if largest > 0 else 0.0)


_PASSES = "gpu.peaks.fodf_metrics_compiled"


def _voxel_metrics(sh0: np.ndarray, amplitudes: np.ndarray, count: np.ndarray, afd_max: np.ndarray,
                   afd_total: np.ndarray, afd_sum: np.ndarray, peak_fraction: np.ndarray) -> np.float32:
    """Fill rows of voxels' ``afd_max``, ``afd_total``, ``afd_sum`` (V,) and ``peak_fraction``
    (V, K) from the l = 0 coefficients ``sh0`` (V,), ``amplitudes`` (V, K) and ``count``
    (V,); returns the largest ``afd_max`` of the voxels with a peak (0 if none)."""
    # The pass reads each value as float32: contiguous float32 copies give it the same
    # numbers and one signature, whatever the backend's precision or the volume's layout (a
    # CPU run's float64 amplitudes compiled a second one after `fibertensor warmup`).
    sh0, amplitudes = (np.ascontiguousarray(a, np.float32) for a in (sh0, amplitudes))
    arrays = [sh0, amplitudes, count, afd_max, afd_total, afd_sum, peak_fraction]
    largest = run_in_blocks(compiled(f"{_PASSES}._voxel_metrics", arrays), arrays)
    return np.float32(max(largest, default=0.0))


def _colour_rows(directions: np.ndarray, afd_max: np.ndarray, count: np.ndarray, colour: np.ndarray,
                 scale: np.float32) -> None:
    """Fill ``colour`` (V, 3) uint8 with ⌊|d_1| · a_1 · ``scale``⌋ clipped to 0…255, 0 where
    ``count`` (V,) is 0, from the first of ``directions`` (V, K, 3) and ``afd_max`` (V,)."""
    arrays = [directions, afd_max, count, colour]
    run_in_blocks(compiled(f"{_PASSES}._colour", [*arrays, scale]), arrays, (scale,))
