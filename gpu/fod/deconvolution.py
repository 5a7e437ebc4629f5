"""FODs from diffusion-weighted images: ``dwi2fod csd`` (Tournier et al. 2007) and
``dwi2fod msmt_csd`` (Jeurissen et al. 2014) of MRtrix3, on the CPU or a CUDA GPU."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.fod.csd_problem import CSD_DEFAULTS, csd_problem
from gpu.fod.msmt_problem import DEFAULT_NEG_LAMBDA, DEFAULT_NORM_LAMBDA, msmt_problem

__all__ = ["msmt_csd", "csd"]


def _voxels(dwi: np.ndarray, n_volumes: int, mask: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Flat indices of the voxels to fit and their signals (n, n_volumes)."""
    dwi = np.asarray(dwi)
    if dwi.ndim < 1 or dwi.shape[-1] != n_volumes:
        raise ValueError(f"the DWI's last axis has {dwi.shape[-1] if dwi.ndim else 0} volumes but the gradient "
                         f"scheme {n_volumes}: give one b-value and direction per volume")
    flat = dwi.reshape(-1, n_volumes)
    if mask is None:
        index = np.arange(flat.shape[0])
    else:
        mask = np.asarray(mask)
        if mask.shape != dwi.shape[:-1]:
            raise ValueError(f"the mask has shape {mask.shape} but the DWI's voxels {dwi.shape[:-1]}")
        index = np.flatnonzero(mask.reshape(-1))
    return index, flat[index]


def _solve(kind: str, problem, signals: np.ndarray, backend: str):
    if resolve_backend(backend) == "cuda":
        from gpu.fod import backend_cuda

        return getattr(backend_cuda, f"{kind}_cuda")(problem, signals)
    from gpu.fod import backend_cpu

    return getattr(backend_cpu, f"{kind}_cpu")(problem, signals)


def msmt_csd(dwi: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray, responses: Sequence[np.ndarray],
             lmax: Sequence[int] | None = None, mask: np.ndarray | None = None, *,
             norm_lambda: float = DEFAULT_NORM_LAMBDA, neg_lambda: float = DEFAULT_NEG_LAMBDA,
             backend: str = "cpu") -> list[np.ndarray]:
    """Multi-shell multi-tissue CSD (Jeurissen et al. 2014, Eq. 3) as ``dwi2fod msmt_csd``.

    Parameters
    ----------
    dwi : ndarray, shape (..., n_volumes)
    bvals : ndarray, shape (n_volumes,)
    bvecs : ndarray, shape (n_volumes, 3)
        Gradient directions in the frame the SH are expressed in: MRtrix3's ``dw_scheme``
        frame (scanner space; image axes for an image whose transform is the identity).
    responses : sequence of ndarray, each (n_shells, n_l)
        Per tissue (e.g. WM, GM, CSF), as ``dwi2response`` writes them.
    lmax : sequence of int, optional
        Per tissue; default min(8, the response's degree).
    mask : ndarray of bool, shape (...), optional
        Voxels to fit; the others are 0.
    norm_lambda, neg_lambda : float
        As ``dwi2fod msmt_csd``.
    backend : {"cpu", "cuda", "auto"}
        ``auto``: CUDA when a GPU is usable.

    Returns
    -------
    list of ndarray, each (..., (lmax_t + 1)(lmax_t + 2) / 2) float32
        Each tissue's SH coefficients (MRtrix3 basis), as ``dwi2fod`` writes them.
    """
    problem = msmt_problem(bvals, bvecs, responses, lmax, norm_lambda, neg_lambda)
    index, signals = _voxels(dwi, problem.H.shape[0], mask)
    x, _ = _solve("msmt_csd", problem, signals, backend)
    shape = np.asarray(dwi).shape[:-1]
    out, start = [], 0
    for count in problem.n_coeffs:
        volume = np.zeros((int(np.prod(shape)), count), np.float32)
        volume[index] = x[:, start:start + count]
        out.append(volume.reshape(*shape, count))
        start += count
    return out


def csd(dwi: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray, response: np.ndarray, lmax: int | None = None,
        mask: np.ndarray | None = None, *, neg_lambda: float = CSD_DEFAULTS["neg_lambda"],
        norm_lambda: float = CSD_DEFAULTS["norm_lambda"], threshold: float = CSD_DEFAULTS["threshold"],
        niter: int = CSD_DEFAULTS["niter"], backend: str = "cpu") -> np.ndarray:
    """Single-shell CSD (Tournier et al. 2007) as ``dwi2fod csd``: the highest shell only.

    Parameters
    ----------
    dwi : ndarray, shape (..., n_volumes)
    bvals : ndarray, shape (n_volumes,)
    bvecs : ndarray, shape (n_volumes, 3)
        As for :func:`msmt_csd`.
    response : ndarray, shape (n_l,)
        Zonal SH coefficients of the highest shell's response (``dwi2response tournier``).
    lmax : int, optional
        Default min(8, the response's degree).
    mask : ndarray of bool, shape (...), optional
        Voxels to fit; the others are 0.
    neg_lambda, norm_lambda, threshold, niter :
        As ``dwi2fod csd``.
    backend : {"cpu", "cuda", "auto"}
        ``auto``: CUDA when a GPU is usable.

    Returns
    -------
    ndarray, shape (..., (lmax + 1)(lmax + 2) / 2) float32
    """
    problem = csd_problem(bvals, bvecs, response, lmax, neg_lambda, norm_lambda, threshold, niter)
    index, signals = _voxels(dwi, np.asarray(bvals).size, mask)
    f, _ = _solve("csd", problem, signals[:, problem.volumes], backend)
    shape = np.asarray(dwi).shape[:-1]
    volume = np.zeros((int(np.prod(shape)), f.shape[1]), np.float32)
    volume[index] = f
    return volume.reshape(*shape, f.shape[1])
