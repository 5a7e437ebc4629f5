"""Real, even-order spherical-harmonic (SH) bases of MRtrix3 and DIPY.

Coefficients are ordered by degree l = 0, 2, …, lmax and, within a degree, by order
m = −l … l, so index(l, m) = l(l+1)/2 + m (the MRtrix3 and DIPY convention).

With Y_l^m the complex SH (Condon–Shortley phase included, as :func:`scipy.special.sph_harm_y`):

* ``mrtrix`` (MRtrix3; identical to DIPY's ``tournier07`` with ``legacy=False``):
  Y_lm = √2·Im(Y_l^|m|) for m < 0, Y_l^0 for m = 0, √2·Re(Y_l^m) for m > 0.
* ``dipy`` (DIPY's default ``descoteaux07`` with ``legacy=True``):
  Y_lm = √2·Re(Y_l^|m|) for m < 0, Y_l^0 for m = 0, √2·Im(Y_l^m) for m > 0.

Both are orthonormal on the sphere and differ only by the swap m ↔ −m.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = [
    "SH_BASES",
    "SUPPORTED_LMAX",
    "n_coeffs",
    "lmax_from_ncoeffs",
    "sh_degrees_orders",
    "real_sh_matrix",
    "convert_sh_basis",
    "legendre_sph",
    "mrtrix_sh_matrix",
]

SH_BASES = ("mrtrix", "dipy")
SUPPORTED_LMAX = (2, 4, 6, 8, 10, 12)


def n_coeffs(lmax: int) -> int:
    """Number of even-order SH coefficients up to degree lmax: (lmax+1)(lmax+2)/2."""
    return (lmax + 1) * (lmax + 2) // 2


_LMAX_BY_COUNT = {n_coeffs(l): l for l in SUPPORTED_LMAX}


def lmax_from_ncoeffs(count: int) -> int:
    """lmax for a number of SH volumes; any count but 6, 15, 28, 45, 66, 91 is an error."""
    if count not in _LMAX_BY_COUNT:
        valid = ", ".join(f"{n} (lmax {l})" for n, l in _LMAX_BY_COUNT.items())
        raise ValueError(
            f"{count} SH coefficients are not an even-order SH series, which has one of {valid} coefficients"
        )
    return _LMAX_BY_COUNT[count]


def sh_degrees_orders(lmax: int) -> tuple[np.ndarray, np.ndarray]:
    """Degree l and order m of each coefficient, in storage order."""
    if lmax not in SUPPORTED_LMAX:
        raise ValueError(f"lmax must be one of {SUPPORTED_LMAX}, not {lmax}")
    ls, ms = [], []
    for l in range(0, lmax + 1, 2):
        for m in range(-l, l + 1):
            ls.append(l)
            ms.append(m)
    return np.array(ls), np.array(ms)


def real_sh_matrix(lmax: int, directions: np.ndarray, basis: str = "mrtrix") -> np.ndarray:
    """SH basis functions at ``directions``.

    Parameters
    ----------
    lmax : int
        One of :data:`SUPPORTED_LMAX`.
    directions : ndarray, shape (N, 3)
        Directions (normalised here), in the frame of the SH coefficients.
    basis : {"mrtrix", "dipy"}

    Returns
    -------
    ndarray, shape (N, n_coeffs(lmax)), float64
        B with amplitude(directions) = B @ coefficients.
    """
    if basis not in SH_BASES:
        raise ValueError(f"basis must be one of {SH_BASES}, not {basis!r}")
    if lmax not in SUPPORTED_LMAX:
        raise ValueError(f"lmax must be one of {SUPPORTED_LMAX}, not {lmax}")
    d = np.asarray(directions, dtype=np.float64)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    return _sh_matrix(lmax, np.arctan2(d[:, 1], d[:, 0]), np.clip(d[:, 2], -1.0, 1.0), basis)


def _sh_matrix(lmax: int, azimuth: np.ndarray, cos_polar: np.ndarray, basis: str) -> np.ndarray:
    """The (N, n_coeffs(lmax)) matrix of ``basis`` at azimuths φ and cos θ, any even lmax:
    with Y_l^m = P̄_l^m(cos θ) e^{imφ} (:func:`legendre_sph`), √2·Re(Y_l^m) goes to column
    l(l+1)/2 + m and √2·Im(Y_l^m) to l(l+1)/2 − m for ``mrtrix``, the other way for ``dipy``."""
    matrix = np.zeros((azimuth.size, n_coeffs(lmax)))
    for m in range(lmax + 1):
        p = legendre_sph(lmax, m, cos_polar)
        for l in range(m + (m & 1), lmax + 1, 2):
            centre = l * (l + 1) // 2
            if m == 0:
                matrix[:, centre] = p[l]
                continue
            real = math.sqrt(2.0) * p[l] * np.cos(m * azimuth)
            imaginary = math.sqrt(2.0) * p[l] * np.sin(m * azimuth)
            if basis == "dipy":
                real, imaginary = imaginary, real
            matrix[:, centre + m] = real
            matrix[:, centre - m] = imaginary
    return matrix


def convert_sh_basis(coeffs: np.ndarray, src: str, dst: str) -> np.ndarray:
    """Re-express SH coefficients (last axis) from basis ``src`` in basis ``dst``.

    The two bases differ by the swap m ↔ −m within each degree, so this is a permutation.
    """
    for b in (src, dst):
        if b not in SH_BASES:
            raise ValueError(f"basis must be one of {SH_BASES}, not {b!r}")
    coeffs = np.asarray(coeffs)
    if src == dst:
        return coeffs
    lmax = lmax_from_ncoeffs(coeffs.shape[-1])
    l, m = sh_degrees_orders(lmax)
    permutation = l * (l + 1) // 2 - m
    return coeffs[..., permutation]


def legendre_sph(lmax: int, m: int, x: np.ndarray) -> np.ndarray:
    """P̄_l^m(x) for l = m … lmax (rows l; rows below m are zero), orthonormalised on the sphere,
    Condon–Shortley phase included: the recurrence of MRtrix3's ``Legendre::Plm_sph``, so that
    tables built from it match MRtrix3's to the last bit.

    P̄_m^m = (−1)^m √(1/4π) √((2m+1) ∏_{k=1}^{m} (2k−1)/(2k)) (1−x²)^{m/2},
    P̄_{m+1}^m = √(2m+3) x P̄_m^m, and for n ≥ m+2
    P̄_n^m = f_n (x P̄_{n−1}^m − P̄_{n−2}^m / f_{n−1}), f_n = √((4n²−1)/(n²−m²)).

    Parameters
    ----------
    lmax, m : int
        Highest degree and the order, 0 ≤ m ≤ lmax (any lmax, not only :data:`SUPPORTED_LMAX`).
    x : ndarray, shape (...)
        cos θ, θ the polar angle.

    Returns
    -------
    ndarray, shape (lmax + 1, ...), float64
    """
    x = np.asarray(x, dtype=np.float64)
    out = np.zeros((lmax + 1, *x.shape))
    x2 = x * x
    start = np.full(x.shape, 1.0 / math.sqrt(4.0 * math.pi))
    if m:
        factor = np.ones(x.shape)
        for k in range(2 * m, 0, -2):
            factor = factor * (1.0 - x2) * (k - 1.0) / k
        start = np.where(x2 < 1.0, start * np.sqrt((2 * m + 1) * factor), 0.0)
        if m & 1:
            start = -start
    out[m] = start
    if lmax == m:
        return out
    f = math.sqrt(2 * m + 3)
    out[m + 1] = x * f * out[m]
    for n in range(m + 2, lmax + 1):
        previous_f = f
        f = math.sqrt((4.0 * n * n - 1.0) / (n * n - m * m))
        out[n] = f * (x * out[n - 1] - out[n - 2] / previous_f)
    return out


def mrtrix_sh_matrix(lmax: int, azimuth: np.ndarray, elevation: np.ndarray) -> np.ndarray:
    """MRtrix3's basis at directions given by angles, evaluated as MRtrix3 does
    (``Math::SH::init_transform``, :func:`legendre_sph`), for any even lmax.

    Parameters
    ----------
    lmax : int
        Even SH degree (not limited to :data:`SUPPORTED_LMAX`).
    azimuth, elevation : ndarray, shape (N,)
        Azimuth φ and polar angle θ in radians.

    Returns
    -------
    ndarray, shape (N, n_coeffs(lmax)), float64
        B with amplitudes = B @ coefficients, column l(l+1)/2 + m as in :func:`real_sh_matrix`.
    """
    azimuth = np.asarray(azimuth, dtype=np.float64)
    return _sh_matrix(lmax, azimuth, np.cos(np.asarray(elevation, dtype=np.float64)), "mrtrix")
