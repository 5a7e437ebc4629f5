"""Compare peak sets with a ground truth: fiber-count agreement and angular errors."""

from __future__ import annotations

import numpy as np

__all__ = ["match_peaks"]


def match_peaks(
    found: np.ndarray, found_count: np.ndarray, truth: np.ndarray, truth_count: np.ndarray
) -> dict[str, float | np.ndarray]:
    """Greedy matching of found peaks (..., K, 3) to true fibers (..., J, 3), per voxel.

    Directions are axes (x ~ −x). Each true fiber takes the closest unmatched found peak, in
    order of the true fibers. Returns ``count_agreement`` (share of voxels with the right
    number of peaks), ``errors`` (degrees, one per matched fiber), ``mean_error``,
    ``median_error`` and ``p95_error``.
    """
    found = np.asarray(found, np.float64).reshape(-1, *found.shape[-2:])
    truth = np.asarray(truth, np.float64).reshape(-1, *truth.shape[-2:])
    found_count = np.asarray(found_count).reshape(-1).astype(np.int64)
    truth_count = np.asarray(truth_count).reshape(-1).astype(np.int64)
    cosines = np.abs(np.einsum("vjc,vkc->vjk", np.nan_to_num(truth), np.nan_to_num(found)))
    k_idx = np.arange(found.shape[1])
    cosines = np.where(k_idx[None, None, :] >= found_count[:, None, None], -1.0, cosines)
    errors = []
    for j in range(truth.shape[1]):
        has = truth_count > j
        best = np.argmax(cosines[:, j, :], axis=1)
        value = cosines[np.arange(len(best)), j, best]
        matched = has & (value >= 0)
        errors.append(np.degrees(np.arccos(np.clip(value[matched], -1.0, 1.0))))
        cosines[matched, :, best[matched]] = -1.0
    errors = np.concatenate(errors) if errors else np.zeros(0)
    return {
        "count_agreement": float((found_count == truth_count).mean()),
        "errors": errors,
        "mean_error": float(errors.mean()) if errors.size else float("nan"),
        "median_error": float(np.median(errors)) if errors.size else float("nan"),
        "p95_error": float(np.percentile(errors, 95)) if errors.size else float("nan"),
    }
