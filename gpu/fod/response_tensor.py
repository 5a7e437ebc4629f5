"""The diffusion tensor fit response estimation starts from, as MRtrix3's ``dwi2tensor``
(iteratively reweighted linear least squares, Veraart et al. 2013, NeuroImage 81:335, eq. 7:
weights first the measured signal, then twice the fitted one) and ``tensor2metric``'s FA and
principal eigenvector."""

from __future__ import annotations

import numpy as np

from gpu.cpu_blocks import run_in_blocks
from gpu.fod.symmetric3 import extreme_eigenvalues

__all__ = ["tensor_fa_and_direction"]

# dwi2tensor's default number of reweightings
_ITERATIONS = 2
# voxels a block of the fit: a fixed size, so that every run does the same arithmetic
_BLOCK = 8192


def _design(scheme: np.ndarray) -> np.ndarray:
    """log S = B p with p = (Dxx, Dyy, Dzz, Dxy, Dxz, Dyz, log S0)."""
    g, b = scheme[:, :3], scheme[:, 3]
    return np.column_stack([-b * g[:, 0] ** 2, -b * g[:, 1] ** 2, -b * g[:, 2] ** 2,
                            -2 * b * g[:, 0] * g[:, 1], -2 * b * g[:, 0] * g[:, 2], -2 * b * g[:, 1] * g[:, 2],
                            np.ones(len(b))])


def tensor_fa_and_direction(signal: np.ndarray, scheme: np.ndarray,
                            backend: str = "cpu") -> tuple[np.ndarray, np.ndarray]:
    """FA and principal eigenvector of each voxel's tensor.

    Parameters
    ----------
    signal : (V, n) array
        DWI signal of V voxels.
    scheme : (n, 4) array
        MRtrix gradient scheme (directions in scanner space).
    backend : {"cpu", "cuda", "auto"}
        Where the fit runs (:mod:`gpu.fod.tensor_kernel_cuda` on a GPU); the FA and
        eigenvectors of its parameters on the host's cores either way.

    Returns
    -------
    fa : (V,) float64 array
    direction : (V, 3) float64 array
        Unit eigenvector of the eigenvalue largest in magnitude (as tensor2metric), in the
        scheme's frame; FA 0 where the weighted normal matrix is not positive definite.
    """
    from gpu.cuda.backend import resolve_backend

    design = _design(np.asarray(scheme, dtype=np.float64))
    products = _products(design)
    signal = np.asarray(signal)
    fa, direction = np.empty(len(signal)), np.empty((len(signal), 3))
    # voxels are independent: blocks of them on every core (every pass below releases the
    # interpreter lock; numpy's batched solve does not: docs/decisions/response-tensor-fit.md)
    if resolve_backend(backend) == "cuda":
        from gpu.fod.backend_cuda import tensor_fit_cuda

        params = tensor_fit_cuda(signal, design, products, _ITERATIONS)
        run_in_blocks(_metrics_block, (params, fa, direction), block_rows=_BLOCK)
    else:
        run_in_blocks(_fit_block, (signal, fa, direction), (design, products), block_rows=_BLOCK)
    return fa, direction


def _products(design: np.ndarray) -> np.ndarray:
    """(n, k(k + 1)/2): each volume's products b_i b_j of the design's columns, i ≥ j, row by
    row (the lower triangle of b bᵀ)."""
    rows, columns = np.tril_indices(design.shape[1])
    return design[:, rows] * design[:, columns]


def _cholesky_solve(normal: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """x of normal · x = rhs for every voxel, by Cholesky (as ``dwi2tensor``'s Eigen LLT).

    Parameters
    ----------
    normal : (k(k + 1)/2, V) array
        Each voxel's symmetric positive definite matrix, its lower triangle row by row.
    rhs : (k, V) array

    Returns
    -------
    (k, V) array; NaN where a matrix is not positive definite.
    """
    k = rhs.shape[0]
    lower = [[None] * k for _ in range(k)]
    entry = 0
    for i in range(k):
        for j in range(i + 1):
            value = normal[entry].copy()
            for m in range(j):
                value -= lower[i][m] * lower[j][m]
            lower[i][j] = np.sqrt(value) if i == j else value / lower[j][j]
            entry += 1
    forward = []
    for i in range(k):
        value = rhs[i].copy()
        for m in range(i):
            value -= lower[i][m] * forward[m]
        forward.append(value / lower[i][i])
    x = [None] * k
    for i in reversed(range(k)):
        value = forward[i]
        for m in range(i + 1, k):
            value = value - lower[m][i] * x[m]
        x[i] = value / lower[i][i]
    return np.array(x)


def _fit_block(signal: np.ndarray, fa: np.ndarray, direction: np.ndarray, design: np.ndarray,
               products: np.ndarray) -> None:
    """:func:`tensor_fa_and_direction` of a block of voxels, into its rows of ``fa`` and
    ``direction``. Voxels along the last axis of every array below, so that each pass over a
    matrix entry is one contiguous run."""
    # volume-major whatever the caller's layout, so that the products below are the same bytes
    signal = np.array(np.asarray(signal, dtype=np.float64).T, order="C")
    # dwi2tensor floors the signal at 1e-6 of the voxel's largest value before the log
    floor = 1e-6 * signal.max(axis=0)
    signal = np.where(signal < floor, floor, signal)
    weights = signal
    with np.errstate(invalid="ignore", divide="ignore"):  # a voxel of zeros: FA 0 below
        log_signal = np.log(signal)
        for _ in range(_ITERATIONS + 1):
            squared = weights * weights
            # (W B)ᵀ (W B) = Σ_n w_n² b_n b_nᵀ for every voxel at once: one product with the
            # volumes' outer products, not W B formed voxel by voxel. numpy's own loops, not
            # BLAS: a BLAS with a thread per core, called from every core at once, took twice
            # as long, and its rounding may follow its thread count
            params = _cholesky_solve(np.einsum("ne,nv->ev", products, squared),
                                     np.einsum("nk,nv->kv", design, squared * log_signal))
            weights = np.exp(np.einsum("nk,kv->nv", design, params))
    _metrics_block(params.T, fa, direction)


def _metrics_block(params: np.ndarray, fa: np.ndarray, direction: np.ndarray) -> None:
    """FA and principal eigenvector (``fa`` (B,), ``direction`` (B, 3)) of a block of fitted
    parameters ``params`` (B, 7); FA 0 where they are not finite."""
    params = np.where(np.isfinite(params).all(axis=1, keepdims=True), params, 0.0)
    xx, yy, zz, xy, xz, yz = params[:, :6].T
    numerator = (xx - yy) ** 2 + (yy - zz) ** 2 + (zz - xx) ** 2 + 6 * (xy ** 2 + xz ** 2 + yz ** 2)
    denominator = xx ** 2 + yy ** 2 + zz ** 2 + 2 * (xy ** 2 + xz ** 2 + yz ** 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        fa[:] = np.where(denominator > 0, np.sqrt(0.5 * numerator / denominator), 0.0)
    direction[:] = _principal_eigenvector(xx, yy, zz, xy, xz, yz)


def _principal_eigenvector(xx, yy, zz, xy, xz, yz) -> np.ndarray:
    """Unit eigenvector (V, 3) of the eigenvalue largest in magnitude of each symmetric 3×3
    matrix A = [[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]] (arrays (V,)).

    Elementwise passes rather than numpy's batched ``eigh``, a LAPACK call a matrix, which
    also slowed each other down from every core at once (docs/decisions/response-tensor-fit.md).
    The extreme eigenvalues in closed form (:func:`gpu.fod.symmetric3.extreme_eigenvalues`);
    λ's eigenvector is orthogonal to every row of A − λI, so it is the longest cross product
    of two rows (a column of the adjugate). That product is as long as the gap to the nearest
    other eigenvalue times ‖A − λI‖; where the gap is under 1e-3 of ‖A − λI‖ the closed form's
    λ loses digits the direction needs, and those voxels (a repeated eigenvalue, A = λI, a zero
    tensor) take ``eigh``.
    """
    largest, smallest = extreme_eigenvalues(xx, yy, zz, xy, xz, yz)
    value = np.where(np.abs(largest) >= np.abs(smallest), largest, smallest)
    m00, m11, m22 = xx - value, yy - value, zz - value
    crosses = np.array([[xy * yz - xz * m11, xz * xy - m00 * yz, m00 * m11 - xy * xy],
                        [xy * m22 - xz * yz, xz * xz - m00 * m22, m00 * yz - xy * xz],
                        [m11 * m22 - yz * yz, yz * xz - xy * m22, xy * yz - m11 * xz]])
    lengths = np.einsum("cjv,cjv->cv", crosses, crosses)
    best = np.argmax(lengths, axis=0)
    voxels = np.arange(len(best))
    vector = crosses[best, :, voxels]
    row_length = np.maximum.reduce([m00 * m00 + xy * xy + xz * xz, xy * xy + m11 * m11 + yz * yz,
                                    xz * xz + yz * yz + m22 * m22])
    # squared lengths: the product under 1e-3 of the largest row's squared length, squared
    with np.errstate(invalid="ignore"):
        close = ~(lengths[best, voxels] >= 1e-6 * row_length * row_length)
    if close.any():
        tensors = np.stack([np.stack([xx, xy, xz], -1), np.stack([xy, yy, yz], -1), np.stack([xz, yz, zz], -1)], -2)
        values, vectors = np.linalg.eigh(tensors[close])
        vector[close] = np.take_along_axis(vectors, np.argmax(np.abs(values), axis=1)[:, None, None], axis=2)[:, :, 0]
    return vector / np.linalg.norm(vector, axis=1, keepdims=True)
