"""Single-fibre WM voxels as ``dwi2response dhollander`` picks them (Dhollander et al. 2019,
ISMRM 27, p. 555): a two-tissue (WM, CSF) multi-shell CSD (:func:`gpu.fod.deconvolution.msmt_csd`,
Jeurissen et al. 2014, NeuroImage 103:411, Eq. 3) with a generic WM response, and each voxel's
largest WM FOD peak as a fraction of the voxel's total (WM + CSF) l=0 coefficient; the best
twice the wanted number at lmax 2, then the best of those at lmax 6 (``dhollander.py`` of
MRtrix3 3.0, its built-in single-fibre WM step, which takes the peak from ``sh2peaks -num 1``).
At lmax 2 the FOD on the unit sphere is a quadratic form uᵀQu, so its largest peak is Q's
largest eigenvalue, in closed form; at lmax 6, the first lobe's peak
(docs/decisions/response-sfwm-peak.md).
"""

from __future__ import annotations

import numpy as np

from gpu.fod.deconvolution import msmt_csd
from gpu.fod.response_tournier import LobePeaks
from gpu.fod.symmetric3 import extreme_eigenvalues
from gpu.sh_basis import real_sh_matrix

__all__ = ["sfwm_peak_fraction", "lmax2_peak"]


def sfwm_peak_fraction(signal: np.ndarray, scheme: np.ndarray, wm_response: np.ndarray, csf_response: np.ndarray,
                       lmax: int, lobe_peaks: LobePeaks, backend: str = "cpu") -> np.ndarray:
    """Largest WM FOD peak amplitude over the WM + CSF l=0 coefficients, per voxel.

    Parameters
    ----------
    signal : (V, n) array
        Voxels' DWI signal.
    scheme : (n, 4) array
        MRtrix gradient scheme.
    wm_response : (n_shells, k) array
        WM zonal response per shell.
    csf_response : (n_shells, 1) array
        CSF response per shell.
    lmax : int
        WM FOD lmax.
    lobe_peaks : LobePeaks
        FOD lobes' peak amplitudes (the first lobe's is the largest peak, as ``sh2peaks -num 1``),
        for lmax above 2.
    backend : {"cpu", "cuda", "auto"}
        Where the CSD runs.

    Returns
    -------
    (V,) float32 array
    """
    scheme = np.asarray(scheme, dtype=np.float64)
    wm, csf = msmt_csd(signal, scheme[:, 3], scheme[:, :3], [wm_response, csf_response], [lmax, 0],
                       backend=backend)
    total = wm[:, 0] + csf[:, 0]
    peak = lmax2_peak(wm) if lmax == 2 else lobe_peaks(wm)[0]
    return np.divide(peak, total, out=np.zeros_like(total), where=total != 0)


# The sphere's points where the quadratic monomials (x², y², z², 2xy, 2xz, 2yz) are solved
# for: the axes and the diagonals of the coordinate planes (an invertible 6 × 6 system).
_AXES_AND_DIAGONALS = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 0], [1, 0, 1], [0, 1, 1]], dtype=np.float64)


def lmax2_peak(sh: np.ndarray) -> np.ndarray:
    """Largest amplitude of lmax-2 FODs on the sphere, 0 where no amplitude is positive.

    The span of the l ≤ 2 even SH on the unit sphere is that of the quadratic monomials, so
    the FOD is uᵀQu with Q symmetric, and its largest peak (``sh2peaks -num 1``'s, which a
    Newton search converges to) is Q's largest eigenvalue.

    Parameters
    ----------
    sh : (V, 6) array
        MRtrix-basis SH coefficients, lmax 2.

    Returns
    -------
    (V,) float32 array
    """
    directions = _AXES_AND_DIAGONALS / np.linalg.norm(_AXES_AND_DIAGONALS, axis=1, keepdims=True)
    x, y, z = directions.T
    monomials = np.column_stack([x * x, y * y, z * z, 2 * x * y, 2 * x * z, 2 * y * z])
    # Q's entries (xx, yy, zz, xy, xz, yz) from the coefficients: Y(u) c = monomials(u) q
    to_quadratic = np.linalg.solve(monomials, real_sh_matrix(2, directions))
    # einsum's own loops, not BLAS: the bytes never depend on the BLAS or its threads
    entries = np.einsum("vc,qc->vq", np.asarray(sh, dtype=np.float64), to_quadratic)
    largest, _ = extreme_eigenvalues(*entries.T)
    # p = 0 (Q = qI, an isotropic FOD) leaves NaN: its amplitude is q everywhere
    largest = np.where(np.isnan(largest), entries[:, :3].sum(axis=1) / 3, largest)
    with np.errstate(invalid="ignore"):
        return np.where(largest > 0, largest, 0).astype(np.float32)
