"""Response functions and the spherical convolution they define, as MRtrix3 builds it.

A response file holds, per shell (rows, in the order of :func:`gpu.fod.shells.dw_shells`),
the zonal (m = 0) SH coefficients r_l of the signal of one fibre along z (columns
l = 0, 2, 4, …). Convolving an FOD f_lm with it gives the signal (Tournier et al. 2004,
Eq. 6; Jeurissen et al. 2014, Eq. 2)

    s_lm = R_l f_lm,  R_l = r_l / Y_l0(z) = r_l √(4π / (2l + 1)),

R_l being the rotational harmonics. The signal of volume v of shell s is then
Σ_lm Y_lm(g_v) R_l^(s) f_lm: one row of the convolution matrix.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from gpu.sh_basis import n_coeffs, real_sh_matrix, sh_degrees_orders

__all__ = ["sh_matrix", "trim_response", "response_lmax", "rotational_harmonics", "convolution_matrix",
           "mean_response"]


def sh_matrix(directions: np.ndarray, lmax: int) -> np.ndarray:
    """MRtrix3's SH basis at ``directions``, as ``Math::SH::init_transform`` with its NaN
    entries zeroed, as ``dwi2fod msmt_csd`` does.

    Parameters
    ----------
    directions : ndarray, shape (n, 3)
        Unit vectors; a zero row (a b=0 volume without direction) gives Y_00 and zeros.
    lmax : int
        Even, ≥ 0.

    Returns
    -------
    ndarray, shape (n, (lmax + 1)(lmax + 2) / 2), float64
    """
    directions = np.asarray(directions, np.float64)
    out = np.zeros((directions.shape[0], n_coeffs(lmax)))
    out[:, 0] = 0.5 / np.sqrt(np.pi)
    if lmax == 0:
        return out
    valid = np.einsum("ij,ij->i", directions, directions) > 0
    if valid.any():
        out[valid] = real_sh_matrix(max(lmax, 2), directions[valid], "mrtrix")[:, : n_coeffs(lmax)]
    return out


def trim_response(response: np.ndarray) -> np.ndarray:
    """A response as a (n_shells, n_l) float64 matrix without trailing all-zero columns
    (MRtrix3's ``prepare_responses``); a single row may come as a vector."""
    r = np.atleast_2d(np.asarray(response, np.float64))
    if r.ndim != 2 or not np.isfinite(r).all():
        raise ValueError(f"a response must be a finite (n_shells, n_l) matrix of zonal SH coefficients; got shape {r.shape}")
    nonzero = np.flatnonzero((r != 0).any(axis=0))
    return r[:, : (nonzero[-1] + 1 if nonzero.size else 0)]


def response_lmax(response: np.ndarray) -> int:
    """The SH degree of a trimmed response: 2 (n_l − 1), 0 for an empty one."""
    n = response.shape[-1]
    return 2 * (n - 1) if n else 0


def mean_response(responses: Sequence[np.ndarray]) -> np.ndarray:
    """The group's response, as MRtrix3's ``responsemean`` (its default, not ``-legacy``):
    each response scaled by the geometric mean over shells of (the group's mean l = 0 term ÷
    its own), then averaged, so that subjects whose signal is globally brighter or darker
    shape the group's response without weighting it.

    Parameters
    ----------
    responses : sequence of (n_shells, n_l) arrays
        The subjects' responses, each the same shape, every l = 0 term positive.

    Returns
    -------
    (n_shells, n_l) float64 array
    """
    matrices = [np.atleast_2d(np.asarray(r, np.float64)) for r in responses]
    if not matrices or matrices[0].ndim != 2 or any(m.shape != matrices[0].shape for m in matrices):
        raise ValueError("responses of one shape, (n_shells, n_l), are needed")
    stack = np.asarray(matrices)
    lzero = stack[:, :, 0]
    if not (np.isfinite(stack).all() and (lzero > 0).all()):
        raise ValueError("every response needs finite coefficients and a positive l = 0 term on every shell")
    # responsemean's operations, term by term in the subjects' order: the same bytes
    mean_lzero = [sum(float(subject[row]) for subject in lzero) / len(stack) for row in range(stack.shape[1])]
    total = np.zeros(stack.shape[1:])
    for subject, own in zip(stack, lzero):
        logs = [math.log(mean / value) for mean, value in zip(mean_lzero, own.tolist())]
        multiplier = math.exp(sum(logs) / stack.shape[1])
        total = total + multiplier * subject
    return total / len(stack)


def rotational_harmonics(zonal: np.ndarray) -> np.ndarray:
    """R_l = r_l / Y_l0(z) for zonal coefficients ``zonal`` (..., n_l), l = 0, 2, …
    (MRtrix3's ``Math::ZSH::ZSH2RH``)."""
    zonal = np.asarray(zonal, np.float64)
    degrees = 2 * np.arange(zonal.shape[-1])
    return zonal * np.sqrt(4 * np.pi / (2 * degrees + 1))


def convolution_matrix(directions: np.ndarray, shell_volumes: list[np.ndarray], response: np.ndarray,
                       lmax: int) -> np.ndarray:
    """The signal of each volume given one tissue's FOD: A[v] = Y(g_v) · R^(shell of v).

    Parameters
    ----------
    directions : ndarray, shape (n_volumes, 3)
        Unit gradient directions.
    shell_volumes : list of ndarray
        The volumes of each shell, in the response's row order; volumes in no shell get
        a zero row.
    response : ndarray, shape (n_shells, n_l)
        Zonal SH coefficients per shell, padded with zeros or cut to lmax / 2 + 1 columns.
    lmax : int
        The tissue's SH degree (0 for an isotropic tissue).

    Returns
    -------
    ndarray, shape (n_volumes, (lmax + 1)(lmax + 2) / 2), float64
    """
    n_l = lmax // 2 + 1
    padded = np.zeros((response.shape[0], n_l))
    keep = min(n_l, response.shape[1])
    padded[:, :keep] = response[:, :keep]
    rh = rotational_harmonics(padded)
    degree_index = sh_degrees_orders(max(lmax, 2))[0][: n_coeffs(lmax)] // 2
    basis = sh_matrix(directions, lmax)
    out = np.zeros_like(basis)
    for volumes, row in zip(shell_volumes, rh):
        out[volumes] = basis[volumes] * row[degree_index]
    return out
