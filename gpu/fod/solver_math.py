"""Per-voxel solvers of CSD and MSMT-CSD, compiled for both the CPU and the CUDA backend.

Every function is ``register_jitable``: numba compiles it into the ``@njit`` loop or the
``cuda.jit`` kernel that calls it, so the math is written once. They allocate nothing:
callers pass work arrays, sized as the docstrings say. All arithmetic is float64.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["cholesky_lower", "cholesky_solve", "matvec", "icls_voxel", "csd_initial_terms", "csd_voxel"]


@register_jitable
def cholesky_lower(a, n):
    """Overwrite the lower triangle of a[:n, :n] (symmetric positive definite, lower triangle
    read) with L, L Lᵀ = a. Returns False, leaving later columns unfactored, at a pivot ≤ 0."""
    for j in range(n):
        s = a[j, j]
        for k in range(j):
            s -= a[j, k] * a[j, k]
        if not s > 0.0:
            return False
        d = math.sqrt(s)
        a[j, j] = d
        for i in range(j + 1, n):
            t = a[i, j]
            for k in range(j):
                t -= a[i, k] * a[j, k]
            a[i, j] = t / d
    return True


@register_jitable
def cholesky_solve(low, n, x):
    """x[:n] ← (L Lᵀ)⁻¹ x[:n], L the lower triangle of low[:n, :n]."""
    for i in range(n):
        t = x[i]
        for k in range(i):
            t -= low[i, k] * x[k]
        x[i] = t / low[i, i]
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= low[k, i] * x[k]
        x[i] = t / low[i, i]


@register_jitable
def matvec(a, x, out):
    """out = a x for a (m, n), x (n,)."""
    for r in range(a.shape[0]):
        t = 0.0
        for i in range(a.shape[1]):
            t += a[r, i] * x[i]
        out[r] = t


@register_jitable
def matvec_columns(at, x, out):
    """out = a x for at = aᵀ (n, m), x (n,): a column of ``at`` at a time, each out[r] a sum
    over i in order, as :func:`matvec`'s (the same bytes), with the rows side by side in the
    inner loop, which the compiler vectorises (docs/decisions/fod-cpu-constraint-columns.md)."""
    m = at.shape[1]
    for r in range(m):
        out[r] = 0.0
    for i in range(at.shape[0]):
        xi = x[i]
        for r in range(m):
            out[r] += at[i, r] * xi


@register_jitable
def _append_row(B, rows, k, r, lambda_min_norm, low):
    """Extend the Cholesky factor low[:k, :k] of the active rows' Gram matrix
    (B_a B_aᵀ + λ I, rows in the order of ``rows``) by row r of B: one forward solve."""
    n = B.shape[1]
    ss = 0.0
    for j in range(k):
        t = 0.0
        for i in range(n):
            t += B[rows[j], i] * B[r, i]
        for q in range(j):
            t -= low[j, q] * low[k, q]
        t /= low[j, j]
        low[k, j] = t
        ss += t * t
    d = lambda_min_norm
    for i in range(n):
        d += B[r, i] * B[r, i]
    d -= ss
    # the pivot is ≥ λ in exact arithmetic; rounding must not leave it ≤ 0
    low[k, k] = math.sqrt(max(max(d, lambda_min_norm), 1e-300))
    rows[k] = r


@register_jitable
def _remove_row(rows, k, p, low):
    """Drop position p from the factor low[:k, :k] and from ``rows``: deleting row p leaves
    one entry above the diagonal in each later row, which Givens rotations of neighbouring
    columns clear (Golub & Van Loan, Matrix Computations, Sec. 6.5.4)."""
    for i in range(p, k - 1):
        rows[i] = rows[i + 1]
        for j in range(i + 2):
            low[i, j] = low[i + 1, j]
    for i in range(p, k - 1):
        a = low[i, i]
        b = low[i, i + 1]
        h = math.hypot(a, b)
        cs = a / h
        sn = b / h
        for j in range(i, k - 1):
            u = low[j, i]
            v = low[j, i + 1] if j > i else b
            low[j, i] = cs * u + sn * v
            if j > i:
                low[j, i + 1] = cs * v - sn * u
        low[i, i] = h


@register_jitable
def icls_voxel(b, project, B, Bt, L, lambda_min_norm, max_iterations, x,
               y_u, c_u, c, lam_prev, active, rows, l, low):
    """Minimise ‖H x − b‖ subject to A x ≥ 0 for one voxel by MRtrix3's dual active-set method
    (``Math::ICLS::Solver``, ``core/math/constrained_least_squares.h``), in the preconditioned
    frame of :class:`gpu.fod.msmt_problem.MsmtProblem`.

    From y = y_u, the most violated constraint (lowest c = B y) joins the active set; the
    multipliers of the active rows solve (B_a B_aᵀ + λ I) l = −B_a y_u (Cholesky). While
    some are negative, the row whose multiplier reaches zero first on the way from the
    previous feasible ones leaves (ties: the lowest row); then y = y_u + B_aᵀ l. This
    repeats until no constraint is violated, the active set stops changing, or after
    ``max_iterations``. Finally x = L⁻ᵀ y. The active set goes through the same steps as
    MRtrix3's, which factors the Gram matrix afresh at each; here its Cholesky factor is
    updated as a row joins or leaves.

    Parameters
    ----------
    b : (n_volumes,) the signal.
    project : (N, n_volumes); B : (M, N), Bt = Bᵀ (contiguous); L : (N, N) — from the problem.
    lambda_min_norm : float; max_iterations : int.
    x : (N,) output.
    y_u : (N,); c_u, c, lam_prev, l : (M,) float64; active, rows : (M,) integer;
    low : (M, M) — work arrays.

    Returns
    -------
    int
        Outer iterations (> max_iterations: not converged).
    """
    n = project.shape[0]
    m = B.shape[0]
    matvec(project, b, y_u)
    matvec_columns(Bt, y_u, c_u)
    for i in range(n):
        x[i] = y_u[i]
    for r in range(m):
        c[r] = c_u[r]
        lam_prev[r] = 0.0
        active[r] = 0
    k = 0
    niter = 0
    while True:
        worst = 0
        lowest = c[0]
        for r in range(1, m):
            if c[r] < lowest:
                lowest = c[r]
                worst = r
        if not lowest < 0.0:
            break
        changed = active[worst] == 0
        if changed:
            _append_row(B, rows, k, worst, lambda_min_norm, low)
            k += 1
            active[worst] = 1
        while True:
            for p in range(k):
                l[p] = -c_u[rows[p]]
            cholesky_solve(low, k, l)
            s_min = math.inf
            s_row = m
            s_pos = 0
            for p in range(k):
                r = rows[p]
                if l[p] < 0.0:
                    s = lam_prev[r] / (lam_prev[r] - l[p])
                    if s < s_min or (s == s_min and r < s_row):
                        s_min = s
                        s_row = r
                        s_pos = p
            if s_min == math.inf:
                for i in range(n):
                    t = y_u[i]
                    for p in range(k):
                        t += B[rows[p], i] * l[p]
                    x[i] = t
                break
            changed = True
            active[s_row] = 0
            _remove_row(rows, k, s_pos, low)
            k -= 1
        for r in range(m):
            lam_prev[r] = 0.0
        for p in range(k):
            lam_prev[rows[p]] = l[p]
        niter += 1
        if not changed or niter > max_iterations:
            break
        matvec_columns(Bt, x, c)
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]
    return niter


@register_jitable
def csd_initial_terms(init, Q, data, i):
    """Coefficient i of CSD's initial estimate (0 beyond the rows of ``init``) and of Qᵀ data."""
    n = data.shape[0]
    t = 0.0
    if i < init.shape[0]:
        for j in range(n):
            t += init[i, j] * data[j]
    u = 0.0
    for j in range(n):
        u += Q[j, i] * data[j]
    return t, u


@register_jitable
def csd_voxel(signal, init, Q, QtQ, P, Pt, threshold, max_iterations, f,
              data, qtb, negative, was_negative, amplitudes, normal, work):
    """Tournier et al. (2007) super-resolved CSD of one voxel as ``dwi2fod csd`` iterates it
    (:mod:`gpu.fod.csd_problem`). A voxel with a non-finite signal gets f = 0; negative
    signal values count as 0.

    The normal matrix QᵀQ + Σ pᵣ pᵣᵀ over the negative rows follows the negative set: a row
    that turns negative is added, one that stops being negative taken out. After the first
    iteration few rows change, so this costs a fraction of summing every negative row
    afresh at each iteration, as ``dwi2fod`` does; the result differs from that sum's by
    rounding (docs/decisions/fod-csd-normal-update.md).

    Parameters
    ----------
    signal : (n,) the highest shell's values.
    init : (n_init, n); Q : (n, N); QtQ : (N, N); P : (K, N), Pt = Pᵀ (contiguous) — from
    the problem.
    threshold : float; max_iterations : int.
    f : (N,) output.
    data : (n,); qtb : (N,); amplitudes : (K,) float64; negative, was_negative : (K,)
    integer; normal, work : (N, N) — work arrays.

    Returns
    -------
    int
        Iterations; max_iterations when the negative set never repeated, −1 for a
        non-finite signal.
    """
    n = signal.shape[0]
    nf = Q.shape[1]
    nk = P.shape[0]
    for j in range(n):
        v = signal[j]
        if not math.isfinite(v):
            for i in range(nf):
                f[i] = 0.0
            return -1
        data[j] = v if v > 0.0 else 0.0
    for i in range(nf):
        f[i], qtb[i] = csd_initial_terms(init, Q, data, i)
    for p in range(nf):
        for q in range(p + 1):
            normal[p, q] = QtQ[p, q]
    for r in range(nk):
        was_negative[r] = 0
    for it in range(max_iterations):
        same = it > 0
        matvec_columns(Pt, f, amplitudes)
        for r in range(nk):
            neg = 1 if amplitudes[r] < threshold else 0
            if neg != was_negative[r]:
                same = False
            negative[r] = neg
        if same:
            return it
        for r in range(nk):
            change = negative[r] - was_negative[r]
            if change != 0:
                for p in range(nf):
                    w = change * P[r, p]
                    for q in range(p + 1):
                        normal[p, q] += w * P[r, q]
        for p in range(nf):
            for q in range(p + 1):
                work[p, q] = normal[p, q]
        cholesky_lower(work, nf)
        for i in range(nf):
            f[i] = qtb[i]
        cholesky_solve(work, nf, f)
        for r in range(nk):
            was_negative[r] = negative[r]
    return max_iterations
