"""FODs from diffusion-weighted images: ``dwi2fod csd`` (Tournier et al. 2007) and
``dwi2fod msmt_csd`` (Jeurissen et al. 2014) of MRtrix3, on the CPU or a CUDA GPU; and the
signal fitted FODs predict (``dwi2fod msmt_csd -predicted_signal``)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.fod.csd_problem import CSD_DEFAULTS, csd_problem
from gpu.fod.msmt_problem import DEFAULT_NEG_LAMBDA, DEFAULT_NORM_LAMBDA, msmt_problem
from gpu.fod.voxel_rows import rows_by_volume

__all__ = ["msmt_csd", "csd", "msmt_predicted_signal", "csd_predicted_signal", "prediction_bytes"]

#: Voxels whose prediction a thread forms at a time: rows of this many in float64, one block a
#: core at once, bound the memory (:func:`prediction_bytes`).
PREDICT_BLOCK_VOXELS = 2048


def _voxels(dwi: np.ndarray, n_volumes: int, mask: np.ndarray | None, backend: str = "cpu"
            ) -> tuple[np.ndarray, np.ndarray, str]:
    """Flat indices of the voxels to fit, their signals (n, n_volumes), and the order of the
    indices: "F" (x fastest) for a DWI stored a volume at a time, as NIfTI stores it, whose
    volumes are then read each along its run (not copied whole into voxel-major order, as a
    C-order view would); "C" otherwise. The signals are float64, or for the CUDA backend
    float32 where that holds the DWI's values exactly (float32 or narrower): the kernels widen
    them as they read, and the copy to the GPU is half as large; and for it in page-locked
    memory, which the driver copies by DMA (docs/decisions/pinned-host-transfers.md)."""
    dwi = np.asarray(dwi)
    if dwi.ndim < 1 or dwi.shape[-1] != n_volumes:
        raise ValueError(f"the DWI's last axis has {dwi.shape[-1] if dwi.ndim else 0} volumes but the gradient "
                         f"scheme {n_volumes}: give one b-value and direction per volume")
    # docs/decisions/fod-volume-order-read.md
    order = "F" if dwi.ndim > 1 and dwi.flags.f_contiguous and not dwi.flags.c_contiguous else "C"
    n_voxels = dwi.size // max(n_volumes, 1)
    if mask is None:
        index = np.arange(n_voxels)
    else:
        mask = np.asarray(mask)
        if mask.shape != dwi.shape[:-1]:
            raise ValueError(f"the mask has shape {mask.shape} but the DWI's voxels {dwi.shape[:-1]}")
        index = np.flatnonzero(mask.reshape(-1, order=order))
    dtype, empty = np.float64, np.empty
    if backend == "cuda":
        from gpu.cuda.host_memory import pinned_empty as empty

        if np.result_type(dwi.dtype, np.float32) == np.float32:
            dtype = np.float32
    signals = empty((index.size, n_volumes), dtype)
    if order == "F":
        signals[...] = rows_by_volume(dwi, index)
    else:
        signals[...] = dwi.reshape(-1, n_volumes)[index]
    return index, signals, order


def _image(values: np.ndarray, index: np.ndarray, shape: tuple[int, ...], order: str) -> np.ndarray:
    """The (n, count) values of the voxels ``index`` (flat, in ``order``) as a float32 image
    (*shape, count), zero elsewhere, laid out in that order (F: a volume at a time)."""
    count = values.shape[1]
    if order == "F":
        volumes = np.zeros((count, int(np.prod(shape))), np.float32)
        volumes[:, index] = values.T
        return volumes.T.reshape(*shape, count, order="F")
    volume = np.zeros((int(np.prod(shape)), count), np.float32)
    volume[index] = values
    return volume.reshape(*shape, count)


def _solve(kind: str, problem, signals: np.ndarray, backend: str):
    if backend == "cuda":
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
    backend = resolve_backend(backend)
    index, signals, order = _voxels(dwi, problem.H.shape[0], mask, backend)
    x, _ = _solve("msmt_csd", problem, signals, backend)
    shape = np.asarray(dwi).shape[:-1]
    ends = np.cumsum(problem.n_coeffs)
    return [_image(x[:, end - count:end], index, shape, order) for count, end in zip(problem.n_coeffs, ends)]


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
    backend = resolve_backend(backend)
    index, signals, order = _voxels(dwi, np.asarray(bvals).size, mask, backend)
    f, _ = _solve("csd", problem, signals[:, problem.volumes], backend)
    return _image(f, index, np.asarray(dwi).shape[:-1], order)


def msmt_predicted_signal(fods: Sequence[np.ndarray], bvals: np.ndarray, bvecs: np.ndarray,
                          responses: Sequence[np.ndarray], lmax: Sequence[int] | None = None,
                          mask: np.ndarray | None = None) -> np.ndarray:
    """The signal that MSMT-CSD compartments predict, H x (Jeurissen et al. 2014, Eq. 3):
    ``dwi2fod msmt_csd -predicted_signal``, whose difference from the DWI is the fit's
    residual.

    Parameters
    ----------
    fods : sequence of ndarray, each (..., (lmax_t + 1)(lmax_t + 2) / 2)
        Each tissue's SH coefficients (MRtrix3 basis), as :func:`msmt_csd` returns them.
    bvals, bvecs, responses, lmax :
        As :func:`msmt_csd` was given them.
    mask : ndarray of bool, shape (...), optional
        Voxels to predict; the others are 0.

    Returns
    -------
    ndarray, shape (..., n_volumes) float32
        Laid out as ``fods[0]`` (a volume at a time where it is).
    """
    problem = msmt_problem(bvals, bvecs, responses, lmax)
    if tuple(f.shape[-1] for f in fods) != problem.n_coeffs:
        raise ValueError(f"the FODs have {[f.shape[-1] for f in fods]} coefficients but the tissues' lmax "
                         f"{list(problem.lmax)} take {list(problem.n_coeffs)}")
    return _predict(fods, problem.H, np.arange(problem.H.shape[0]), problem.H.shape[0], mask)


def csd_predicted_signal(fod: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray, response: np.ndarray,
                         lmax: int | None = None, mask: np.ndarray | None = None) -> np.ndarray:
    """The signal a CSD FOD predicts in the volumes it was fitted to (the highest shell),
    Q f (Tournier et al. 2007, Eq. 3); 0 in the other volumes.

    Parameters
    ----------
    fod : ndarray, shape (..., (lmax + 1)(lmax + 2) / 2)
        SH coefficients (MRtrix3 basis), as :func:`csd` returns them.
    bvals, bvecs, response, lmax :
        As :func:`csd` was given them.
    mask : ndarray of bool, shape (...), optional
        Voxels to predict; the others are 0.

    Returns
    -------
    ndarray, shape (..., n_volumes) float32
    """
    problem = csd_problem(bvals, bvecs, response, lmax)
    if fod.shape[-1] != problem.Q.shape[1]:
        raise ValueError(f"the FOD has {fod.shape[-1]} coefficients but lmax {problem.lmax} takes "
                         f"{problem.Q.shape[1]}")
    return _predict([fod], problem.Q, problem.volumes, np.asarray(bvals).size, mask)


def prediction_bytes(n_voxels: int, n_coeffs: int, n_volumes: int, threads: int) -> int:
    """Most memory :func:`msmt_predicted_signal` and :func:`csd_predicted_signal` hold, in bytes,
    for ``n_voxels`` voxels (each counted as masked), ``n_coeffs`` coefficients in all and
    ``n_volumes`` volumes on ``threads`` threads: the image and the masked voxels' values in
    float32, and a block of rows a thread in float32 and float64 with its products."""
    return n_voxels * n_volumes * 8 + threads * PREDICT_BLOCK_VOXELS * (n_coeffs * 12 + n_volumes * 8)


def _predict(fods: Sequence[np.ndarray], forward: np.ndarray, volumes: np.ndarray, n_volumes: int,
             mask: np.ndarray | None) -> np.ndarray:
    """``forward`` (len(volumes), N) times each voxel's coefficients, the tissues' side by
    side, into ``volumes`` of an (..., n_volumes) float32 image laid out as ``fods[0]``: a
    block of voxels a thread (:func:`gpu.cpu_blocks.run_in_blocks`), each summed in float64 by
    numpy's own loops, not BLAS, whose sums depend on its thread count."""
    from gpu.cpu_blocks import run_in_blocks

    shape = fods[0].shape[:-1]
    order = "F" if fods[0].ndim > 1 and fods[0].flags.f_contiguous and not fods[0].flags.c_contiguous else "C"
    index = (np.arange(int(np.prod(shape))) if mask is None
             else np.flatnonzero(np.asarray(mask).reshape(-1, order=order)))
    values = np.zeros((index.size, n_volumes), np.float32)
    run_in_blocks(_predict_block, (index, values), (fods, forward, volumes, order), PREDICT_BLOCK_VOXELS)
    return _image(values, index, shape, order)


def _predict_block(index: np.ndarray, values: np.ndarray, fods: Sequence[np.ndarray], forward: np.ndarray,
                   volumes: np.ndarray, order: str) -> None:
    rows = np.concatenate([rows_by_volume(f, index) if order == "F" else f.reshape(-1, f.shape[-1])[index]
                           for f in fods], axis=1)
    values[:, volumes] = np.einsum("vn,kn->vk", rows.astype(np.float64), forward)
