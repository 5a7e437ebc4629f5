"""Per-voxel solvers of CSD and MSMT-CSD, compiled for both the CPU and the CUDA backend.

Every function is ``register_jitable``: numba compiles it into the ``@njit`` loop or the
``cuda.jit`` kernel that calls it, so the math is written once. They allocate nothing:
callers pass work arrays, sized as the docstrings say. All arithmetic is float64.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["cholesky_lower", "cholesky_solve", "icls_voxel", "csd_voxel"]


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
def icls_voxel(b, project, B, L, lambda_min_norm, max_iterations, x,
               y_u, c_u, c, lam, lam_prev, active, rows, l, gram):
    """Minimise ‖H x − b‖ subject to A x ≥ 0 for one voxel by MRtrix3's dual active-set method
    (``Math::ICLS::Solver``, ``core/math/constrained_least_squares.h``), in the preconditioned
    frame of :class:`gpu.fod.msmt_problem.MsmtProblem`.

    From y = y_u, the most violated constraint (lowest c = B y) joins the active set; the
    multipliers of the active rows solve (B_a B_aᵀ + λ I) l = −B_a y_u (Cholesky). While
    some are negative, the row whose multiplier reaches zero first on the way from the
    previous feasible ones leaves; then y = y_u + B_aᵀ l. This repeats until no constraint
    is violated, the active set stops changing, or after ``max_iterations``. Finally
    x = L⁻ᵀ y.

    Parameters
    ----------
    b : (n_volumes,) the signal.
    project : (N, n_volumes); B : (M, N); L : (N, N) — from the problem.
    lambda_min_norm : float; max_iterations : int.
    x : (N,) output.
    y_u : (N,); c_u, c, lam, lam_prev, l : (M,) float64; active, rows : (M,) integer;
    gram : (M, M) — work arrays.

    Returns
    -------
    int
        Outer iterations (> max_iterations: not converged).
    """
    n = project.shape[0]
    nb = project.shape[1]
    m = B.shape[0]
    for i in range(n):
        t = 0.0
        for j in range(nb):
            t += project[i, j] * b[j]
        y_u[i] = t
        x[i] = t
    for r in range(m):
        t = 0.0
        for i in range(n):
            t += B[r, i] * y_u[i]
        c_u[r] = t
        c[r] = t
        lam[r] = 0.0
        lam_prev[r] = 0.0
        active[r] = 0
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
        active[worst] = 1
        while True:
            k = 0
            for r in range(m):
                if active[r] != 0:
                    rows[k] = r
                    l[k] = -c_u[r]
                    k += 1
            for p in range(k):
                rp = rows[p]
                for q in range(p + 1):
                    rq = rows[q]
                    t = 0.0
                    for i in range(n):
                        t += B[rp, i] * B[rq, i]
                    gram[p, q] = t
                gram[p, p] += lambda_min_norm
            cholesky_lower(gram, k)
            cholesky_solve(gram, k, l)
            s_min = math.inf
            s_row = 0
            for r in range(m):
                lam[r] = 0.0
            for p in range(k):
                r = rows[p]
                if l[p] < 0.0:
                    s = lam_prev[r] / (lam_prev[r] - l[p])
                    if s < s_min:
                        s_min = s
                        s_row = r
                lam[r] = l[p]
            if s_min == math.inf:
                for i in range(n):
                    t = y_u[i]
                    for p in range(k):
                        t += B[rows[p], i] * l[p]
                    x[i] = t
                break
            changed = True
            active[s_row] = 0
        for r in range(m):
            lam_prev[r] = lam[r]
        niter += 1
        if not changed or niter > max_iterations:
            break
        for r in range(m):
            t = 0.0
            for i in range(n):
                t += B[r, i] * x[i]
            c[r] = t
    for i in range(n - 1, -1, -1):
        t = x[i]
        for k in range(i + 1, n):
            t -= L[k, i] * x[k]
        x[i] = t / L[i, i]
    return niter


@register_jitable
def csd_voxel(signal, init, Q, QtQ, P, threshold, max_iterations, f,
              data, qtb, negative, was_negative, work):
    """Tournier et al. (2007) super-resolved CSD of one voxel as ``dwi2fod csd`` iterates it
    (:mod:`gpu.fod.csd_problem`). A voxel with a non-finite signal gets f = 0; negative
    signal values count as 0.

    Parameters
    ----------
    signal : (n,) the highest shell's values.
    init : (n_init, n); Q : (n, N); QtQ : (N, N); P : (K, N) — from the problem.
    threshold : float; max_iterations : int.
    f : (N,) output.
    data : (n,); qtb : (N,) float64; negative, was_negative : (K,) integer;
    work : (N, N) — work arrays.

    Returns
    -------
    int
        Iterations; max_iterations when the negative set never repeated, −1 for a
        non-finite signal.
    """
    n = signal.shape[0]
    nf = Q.shape[1]
    n_init = init.shape[0]
    nk = P.shape[0]
    for j in range(n):
        v = signal[j]
        if not math.isfinite(v):
            for i in range(nf):
                f[i] = 0.0
            return -1
        data[j] = v if v > 0.0 else 0.0
    for i in range(nf):
        t = 0.0
        if i < n_init:
            for j in range(n):
                t += init[i, j] * data[j]
        f[i] = t
        u = 0.0
        for j in range(n):
            u += Q[j, i] * data[j]
        qtb[i] = u
    for it in range(max_iterations):
        same = it > 0
        for r in range(nk):
            t = 0.0
            for i in range(nf):
                t += P[r, i] * f[i]
            neg = 1 if t < threshold else 0
            if neg != was_negative[r]:
                same = False
            negative[r] = neg
        if same:
            return it
        for p in range(nf):
            for q in range(p + 1):
                work[p, q] = QtQ[p, q]
        for r in range(nk):
            if negative[r] != 0:
                for p in range(nf):
                    w = P[r, p]
                    for q in range(p + 1):
                        work[p, q] += w * P[r, q]
        cholesky_lower(work, nf)
        for i in range(nf):
            f[i] = qtb[i]
        cholesky_solve(work, nf, f)
        for r in range(nk):
            was_negative[r] = negative[r]
    return max_iterations
