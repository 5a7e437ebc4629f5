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
SH coefficients → unique entries is square and invertible. It is derived in closed form:
r^l times a complex SH is a harmonic polynomial with integer coefficients (up to one
normalising factor), times r^(L−l) = (x²+y²+z²)^((L−l)/2) a homogeneous polynomial of degree L,
whose coefficient of x^k_x y^k_y z^k_z is σ(k) a_k: exact integers times one factor per
column, with no LAPACK call (whose BLAS threads a fresh process would wait for).
"""

from __future__ import annotations

import functools
from math import comb, factorial, pi, sqrt

import numpy as np

from gpu.sh_basis import SH_BASES, lmax_from_ncoeffs, n_coeffs, sh_degrees_orders

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
def _power_of_r_squared(power: int) -> tuple[tuple[int, int, int, int], ...]:
    """(x²+y²+z²)^power as (multinomial coefficient, i, j, k) of its terms x^2i y^2j z^2k."""
    return tuple((factorial(power) // (factorial(i) * factorial(j) * factorial(power - i - j)), i, j, power - i - j)
                 for i in range(power + 1) for j in range(power - i + 1))


def _harmonic_polynomial(degree: int, order: int, imaginary: bool, lmax: int) -> tuple[dict, float]:
    """r^lmax · Re or Im of Y_l^m (l = ``degree``, m = ``order`` ≥ 0) as a homogeneous
    polynomial of degree ``lmax``: ({(k_x, k_y, k_z): integer coefficient}, factor).

    With t = z/r, P_l(t) = 2^−l Σ_k (−1)^k C(l, k) C(2l−2k, l) t^(l−2k) (Abramowitz & Stegun
    22.3.8) and P_l^m(t) = (−1)^m (1−t²)^(m/2) d^m P_l/dt^m (Condon–Shortley phase, as
    :mod:`gpu.sh_basis`), r^l P_l^m(t) e^(imφ) = (−1)^m (x+iy)^m Σ_k (−1)^k C(l, k) C(2l−2k, l)
    (l−2k)!/(l−2k−m)! z^(l−2k−m) r^2k / 2^l; Re and Im of (x+iy)^m are Σ_j C(m, j) x^(m−j)
    (iy)^j over even and odd j. The normalisation √((2l+1)/4π (l−m)!/(l+m)!) and the 2^−l
    go in the factor."""
    xy = [(order - j, j, comb(order, j) * (-1) ** (j // 2)) for j in range(order + 1) if j % 2 == int(imaginary)]
    terms: dict[tuple[int, int, int], int] = {}
    for k in range((degree - order) // 2 + 1):
        z_power = degree - 2 * k - order
        legendre = ((-1) ** k * comb(degree, k) * comb(2 * degree - 2 * k, degree)
                    * factorial(degree - 2 * k) // factorial(z_power))
        for multinomial, i, j, h in _power_of_r_squared(k + (lmax - degree) // 2):
            for x_power, y_power, binomial in xy:
                key = (2 * i + x_power, 2 * j + y_power, 2 * h + z_power)
                terms[key] = terms.get(key, 0) + legendre * multinomial * binomial
    factor = (-1) ** order * sqrt((2 * degree + 1) / (4 * pi) * factorial(degree - order) / factorial(degree + order))
    return terms, factor / 2.0**degree


@functools.cache
def _sh_to_tensor_matrix(lmax: int, basis: str) -> np.ndarray:
    if basis not in SH_BASES:
        raise ValueError(f"basis must be one of {SH_BASES}, not {basis!r}")
    row = {tuple(k): i for i, k in enumerate(monomial_exponents(lmax).tolist())}
    sigma = multiplicities(lmax)
    degrees, orders = sh_degrees_orders(lmax)
    matrix = np.zeros((len(row), degrees.size))
    for column, (degree, order) in enumerate(zip(degrees.tolist(), orders.tolist())):
        # mrtrix: √2·Im(Y_l^|m|) for m < 0, Y_l^0, √2·Re(Y_l^m) for m > 0; dipy swaps the two.
        terms, factor = _harmonic_polynomial(degree, abs(order), order < 0 if basis == "mrtrix" else order > 0, lmax)
        if order:
            factor *= sqrt(2.0)
        for key, coefficient in terms.items():
            matrix[row[key], column] = coefficient * factor / sigma[row[key]]
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
