"""Single-fibre WM voxels as ``dwi2response dhollander`` picks them (Dhollander et al. 2019,
ISMRM 27, p. 555): a two-tissue (WM, CSF) multi-shell CSD (:func:`gpu.fod.deconvolution.msmt_csd`,
Jeurissen et al. 2014, NeuroImage 103:411, Eq. 3) with a generic WM response, and each voxel's
largest WM FOD peak as a fraction of the voxel's total (WM + CSF) l=0 coefficient; the best
twice the wanted number at lmax 2, then the best of those at lmax 6 (``dhollander.py`` of
MRtrix3 3.0, its built-in single-fibre WM step).
"""

from __future__ import annotations

import numpy as np

from gpu.fod.deconvolution import msmt_csd
from gpu.fod.response_tournier import LobePeaks

__all__ = ["sfwm_peak_fraction"]


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
        FOD lobes' peak amplitudes (the first lobe's is the largest peak, as ``sh2peaks -num 1``).
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
    peak = lobe_peaks(wm)[0]
    return np.divide(peak, total, out=np.zeros_like(total), where=total != 0)
