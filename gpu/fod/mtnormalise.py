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


def _terms(x, y, z, order: int) -> list:
    """The polynomial terms of ``mtnormalise``'s field at scanner coordinates, in its order."""
    terms = [np.ones_like(x)]
    if order >= 1:
        terms += [x, y, z]
    if order >= 2:
        terms += [x * x, y * y, z * z, x * y, x * z, y * z]
    if order >= 3:
        terms += [x * x * x, y * y * y, z * z * z, x * x * y, x * x * z, y * y * x, y * y * z, z * z * x, z * z * y,
                  x * y * z]
    return terms


def _positions(index: np.ndarray, affine: np.ndarray) -> np.ndarray:
    """Scanner coordinates (3, V) of voxel indices (V, 3)."""
    return affine[:3, :3] @ index.T + affine[:3, 3:4]


def _order_statistics(values: np.ndarray, ranks: tuple[int, int]) -> list[float]:
    """The values of two ranks with NaN ordered first (``mtnormalise``'s nth_element), exact.

    Each rank's value is bracketed by a strided sample's order statistics and selected among
    the values inside the bracket alone; where a bracket misses (counted, not assumed), all the
    values are partitioned."""
    nan = np.isnan(values)
    count = int(np.count_nonzero(nan))
    finite = values[~nan] if count else values
    wanted = [rank - count for rank in ranks]
    chosen = [float("nan") if rank < 0 else None for rank in wanted]
    stride = max(1, len(finite) // 4096)
    sample = np.sort(finite[::stride])
    margin = 2 + 2 * int(np.sqrt(len(sample)))
    for k, rank in enumerate(wanted):
        if chosen[k] is not None:
            continue
        at = rank // stride
        low = sample[at - margin] if at - margin >= 0 else -np.inf
        high = sample[at + margin] if at + margin < len(sample) else np.inf
        below = np.count_nonzero(finite < low)
        inside = finite[(finite >= low) & (finite <= high)]
        if below <= rank < below + len(inside):
            chosen[k] = float(np.partition(inside, rank - below)[rank - below])
    if any(value is None for value in chosen):
        missing = sorted(rank for rank, value in zip(wanted, chosen) if value is None)
        ordered = np.partition(finite, missing)
        chosen = [float(ordered[rank]) if value is None else value for rank, value in zip(wanted, chosen)]
    return chosen


class _Fit:
    """The masked voxels' compartments and field terms, with the two least squares' normal
    matrices kept for the current weights: a change of weights moves them by the changed
    voxels' terms alone, not a product over every voxel (docs/decisions/mtnormalise-changed-voxels.md)."""

    def __init__(self, data: np.ndarray, terms: np.ndarray, weights: np.ndarray):
        self.data, self.terms, self.weights = data, terms, weights
        self.field_normal = (terms * weights) @ terms.T
        self.rescale(np.zeros(data.shape[1]))

    def rescale(self, log_field: np.ndarray) -> None:
        """Sets the field the compartments are corrected by (its log at the voxels, (V,))."""
        self.scaled = self.data * np.exp(-log_field)
        kept = self.scaled * self.weights
        self.balance_normal, self.balance_rhs = kept @ self.scaled.T, kept.sum(axis=1)

    def reweight(self, weights: np.ndarray) -> int:
        """Sets the weights (0 or 1 a voxel); returns how many changed."""
        changed = np.flatnonzero(weights != self.weights)
        if len(changed):
            step = (weights - self.weights)[changed]
            terms, scaled = self.terms[:, changed], self.scaled[:, changed]
            self.field_normal += (terms * step) @ terms.T
            self.balance_normal += (scaled * step) @ scaled.T
            self.balance_rhs += scaled @ step
            self.weights = weights
        return len(changed)

    def balance(self) -> np.ndarray:
        """Balance factors: least squares of the field-corrected compartments against 1 over the
        kept voxels, scaled to a geometric mean of 1."""
        lower = np.linalg.cholesky(self.balance_normal)
        factors = np.linalg.solve(lower.T, np.linalg.solve(lower, self.balance_rhs))
        if not np.all(np.isfinite(factors)) or np.any(factors <= 0):
            raise ValueError(f"a non-positive tissue balance factor was computed ({factors}); check the mask covers "
                             "brain tissue and the compartments are a multi-tissue fit's")
        return factors / np.exp(np.log(factors).sum() / len(factors))


def _outliers(fit: _Fit, log_field, balance, spread: float) -> np.ndarray:
    """Weights: 1 where the log of the balanced, field-corrected sum lies within ``spread``
    interquartile ranges of its quartiles."""
    with np.errstate(divide="ignore", invalid="ignore"):
        summed_log = np.log(balance @ fit.data) - log_field
    size = len(summed_log)
    lower, upper = _order_statistics(summed_log, (int(np.round(size * 0.25)), int(np.round(size * 0.75))))
    low, high = lower - spread * (upper - lower), upper + spread * (upper - lower)
    with np.errstate(invalid="ignore"):
        return (np.isfinite(summed_log) & (summed_log >= low) & (summed_log <= high)).astype(np.float64)


def _field(fit: _Fit, log_reference, balance) -> tuple[np.ndarray, np.ndarray]:
    """The field's polynomial coefficients and its logarithm at the masked voxels."""
    total = balance @ fit.data
    with np.errstate(divide="ignore", invalid="ignore"):
        logsum = np.where(total > 0, fit.weights * (np.log(total) - log_reference), 0.0)
    lower = np.linalg.cholesky(fit.field_normal)
    coefficients = np.linalg.solve(lower.T, np.linalg.solve(lower, fit.terms @ logsum))
    return coefficients, coefficients @ fit.terms


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
    index = np.argwhere(mask.transpose(2, 1, 0))[:, ::-1]
    if not len(index):
        raise ValueError("the mask holds no voxel; give a brain mask")
    voxels = tuple(index.T)
    data = np.stack([np.maximum(np.asarray(c, np.float32)[voxels], np.float32(0)) for c in compartments]
                    ).astype(np.float64)
    terms = np.stack(_terms(*_positions(index.astype(np.float64), affine), order))
    log_reference = float(np.log(np.float32(reference)))
    log_field = np.zeros(len(index))
    balance = np.ones(len(data))
    total = data.sum(axis=0)
    fit = _Fit(data, terms, (np.isfinite(total) & (total > 0)).astype(np.float64))
    coefficients = np.zeros(len(terms))
    fit.reweight(_outliers(fit, log_field, balance, 3.0))
    for _ in range(iterations):
        fit.rescale(log_field)
        for _ in range(balance_iterations):
            if len(data) > 1:
                balance = fit.balance()
            if not fit.reweight(_outliers(fit, log_field, balance, 1.5)):
                break
        coefficients, log_field = _field(fit, log_reference, balance)
    kept = np.zeros(mask.shape, bool)
    kept[voxels] = fit.weights != 0
    scale = float(np.exp((log_field * fit.weights).sum() / fit.weights.sum()))
    return MtNormalisation(_full_field(coefficients, mask.shape, affine, order), balance, kept, scale)


def _full_field(coefficients: np.ndarray, shape: tuple[int, int, int], affine: np.ndarray, order: int) -> np.ndarray:
    """The field (X, Y, Z) float32 over the whole grid, a slice at a time, each term added in turn."""
    field = np.empty(shape, np.float32)
    plane = np.indices(shape[:2]).reshape(2, -1).T.astype(np.float64)
    for k in range(shape[2]):
        index = np.column_stack([plane, np.full(len(plane), float(k))])
        log_field = np.zeros(len(plane))
        for coefficient, term in zip(coefficients, _terms(*_positions(index, affine), order)):
            log_field += coefficient * term
        field[..., k] = np.exp(log_field).reshape(shape[:2])
    return field
