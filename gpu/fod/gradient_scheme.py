"""A diffusion gradient scheme as MRtrix3 reads it (``DWI::get_DW_scheme``, ``core/dwi/gradient.cpp``).

Gradient directions are scaled to unit length; when any norm differs from 1 by more than
1 % in its square (a zero vector for b=0 counts), every b-value is multiplied by its
direction's squared norm, the way scanners encode several shells with one nominal b.
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
        Gradient directions (any length; zero for b=0) in the frame the SH coefficients are
        expressed in: MRtrix3's ``dw_scheme`` frame (scanner space).

    Returns
    -------
    bvals : ndarray, shape (n,)
        b-values, scaled by ‖g‖² where MRtrix3 scales them.
    bvecs : ndarray, shape (n, 3)
        Unit directions; zero rows stay zero.
    """
    bvals = np.asarray(bvals, np.float64)
    bvecs = np.asarray(bvecs, np.float64)
    if bvals.ndim != 1 or bvecs.shape != (bvals.size, 3):
        raise ValueError(f"bvals must have shape (n,) and bvecs (n, 3); got {bvals.shape} and {bvecs.shape}")
    if bvals.size == 0:
        raise ValueError("the gradient scheme is empty: give one b-value and direction per volume")
    if not (np.isfinite(bvals).all() and np.isfinite(bvecs).all()):
        raise ValueError("the gradient scheme holds non-finite numbers: fix the bvals/bvecs")
    squared = np.einsum("ij,ij->i", bvecs, bvecs)
    nonzero = squared > 0
    unit = bvecs.copy()
    unit[nonzero] /= np.sqrt(squared[nonzero])[:, None]
    with np.errstate(divide="ignore"):
        scale = np.abs(np.log(squared)).max() > BVALUE_SCALING_LOG_TOLERANCE
    return (bvals * squared if scale else bvals.copy()), unit
