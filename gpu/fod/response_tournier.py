"""Single-fibre WM response by iterative voxel selection, as MRtrix3's ``dwi2response tournier``.

Tournier, Calamante & Connelly 2013 (NMR Biomed 26:1775, Sec. 2.3), as MRtrix3 3.0 runs it on
the highest b-value shell alone: from the response ``1 -1 1`` (lmax 4), repeat

1. CSD of the voxels under test (:func:`gpu.fod.deconvolution.csd`, ``dwi2fod csd``);
2. per voxel the peak amplitudes p₁, p₂ of its first two FOD lobes and the first lobe's
   direction (``fod2fixel -fmls_no_thresholds``, given by the caller as ``lobe_peaks``);
3. rank the voxels by √p₁ (1 − p₂/p₁)² (the cost of MRtrix3 pull request 426) and keep the
   ``number`` best as single-fibre voxels;
4. fit the response to them (:func:`gpu.fod.amp2response.amp2response`; lmax 4 on the first
   pass);
5. stop when the single-fibre voxels are those of the pass before; else test next the
   ``iter_voxels`` best, dilated ``dilate`` times within the mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from gpu.fod.amp2response import amp2response
from gpu.fod.deconvolution import csd
from gpu.fod.masks import dilate_6_connected
from gpu.fod.shells import dw_shells
from gpu.fod.voxel_rows import masked_rows

__all__ = ["TOURNIER_DEFAULTS", "LobePeaks", "TournierResponse", "tournier_response"]

#: dwi2response tournier's defaults (iter_voxels 0: ten times number).
TOURNIER_DEFAULTS = {"number": 300, "iter_voxels": 0, "dilate": 1, "max_iters": 10}

#: (V, n_coeffs) MRtrix3-basis SH → (p₁ (V,), p₂ (V,), first lobe's direction (V, 3)): the peak
#: amplitudes of each FOD's first two lobes in ``fod2fixel``'s order (0 where there is none).
LobePeaks = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]]

# the response the first pass deconvolves with, and its lmax
_INITIAL_RESPONSE = np.array([[1.0, -1.0, 1.0]])
_INITIAL_LMAX = 4


@dataclass(frozen=True)
class TournierResponse:
    """The WM response (1, lmax/2 + 1) of the shell at ``bvalue``, the single-fibre ``voxels``
    (X, Y, Z) bool it came from, the passes run and whether the selection converged."""

    wm: np.ndarray
    bvalue: float
    voxels: np.ndarray
    iterations: int
    converged: bool


def _top(cost: np.ndarray, count: int) -> np.ndarray:
    """``mrthreshold -top count``: the ``count`` largest finite values (ties at the last kept)."""
    finite = np.isfinite(cost)
    if not finite.any():
        return finite
    ordered = np.sort(cost[finite])
    return finite & (cost >= ordered[max(0, ordered.size - count)])


def tournier_response(dwi: np.ndarray, scheme: np.ndarray, mask: np.ndarray, lobe_peaks: LobePeaks, *,
                      lmax: int | None = None, number: int = 300, iter_voxels: int = 0, dilate: int = 1,
                      max_iters: int = 10, backend: str = "cpu") -> TournierResponse:
    """The single-fibre WM response of a DWI's highest shell (see the module).

    Parameters
    ----------
    dwi : (X, Y, Z, n) array
    scheme : (n, 4) array
        MRtrix gradient scheme (:mod:`worker.io.gradients`).
    mask : (X, Y, Z) bool array
        Voxels to select from.
    lobe_peaks : LobePeaks
        FOD lobes as ``fod2fixel -fmls_no_thresholds`` segments them.
    lmax : int, optional
        Even lmax of the response (``-lmax``); default amp2response's (10).
    number, iter_voxels, dilate, max_iters : int
        As ``dwi2response tournier``'s options (:data:`TOURNIER_DEFAULTS`).
    backend : {"cpu", "cuda", "auto"}
        Where the CSD runs.

    Returns
    -------
    TournierResponse
    """
    dwi = np.asarray(dwi, dtype=np.float32)
    mask = np.asarray(mask, dtype=bool)
    scheme = np.asarray(scheme, dtype=np.float64)
    if dwi.ndim != 4 or mask.shape != dwi.shape[:3] or dwi.shape[3] != len(scheme):
        raise ValueError(f"dwi (X, Y, Z, {len(scheme)}) and mask (X, Y, Z) expected, got {dwi.shape}, {mask.shape}")
    if max_iters < 2:
        raise ValueError("the number of iterations (max_iters) must be at least 2")
    if number < 1:
        raise ValueError("the number of single-fibre voxels must be at least 1")
    if dilate < 0:
        raise ValueError(f"the number of dilation passes (dilate) must be at least 0, not {dilate}")
    iter_voxels = iter_voxels or 10 * number
    if iter_voxels < number:
        raise ValueError(f"iter_voxels ({iter_voxels}) must be at least the number of single-fibre voxels "
                         f"({number})")
    shell = dw_shells(scheme[:, 3])[-1]
    if shell.is_bzero:
        raise ValueError("the DWI has no b > 0 shell")
    if not mask.any():
        raise ValueError("the mask holds no voxels")
    signal, shell_scheme = dwi[..., shell.volumes], scheme[shell.volumes]
    response, response_lmax = _INITIAL_RESPONSE, [_INITIAL_LMAX]
    tested, previous = mask, None
    for iteration in range(max_iters):
        fods = csd(masked_rows(signal, tested), shell_scheme[:, 3], shell_scheme[:, :3], response, backend=backend)
        first, second, direction = lobe_peaks(fods)
        with np.errstate(divide="ignore", invalid="ignore"):
            scores = np.sqrt(first) * (1.0 - second / first) ** 2
        cost = np.full(mask.shape, np.nan, np.float32)
        cost[tested] = scores
        selected = _top(cost, number)
        if not selected.any():
            raise ValueError("no voxel under test has a positive FOD lobe: check the DWI's scaling and the mask")
        directions = np.zeros(mask.shape + (3,))
        directions[tested] = direction
        response, _ = amp2response(signal[selected], directions[selected], shell_scheme, lmax=response_lmax)
        response_lmax = None if lmax is None else [lmax]
        if previous is not None and np.array_equal(selected, previous):
            return TournierResponse(response, shell.mean_b, selected, iteration + 1, True)
        previous = selected
        tested = _top(cost, iter_voxels)
        if dilate:
            tested = dilate_6_connected(tested, iterations=dilate)
        tested &= mask
    return TournierResponse(response, shell.mean_b, previous, max_iters, False)
