"""Small dense solvers on numpy for the response fit: triangular and Cholesky solves, and
non-negative least squares by Lawson & Hanson's active-set method (no scipy:
docs/decisions/no-scipy.md)."""

from __future__ import annotations

import numpy as np

__all__ = ["solve_triangular", "solve_positive_definite", "nonnegative_least_squares"]


def solve_triangular(matrix: np.ndarray, rhs: np.ndarray, *, lower: bool) -> np.ndarray:
    """x with T x = b, T triangular, by forward (``lower``) or back substitution.

    Parameters
    ----------
    matrix : (n, n) array
        T; only its lower (``lower``) or upper triangle is read.
    rhs : (n,) or (n, k) array
        b.
    lower : bool

    Returns
    -------
    (n,) or (n, k) float64 array
        x, the shape of ``rhs``.

    Raises
    ------
    numpy.linalg.LinAlgError
        A zero on T's diagonal (T singular).
    """
    t = np.asarray(matrix, dtype=np.float64)
    b = np.asarray(rhs, dtype=np.float64)
    n = t.shape[0]
    if t.shape != (n, n) or b.shape[0] != n:
        raise ValueError(f"need a square matrix and a right-hand side of {n} rows, not {t.shape} and {b.shape}")
    if not np.all(np.diag(t)):
        zero = int(np.argmin(np.abs(np.diag(t))))
        raise np.linalg.LinAlgError(f"singular triangular matrix: zero at diagonal entry {zero}")
    x = np.zeros_like(b)
    for i in range(n) if lower else range(n - 1, -1, -1):
        known = slice(0, i) if lower else slice(i + 1, n)
        x[i] = (b[i] - t[i, known] @ x[known]) / t[i, i]
    return x


def solve_positive_definite(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """x with M x = b, M symmetric positive definite, by its Cholesky factor M = L Lᵀ.

    Parameters
    ----------
    matrix : (n, n) array
        M.
    rhs : (n,) or (n, k) array
        b.

    Returns
    -------
    (n,) or (n, k) float64 array

    Raises
    ------
    numpy.linalg.LinAlgError
        M is not positive definite.
    """
    lower = np.linalg.cholesky(np.asarray(matrix, dtype=np.float64))
    return solve_triangular(lower.T, solve_triangular(lower, rhs, lower=True), lower=False)


def nonnegative_least_squares(matrix: np.ndarray, rhs: np.ndarray, maxiter: int | None = None) -> np.ndarray:
    """argmin ‖Ax − b‖ subject to x ≥ 0: Lawson & Hanson's active-set algorithm NNLS (Solving
    Least Squares Problems, 1974, ch. 23, section 3), with the guards of their Fortran: a column joins the
    passive set only when it is linearly independent of those in it and its prospective
    coefficient is positive, and the first largest dual coefficient wins in their column order
    (so ties, in a rank-deficient A, fall as in scipy's ``nnls``).

    Parameters
    ----------
    matrix : (m, n) array
        A.
    rhs : (m,) array
        b.
    maxiter : int, optional
        Limit on the passes of the inner loop (each a least-squares solve on the passive set),
        ``3 n`` when None or 0, as ``ITMAX`` of the Fortran and ``maxiter`` of scipy's ``nnls``.

    Returns
    -------
    (n,) float64 array
        x.

    Raises
    ------
    RuntimeError
        The inner loop reached ``maxiter`` passes.
    """
    a = np.asarray(matrix, dtype=np.float64)
    b = np.asarray(rhs, dtype=np.float64)
    if a.ndim != 2 or b.shape != (a.shape[0],):
        raise ValueError(f"need an (m, n) matrix and an (m,) right-hand side, not {a.shape} and {b.shape}")
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        raise ValueError("the matrix and right-hand side must be finite")
    m, n = a.shape
    maxiter = maxiter or 3 * n
    x = np.zeros(n)
    # order[:size] is the passive set P, order[size:] the active set Z, in the Fortran's order
    order = np.arange(n)
    size = 0
    passes = 0
    while size < min(m, n):
        # column by column in one order of operations, so equal columns get equal duals (a tie)
        dual = (a * (b - a @ x)[:, None]).sum(axis=0)
        basis = np.linalg.qr(a[:, order[:size]])[0] if size else np.zeros((m, 0))
        while True:
            candidates = order[size:]
            best = int(np.argmax(dual[candidates]))
            if not dual[candidates[best]] > 0.0:  # Kuhn-Tucker conditions hold: x is optimal
                return x
            column = a[:, candidates[best]]
            outside = column - basis @ (basis.T @ column)
            outside -= basis @ (basis.T @ outside)  # projected out twice: accurate to rounding
            inside_norm = np.linalg.norm(column - outside)
            # L&H's test: R's new diagonal element, ‖outside‖, must not vanish beside the column's
            # part in span(P); and the column's prospective coefficient must be positive
            if np.linalg.norm(outside) > 100.0 * (np.spacing(inside_norm) if inside_norm > 0 else 0.0):
                z = np.linalg.lstsq(a[:, np.append(order[:size], candidates[best])], b, rcond=None)[0]
                if z[-1] > 0.0:
                    break
            dual[candidates[best]] = 0.0
        order[[size, size + best]] = order[[size + best, size]]
        size += 1
        while True:
            passes += 1
            if passes >= maxiter:
                raise RuntimeError(f"non-negative least squares reached the maximum number of iterations ({maxiter})")
            passive = order[:size]
            # the step from x towards z at which each coefficient of P going to 0 or below reaches 0
            with np.errstate(divide="ignore", invalid="ignore"):
                steps = np.where(z <= 0.0, x[passive] / (x[passive] - z), np.inf)
            steps[np.isnan(steps)] = np.inf
            if np.all(steps == np.inf):  # z is feasible
                break
            first = int(np.argmin(steps))
            x[passive] += steps[first] * (z - x[passive])
            x[passive[first]] = 0.0
            # it and every other coefficient of P at or below 0 move to Z, each to Z's front in turn
            leaving = x[passive] <= 0.0
            leaving[first] = False
            moved = np.concatenate([[passive[first]], passive[leaving]])
            x[moved] = 0.0
            leaving[first] = True
            order[:size] = np.concatenate([passive[~leaving], moved[::-1]])
            size -= moved.size
            z = np.linalg.lstsq(a[:, order[:size]], b, rcond=None)[0]
        x[order[:size]] = z
    return x
