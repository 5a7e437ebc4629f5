"""Unsupervised 3-tissue response functions (WM, GM, CSF) from the DWI alone, as MRtrix3's
``dwi2response dhollander``.

Dhollander, Raffelt & Connelly 2016, "Unsupervised 3-tissue response function estimation from
single-shell or multi-shell diffusion MR data without a co-registered T1 image" (ISMRM Workshop
on Breaking the Barriers of Diffusion MRI, p. 5), with the 2019 refinements MRtrix3 ships
(Dhollander et al. 2019, ISMRM 27, p. 555): the signal decay metric (SDM) separates the tissues,
FA > ``fa`` gives crude WM, SDM outliers move from WM to CSF, automatic thresholds split GM and
CSF, and the final voxels are the top ``csf`` % of refined CSF by SDM, the ``gm`` % of refined GM
closest to its median SDM, and ``sfwm`` % of refined WM ranked by their WM FOD peak fraction
(:mod:`gpu.fod.response_sfwm`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.cpu_blocks import run_in_blocks
from gpu.fod.amp2response import amp2response
from gpu.fod.masks import erode_6_connected
from gpu.fod.optimal_threshold import optimal_threshold
from gpu.fod.response_sfwm import sfwm_peak_fraction
from gpu.fod.response_tensor import tensor_fa_and_direction
from gpu.fod.response_tournier import LobePeaks
from gpu.fod.shells import BZERO_THRESHOLD, Shell, dw_shells
from gpu.fod.voxel_rows import masked_rows

__all__ = ["DhollanderResponse", "dhollander_response"]

# planes of the first axis a block of the shells' means
_MEAN_BLOCK_ROWS = 4
# MAD → standard deviation of a normal distribution; WM SDM outliers lie beyond 2 of them
_MAD_TO_SD = 1.4826
_OUTLIER_SDS = 2.0
# the largest SDM kept (MRtrix3 clamps it)
_SDM_MAX = 10.0


@dataclass(frozen=True)
class DhollanderResponse:
    """Responses (rows per shell, zonal coefficients l = 0, 2, …) and the voxels they came from."""

    wm: np.ndarray
    gm: np.ndarray
    csf: np.ndarray
    bvalues: np.ndarray
    #: (X, Y, Z, 3) bool: CSF, GM, single-fibre WM voxels (``dwi2response -voxels``'s order)
    voxels: np.ndarray


def _erode(mask: np.ndarray, passes: int) -> np.ndarray:
    """``maskfilter erode``: a voxel survives a pass when it and its 6 face neighbours are in the
    mask and it is not on the image border."""
    inner = np.zeros_like(mask)
    inner[1:-1, 1:-1, 1:-1] = True
    for _ in range(passes):
        mask = erode_6_connected(mask) & inner
    return mask


def _auto_select(values: np.ndarray, region: np.ndarray, below: bool = False) -> np.ndarray:
    """``mrthreshold -mask region`` (``-invert``: ``below``) on ``values`` inside ``region``."""
    threshold = np.float32(optimal_threshold(values[region]))
    chosen = values < threshold if below else values >= threshold
    return region & chosen


def _extreme(values: np.ndarray, region: np.ndarray, count: int, top: bool, what: str) -> np.ndarray:
    """``mrthreshold -top/-bottom count -ignorezero`` of ``values`` (zero outside ``region``)."""
    image = np.where(region, values, np.float32(0))
    data = np.sort(image[image != 0])
    if not 1 <= count <= data.size:
        raise ValueError(f"cannot select {count} {what} voxels from {data.size}; give a larger brain mask or "
                         "raise the percentage")
    if top:
        return region & (image >= data[data.size - count])
    return region & (image <= data[count - 1])


def _shell_means(dwi: np.ndarray, shells: list[Shell]) -> list[np.ndarray]:
    """Each shell's mean signal of every voxel, negative values taken as 0: float32 (X, Y, Z)
    arrays, in blocks of the first axis on every core (numpy's passes release the interpreter
    lock; each voxel's mean is the same whatever the blocks)."""
    means = [np.empty(dwi.shape[:3], np.float32) for _ in shells]
    run_in_blocks(_shell_means_block, (dwi, *means), (shells,), block_rows=_MEAN_BLOCK_ROWS)
    return means


def _shell_means_block(dwi: np.ndarray, *means_and_shells) -> None:
    *means, shells = means_and_shells
    for mean, shell in zip(means, shells):
        mean[...] = np.mean(np.maximum(dwi[..., shell.volumes], 0), axis=3, dtype=np.float64)


def _median(values: np.ndarray) -> np.float32:
    return np.float32(np.median(values))


def dhollander_response(dwi: np.ndarray, scheme: np.ndarray, mask: np.ndarray, lobe_peaks: LobePeaks, *,
                        erode: int = 3, fa: float = 0.2, sfwm: float = 0.5, gm: float = 2.0,
                        csf: float = 10.0, backend: str = "cpu") -> DhollanderResponse:
    """WM, GM and CSF responses of a DWI, as ``dwi2response dhollander`` (see the module).

    Parameters
    ----------
    dwi : (X, Y, Z, n) array
        The diffusion-weighted series.
    scheme : (n, 4) array
        MRtrix gradient scheme (:mod:`worker.io.gradients`); needs b=0 and at least one shell.
    mask : (X, Y, Z) bool array
        Brain mask.
    lobe_peaks : LobePeaks
        FOD lobes as ``fod2fixel`` segments them (:data:`gpu.fod.response_tournier.LobePeaks`),
        the first's peak for the single-fibre WM ranking at lmax 6 (at lmax 2 the largest peak
        is in closed form: :func:`gpu.fod.response_sfwm.lmax2_peak`).
    erode : int
        Erosion passes of the brain mask (``-erode``, default 3).
    fa : float
        FA threshold between crude WM and GM-CSF (``-fa``).
    sfwm, gm, csf : float
        Percentages of refined WM, GM and CSF selected (``-sfwm``, ``-gm``, ``-csf``).
    backend : {"cpu", "cuda", "auto"}
        Where the tensor fit and the single-fibre WM step's CSD run.

    Returns
    -------
    DhollanderResponse
        ``wm`` (n_shells, lmax/2 + 1) with lmax 10 (0 on b=0), ``gm`` and ``csf`` (n_shells, 1).
    """
    dwi = np.asarray(dwi, dtype=np.float32)
    mask = np.asarray(mask, dtype=bool)
    if dwi.ndim != 4 or mask.shape != dwi.shape[:3] or dwi.shape[3] != len(scheme):
        raise ValueError(f"dwi (X, Y, Z, {len(scheme)}) and mask (X, Y, Z) expected, got {dwi.shape}, {mask.shape}")
    shells = dw_shells(np.asarray(scheme)[:, 3])
    if len(shells) < 2:
        raise ValueError("dhollander needs at least 2 b-values (b=0 and a shell)")
    if not mask.any():
        raise ValueError("the brain mask holds no voxels")

    eroded = _erode(mask, erode) if erode > 0 else mask
    # signal decay metric: log(mean b0 / mean shell), averaged over shells weighted by volume count
    with np.errstate(divide="ignore", invalid="ignore"):
        means = _shell_means(dwi, shells)
        errors = np.zeros(mask.shape, dtype=bool)
        for m in means:
            errors |= np.where(np.isfinite(m), m, 0) <= 0
        weighted_volumes = sum(s.volumes.size for s in shells[1:])
        full_sdm = sum(np.log(means[0] / m).astype(np.float32) * s.volumes.size
                       for m, s in zip(means[1:], shells[1:])) / weighted_volumes
        full_sdm = full_sdm.astype(np.float32)
    errors |= np.where(np.isfinite(full_sdm), full_sdm, 0) <= 0
    safe = eroded & ~errors
    if not safe.any():
        raise ValueError("no brain-mask voxel has usable signal after erosion; give a larger mask or fewer erosions")
    sdm = np.minimum(np.where(safe, full_sdm, 0), _SDM_MAX).astype(np.float32)

    fa_map = np.zeros(mask.shape, dtype=np.float32)
    vectors = np.zeros(mask.shape + (3,))
    fa_map[safe], vectors[safe] = tensor_fa_and_direction(masked_rows(dwi, safe), scheme, backend)

    # crude segmentation
    crude_wm = safe & (fa_map > fa)
    crude_non_wm = safe & ~crude_wm
    crude_csf = _auto_select(np.where(crude_non_wm, sdm - _median(sdm[crude_non_wm]), 0), crude_non_wm)
    crude_gm = crude_non_wm & ~crude_csf
    for tissue, region in (("WM", crude_wm), ("GM", crude_gm), ("CSF", crude_csf)):
        if not region.any():
            raise ValueError(f"the eroded brain mask holds no crude {tissue} voxel; the mask must cover WM, GM "
                             "and CSF (a whole brain), or give fewer erosions")

    # refined WM: drop SDM outliers
    wm_median = _median(sdm[crude_wm])
    wm_mad = _median(np.abs(sdm - wm_median)[crude_wm])
    wm_outliers = np.where(crude_wm, sdm, 0) > wm_median + _MAD_TO_SD * wm_mad * _OUTLIER_SDS
    refined_wm = crude_wm & ~wm_outliers

    # refined GM: the core of its SDM distribution on both sides of the median
    gm_median = _median(sdm[crude_gm])
    gm_high = np.where(crude_gm, sdm, 0) > gm_median
    gm_low = crude_gm & ~gm_high
    refined_gm = (_auto_select(np.where(gm_high, sdm - gm_median, 0), gm_high, below=True)
                  | _auto_select(np.where(gm_low, gm_median - sdm, 0), gm_low, below=True))

    # refined CSF: crude CSF and the WM outliers beyond its lowest SDM, thresholded again
    csf_min = np.min(sdm[crude_csf])
    csf_extra = (np.where(wm_outliers, sdm, 0) > csf_min) | crude_csf
    refined_csf = _auto_select(np.where(csf_extra, sdm - csf_min, 0), csf_extra)

    csf_voxels = _extreme(sdm, refined_csf, int(round(refined_csf.sum() * csf / 100.0)), True, "CSF")
    gm_distance = np.abs(sdm - _median(sdm[refined_gm])) + np.float32(1)
    gm_voxels = _extreme(gm_distance, refined_gm, int(round(refined_gm.sum() * gm / 100.0)), False, "GM")

    def response(voxels: np.ndarray, isotropic: bool) -> tuple[np.ndarray, np.ndarray]:
        return amp2response(masked_rows(dwi, voxels), vectors[voxels], scheme, isotropic=isotropic)

    csf_rf, bvalues = response(csf_voxels, True)
    gm_rf, _ = response(gm_voxels, True)

    # single-fibre WM: a generic WM response (the refined WM's median mean signal, alternating
    # in sign over l) against the CSF one; the best peak fractions at lmax 2, then at lmax 6
    wm_count = int(round(refined_wm.sum() * sfwm / 100.0))
    level = float(_median(np.mean(dwi, axis=3, dtype=np.float64).astype(np.float32)[refined_wm])) * np.sqrt(4 * np.pi)
    generic = np.array([[level, 0, 0, 0] if round(b) < BZERO_THRESHOLD else [level, -level, level, -level]
                        for b in bvalues])
    candidates = refined_wm
    for lmax, count in ((2, 2 * wm_count), (6, wm_count)):
        fraction = np.zeros(mask.shape, dtype=np.float32)
        fraction[candidates] = sfwm_peak_fraction(masked_rows(dwi, candidates), scheme, generic, csf_rf, lmax,
                                                  lobe_peaks, backend)
        candidates = _extreme(fraction, candidates, count, True, "WM")
    wm_voxels = candidates
    wm_rf, _ = response(wm_voxels, False)
    return DhollanderResponse(wm_rf, gm_rf, csf_rf, bvalues, np.stack([csf_voxels, gm_voxels, wm_voxels], axis=-1))
