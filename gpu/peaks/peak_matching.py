"""Compare peak sets with a ground truth: fiber-count agreement and angular errors."""

from __future__ import annotations

import numpy as np

__all__ = ["match_peaks", "exact_peak_offsets"]


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


def exact_peak_offsets(entries: np.ndarray, directions: np.ndarray, count: np.ndarray, order: int) -> np.ndarray:
    """Angles (degrees) between reported peaks and the exact local maxima they belong to.

    Each peak is refined in float64 by Newton steps on the sphere (plain-Python execution of
    the same generated A x^(m−2) code, independent of the backend that found it) until the
    step is below 1e-12 rad. ``entries`` (n, n_unique) float64 unique tensor entries,
    ``directions`` (n, K, 3), ``count`` (n,).
    """
    from gpu.peaks import sshopm_generated, sshopm_math

    axm2 = getattr(sshopm_generated, f"axm2_m{order}")
    offsets = []
    for a, dirs, k in zip(np.asarray(entries, np.float64), np.asarray(directions, np.float64), count):
        for d in dirs[: int(k)]:
            x, y, z = (float(c) for c in d / np.linalg.norm(d))
            for _ in range(20):
                x, y, z, _, step, _ = sshopm_math.sshopm_step(order, x, y, z, *axm2(a, x, y, z), 0.05)
                if step < 1e-12:
                    break
            cosine = min(1.0, abs(x * d[0] + y * d[1] + z * d[2]) / float(np.linalg.norm(d)))
            offsets.append(np.degrees(np.arccos(cosine)))
    return np.array(offsets)
