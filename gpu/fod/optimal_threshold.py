"""The parameter-free threshold MRtrix3 masks images with (``mrthreshold``'s default,
``dwi2mask``'s per-shell threshold, ``dwi2response dhollander``'s tissue splits)."""

from __future__ import annotations

import numpy as np

__all__ = ["optimal_threshold"]


def optimal_threshold(values: np.ndarray) -> float:
    """``mrthreshold``'s automatic threshold (Ridgway et al. 2009, NeuroImage 47:S98): the one whose
    binary mask (values above it) correlates best with the values, by MRtrix3's golden-section
    search in float32 (``Filter::OptimalThreshold``).

    Parameters
    ----------
    values : array
        The values to threshold, any shape; non-finite ones are left out.

    Returns
    -------
    float
    """
    values = values[np.isfinite(values)].astype(np.float64)
    count = values.size
    mean = values.sum() / count
    stdev = np.sqrt((np.sum(values ** 2) - values.sum() * mean) / count)
    ordered = np.sort(values)
    above_sums = np.concatenate([np.cumsum(ordered[::-1])[::-1], [0.0]])

    def cost(threshold: np.float32) -> np.float32:
        first = np.searchsorted(ordered, float(threshold), side="right")
        n_above = count - first
        covariance = above_sums[first] / count - (n_above / count) * mean
        mask_stdev = np.sqrt((n_above - n_above * n_above / count) / count)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.float32(-covariance / (stdev * mask_stdev))

    f32 = np.float32
    low, high = f32(ordered[0]), f32(ordered[-1])
    x0, init, x3 = low + f32(0.001) * (high - low), f32(0.5) * (low + high), high - f32(0.001) * (high - low)
    g1 = f32(0.61803399)
    g2 = f32(1) - g1
    if abs(x3 - init) > abs(init - x0):
        x1, x2 = init, init + g2 * (x3 - init)
    else:
        x2, x1 = init, init - g2 * (init - x0)
    f1, f2 = cost(x1), cost(x2)
    while f32(0.01) * (abs(x1) + abs(x2)) < abs(x3 - x0):
        if f2 < f1:
            x0, x1 = x1, x2
            x2 = g1 * x1 + g2 * x3
            f1, f2 = f2, cost(x2)
        else:
            x3, x2 = x2, x1
            x1 = g1 * x2 + g2 * x0
            f2, f1 = f1, cost(x1)
    return float(x1 if f1 < f2 else x2)
