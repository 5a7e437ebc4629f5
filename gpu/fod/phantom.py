"""Synthetic multi-shell DWI: white matter of 1–3 crossing fibres, grey matter and CSF in
partial volume, with Rician noise; for testing FOD fits against known truth and MRtrix3.

Each fibre is a prolate (cylindrically symmetric) tensor, S = S0 exp(−b gᵀDg) with
D = λ⊥ I + (λ∥ − λ⊥) u uᵀ; grey matter and CSF decay isotropically (Jeurissen et al.
2014, Sec. 2.4 uses the same three compartments). Noise is Rician: |S + σ(n₁ + i n₂)|.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["shell_scheme", "dwi_phantom", "tissue_responses"]

# Diffusivities (mm²/s) and b=0 signals of the three tissues.
_WM_AXIAL, _WM_RADIAL = 1.7e-3, 0.3e-3
_GM_D, _CSF_D = 0.8e-3, 3.0e-3
_S0 = {"wm": 1.0, "gm": 1.2, "csf": 2.0}
# Signal units: the b=0 white-matter signal.
_SCALE = 1000.0


def _hemisphere(n: int, rng: np.random.Generator) -> np.ndarray:
    """n well-spread unit vectors on a hemisphere (a Fibonacci spiral), randomly rotated."""
    k = np.arange(n) + 0.5
    z = 1.0 - k / n
    azimuth = np.pi * (1 + 5 ** 0.5) * k
    r = np.sqrt(1 - z * z)
    points = np.stack([r * np.cos(azimuth), r * np.sin(azimuth), z], axis=1)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    return points @ q.T


def shell_scheme(n_b0: int = 4, shells: Sequence[tuple[float, int]] = ((1000, 30), (2000, 45), (3000, 60)),
                 seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A gradient scheme: ``n_b0`` b=0 volumes (zero vectors), then each (b, count) shell.

    Returns
    -------
    bvals : ndarray, shape (n,)
    bvecs : ndarray, shape (n, 3)
        Unit vectors, zero for b=0.
    """
    rng = np.random.default_rng(seed)
    bvals = [np.zeros(n_b0)]
    bvecs = [np.zeros((n_b0, 3))]
    for b, count in shells:
        bvals.append(np.full(count, float(b)))
        bvecs.append(_hemisphere(count, rng))
    return np.concatenate(bvals), np.concatenate(bvecs)


def _random_unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.standard_normal((*shape, 3))
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def dwi_phantom(shape: tuple[int, int, int], bvals: np.ndarray, bvecs: np.ndarray, snr: float | None = 30.0,
                seed: int = 0) -> dict[str, np.ndarray]:
    """DWI of a volume whose voxels are, in thirds along the first axis, mostly white matter,
    mostly grey matter and mostly CSF, the rest of each voxel the other two tissues.
    White-matter voxels hold 1, 2 or 3 fibres (in turn along the second axis) of random
    directions and weights.

    Parameters
    ----------
    shape : (X, Y, Z)
    bvals : ndarray, shape (n,)
    bvecs : ndarray, shape (n, 3)
        Unit vectors (zero for b=0), in image axes.
    snr : float or None
        b=0 white-matter signal over the noise σ; None: no noise.
    seed : int

    Returns
    -------
    dict
        ``dwi`` (X, Y, Z, n) float32; ``fractions`` (X, Y, Z, 3) WM, GM, CSF signal
        fractions at b=0; ``fibres`` (X, Y, Z, 3, 3) unit directions and ``weights``
        (X, Y, Z, 3) (0 for absent fibres).
    """
    rng = np.random.default_rng(seed)
    bvals = np.asarray(bvals, np.float64)
    bvecs = np.asarray(bvecs, np.float64)
    x = np.arange(shape[0])[:, None, None] * 3 // shape[0]
    dominant = np.broadcast_to(x, shape)
    fractions = rng.uniform(0.0, 0.15, (*shape, 3))
    dominant_fraction = rng.uniform(0.7, 1.0, shape)
    np.put_along_axis(fractions, dominant[..., None], 0.0, axis=-1)
    fractions *= ((1 - dominant_fraction) / np.maximum(fractions.sum(-1), 1e-12))[..., None]
    np.put_along_axis(fractions, dominant[..., None], dominant_fraction[..., None], axis=-1)

    n_fibres = np.broadcast_to((np.arange(shape[1]) % 3 + 1)[None, :, None], shape)
    fibres = _random_unit(rng, (*shape, 3))
    weights = rng.uniform(0.5, 1.0, (*shape, 3)) * (np.arange(3) < n_fibres[..., None])
    weights /= weights.sum(-1, keepdims=True)

    cos = np.einsum("xyzfc,nc->xyzfn", fibres, bvecs)
    fibre_signal = np.exp(-bvals * (_WM_RADIAL + (_WM_AXIAL - _WM_RADIAL) * cos ** 2))
    wm = np.einsum("xyzf,xyzfn->xyzn", weights, fibre_signal)
    signal = (fractions[..., :1] * _S0["wm"] * wm + fractions[..., 1:2] * _S0["gm"] * np.exp(-bvals * _GM_D)
              + fractions[..., 2:3] * _S0["csf"] * np.exp(-bvals * _CSF_D))
    if snr is not None:
        sigma = _S0["wm"] / snr
        signal = np.hypot(signal + sigma * rng.standard_normal(signal.shape), sigma * rng.standard_normal(signal.shape))
    return {"dwi": (_SCALE * signal).astype(np.float32), "fractions": fractions, "fibres": fibres, "weights": weights}


def tissue_responses(shell_bvalues: Sequence[float], lmax: int = 8) -> list[np.ndarray]:
    """The exact responses of the phantom's tissues, in ``dwi2response``'s layout.

    The zonal SH coefficient of degree l of an axially symmetric signal S(cos θ) is
    r_l = 2π ∫ S(x) Y_l0(x) dx over [−1, 1] (Gauss–Legendre quadrature); an isotropic
    signal s has only r_0 = √(4π) s. With them a voxel's fitted WM, GM and CSF l = 0
    coefficients are its tissue fractions times Y_00.

    Parameters
    ----------
    shell_bvalues : sequence of float
        Each shell's b-value, ascending (0 for the b=0 shell).
    lmax : int
        Degree of the white-matter response.

    Returns
    -------
    list of ndarray
        WM (n_shells, lmax / 2 + 1), GM (n_shells, 1) and CSF (n_shells, 1).
    """
    b = np.asarray(shell_bvalues, np.float64)[:, None]
    x, w = np.polynomial.legendre.leggauss(64)
    degrees = np.arange(0, lmax + 1, 2)
    legendre = np.stack([np.polynomial.legendre.Legendre.basis(l)(x) for l in degrees])
    y_l0 = np.sqrt((2 * degrees + 1) / (4 * np.pi))[:, None] * legendre
    wm = _S0["wm"] * np.exp(-b * (_WM_RADIAL + (_WM_AXIAL - _WM_RADIAL) * x ** 2))
    root = np.sqrt(4 * np.pi)
    return [_SCALE * 2 * np.pi * (wm * w) @ y_l0.T,
            _SCALE * root * _S0["gm"] * np.exp(-b * _GM_D),
            _SCALE * root * _S0["csf"] * np.exp(-b * _CSF_D)]
