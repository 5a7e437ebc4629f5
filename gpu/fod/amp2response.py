"""Axially symmetric response functions from single-fibre voxels, as MRtrix3's ``amp2response``.

Each selected voxel's signal on a shell is expressed against the angle between each gradient
direction and the voxel's fibre direction, and one zonal spherical harmonic (ZSH) series per
shell is fitted to all voxels at once (Tournier et al. 2013, NeuroImage 76:49, section 2.3;
MRtrix3 ``cmd/amp2response.cpp``). Anisotropic shells are fitted by least squares constrained
so the response is non-negative and non-decreasing from the fibre axis to its equator
(amplitudes and elevation derivatives ≥ 0 at 1° steps, 0°–90°); b=0 and isotropic shells
by ordinary least squares.
"""

from __future__ import annotations

import numpy as np

from gpu.fod.dense_solvers import nonnegative_least_squares, solve_positive_definite, solve_triangular
from gpu.fod.shells import BZERO_THRESHOLD, dw_shells
from gpu.sh_basis import legendre_sph

__all__ = ["constrained_least_squares", "zsh_amplitudes", "zsh_elevation_derivatives", "amp2response"]

# the default lmax of anisotropic shells: the fit pools voxels, so directions do not limit it
_DEFAULT_LMAX = 10


def zsh_amplitudes(cos_elevation: np.ndarray, lmax: int) -> np.ndarray:
    """Zonal SH → amplitude: ``sqrt((2l+1)/4π) P_l(cos θ)`` for even ``l ≤ lmax``, which is the
    orthonormalised P̄_l^0 of :func:`gpu.sh_basis.legendre_sph`.

    Parameters
    ----------
    cos_elevation : (k,) array
    lmax : int, even

    Returns
    -------
    (k, lmax/2 + 1) array
    """
    return legendre_sph(lmax, 0, np.asarray(cos_elevation, dtype=np.float64))[::2].T


def zsh_elevation_derivatives(elevation: np.ndarray, lmax: int) -> np.ndarray:
    """d/dθ of :func:`zsh_amplitudes` for θ in [0, π]: ``sqrt((2l+1)/4π) P_l^1(cos θ)``
    (the associated Legendre function with the Condon-Shortley phase is ``-sin θ P_l'``), which is
    ``sqrt(l(l+1))`` times the orthonormalised P̄_l^1 of :func:`gpu.sh_basis.legendre_sph`.

    Parameters
    ----------
    elevation : (k,) array
        θ in radians.
    lmax : int, even

    Returns
    -------
    (k, lmax/2 + 1) array
    """
    ls = np.arange(0, lmax + 1, 2)
    x = np.cos(np.asarray(elevation, dtype=np.float64))
    # P̄_l^1 = sqrt((2l+1)/4π · (l−1)!/(l+1)!) P_l^1; rows l < 1 are zero
    return (np.sqrt(ls * (ls + 1.0))[:, None] * legendre_sph(max(lmax, 1), 1, x)[:lmax + 1:2]).T


def constrained_least_squares(normal: np.ndarray, rhs: np.ndarray, constraints: np.ndarray) -> np.ndarray:
    """argmin ½xᵀMx − bᵀx subject to Cx ≥ 0, as least distance programming solved by NNLS
    (Lawson & Hanson 1974, Solving Least Squares Problems, ch. 23, eqs. 23.3–23.7).

    Parameters
    ----------
    normal : (k, k) array
        M, positive definite (the normal matrix AᵀA of a least-squares problem).
    rhs : (k,) array
        b (Aᵀy).
    constraints : (c, k) array
        C.

    Returns
    -------
    (k,) float64 array
    """
    lower = np.linalg.cholesky(normal)
    y0 = solve_triangular(lower, rhs, lower=True)  # ½‖Lᵀx − y0‖² is the objective
    g = solve_triangular(lower, constraints.T, lower=True).T  # C L⁻ᵀ
    x0 = solve_triangular(lower.T, y0, lower=False)
    h = -constraints @ x0
    if np.all(h <= 0):  # the unconstrained optimum is feasible
        return x0
    n = normal.shape[0]
    # LDP: min ‖z‖ s.t. Gz ≥ h, z = Lᵀx − y0, from the NNLS residual of [Gᵀ; hᵀ] u ≈ e_{n+1}
    e = np.vstack([g.T, h[None, :]])
    f = np.zeros(n + 1)
    f[n] = 1.0
    u = nonnegative_least_squares(e, f, maxiter=50 * e.shape[1])
    r = e @ u - f
    z = -r[:n] / r[n]
    return solve_triangular(lower.T, z + y0, lower=False)


def amp2response(signal: np.ndarray, fibre_dirs: np.ndarray, scheme: np.ndarray, *,
                 lmax: list[int] | None = None, isotropic: bool = False,
                 constrained: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Per-shell zonal response coefficients of the selected voxels' signal.

    Tournier et al. 2013 (NeuroImage 76:49), eq. 4 fitted in the ZSH basis: for voxel ``v``
    with fibre direction ``f_v`` and gradient direction ``g_i`` on shell ``s``,
    ``S_v(g_i) ≈ Σ_l R_{s,l} sqrt((2l+1)/4π) P_l(|g_i·f_v|)``.

    Parameters
    ----------
    signal : (V, n) array
        The selected voxels' DWI signal, volumes in scheme order.
    fibre_dirs : (V, 3) array
        Each voxel's fibre direction in the scheme's frame (need not be unit; unused, and may
        be zero, when ``isotropic``).
    scheme : (n, 4) array
        MRtrix gradient scheme (``x y z b``; :mod:`worker.io.gradients`).
    lmax : list of int, optional
        Even lmax per shell; default 0 for a b=0 shell and 10 for the others, as MRtrix3.
    isotropic : bool
        Fit lmax 0 on every shell (``-isotropic``).
    constrained : bool
        Non-negative, monotonic fit (False: ``-noconstraint``).

    Returns
    -------
    response : (n_shells, max_lmax/2 + 1) float64 array
        Zonal coefficients l = 0, 2, … per shell, zero-padded to the largest lmax.
    bvalues : (n_shells,) float64 array
        Each shell's mean b.
    """
    signal = np.asarray(signal, dtype=np.float64)
    scheme = np.asarray(scheme, dtype=np.float64)
    if signal.ndim != 2 or signal.shape[1] != scheme.shape[0] or signal.shape[0] == 0:
        raise ValueError(f"signal must be (voxels ≥ 1, {scheme.shape[0]} volumes), not {signal.shape}")
    fibre = np.asarray(fibre_dirs, dtype=np.float64)
    if fibre.shape != (signal.shape[0], 3):
        raise ValueError(f"fibre_dirs must be ({signal.shape[0]}, 3), not {fibre.shape}")
    lengths = np.linalg.norm(fibre, axis=1, keepdims=True)
    if not isotropic and not np.all(lengths > 0):
        raise ValueError("every voxel needs a non-zero fibre direction for an anisotropic response")
    fibre = fibre / np.where(lengths > 0, lengths, 1.0)
    shells = dw_shells(scheme[:, 3])
    if isotropic:
        lmax = [0] * len(shells)
    elif lmax is None:
        lmax = [0 if (i == 0 and s.is_bzero) else _DEFAULT_LMAX for i, s in enumerate(shells)]
    elif len(lmax) != len(shells) or any(l < 0 or l % 2 for l in lmax):
        raise ValueError(f"lmax needs one even value ≥ 0 per shell ({len(shells)}), not {lmax}")
    if isotropic or (len(shells) == 1 and shells[0].is_bzero):
        width = 1
    else:
        width = max(lmax) // 2 + 1
    response = np.zeros((len(shells), width))
    for row, (shell, shell_lmax) in enumerate(zip(shells, lmax)):
        dirs = scheme[shell.volumes, :3]
        dirs = dirs / np.where(np.linalg.norm(dirs, axis=1, keepdims=True) > 0,
                               np.linalg.norm(dirs, axis=1, keepdims=True), 1.0)
        # |cos| folds each direction into the fibre's hemisphere: even l only
        cosines = np.abs(fibre @ dirs.T).ravel()
        transform = zsh_amplitudes(cosines, shell_lmax)
        amplitudes = signal[:, shell.volumes].ravel()
        normal = transform.T @ transform
        rhs = transform.T @ amplitudes
        if shell_lmax == 0 or not constrained:
            coefs = solve_positive_definite(normal, rhs)
        else:
            elevations = np.deg2rad(np.arange(91.0))
            limits = np.vstack([zsh_amplitudes(np.cos(elevations), shell_lmax),
                                zsh_elevation_derivatives(elevations, shell_lmax)])
            coefs = constrained_least_squares(normal, rhs, limits)
        response[row, :coefs.size] = coefs
    return response, np.array([s.mean_b for s in shells])
