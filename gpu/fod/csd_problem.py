"""Single-shell constrained spherical deconvolution (Tournier et al. 2007) as MRtrix3's
``dwi2fod csd`` sets it up (``DWI::SDeconv::CSD::Shared::init``, ``src/dwi/sdeconv/csd.h``).

Only the volumes of the highest-b shell are used. Per voxel, with s the signal, Q the
convolution matrix (SH basis at the gradient directions times the rotational harmonics),
P the SH basis at the 300 constraint directions scaled by
λ_neg · 50 r_0 / 300 and Pₙ its rows where the current estimate is below the threshold,
the estimate is iterated (Tournier et al. 2007, Eqs. 3–4, with a min-norm term)

    f ← (QᵀQ + λ_norm I + PₙᵀPₙ)⁻¹ Qᵀ s,   λ_norm = norm_lambda · 2·10⁻⁴ (QᵀQ)_00,

from a filtered linear deconvolution at the degree the data support, until the set of
negative directions repeats or 50 iterations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.fod.constraint_directions import constraint_directions
from gpu.fod.gradient_scheme import normalise_scheme
from gpu.fod.response import response_lmax, rotational_harmonics, sh_matrix
from gpu.fod.shells import dw_shells
from gpu.sh_basis import n_coeffs, sh_degrees_orders

__all__ = ["CSD_DEFAULTS", "CsdProblem", "csd_problem"]

#: dwi2fod csd's defaults.
CSD_DEFAULTS = {"lmax": 8, "neg_lambda": 1.0, "norm_lambda": 1.0, "threshold": 0.0, "niter": 50}
_NORM_LAMBDA_MULTIPLIER = 2e-4
_INIT_DIAGONAL = 1e-2


@dataclass(frozen=True)
class CsdProblem:
    """Matrices shared by every voxel.

    Attributes
    ----------
    lmax : int
    volumes : ndarray, shape (n,)
        The volumes used (the highest shell).
    init : ndarray, shape (n_init, n)
        Signal → initial SH coefficients (the first n_init of the N).
    Q : ndarray, shape (n, N)
        Convolution matrix.
    QtQ : ndarray, shape (N, N)
        QᵀQ + λ_norm I.
    P : ndarray, shape (300, N)
        Scaled constraint matrix.
    threshold : float
        Scaled amplitude threshold.
    max_iterations : int
    """

    lmax: int
    volumes: np.ndarray
    init: np.ndarray
    Q: np.ndarray
    QtQ: np.ndarray
    P: np.ndarray
    threshold: float
    max_iterations: int


def _degree_index(lmax: int) -> np.ndarray:
    return sh_degrees_orders(max(lmax, 2))[0][: n_coeffs(lmax)] // 2


def _lmax_for_count(n: int) -> int:
    """Highest even degree n directions can fit (MRtrix3's ``Math::SH::LforN``)."""
    return 2 * int((np.sqrt(np.float32(1 + 8 * n)) - 3.0) / 4.0) if n else 0


def csd_problem(bvals: np.ndarray, bvecs: np.ndarray, response: np.ndarray, lmax: int | None = None,
                neg_lambda: float = CSD_DEFAULTS["neg_lambda"], norm_lambda: float = CSD_DEFAULTS["norm_lambda"],
                threshold: float = CSD_DEFAULTS["threshold"], niter: int = CSD_DEFAULTS["niter"],
                init_filter: np.ndarray | None = None) -> CsdProblem:
    """Build the CSD problem as ``dwi2fod csd`` does.

    Parameters
    ----------
    bvals : ndarray, shape (n_volumes,)
    bvecs : ndarray, shape (n_volumes, 3)
        In the frame the SH are expressed in (:func:`gpu.fod.gradient_scheme.normalise_scheme`).
    response : ndarray, shape (n_l,) or (1, n_l)
        Zonal SH coefficients of the highest shell's response (``dwi2response tournier``).
    lmax : int, optional
        Default min(8, the response's degree).
    neg_lambda, norm_lambda, threshold, niter :
        As ``dwi2fod csd``'s options of those names.
    init_filter : ndarray, optional
        Per-degree filter of the initial linear deconvolution; default (1, 1, 1).

    Returns
    -------
    CsdProblem
    """
    r = np.atleast_2d(np.asarray(response, np.float64))
    if r.ndim != 2 or r.shape[0] != 1 or not np.isfinite(r).all():
        raise ValueError(f"csd takes a finite response of one row (the highest shell), not shape {r.shape}")
    r = r[0]  # as MRtrix3 reads it: trailing zeros still count towards its degree
    if neg_lambda < 0 or norm_lambda < 0 or not 0 <= niter <= 1000:
        raise ValueError("neg_lambda and norm_lambda must be ≥ 0 and niter in 0…1000")
    bvals, unit = normalise_scheme(bvals, bvecs)
    shells = dw_shells(bvals)
    if shells[-1].is_bzero:
        raise ValueError("the data have no b > 0 shell: csd needs diffusion-weighted volumes")
    volumes = shells[-1].volumes
    dirs = unit[volumes]
    lmax_data = _lmax_for_count(volumes.size)
    if lmax_data <= 0:
        raise ValueError(f"{volumes.size} directions are too few even for lmax 2")
    lmax_response = response_lmax(r)
    if lmax_response <= 0:
        raise ValueError("the response has no anisotropic terms (l > 0)")
    lmax = min(lmax_response, CSD_DEFAULTS["lmax"]) if lmax is None else int(lmax)
    if lmax <= 0 or lmax % 2:
        raise ValueError(f"lmax must be a positive even integer, not {lmax}")
    lmax_init = min(lmax_response, lmax_data, lmax)

    n_l = max(lmax, lmax_response) // 2 + 1
    rh = rotational_harmonics(np.pad(r, (0, n_l - r.size)))
    filt = np.zeros(lmax_init // 2 + 1)
    given = np.ones(3) if init_filter is None else np.asarray(init_filter, np.float64)
    filt[: min(filt.size, given.size)] = given[: filt.size]

    forward = sh_matrix(dirs, lmax_init)
    k = min(forward.shape)
    forward[np.arange(k), np.arange(k)] += _INIT_DIAGONAL
    if forward.shape[0] >= forward.shape[1]:
        init = np.linalg.solve(forward.T @ forward, forward.T)
    else:
        init = np.linalg.solve(forward @ forward.T, forward).T
    degree = _degree_index(lmax_init)
    init = init * (filt[degree] / rh[degree])[:, None]

    Q = sh_matrix(dirs, lmax) * rh[_degree_index(lmax)]
    P = sh_matrix(constraint_directions(), lmax)
    multiplier = neg_lambda * 50.0 * r[0] / P.shape[0]
    P *= multiplier
    QtQ = Q.T @ Q
    if norm_lambda:
        QtQ[np.diag_indices_from(QtQ)] += norm_lambda * _NORM_LAMBDA_MULTIPLIER * QtQ[0, 0]
    return CsdProblem(lmax, volumes, np.ascontiguousarray(init), np.ascontiguousarray(Q), QtQ,
                      np.ascontiguousarray(P), float(threshold * multiplier), int(niter))
