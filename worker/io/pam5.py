"""DIPY ``.pam5`` files (PeaksAndMetrics in HDF5) written from per-voxel peaks.

The file is written by DIPY's own ``dipy.io.peaks.save_pam``, so ``dipy.io.peaks.load_pam``
and every DIPY workflow read it: group ``pam`` with ``peak_dirs`` (X, Y, Z, K, 3),
``peak_values`` and ``peak_indices`` (X, Y, Z, K; the sphere vertex of each peak, -1 where
there is none), ``sphere_vertices``, ``affine`` and, when given, ``shm_coeff`` and ``gfa``.
DIPY is an optional dependency: ``pip install 'fibertensor[dipy]'``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import numpy as np
from scipy.spatial import cKDTree

from worker.errors import InputError
from worker.io.atomic import atomic_path

__all__ = ["require_dipy", "nearest_vertex", "write_pam5"]


def require_dipy() -> None:
    """Raise :class:`InputError` saying how to install DIPY when it is missing; a job that
    is asked for ``.pam5`` output calls this before it starts."""
    try:
        importlib.import_module("dipy.io.peaks")
    except ImportError:
        raise InputError(
            "DIPY not installed",
            ".pam5 output is written with DIPY, which is not installed here; install it with "
            "pip install 'fibertensor[dipy]' (or choose another output format)",
        ) from None


def nearest_vertex(directions: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Index of the vertex nearest to each axis ``±direction``, the one on the direction's
    side where the sphere has both (as DIPY's ``peak_directions`` picks them).

    Parameters
    ----------
    directions : ndarray, shape (..., 3)
        Unit vectors; non-finite or zero rows get -1.
    vertices : ndarray, shape (V, 3)
        Unit vectors of a sphere (full or hemisphere).

    Returns
    -------
    ndarray of int32, shape (...)
    """
    vertices = np.asarray(vertices, np.float64)
    n = len(vertices)
    # Peaks are axes: search v and -v at once. Where the sphere also holds -v (a full
    # sphere), the match -v stands for that vertex, on the direction's side.
    gap, twin = cKDTree(vertices).query(-vertices)
    same_side = np.where(gap < 1e-6, twin, np.arange(n))
    tree = cKDTree(np.concatenate([vertices, -vertices]))
    flat = np.asarray(directions, np.float64).reshape(-1, 3)
    valid = np.isfinite(flat).all(axis=1) & (np.abs(flat).sum(axis=1) > 0)
    found = np.full(len(flat), -1, np.int32)
    if valid.any():
        nearest = tree.query(flat[valid], workers=-1)[1]
        found[valid] = np.where(nearest < n, nearest, same_side[nearest % n])
    return found.reshape(np.shape(directions)[:-1])


def write_pam5(
    path: Path,
    directions: np.ndarray,
    values: np.ndarray,
    affine: np.ndarray,
    *,
    sphere: str | np.ndarray = "repulsion724",
    indices: np.ndarray | None = None,
    shm_coeff: np.ndarray | None = None,
    gfa: np.ndarray | None = None,
) -> Path:
    """Write peaks as a DIPY PeaksAndMetrics ``.pam5`` file, atomically.

    Parameters
    ----------
    path : Path
        Output file, ending in ``.pam5``.
    directions : ndarray, shape (X, Y, Z, K, 3)
        Unit peak directions, stored as given; NaN where there is no peak. DIPY takes them
        in the frame of the gradient table its models are fitted with (for FSL-style bvecs,
        the image axes), not necessarily the scanner frame of MRtrix3 peaks.
    values : ndarray, shape (X, Y, Z, K)
        Peak amplitudes; NaN where there is no peak. Absent peaks are stored as DIPY stores
        them: zero direction, zero value, index -1.
    affine : ndarray, shape (4, 4)
        Voxel → world mm.
    sphere : str or ndarray, shape (V, 3)
        A DIPY sphere name (``dipy.data.get_sphere``) or its vertices: the sphere the peak
        indices refer to.
    indices : ndarray, shape (X, Y, Z, K), optional
        Sphere vertex of each peak; default: the vertex nearest to each peak's axis.
    shm_coeff : ndarray, shape (X, Y, Z, C), optional
        SH coefficients, in DIPY's basis (``descoteaux07``) for DIPY tools to read them right.
    gfa : ndarray, shape (X, Y, Z), optional
        Generalized fractional anisotropy.
    """
    require_dipy()
    from dipy.core.sphere import Sphere
    from dipy.data import get_sphere
    from dipy.direction.peaks import PeaksAndMetrics
    from dipy.io.peaks import save_pam

    path = Path(path)
    if path.suffix.lower() != ".pam5":
        raise ValueError(f"{path.name!r}: a PeaksAndMetrics file name ends in .pam5")
    directions = np.asarray(directions)
    values = np.asarray(values)
    if directions.shape != (*values.shape, 3) or values.ndim != 4:
        raise ValueError(f"directions {directions.shape} and values {values.shape} must be (X, Y, Z, K, 3) and (X, Y, Z, K)")
    sphere = get_sphere(name=sphere) if isinstance(sphere, str) else Sphere(xyz=np.asarray(sphere, np.float64))
    present = np.isfinite(values) & (values != 0)
    if indices is None:
        indices = nearest_vertex(np.where(present[..., None], directions, np.nan), sphere.vertices)
    indices = np.where(present, indices, -1).astype(np.int32)

    pam = PeaksAndMetrics()
    pam.affine = np.asarray(affine, np.float64)
    pam.peak_dirs = np.where(present[..., None], directions, 0).astype(np.float32)
    pam.peak_values = np.where(present, values, 0).astype(np.float32)
    pam.peak_indices = indices
    pam.sphere = sphere
    pam.shm_coeff = None if shm_coeff is None else np.asarray(shm_coeff, np.float32)
    pam.gfa = None if gfa is None else np.asarray(gfa, np.float32)
    with atomic_path(path) as temporary:
        save_pam(str(temporary), pam)
    return path
