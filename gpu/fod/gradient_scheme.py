"""A diffusion gradient scheme as MRtrix3 reads it (``DWI::get_DW_scheme``, ``core/dwi/gradient.cpp``).

Gradient directions are scaled to unit length; when any norm differs from 1 by more than
1 % in its square (a zero vector for b=0 counts), every b-value is multiplied by its
direction's squared norm, the way scanners encode several shells with one nominal b.
A direction of NaNs (as some b=0 rows of FSL bvecs hold) stands for no direction: it
becomes a zero vector, its b-value stays as it is, and it takes no part in deciding whether
to scale (MRtrix3 skips it there too, but keeps the NaNs and, where it scales, turns its b
into NaN).
"""

from __future__ import annotations

import numpy as np

__all__ = ["BVALUE_SCALING_LOG_TOLERANCE", "normalise_scheme"]

#: Largest |log ‖g‖²| left without scaling the b-values (MRtrix3's automatic b-value scaling).
BVALUE_SCALING_LOG_TOLERANCE = 0.01


def normalise_scheme(bvals: np.ndarray, bvecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit gradient directions and b-values as MRtrix3 uses them.

    Parameters
    ----------
    bvals : ndarray, shape (n,)
        b-values in s/mm².
    bvecs : ndarray, shape (n, 3)
        Gradient directions (any length; zero or NaN for b=0) in the frame the SH coefficients are
        expressed in: MRtrix3's ``dw_scheme`` frame (scanner space).

    Returns
    -------
    bvals : ndarray, shape (n,)
        b-values, scaled by ‖g‖² where MRtrix3 scales them.
    bvecs : ndarray, shape (n, 3)
        Unit directions; zero and NaN rows are zero.
    """
    bvals = np.asarray(bvals, np.float64)
    bvecs = np.asarray(bvecs, np.float64)
    if bvals.ndim != 1 or bvecs.shape != (bvals.size, 3):
        raise ValueError(f"bvals must have shape (n,) and bvecs (n, 3); got {bvals.shape} and {bvecs.shape}")
    if bvals.size == 0:
        raise ValueError("the gradient scheme is empty: give one b-value and direction per volume")
    if not np.isfinite(bvals).all() or np.isinf(bvecs).any():
        raise ValueError("the gradient scheme holds infinite or NaN b-values or infinite directions: fix the bvals/bvecs")
    given = ~np.isnan(bvecs).any(axis=1)
    unit = np.where(given[:, None], bvecs, 0.0)
    squared = np.einsum("ij,ij->i", unit, unit)
    nonzero = squared > 0
    unit[nonzero] /= np.sqrt(squared[nonzero])[:, None]
    with np.errstate(divide="ignore"):
        scale = given.any() and np.abs(np.log(squared[given])).max() > BVALUE_SCALING_LOG_TOLERANCE
    return (np.where(given, bvals * squared, bvals) if scale else bvals.copy()), unit
