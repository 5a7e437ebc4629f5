"""Symmetric tensors in R^3 stored by their unique entries, and the exact map from SH.

A symmetric tensor A of order m in R^3 has (m+1)(m+2)/2 unique entries, one per *index
class* [i_1 ≤ … ≤ i_m]. We store them in lexicographic order of the index representation,
equivalently decreasing order of the monomial representation (k_x, k_y, k_z)
(Ballard, Kolda & Plantenga 2011, Sec. III-A and Table I). The class with monomial
representation k occurs σ(k) = m!/(k_x! k_y! k_z!) times in the full tensor, so

    A x^m = Σ_k σ(k) a_k x^k_x y^k_y z^k_z                      (Ballard et al., Eq. 3–4)

An even-order SH series of degree L restricted to the unit sphere equals a homogeneous
polynomial of degree L (multiply each degree-l term by (x²+y²+z²)^((L−l)/2)), i.e. A x^L
for one symmetric tensor A of order L. Both spaces have dimension (L+1)(L+2)/2, so the map
SH coefficients → unique entries is square and invertible; we derive it in float64 by an
exact least-squares fit on well-spread points of the sphere.
"""

from __future__ import annotations

import functools
from math import factorial

import numpy as np

from gpu.sh_basis import lmax_from_ncoeffs, n_coeffs, real_sh_matrix

__all__ = [
    "index_classes",
    "monomial_exponents",
    "multiplicities",
    "sphere_points",
    "sh_to_tensor_matrix",
    "sh_to_tensor",
    "tensor_to_sh",
    "tensor_value",
]


@functools.cache
def index_classes(order: int) -> np.ndarray:
    """Index classes [i_1 ≤ … ≤ i_m] (0-based) of an order-m tensor in R^3, lexicographic."""
    classes: list[tuple[int, ...]] = []

    def extend(prefix: tuple[int, ...], lowest: int) -> None:
        if len(prefix) == order:
            classes.append(prefix)
            return
        for i in range(lowest, 3):
            extend(prefix + (i,), i)

    extend((), 0)
    return np.array(classes, dtype=np.int64).reshape(len(classes), order)


@functools.cache
def monomial_exponents(order: int) -> np.ndarray:
    """Monomial representation (k_x, k_y, k_z) of each index class, shape (n_unique, 3)."""
    classes = index_classes(order)
    return np.stack([(classes == axis).sum(axis=1) for axis in range(3)], axis=1)


@functools.cache
def multiplicities(order: int) -> np.ndarray:
    """σ(k) = m!/(k_x! k_y! k_z!): how often each unique entry occurs in the full tensor."""
    return np.array(
        [factorial(order) // (factorial(a) * factorial(b) * factorial(c)) for a, b, c in monomial_exponents(order)],
        dtype=np.int64,
    )


def sphere_points(count: int) -> np.ndarray:
    """``count`` well-spread unit vectors on the whole sphere (Fibonacci lattice)."""
    i = np.arange(count) + 0.5
    z = 1.0 - 2.0 * i / count
    r = np.sqrt(1.0 - z * z)
    azimuth = np.pi * (3.0 - np.sqrt(5.0)) * i
    return np.stack([r * np.cos(azimuth), r * np.sin(azimuth), z], axis=1)


def _monomial_matrix(order: int, points: np.ndarray) -> np.ndarray:
    """Rows σ(k)·x^k for each point: A x^m = M @ a."""
    powers = points[:, None, :] ** monomial_exponents(order)[None, :, :]
    return powers.prod(axis=2) * multiplicities(order)[None, :]


@functools.cache
def _sh_to_tensor_matrix(lmax: int, basis: str) -> np.ndarray:
    points = sphere_points(8 * n_coeffs(lmax))
    sh = real_sh_matrix(lmax, points, basis)
    mono = _monomial_matrix(lmax, points)
    matrix, *_ = np.linalg.lstsq(mono, sh, rcond=None)
    matrix.setflags(write=False)
    return matrix


def sh_to_tensor_matrix(lmax: int, basis: str = "mrtrix") -> np.ndarray:
    """The float64 matrix T, shape (n_unique, n_coeffs), with unique entries a = T @ c.

    For every unit x, A x^lmax (Eq. 3 of Ballard et al.) equals the SH series Σ c_j Y_j(x).
    """
    return _sh_to_tensor_matrix(lmax, basis)


def sh_to_tensor(coeffs: np.ndarray, basis: str = "mrtrix", dtype=np.float64) -> np.ndarray:
    """Unique tensor entries (..., n_unique) of SH coefficients (..., n_coeffs)."""
    coeffs = np.asarray(coeffs)
    lmax = lmax_from_ncoeffs(coeffs.shape[-1])
    matrix = sh_to_tensor_matrix(lmax, basis)
    return (coeffs.astype(np.float64, copy=False) @ matrix.T).astype(dtype, copy=False)


def tensor_to_sh(entries: np.ndarray, basis: str = "mrtrix") -> np.ndarray:
    """Inverse of :func:`sh_to_tensor`: SH coefficients of a tensor's unique entries."""
    entries = np.asarray(entries, dtype=np.float64)
    order = next(l for l in range(2, 13, 2) if n_coeffs(l) == entries.shape[-1])
    return entries @ np.linalg.inv(sh_to_tensor_matrix(order, basis)).T


def tensor_value(entries: np.ndarray, directions: np.ndarray) -> np.ndarray:
    """A x^m in float64 for unique entries (n_unique,) at directions (N, 3) — the reference."""
    entries = np.asarray(entries, dtype=np.float64)
    order = next(l for l in range(2, 13, 2) if n_coeffs(l) == entries.shape[-1])
    return _monomial_matrix(order, np.asarray(directions, dtype=np.float64)) @ entries
