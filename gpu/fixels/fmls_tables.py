"""The fixed tables of FMLS segmentation: the 1281 sampling directions, their adjacency, their
integration weights, the SH → amplitude matrix and the sampled Legendre functions of the
Newton peak search, each built as MRtrix3's ``fod2fixel`` builds it.

SH basis and Legendre functions: :func:`gpu.sh_basis.mrtrix_sh_matrix` and
:func:`gpu.sh_basis.legendre_sph`, MRtrix3's own recurrence, so that the tables match
``fod2fixel``'s to the last bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from gpu.fixels.directions_1281 import AZIMUTH_ELEVATION_1281
from gpu.fixels.sampling_tables_1281 import INTEGRATION_WEIGHTS_1281, NEIGHBOURS_1281
from gpu.sh_basis import SUPPORTED_LMAX, legendre_sph, mrtrix_sh_matrix

__all__ = ["FmlsTables", "fmls_tables", "sampling_directions", "direction_neighbours", "integration_weights",
           "MAX_NEIGHBOURS"]

# Every direction of the 1281 set has 5 or 6 neighbours on the hull of the set and its antipodes.
MAX_NEIGHBOURS = 6


@lru_cache(maxsize=1)
def sampling_directions() -> np.ndarray:
    """The (1281, 3) unit vectors of the sampling set, a hemisphere, in MRtrix3's order."""
    azimuth, elevation = np.array(AZIMUTH_ELEVATION_1281, dtype=np.float64).T
    unit = np.stack([np.cos(azimuth) * np.sin(elevation), np.sin(azimuth) * np.sin(elevation), np.cos(elevation)], 1)
    unit.flags.writeable = False
    return unit


def _azimuth_elevation(unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.arctan2(unit[:, 1], unit[:, 0]), np.arccos(np.clip(unit[:, 2], -1.0, 1.0))


@lru_cache(maxsize=1)
def direction_neighbours() -> np.ndarray:
    """(1281, MAX_NEIGHBOURS) int32: each direction's neighbours, ascending, padded with −1.

    Two directions are neighbours when they, or one and the other's antipode, share an edge of
    the convex hull of the set and its antipodes (MRtrix3's ``Directions::Set``). The hull's
    triangulation is unique here: no two adjacent facets are coplanar. Stored
    (:mod:`gpu.fixels.sampling_tables_1281`), not rebuilt in each process.
    """
    table = np.array(NEIGHBOURS_1281, np.int32)
    table.flags.writeable = False
    return table


@lru_cache(maxsize=1)
def integration_weights() -> np.ndarray:
    """(1281,) weights w with Σ w_i f(u_i) ≈ ∫ f dΩ over the sphere for even f: the least-squares
    solution that integrates every SH basis function up to degree lmax+2 exactly (Y_00 to
    √(4π), the others to 0), lmax the highest the set supports (MRtrix3's
    ``FMLS::IntegrationWeights``), so a lobe's sum of w·amplitude is its integral, the AFD
    (Raffelt et al. 2012, NeuroImage 59:3976, Eq. 1). Stored
    (:mod:`gpu.fixels.sampling_tables_1281`): the solve takes seconds.
    """
    weights = np.array(INTEGRATION_WEIGHTS_1281)
    weights.flags.writeable = False
    return weights


@dataclass(frozen=True)
class FmlsTables:
    """Everything FMLS needs for one lmax.

    unit : (D, 3) sampling directions; neighbours : (D, MAX_NEIGHBOURS) int32;
    weights : (D,) integration weights; sh_to_amp : (D, n_coeffs) SH → amplitude matrix;
    legendre : (2D, (lmax/2+1)²) P̄_l^m(cos θ_k) at θ_k = k·π/(2D−1), entry l²/4 + m for even
    l ≥ m (MRtrix3's ``PrecomputedAL``, which the Newton peak search interpolates linearly);
    legendre_step : π/(2D−1); derivative_factors : ((lmax/2+1)², 5) the square roots of the
    Legendre derivative identities at entry l²/4 + m: √((l+m)(l−m+1)), √((l−m)(l+m+1)),
    √((l+m)(l−m+1)(l+m−1)(l−m+2)), √((l−m)(l+m+1)(l−m−1)(l+m+2)) (0 where a factor is
    negative) and −((l+m)(l−m+1) + (l−m)(l+m+1)), each rounded once as the Newton step
    would compute it.
    """

    lmax: int
    unit: np.ndarray
    neighbours: np.ndarray
    weights: np.ndarray
    sh_to_amp: np.ndarray
    legendre: np.ndarray
    legendre_step: float
    derivative_factors: np.ndarray


def _derivative_factors(lmax: int) -> np.ndarray:
    factors = np.zeros(((lmax // 2 + 1) ** 2, 5))
    for m in range(lmax + 1):
        for l in range(m + (m & 1), lmax + 1, 2):
            products = ((l + m) * (l - m + 1), (l - m) * (l + m + 1),
                        (l + m) * (l - m + 1) * (l + m - 1) * (l - m + 2),
                        (l - m) * (l + m + 1) * (l - m - 1) * (l + m + 2))
            row = factors[l * l // 4 + m]
            row[:4] = [math.sqrt(float(p)) if p > 0 else 0.0 for p in products]
            row[4] = -float(products[0] + products[1])
    return factors


@lru_cache(maxsize=8)
def fmls_tables(lmax: int) -> FmlsTables:
    """The tables for SH series of degree ``lmax`` (cached)."""
    if lmax not in SUPPORTED_LMAX:
        raise ValueError(f"lmax must be one of {SUPPORTED_LMAX}, not {lmax}")
    unit = sampling_directions()
    n_samples = 2 * len(unit)
    step = math.pi / (n_samples - 1)
    cos_el = np.cos(np.arange(n_samples) * step)
    legendre = np.zeros((n_samples, (lmax // 2 + 1) ** 2))
    for m in range(lmax + 1):
        p = legendre_sph(lmax, m, cos_el)
        for l in range(m + (m & 1), lmax + 1, 2):
            legendre[:, l * l // 4 + m] = p[l]
    return FmlsTables(lmax=lmax, unit=unit, neighbours=direction_neighbours(), weights=integration_weights(),
                      sh_to_amp=mrtrix_sh_matrix(lmax, *_azimuth_elevation(unit)), legendre=legendre,
                      legendre_step=step, derivative_factors=_derivative_factors(lmax))
