"""A brain mask from the DWI alone, as MRtrix3's ``dwi2mask`` (3.0) makes it
(``Filter::DWIBrainMask``): each shell's mean image (b=0 too; values ≤ 0 count as 0)
thresholded at its optimal threshold (Ridgway et al. 2009, NeuroImage 47:S98), the union
cleaned by a 3×3×3 median, kept to its largest 6-connected component, and its holes filled.
``dwi2response`` makes the mask it selects voxels in so when none is given.
"""

from __future__ import annotations

import numpy as np

from gpu.fod.masks import fill_holes, largest_6_connected, median_3x3x3
from gpu.fod.optimal_threshold import optimal_threshold
from gpu.fod.shells import dw_shells

__all__ = ["dwi_brain_mask"]


def dwi_brain_mask(dwi: np.ndarray, bvals: np.ndarray) -> np.ndarray:
    """``dwi2mask`` of a DWI series (see the module).

    Parameters
    ----------
    dwi : (X, Y, Z, n) array
    bvals : (n,) array
        The volumes' b-values.

    Returns
    -------
    (X, Y, Z) bool array
    """
    dwi = np.asarray(dwi)
    mask = np.zeros(dwi.shape[:3], dtype=bool)
    for shell in dw_shells(np.asarray(bvals, np.float64)):
        total = np.zeros(dwi.shape[:3])
        for volume in shell.volumes:
            values = dwi[..., volume]
            total += np.where(values > 0, values, 0)
        mean = (total / shell.volumes.size).astype(np.float32)
        with np.errstate(invalid="ignore"):
            mask |= np.isfinite(mean) & (mean > np.float32(optimal_threshold(mean)))
    return fill_holes(largest_6_connected(median_3x3x3(mask)))
