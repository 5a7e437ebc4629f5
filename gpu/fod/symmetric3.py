"""Extreme eigenvalues of stacks of symmetric 3×3 matrices in closed form, as elementwise
passes (numpy's batched ``eigh`` makes a LAPACK call a matrix and holds the interpreter lock:
docs/decisions/response-tensor-fit.md)."""

from __future__ import annotations

import numpy as np

__all__ = ["extreme_eigenvalues"]


def extreme_eigenvalues(xx, yy, zz, xy, xz, yz) -> tuple[np.ndarray, np.ndarray]:
    """Largest and smallest eigenvalue of each A = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]].

    Smith 1961 (Commun. ACM 4:168): λ = q + 2p cos(φ + 2πk/3), q = tr A / 3,
    p = ‖A − qI‖_F / √6, cos 3φ = det((A − qI)/p)/2.

    Parameters
    ----------
    xx, yy, zz, xy, xz, yz : (V,) arrays
        The matrices' entries.

    Returns
    -------
    largest, smallest : (V,) float arrays
        NaN where A = qI (p = 0) or an entry is not finite.
    """
    q = (xx + yy + zz) / 3
    p = np.sqrt(((xx - q) ** 2 + (yy - q) ** 2 + (zz - q) ** 2 + 2 * (xy * xy + xz * xz + yz * yz)) / 6)
    with np.errstate(invalid="ignore", divide="ignore"):
        a, b, c = (xx - q) / p, (yy - q) / p, (zz - q) / p
        d, e, f = xy / p, xz / p, yz / p
        phi = np.arccos(np.clip(0.5 * (a * (b * c - f * f) - d * (d * c - f * e) + e * (d * f - b * e)), -1, 1)) / 3
    return q + 2 * p * np.cos(phi), q + 2 * p * np.cos(phi + 2 * np.pi / 3)
