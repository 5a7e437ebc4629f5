"""The diffusion tensor fit response estimation starts from, as MRtrix3's ``dwi2tensor``
(iteratively reweighted linear least squares, Veraart et al. 2013, NeuroImage 81:335, eq. 7:
weights first the measured signal, then twice the fitted one) and ``tensor2metric``'s FA and
principal eigenvector."""

from __future__ import annotations

import numpy as np

from gpu.cpu_blocks import run_in_blocks

__all__ = ["tensor_fa_and_direction"]

# dwi2tensor's default number of reweightings
_ITERATIONS = 2
# voxels a block of the fit: a fixed size, so that every run does the same arithmetic
_BLOCK = 8192


def _design(scheme: np.ndarray) -> np.ndarray:
    """log S = B p with p = (Dxx, Dyy, Dzz, Dxy, Dxz, Dyz, log S0)."""
    g, b = scheme[:, :3], scheme[:, 3]
    return np.column_stack([-b * g[:, 0] ** 2, -b * g[:, 1] ** 2, -b * g[:, 2] ** 2,
                            -2 * b * g[:, 0] * g[:, 1], -2 * b * g[:, 0] * g[:, 2], -2 * b * g[:, 1] * g[:, 2],
                            np.ones(len(b))])


def tensor_fa_and_direction(signal: np.ndarray, scheme: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """FA and principal eigenvector of each voxel's tensor.

    Parameters
    ----------
    signal : (V, n) array
        DWI signal of V voxels.
    scheme : (n, 4) array
        MRtrix gradient scheme (directions in scanner space).

    Returns
    -------
    fa : (V,) float64 array
    direction : (V, 3) float64 array
        Unit eigenvector of the eigenvalue largest in magnitude (as tensor2metric), in the
        scheme's frame.
    """
    design = _design(np.asarray(scheme, dtype=np.float64))
    signal = np.asarray(signal)
    fa, direction = np.empty(len(signal)), np.empty((len(signal), 3))
    # voxels are independent: blocks of them on every core (numpy's passes release the lock)
    run_in_blocks(_fit_block, (signal, fa, direction), (design,), block_rows=_BLOCK)
    return fa, direction


def _fit_block(signal: np.ndarray, fa: np.ndarray, direction: np.ndarray, design: np.ndarray) -> None:
    """:func:`tensor_fa_and_direction` of a block of voxels, into its rows of ``fa`` and
    ``direction``."""
    # C order whatever the caller's layout, so that the products below are the same bytes
    signal = np.ascontiguousarray(signal, dtype=np.float64)
    # dwi2tensor floors the signal at 1e-6 of the voxel's largest value before the log
    floor = 1e-6 * signal.max(axis=1, keepdims=True)
    signal = np.where(signal < floor, floor, signal)
    log_signal = np.log(signal)
    weights = signal
    k = design.shape[1]
    # (W B)ᵀ (W B) = Σ_n w_n² b_n b_nᵀ for every voxel at once: one matrix product with the
    # volumes' outer products b_n b_nᵀ, not W B formed voxel by voxel
    outer = (design[:, :, None] * design[:, None, :]).reshape(len(design), k * k)
    for _ in range(_ITERATIONS + 1):
        squared = weights * weights
        normal = (squared @ outer).reshape(-1, k, k)
        rhs = (squared * log_signal) @ design  # (W B)ᵀ W log S
        params = np.linalg.solve(normal, rhs[:, :, None])[:, :, 0]
        weights = np.exp(params @ design.T)
    xx, yy, zz, xy, xz, yz = params[:, :6].T
    tensors = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1), np.stack([xz, yz, zz], -1)], -2)
    values, vectors = np.linalg.eigh(tensors)
    numerator = (xx - yy) ** 2 + (yy - zz) ** 2 + (zz - xx) ** 2 + 6 * (xy ** 2 + xz ** 2 + yz ** 2)
    denominator = xx ** 2 + yy ** 2 + zz ** 2 + 2 * (xy ** 2 + xz ** 2 + yz ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        fa[:] = np.where(denominator > 0, np.sqrt(0.5 * numerator / denominator), 0.0)
    direction[:] = np.take_along_axis(vectors, np.argmax(np.abs(values), axis=1)[:, None, None], axis=2)[:, :, 0]
