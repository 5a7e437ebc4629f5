"""DIPY ``.pam5`` files (PeaksAndMetrics in HDF5) written from per-voxel peaks.

The layout is that of DIPY's ``dipy.io.peaks.save_pam`` (DIPY 1.9–1.12), so
``dipy.io.peaks.load_pam`` and every DIPY workflow read it: root attribute ``version``
``"0.0.1"``, group ``pam`` with ``affine``, ``peak_dirs`` (X, Y, Z, K, 3), ``peak_values``
and ``peak_indices`` (X, Y, Z, K; the sphere vertex of each peak, -1 where there is none),
``sphere_vertices``, ``total_weight`` and ``ang_thr`` (the EuDX defaults ``save_pam`` stores)
and, when given, ``shm_coeff`` and ``gfa``. It is written with h5py directly because
``save_pam`` stores every dataset in HDF5 chunks, slower to write than one contiguous block
and no smaller (docs/decisions/pam5-contiguous.md). DIPY is an optional dependency (its spheres, and h5py):
``pip install 'fibertensor[dipy]'``.
"""

from __future__ import annotations

import importlib
import math
from functools import lru_cache
from pathlib import Path

import numpy as np
from numba import njit

import gpu.numba_cache  # noqa: F401 - numba's cache shared safely by processes
from gpu.cpu_blocks import run_in_blocks
from worker.errors import InputError
from worker.io.atomic import atomic_path

__all__ = ["require_dipy", "nearest_vertex", "write_pam5"]

# Peaks per block of the compiled passes (each block on a thread).
_BLOCK = 1 << 16

# The EuDX settings a fresh ``PeaksAndMetrics`` carries and ``save_pam`` writes with it.
_EUDX_TOTAL_WEIGHT, _EUDX_ANGLE_DEGREES = 0.5, 60.0


def require_dipy() -> None:
    """Raise :class:`InputError` saying how to install DIPY when it is missing; a job that
    is asked for ``.pam5`` output calls this before it starts."""
    try:
        for module in ("dipy.data", "h5py"):
            importlib.import_module(module)
    except ImportError as error:
        # a DIPY whose own dependency is missing fails here too: name the module
        raise InputError(
            "DIPY not installed",
            f".pam5 output needs DIPY (its spheres, and h5py), which cannot be imported here ({error}); "
            "install it with pip install 'fibertensor[dipy]' (or choose another output format)",
        ) from None


class _SphereCells:
    """The sphere's vertices sorted into the cells of a cube map, for nearest-vertex search.

    Peaks are axes, so the points searched are the vertices and, for each vertex whose
    antipode is not also a vertex (a hemisphere), its antipode too, labelled with the
    vertex. The unit sphere is cut into the 6·G² cells of the gnomonic cube map (face of the
    largest |coordinate|, then a G×G grid of the other two coordinates over it), and each
    cell lists every point that can be the nearest to some direction in it: with c the
    cell's centre, r its angular radius (the farthest corner: a cell is a convex spherical
    quadrilateral) and q the point nearest to c, the nearest point p to any d in the cell
    has ∠(c, p) ≤ ∠(c, d) + ∠(d, p) ≤ r + ∠(d, q) ≤ 2r + ∠(c, q).
    """

    def __init__(self, vertices: np.ndarray):
        # scipy comes with DIPY, which the format needs: imported here, so that without them
        # require_dipy() can say so (scipy is no dependency of ours: docs/decisions/no-scipy.md)
        from scipy.spatial import cKDTree

        n = len(vertices)
        gap, _ = cKDTree(vertices).query(-vertices)
        lone = np.flatnonzero(gap > 1e-6)
        self.points = np.ascontiguousarray(np.concatenate([vertices, -vertices[lone]]))
        self.labels = np.concatenate([np.arange(n), lone]).astype(np.int32)
        # About four cells per point: a handful of candidates per cell.
        self.cells_per_edge = g = int(np.clip(np.ceil(2 * np.sqrt(len(self.points) / 6)), 4, 256))

        edges = np.linspace(-1.0, 1.0, g + 1)
        middles = (edges[:-1] + edges[1:]) / 2
        centres, radii = [], []
        for face in range(6):
            axis, negative = divmod(face, 2)
            others = [a for a in range(3) if a != axis]

            def on_face(u: np.ndarray, v: np.ndarray) -> np.ndarray:
                point = np.empty((*u.shape, 3))
                point[..., axis] = -1.0 if negative else 1.0
                point[..., others[0]], point[..., others[1]] = u, v
                return point / np.linalg.norm(point, axis=-1, keepdims=True)

            centre = on_face(*np.meshgrid(middles, middles, indexing="ij"))
            radius = np.zeros((g, g))
            for du in (0, 1):
                for dv in (0, 1):
                    corner = on_face(*np.meshgrid(edges[du:g + du], edges[dv:g + dv], indexing="ij"))
                    radius = np.maximum(radius, np.arccos(np.clip(np.sum(centre * corner, axis=-1), -1, 1)))
            centres.append(centre.reshape(-1, 3))
            radii.append(radius.ravel())
        centre, radius = np.concatenate(centres), np.concatenate(radii)

        tree = cKDTree(self.points)
        nearest_chord = tree.query(centre)[0]
        reach = 2 * np.arcsin(np.minimum(nearest_chord / 2, 1)) + 2 * radius + 1e-9
        chords = 2 * np.sin(np.minimum(reach, np.pi) / 2) + 1e-12
        # Within a cell, points in label order: the first of equally near ones wins, as in
        # numpy's argmax over the vertices.
        rank = self.labels.astype(np.int64) * 2 + (np.arange(len(self.points)) >= n)
        candidates = [sorted(found, key=rank.__getitem__) for found in tree.query_ball_point(centre, chords)]
        width = max(len(found) for found in candidates)
        # Short lists repeat their last point, which changes no maximum.
        self.table = np.array([found + found[-1:] * (width - len(found)) for found in candidates], np.int32)


@lru_cache(maxsize=8)
def _sphere_cells(vertices_bytes: bytes) -> _SphereCells:
    return _SphereCells(np.frombuffer(vertices_bytes, np.float64).reshape(-1, 3))


@njit(nogil=True, cache=True)
def _nearest_label(x, y, z, points, labels, table, g):  # pragma: no cover - compiled
    """The label of the point nearest to direction (x, y, z) (float64), -1 for a non-finite
    or zero one: the best of its cube-map cell's candidates."""
    ax, ay, az = abs(x), abs(y), abs(z)
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)) or ax + ay + az == 0.0:
        return -1
    # The cube face of the largest |coordinate| (on a tie either face holds the direction,
    # on its edge), and the cell of the other two over it.
    if ax >= ay and ax >= az:
        face, major, u, v = 0 if x > 0 else 1, ax, y, z
    elif ay >= az:
        face, major, u, v = 2 if y > 0 else 3, ay, x, z
    else:
        face, major, u, v = 4 if z > 0 else 5, az, x, y
    scale = g / (2.0 * major)
    i = min(int((u + major) * scale), g - 1)
    j = min(int((v + major) * scale), g - 1)
    row = table[(face * g + i) * g + j]
    best, best_dot = row[0], -np.inf
    for p in row:
        dot = x * points[p, 0] + y * points[p, 1] + z * points[p, 2]
        if dot > best_dot:
            best, best_dot = p, dot
    return labels[best]


@njit(nogil=True, cache=True)
def _nearest_in_cells(directions, found, points, labels, table, g):  # pragma: no cover - compiled
    for n in range(directions.shape[0]):
        # float64 whatever the input's type (float32 converts exactly)
        found[n] = _nearest_label(np.float64(directions[n, 0]), np.float64(directions[n, 1]),
                                  np.float64(directions[n, 2]), points, labels, table, g)


@njit(nogil=True, cache=True)
def _stored_peaks(directions, values, given, peak_dirs, peak_values, peak_indices,
                  rotation, rotate, points, labels, table, g):  # pragma: no cover - compiled
    """The rows of ``peak_dirs``, ``peak_values``, ``peak_indices`` for flat peaks: absent
    (value non-finite or zero) → 0, 0, -1; present → the direction (times ``rotation`` where
    ``rotate``, in float64, stored float32), the value, and the given index or else the
    vertex nearest to the stored direction."""
    for n in range(values.shape[0]):
        value = values[n]
        if not math.isfinite(value) or value == 0:
            peak_dirs[n, 0] = peak_dirs[n, 1] = peak_dirs[n, 2] = 0
            peak_values[n] = 0
            peak_indices[n] = -1
            continue
        d0, d1, d2 = np.float64(directions[n, 0]), np.float64(directions[n, 1]), np.float64(directions[n, 2])
        if rotate:
            d0, d1, d2 = (d0 * rotation[0, 0] + d1 * rotation[1, 0] + d2 * rotation[2, 0],
                          d0 * rotation[0, 1] + d1 * rotation[1, 1] + d2 * rotation[2, 1],
                          d0 * rotation[0, 2] + d1 * rotation[1, 2] + d2 * rotation[2, 2])
        peak_dirs[n, 0], peak_dirs[n, 1], peak_dirs[n, 2] = d0, d1, d2
        peak_values[n] = value
        if given.shape[0]:  # as many rows as the others, or none
            peak_indices[n] = given[n]
        else:
            peak_indices[n] = _nearest_label(np.float64(peak_dirs[n, 0]), np.float64(peak_dirs[n, 1]),
                                             np.float64(peak_dirs[n, 2]), points, labels, table, g)


def nearest_vertex(directions: np.ndarray, vertices: np.ndarray) -> np.ndarray:
    """Index of the vertex nearest to each axis ``±direction``, the one on the direction's
    side where the sphere has both: on a full sphere DIPY's ``Sphere.find_closest``
    (largest cosine), on a hemisphere ``HemiSphere.find_closest`` (largest |cosine|), the
    lowest index among equally near ones; so ``vertices[index]`` is the peak's direction
    itself for each peak DIPY's ``peak_directions`` finds on the sphere, as in the files
    DIPY writes.

    Parameters
    ----------
    directions : ndarray, shape (..., 3)
        Directions (any length); non-finite or zero rows get -1.
    vertices : ndarray, shape (V, 3)
        Unit vectors of a sphere (full or hemisphere).

    Returns
    -------
    ndarray of int32, shape (...)

    Each direction is compared with the few vertices of its cell of a cube map
    (:class:`_SphereCells`) instead of all V of them.
    """
    vertices = np.ascontiguousarray(vertices, np.float64)
    if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) == 0:
        raise ValueError(f"vertices must have shape (V, 3) with V > 0; got {vertices.shape}")
    cells = _sphere_cells(vertices.tobytes())
    flat = np.reshape(directions, (-1, 3))
    flat = np.ascontiguousarray(flat, flat.dtype if flat.dtype in (np.float32, np.float64) else np.float64)
    found = np.empty(len(flat), np.int32)
    run_in_blocks(_nearest_in_cells, [flat, found], [cells.points, cells.labels, cells.table, cells.cells_per_edge],
                  _BLOCK)
    return found.reshape(np.shape(directions)[:-1])


def write_pam5(
    path: Path,
    directions: np.ndarray,
    values: np.ndarray,
    affine: np.ndarray,
    *,
    sphere: str | np.ndarray = "repulsion724",
    rotation: np.ndarray | None = None,
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
        Unit peak directions, stored as given or times ``rotation``; NaN where there is no
        peak. DIPY takes them in the frame of the gradient table its models are fitted with
        (for FSL-style bvecs, the image axes), not necessarily the scanner frame of MRtrix3
        peaks.
    values : ndarray, shape (X, Y, Z, K)
        Peak amplitudes; NaN where there is no peak. Absent peaks are stored as DIPY stores
        them: zero direction, zero value, index -1.
    affine : ndarray, shape (4, 4)
        Voxel → world mm.
    sphere : str or ndarray, shape (V, 3)
        A DIPY sphere name (``dipy.data.get_sphere``) or its vertices: the sphere the peak
        indices refer to.
    rotation : ndarray, shape (3, 3), optional
        Stored directions are ``directions @ rotation`` (computed in float64), e.g. the
        scanner frame's axes in image coordinates.
    indices : ndarray, shape (X, Y, Z, K), optional
        Sphere vertex of each peak; default: :func:`nearest_vertex` of each stored direction.
    shm_coeff : ndarray, shape (X, Y, Z, C), optional
        SH coefficients, in DIPY's basis (``descoteaux07``) for DIPY tools to read them right.
    gfa : ndarray, shape (X, Y, Z), optional
        Generalized fractional anisotropy.

    The datasets are stored contiguous and uncompressed: gzip would halve the file (the
    background's zeros) but take longer than everything else the job writes
    (docs/decisions/pam5-contiguous.md).
    """
    require_dipy()
    import h5py
    from dipy.core.sphere import Sphere
    from dipy.data import get_sphere

    path = Path(path)
    if path.suffix.lower() != ".pam5":
        raise ValueError(f"{path.name!r}: a PeaksAndMetrics file name ends in .pam5")
    # float32 as DIPY stores them; a peak is present where its stored value is non-zero.
    directions = np.asarray(directions, np.float32)
    values = np.asarray(values, np.float32)
    if directions.shape != (*values.shape, 3) or values.ndim != 4:
        raise ValueError(f"directions {directions.shape} and values {values.shape} must be (X, Y, Z, K, 3) and (X, Y, Z, K)")
    # DIPY's own sphere object, which normalises given vertices as load_pam will.
    vertices = (get_sphere(name=sphere) if isinstance(sphere, str) else Sphere(xyz=np.asarray(sphere, np.float64))).vertices
    cells = _sphere_cells(np.ascontiguousarray(vertices, np.float64).tobytes())
    peak_dirs = np.empty(directions.shape, np.float32)
    peak_values = np.empty(values.shape, np.float32)
    peak_indices = np.empty(values.shape, np.int32)
    given = np.empty(0, np.int32) if indices is None else np.asarray(indices, np.int32).reshape(-1)
    # One compiled pass over the peaks (absent ones zeroed, directions rotated, the nearest
    # vertex of each stored direction, so that find_closest on a read-back peak agrees).
    run_in_blocks(_stored_peaks,
                  [directions.reshape(-1, 3), values.reshape(-1), given, peak_dirs.reshape(-1, 3),
                   peak_values.reshape(-1), peak_indices.reshape(-1)],
                  [np.eye(3) if rotation is None else np.asarray(rotation, np.float64), rotation is not None,
                   cells.points, cells.labels, cells.table, cells.cells_per_edge], _BLOCK)
    datasets = {
        "affine": np.asarray(affine, np.float64),
        "peak_dirs": peak_dirs,
        "peak_values": peak_values,
        "peak_indices": peak_indices,
        "shm_coeff": None if shm_coeff is None else np.asarray(shm_coeff, np.float32),
        "sphere_vertices": vertices,
        "total_weight": np.array([_EUDX_TOTAL_WEIGHT]),
        "ang_thr": np.array([_EUDX_ANGLE_DEGREES]),
        "gfa": None if gfa is None else np.asarray(gfa, np.float32),
    }
    with atomic_path(path) as temporary, h5py.File(temporary, "w") as handle:
        handle.attrs["version"] = "0.0.1"
        group = handle.create_group("pam")
        for name, data in datasets.items():
            if data is not None:
                group.create_dataset(name, data=data)
    return path
