"""A small multi-shell 3-tissue DWI phantom for response estimation tests: CSF at one corner, WM
(one random fibre per voxel, axially symmetric tensor) at the other, GM between, tissue fractions
varying smoothly, Rician noise."""

from __future__ import annotations

import numpy as np

__all__ = ["three_tissue_phantom"]


def three_tissue_phantom(n: int = 20, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(n, n, n, 93) float32 signal and its (93, 4) scheme: 3 b=0, 30 directions at b = 1000, 2000, 3000."""
    rng = np.random.default_rng(seed)
    dirs = rng.normal(size=(30, 3))
    dirs /= np.linalg.norm(dirs, axis=1, keepdims=True)
    scheme = np.vstack([np.zeros((3, 4))] + [np.hstack([dirs, np.full((30, 1), b)]) for b in (1000.0, 2000.0, 3000.0)])
    g, b = scheme[:, :3], scheme[:, 3]
    x, y, _ = np.meshgrid(*(np.arange(n),) * 3, indexing="ij")
    t = (x + 0.3 * y) / (1.3 * (n - 1))
    wm = np.clip(1.5 * t - 0.5, 0, 1)
    csf = np.clip(1 - 2.5 * t, 0, 1)
    gm = np.clip(1 - wm - csf, 0, 1)
    fibre = rng.normal(size=(n, n, n, 3))
    fibre /= np.linalg.norm(fibre, axis=-1, keepdims=True)
    s_wm = np.exp(-b * (0.3e-3 + 1.4e-3 * (fibre @ g.T) ** 2))
    s_gm = np.exp(-b * 0.8e-3)
    s_csf = np.exp(-b * 3.0e-3)
    signal = 1000.0 * (wm[..., None] * s_wm + 1.2 * gm[..., None] * s_gm + 1.6 * csf[..., None] * s_csf)
    noise = rng.normal(scale=10.0, size=(2,) + signal.shape)
    return np.hypot(signal + noise[0], noise[1]).astype(np.float32), scheme
