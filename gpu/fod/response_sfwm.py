"""Single-fibre WM voxels as ``dwi2response dhollander`` picks them (Dhollander et al. 2019,
ISMRM 27, p. 555): a two-tissue (WM, CSF) multi-shell CSD (Jeurissen et al. 2014, NeuroImage
103:411, eq. 4 with its non-negativity constraints) with a generic WM response, and each voxel's
largest WM FOD peak as a fraction of the voxel's total (WM + CSF) l=0 coefficient; the best
twice the wanted number at lmax 2, then the best of those at lmax 6.

The CSD here is a per-voxel constrained least-squares solve, enough for the few voxels of this
selection.
"""

from __future__ import annotations

import numpy as np
from scipy.special import sph_harm_y

from gpu.fod.amp2response import constrained_least_squares

__all__ = ["real_sh", "sfwm_peak_fraction"]

# non-negativity directions of the WM FOD; the peak search's starting grid
_CONSTRAINT_DIRECTIONS = 300
_SEARCH_DIRECTIONS = 1000
_SEARCH_STEPS = 40


def _sphere(n: int) -> np.ndarray:
    """``n`` near-uniform unit vectors (Fibonacci lattice) over the whole sphere."""
    k = np.arange(n) + 0.5
    z = 1 - 2 * k / n
    phi = np.pi * (1 + 5 ** 0.5) * k
    r = np.sqrt(1 - z ** 2)
    return np.column_stack([r * np.cos(phi), r * np.sin(phi), z])


def real_sh(directions: np.ndarray, lmax: int) -> np.ndarray:
    """An orthonormal real even-order SH basis at unit ``directions`` ((k, 3) → (k, n_coefs)).

    Amplitudes, peaks and the l=0 coefficient do not depend on which orthonormal real basis is
    used, so this one need not be MRtrix3's ordering or signs.
    """
    theta = np.arccos(np.clip(directions[:, 2], -1, 1))
    phi = np.arctan2(directions[:, 1], directions[:, 0])
    columns = []
    for l in range(0, lmax + 1, 2):
        for m in range(-l, l + 1):
            y = sph_harm_y(l, abs(m), theta, phi)
            if m < 0:
                columns.append(np.sqrt(2) * y.imag)
            elif m == 0:
                columns.append(y.real)
            else:
                columns.append(np.sqrt(2) * y.real)
    return np.column_stack(columns)


def _forward(scheme: np.ndarray, shells, wm_response: np.ndarray, csf_response: np.ndarray, lmax: int) -> np.ndarray:
    """Signal = Σ_l R_l sqrt(4π/(2l+1)) Σ_m f_lm Y_lm(g) for WM, plus R_0 f for CSF."""
    n_coefs = (lmax + 1) * (lmax + 2) // 2
    forward = np.zeros((scheme.shape[0], n_coefs + 1))
    degrees = np.concatenate([[l] * (2 * l + 1) for l in range(0, lmax + 1, 2)])
    for row, shell in enumerate(shells):
        dirs = scheme[shell.volumes, :3]
        norms = np.linalg.norm(dirs, axis=1, keepdims=True)
        dirs = np.where(norms > 0, dirs / np.where(norms > 0, norms, 1), [0.0, 0.0, 1.0])
        zonal = np.zeros(lmax // 2 + 1)
        width = min(zonal.size, wm_response.shape[1])
        zonal[:width] = wm_response[row, :width]
        gains = zonal[degrees // 2] * np.sqrt(4 * np.pi / (2 * degrees + 1))
        forward[shell.volumes, :n_coefs] = real_sh(dirs, lmax) * gains
        forward[shell.volumes, n_coefs] = csf_response[row, 0]
    return forward


def _largest_amplitudes(coefs: np.ndarray, lmax: int) -> np.ndarray:
    """Each FOD's largest amplitude ((V, n_coefs) → (V,)): the best of a grid of directions,
    refined by a compass search on the sphere (8 tangent steps, halved when none improves)."""
    grid = _sphere(_SEARCH_DIRECTIONS)
    values = coefs @ real_sh(grid, lmax).T
    best_index = np.argmax(values, axis=1)
    u, best = grid[best_index], values[np.arange(len(coefs)), best_index]
    step = np.full(len(coefs), np.sqrt(4 * np.pi / _SEARCH_DIRECTIONS))
    angles = np.arange(8) * np.pi / 4
    for _ in range(_SEARCH_STEPS):
        helper = np.where(np.abs(u[:, :1]) < 0.9, [[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
        e1 = np.cross(u, helper)
        e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
        e2 = np.cross(u, e1)
        tangent = np.cos(angles)[None, :, None] * e1[:, None] + np.sin(angles)[None, :, None] * e2[:, None]
        trial = np.cos(step)[:, None, None] * u[:, None] + np.sin(step)[:, None, None] * tangent
        trial_values = np.einsum("vkc,vc->vk", real_sh(trial.reshape(-1, 3), lmax).reshape(len(coefs), 8, -1), coefs)
        k = np.argmax(trial_values, axis=1)
        better = trial_values[np.arange(len(coefs)), k] > best
        u = np.where(better[:, None], trial[np.arange(len(coefs)), k], u)
        best = np.where(better, trial_values[np.arange(len(coefs)), k], best)
        step = np.where(better, step, step / 2)
    return best


def sfwm_peak_fraction(signal: np.ndarray, scheme: np.ndarray, shells, wm_response: np.ndarray,
                       csf_response: np.ndarray, lmax: int) -> np.ndarray:
    """Largest WM FOD peak amplitude over the WM + CSF l=0 coefficients, per voxel.

    Parameters
    ----------
    signal : (V, n) array
        Voxels' DWI signal.
    scheme : (n, 4) array
        MRtrix gradient scheme.
    shells : list of :class:`gpu.fod.shells.Shell`
        The scheme's shells, in the responses' row order.
    wm_response : (n_shells, k) array
        WM zonal response per shell.
    csf_response : (n_shells, 1) array
        CSF response per shell.
    lmax : int
        WM FOD lmax.

    Returns
    -------
    (V,) float64 array
    """
    forward = _forward(np.asarray(scheme, dtype=np.float64), shells, wm_response, csf_response, lmax)
    n_coefs = forward.shape[1] - 1
    constraints = np.zeros((_CONSTRAINT_DIRECTIONS + 1, n_coefs + 1))
    constraints[:-1, :n_coefs] = real_sh(_sphere(_CONSTRAINT_DIRECTIONS), lmax)
    constraints[-1, n_coefs] = 1.0
    normal = forward.T @ forward
    rhs = np.asarray(signal, dtype=np.float64) @ forward
    coefs = np.linalg.solve(normal, rhs.T).T.reshape(-1, n_coefs + 1)
    # only voxels whose unconstrained fit breaks a constraint need the constrained solve
    for v in np.flatnonzero(np.any(coefs @ constraints.T < 0, axis=1)):
        coefs[v] = constrained_least_squares(normal, rhs[v], constraints)
    total = coefs[:, 0] + coefs[:, n_coefs]
    peaks = _largest_amplitudes(coefs[:, :n_coefs], lmax)
    return np.divide(peaks, total, out=np.zeros_like(total), where=total != 0)
