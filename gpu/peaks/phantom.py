"""Synthetic fiber orientation distributions with known fibers (a phantom).

Each voxel holds 1–3 fibers; fiber i contributes w_i·K(x·d_i), an axially symmetric lobe
about its direction d_i. In SH, by the Funk–Hecke theorem, the lobe's coefficients are
c_lm = w_i · k_l · Y_lm(d_i), with the degree profile k_l = exp(−l(l+1)/(2s)) (a heat-kernel
lobe of sharpness s, about as sharp as a CSD FOD at b = 3000). Gaussian noise is added to
the coefficients. The ground truth is the fiber directions themselves.

``relative_noise`` adds the noise of low-SNR data, grey matter or unconstrained fits
(CSA/Q-ball ODFs): on every coefficient, of every SH order, a standard deviation
proportional to the voxel's own l = 0 coefficient. It raises many small noise lobes, which
is what makes a peak search climb more (python3 -m bench.peaks noisy).
"""

from __future__ import annotations

import numpy as np

from gpu.sh_basis import n_coeffs, real_sh_matrix, sh_degrees_orders

__all__ = ["fod_phantom", "random_directions"]


def random_directions(count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` unit vectors uniform on the sphere."""
    v = rng.normal(size=(count, 3))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def fod_phantom(
    shape: tuple[int, ...],
    lmax: int = 8,
    *,
    basis: str = "mrtrix",
    fiber_fractions: tuple[float, float, float] = (0.4, 0.4, 0.2),
    min_separation: float = 45.0,
    min_weight: float = 0.5,
    sharpness: float = 30.0,
    noise: float = 0.02,
    relative_noise: float = 0.0,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """A phantom FOD volume of spatial ``shape``.

    Returns ``sh`` (*shape, n_coeffs) float32 in ``basis``; ``directions`` (*shape, 3, 3)
    with the true fibers sorted by weight (NaN past ``count``); ``weights`` (*shape, 3);
    ``count`` (*shape) uint8. Fibers in a voxel are at least ``min_separation`` degrees
    apart; weights are 1 for the first fiber and uniform in [min_weight, 1] for the others;
    ``noise`` is the standard deviation of the coefficient noise relative to the l = 0
    coefficient of a single fiber; ``relative_noise`` that of further noise relative to the
    voxel's own noise-free l = 0 coefficient (0 leaves the phantom of a given seed as it was).
    """
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    counts = rng.choice([1, 2, 3], size=n, p=fiber_fractions).astype(np.uint8)
    directions = np.full((n, 3, 3), np.nan)
    weights = np.full((n, 3), np.nan)
    cos_sep = np.cos(np.radians(min_separation))
    directions[:, 0] = random_directions(n, rng)
    weights[:, 0] = 1.0
    for fiber in (1, 2):
        todo = np.flatnonzero(counts > fiber)
        while todo.size:
            candidate = random_directions(todo.size, rng)
            ok = np.ones(todo.size, bool)
            for previous in range(fiber):
                ok &= np.abs((candidate * directions[todo, previous]).sum(axis=1)) < cos_sep
            directions[todo[ok], fiber] = candidate[ok]
            weights[todo[ok], fiber] = rng.uniform(min_weight, 1.0, size=int(ok.sum()))
            todo = todo[~ok]
    order = np.argsort(-np.nan_to_num(weights, nan=-1.0), axis=1, kind="stable")
    weights = np.take_along_axis(weights, order, axis=1)
    directions = np.take_along_axis(directions, order[:, :, None], axis=1)

    degrees, _ = sh_degrees_orders(lmax)
    profile = np.exp(-degrees * (degrees + 1) / (2.0 * sharpness))
    sh = np.zeros((n, n_coeffs(lmax)))
    for fiber in range(3):
        present = np.flatnonzero(counts > fiber)
        basis_rows = real_sh_matrix(lmax, directions[present, fiber], basis)
        sh[present] += weights[present, fiber, None] * basis_rows * profile[None, :]
    single_l0 = profile[0] * real_sh_matrix(lmax, np.array([[0.0, 0.0, 1.0]]), basis)[0, 0]
    clean_l0 = sh[:, :1].copy()
    sh += rng.normal(scale=noise * single_l0, size=sh.shape)
    if relative_noise:
        sh += rng.normal(scale=relative_noise, size=sh.shape) * clean_l0
    return {
        "sh": sh.astype(np.float32).reshape(*shape, -1),
        "directions": directions.astype(np.float32).reshape(*shape, 3, 3),
        "weights": weights.astype(np.float32).reshape(*shape, 3),
        "count": counts.reshape(shape),
    }
