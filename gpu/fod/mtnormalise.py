"""Multi-tissue log-domain intensity normalisation, as MRtrix3's ``mtnormalise`` (3.0;
Raffelt et al. 2017, ISMRM 25:3541; Dhollander et al. 2021, ISMRM 29:2472).

Within a mask, the voxel-wise sum of the tissue compartments (each one's l = 0 term), each
weighted by a balance factor, is driven to a reference value by a smooth field: the field's
logarithm is a polynomial of the scanner coordinates (order 3: 20 terms), fitted by least
squares to log(sum) − log(reference) over the voxels that are not outliers. Each of
``iterations`` passes first alternates, up to ``balance_iterations`` times while the outliers
change, the balance factors (least squares of the field-corrected compartments against 1,
scaled to a geometric mean of 1) and the outliers (log-sums beyond 1.5 interquartile ranges
of the quartiles; 3 before the first pass), then fits the field. Each compartment is then
divided by the field, over the whole image.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["MtNormalisation", "mtnormalise", "REFERENCE"]

#: The SH DC term of a unit angular integral: what the compartments' sum is normalised to.
REFERENCE = 0.28209479177


@dataclass(frozen=True)
class MtNormalisation:
    """``field`` (X, Y, Z) float32, what each compartment is divided by; ``balance`` (n,) the
    tissues' balance factors; ``kept`` (X, Y, Z) bool, the mask less its final outliers;
    ``lognorm_scale``, the field's geometric mean over ``kept``."""

    field: np.ndarray
    balance: np.ndarray
    kept: np.ndarray
    lognorm_scale: float


def _basis(positions: np.ndarray, order: int) -> np.ndarray:
    """The polynomial terms of ``mtnormalise``'s field at scanner positions (V, 3), in its order."""
    x, y, z = positions.T
    terms = [np.ones_like(x)]
    if order >= 1:
        terms += [x, y, z]
    if order >= 2:
        terms += [x * x, y * y, z * z, x * y, x * z, y * z]
    if order >= 3:
        terms += [x * x * x, y * y * y, z * z * z, x * x * y, x * x * z, y * y * x, y * y * z, z * z * x, z * z * y,
                  x * y * z]
    return np.stack(terms, axis=1)


def _positions(index: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """Scanner coordinates (V, 3) of voxel indices (V, 3)."""
    return index @ affine[:3, :3].T + affine[:3, 3]


def _order_statistics(values: np.ndarray, ranks: tuple[int, ...]) -> list[float]:
    """The values of ranks ``ranks`` with NaN ordered first (``mtnormalise``'s nth_element), from
    one partition."""
    nan = np.isnan(values)
    count = int(nan.sum())
    finite = values[~nan] if count else values
    wanted = sorted({rank - count for rank in ranks if rank >= count})
    ordered = np.partition(finite, wanted) if wanted else finite
    return [float("nan") if rank < count else float(ordered[rank - count]) for rank in ranks]


def _outliers(data, field, balance, weights, spread: float) -> tuple[np.ndarray, int]:
    """Voxels whose log of the balanced, field-corrected sum lies within ``spread`` interquartile
    ranges of its quartiles (weight 1), and how many weights changed."""
    with np.errstate(divide="ignore", invalid="ignore"):
        summed_log = np.log((data @ balance) / field)
    size = field.size
    lower, upper = _order_statistics(summed_log, (int(np.round(size * 0.25)), int(np.round(size * 0.75))))
    low, high = lower - spread * (upper - lower), upper + spread * (upper - lower)
    with np.errstate(invalid="ignore"):
        kept = (np.isfinite(summed_log) & (summed_log >= low) & (summed_log <= high)).astype(np.float64)
    return kept, int(np.count_nonzero(kept != weights))


def _balance(data, field, weights) -> np.ndarray:
    scaled = data / field[:, None]
    scaled[weights == 0] = 0.0
    lower = np.linalg.cholesky(scaled.T @ scaled)
    factors = np.linalg.solve(lower.T, np.linalg.solve(lower, scaled.sum(axis=0)))
    if not np.all(np.isfinite(factors)) or np.any(factors <= 0):
        raise ValueError(f"a non-positive tissue balance factor was computed ({factors}); check the mask covers "
                         "brain tissue and the compartments are a multi-tissue fit's")
    return factors / np.exp(np.log(factors).sum() / data.shape[1])


def _field(log_reference, basis, data, balance, weights) -> tuple[np.ndarray, np.ndarray]:
    total = data @ balance
    with np.errstate(divide="ignore", invalid="ignore"):
        logsum = np.where(total > 0, weights * (np.log(total) - log_reference), 0.0)
    weighted = basis * weights[:, None]
    lower = np.linalg.cholesky(weighted.T @ weighted)
    coefficients = np.linalg.solve(lower.T, np.linalg.solve(lower, basis.T @ logsum))
    return coefficients, np.exp(basis @ coefficients)


def mtnormalise(compartments: list[np.ndarray], mask: np.ndarray, affine: np.ndarray, *, order: int = 3,
                iterations: int = 15, balance_iterations: int = 7, reference: float = REFERENCE) -> MtNormalisation:
    """The normalisation field of tissue compartments (see the module).

    Parameters
    ----------
    compartments : list of (X, Y, Z) arrays
        Each tissue's l = 0 term (the WM FOD's first volume, GM, CSF); values below 0 count as 0.
    mask : (X, Y, Z) bool array
        The voxels the field is fitted to (a brain mask).
    affine : (4, 4) array
        Voxel to scanner coordinates (mm), which the field's polynomial is of.
    order : {0, 1, 2, 3}
        The polynomial's order (``-order``).
    iterations, balance_iterations : int
        ``-niter``'s two counts.
    reference : float
        What the balanced sum is normalised to (``-reference``).

    Returns
    -------
    MtNormalisation
    """
    mask = np.asarray(mask, bool)
    # MRtrix3 walks the mask with x fastest
    index = np.argwhere(mask.transpose(2, 1, 0))[:, ::-1].astype(np.float64)
    if not len(index):
        raise ValueError("the mask holds no voxel; give a brain mask")
    voxels = tuple(index.astype(np.int64).T)
    data = np.stack([np.maximum(np.asarray(c, np.float32)[voxels], np.float32(0)).astype(np.float64)
                     for c in compartments], axis=1)
    basis = _basis(_positions(index, affine), order)
    log_reference = float(np.log(np.float32(reference)))
    field = np.ones(len(index))
    balance = np.ones(data.shape[1])
    weights = (np.isfinite(data.sum(axis=1)) & (data.sum(axis=1) > 0)).astype(np.float64)
    coefficients = np.zeros(basis.shape[1])
    weights, _ = _outliers(data, field, balance, weights, 3.0)
    for _ in range(iterations):
        for _ in range(balance_iterations):
            if data.shape[1] > 1:
                balance = _balance(data, field, weights)
            weights, changed = _outliers(data, field, balance, weights, 1.5)
            if not changed:
                break
        coefficients, field = _field(log_reference, basis, data, balance, weights)
    grid = np.indices(mask.shape).reshape(3, -1).T.astype(np.float64)
    full = np.exp(_basis(_positions(grid, affine), order) @ coefficients).astype(np.float32).reshape(mask.shape)
    kept = np.zeros(mask.shape, bool)
    kept[voxels] = weights != 0
    scale = float(np.exp((np.log(field) * weights).sum() / weights.sum()))
    return MtNormalisation(full, balance, kept, scale)
