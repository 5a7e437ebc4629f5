"""What compression does to diffusion measures: DTI (FA, MD) and CSD peaks fitted with DIPY
on the original and the decompressed DWI, and their differences.

DTI: weighted least squares (DIPY ``TensorModel``, Basser, Mattiello & LeBihan 1994; Chung,
Lu & Henry 2006). Peaks: single-shell CSD (Tournier et al. 2007, DIPY
``ConstrainedSphericalDeconvModel``) on the b=0 volumes and the highest shell, the response
from the original by ``auto_response_ssst``, up to 3 peaks at half the largest amplitude and
25° apart (``peaks_from_model``). Both fits use the same response and mask (voxels whose mean
b=0 signal exceeds a fifth of its 99th percentile in the original).

Reported: median |ΔFA| and median |ΔMD| (mm²/s) over the mask, the share of mask voxels where
both have the same number of fibres, and the 95th percentile of the angle (degrees, axial)
between each original peak and the nearest decompressed one, over voxels with fibres in both.
"""

from __future__ import annotations

import numpy as np

__all__ = ["dwi_differences"]

_SHELL_GAP = 100.0  # b-values closer than this belong to one shell (s/mm²)


def _fit_peaks(data, gtab, mask, response):
    from dipy.data import default_sphere
    from dipy.direction import peaks_from_model
    from dipy.reconst.csdeconv import ConstrainedSphericalDeconvModel

    model = ConstrainedSphericalDeconvModel(gtab, response, sh_order_max=6)
    peaks = peaks_from_model(model, data, default_sphere, 0.5, 25, mask=mask, return_sh=False, npeaks=3,
                             legacy=False)
    return peaks.peak_dirs, np.count_nonzero(peaks.peak_values > 0, axis=-1)


def _angles(dirs_a, count_a, dirs_b, count_b) -> np.ndarray:
    """Per original peak, the axial angle (degrees) to the nearest peak of the other fit."""
    both = (count_a > 0) & (count_b > 0)
    a, b = dirs_a[both], dirs_b[both]
    valid_b = np.arange(b.shape[1])[None, :] < count_b[both][:, None]
    cosines = np.abs(np.einsum("vpk,vqk->vpq", a, b))
    cosines = np.where(valid_b[:, None, :], cosines, 0.0).max(axis=2)
    valid_a = np.arange(a.shape[1])[None, :] < count_a[both][:, None]
    return np.degrees(np.arccos(np.clip(cosines[valid_a], 0.0, 1.0)))


def dwi_differences(original: np.ndarray, decoded: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray) -> dict:
    """Differences of DTI and CSD-peak measures between two DWI series.

    Parameters
    ----------
    original, decoded : (X, Y, Z, n) arrays
        The DWI series before and after compression.
    bvals : (n,) array, s/mm²
    bvecs : (n, 3) array, unit vectors in the image's voxel axes (FSL/DIPY convention)

    Returns
    -------
    dict
        ``fa_median_abs_diff``, ``md_median_abs_diff`` (mm²/s), ``fibre_count_agreement``
        (0–1), ``peak_angle_p95`` (degrees), ``voxels``.
    """
    from dipy.core.gradients import gradient_table
    from dipy.reconst.csdeconv import auto_response_ssst
    from dipy.reconst.dti import TensorModel

    original = np.asarray(original, dtype=np.float64)
    decoded = np.asarray(decoded, dtype=np.float64)
    bvals = np.asarray(bvals, dtype=np.float64)
    if original.ndim != 4 or original.shape != decoded.shape or original.shape[3] != len(bvals):
        raise ValueError(f"DWI report: need two 4D series of equal shape with one b-value per volume, got "
                         f"{original.shape}, {decoded.shape} and {len(bvals)} b-values")
    gtab = gradient_table(bvals, bvecs=np.asarray(bvecs, dtype=np.float64))
    b0 = original[..., gtab.b0s_mask].mean(axis=-1)
    mask = b0 > 0.2 * np.percentile(b0, 99)
    tensors = TensorModel(gtab)
    fits = [tensors.fit(d, mask=mask) for d in (original, decoded)]
    fa = [np.nan_to_num(f.fa)[mask] for f in fits]
    md = [np.nan_to_num(f.md)[mask] for f in fits]

    top = bvals.max()
    keep = gtab.b0s_mask | (np.abs(bvals - top) < _SHELL_GAP)
    shell = gradient_table(bvals[keep], bvecs=np.asarray(bvecs, dtype=np.float64)[keep])
    response, _ = auto_response_ssst(shell, original[..., keep], roi_radii=10, fa_thr=0.7)
    (dirs_a, count_a), (dirs_b, count_b) = (_fit_peaks(d[..., keep], shell, mask, response)
                                            for d in (original, decoded))
    angles = _angles(dirs_a[mask], count_a[mask], dirs_b[mask], count_b[mask])
    return {
        "fa_median_abs_diff": float(np.median(np.abs(fa[0] - fa[1]))),
        "md_median_abs_diff": float(np.median(np.abs(md[0] - md[1]))),
        "fibre_count_agreement": float(np.mean(count_a[mask] == count_b[mask])),
        "peak_angle_p95": float(np.percentile(angles, 95)) if angles.size else 0.0,
        "voxels": int(mask.sum()),
    }
