"""Per-voxel solvers of CSD and MSMT-CSD, compiled for both the CPU and the CUDA backend.

Every function is ``register_jitable``: numba compiles it into the ``@njit`` loop or the
``cuda.jit`` kernel that calls it, so the math is written once. They allocate nothing:
callers pass work arrays, sized as the docstrings say. All arithmetic is float64.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["cholesky_lower", "cholesky_solve", "matvec", "inverse_pivot", "icls_voxel", "csd_initial_terms",
           "csd_voxel"]


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
def inverse_pivot(g_rr, ss, lambda_min_norm):
    """1/ρ for the row joining the active rows' factor: ρ² = G[r, r] + λ − wᵀw (ss = wᵀw),
    which is ≥ λ in exact arithmetic and is held there against rounding."""
    d = lambda_min_norm + g_rr
    d -= ss
    if not d > lambda_min_norm:
        d = lambda_min_norm
    if not d > 1e-300:
        d = 1e-300
    return 1.0 / math.sqrt(d)


@register_jitable
def _add_rows(base, M, rows, l, k, out):
    """out = base + Σ_{p<k} l[p] M[rows[p]], each entry a sum over p in order: four rows a
    pass over ``out``, so that each entry is loaded and stored once for four of its terms."""
    n = out.shape[0]
    for i in range(n):
        out[i] = base[i]
    p = 0
    while p + 3 < k:
        l0, l1, l2, l3 = l[p], l[p + 1], l[p + 2], l[p + 3]
        m0, m1, m2, m3 = M[rows[p]], M[rows[p + 1]], M[rows[p + 2]], M[rows[p + 3]]
        for i in range(n):
            t = out[i] + m0[i] * l0
            t += m1[i] * l1
            t += m2[i] * l2
            out[i] = t + m3[i] * l3
        p += 4
    while p < k:
        lq = l[p]
        mp = M[rows[p]]
        for i in range(n):
            out[i] += mp[i] * lq
        p += 1


@register_jitable
def _append_row(G, rows, k, r, c_u_r, lambda_min_norm, li, u, w, l, lp):
    """Row r joins the active set at position k. With L Lᵀ = G[rows, rows] + λ I (G = B Bᵀ),
    L would gain the row (wᵀ, ρ), w = L⁻¹ G[rows, r], ρ² = G[r, r] + λ − wᵀw (one forward
    solve); L⁻¹, kept in li[:k, :k] instead, gains the row q = (−wᵀL⁻¹/ρ, 1/ρ), u = L⁻¹
    c_u[rows] the entry u_k = (c_u[r] − wᵀu)/ρ, and the multipliers l = −L⁻ᵀu, which were
    lp[:k], become lp − u_k q (the new row's own −u_k/ρ): products, no triangular solve.
    ``w`` holds 2k entries (G[rows, r] in its second half)."""
    g = w[k:]
    for j in range(k):
        g[j] = G[rows[j], r]
    # w = L⁻¹ g four rows at a time: each row's sum in order, as one row alone would take it,
    # with four independent chains of additions in flight instead of one
    i = 0
    while i + 3 < k:
        t0 = 0.0
        t1 = 0.0
        t2 = 0.0
        t3 = 0.0
        for j in range(i + 1):
            gj = g[j]
            t0 += li[i, j] * gj
            t1 += li[i + 1, j] * gj
            t2 += li[i + 2, j] * gj
            t3 += li[i + 3, j] * gj
        t1 += li[i + 1, i + 1] * g[i + 1]
        t2 += li[i + 2, i + 1] * g[i + 1]
        t2 += li[i + 2, i + 2] * g[i + 2]
        t3 += li[i + 3, i + 1] * g[i + 1]
        t3 += li[i + 3, i + 2] * g[i + 2]
        t3 += li[i + 3, i + 3] * g[i + 3]
        w[i] = t0
        w[i + 1] = t1
        w[i + 2] = t2
        w[i + 3] = t3
        i += 4
    while i < k:
        t = 0.0
        for j in range(i + 1):
            t += li[i, j] * g[j]
        w[i] = t
        i += 1
    ss = 0.0
    wu = 0.0
    for j in range(k):
        ss += w[j] * w[j]
        wu += w[j] * u[j]
    rrho = inverse_pivot(G[r, r], ss, lambda_min_norm)
    # −wᵀL⁻¹/ρ, each entry a sum over the rows in order
    for j in range(k + 2):
        li[k, j] = 0.0
    for i in range(k):
        wi = w[i]
        for j in range(i + 1):
            li[k, j] += li[i, j] * wi
    for j in range(k):
        li[k, j] = -rrho * li[k, j]
    li[k, k] = rrho
    uk = (c_u_r - wu) * rrho
    u[k] = uk
    for j in range(k):
        l[j] = lp[j] - uk * li[k, j]
    l[k] = -uk * rrho
    lp[k] = 0.0
    rows[k] = r


@register_jitable
def _remove_row(rows, k, p, li, u, l, lp, v):
    """Position p of k leaves the active set. Deleting row p of L leaves one entry above the
    diagonal in each later row, which Givens rotations of neighbouring columns clear (Golub &
    Van Loan, Matrix Computations, Sec. 6.5.4); the same rotations, applied to the rows of
    L⁻¹, leave L⁻¹ of the new factor in its first k − 1 rows once column p is deleted. They
    are the rotations that sweep column p of L⁻¹ (v, nonzero from row p on) into its last
    row: rotation i (rows i, i + 1) has cos = v_{i+1}/a_{i+1}, sin = −a_i/a_{i+1}, a_p = v_p,
    a_i = ‖v_{p…i}‖. u, a vector of L⁻¹'s rows, turns with them, and the multipliers become,
    without position p, l + ū r̄: r̄ the row the rotations leave last (dropped), ū u's entry
    there. li has a zero right of each row's diagonal (room for the rotations)."""
    for i in range(p, k):
        v[i] = li[i, p]
    # the squares' running sums, then each rotation's cosine and sine from them
    a = 0.0
    for i in range(p, k):
        a += v[i] * v[i]
        v[k + i] = a
    for i in range(p, k - 1):
        ai = v[p] if i == p else math.sqrt(v[k + i])
        rn = 1.0 / math.sqrt(v[k + i + 1])
        cs = v[i + 1] * rn
        sn = -ai * rn
        for j in range(i + 2):
            lo = li[i, j]
            hi = li[i + 1, j]
            li[i, j] = cs * lo + sn * hi
            li[i + 1, j] = cs * hi - sn * lo
        lo = u[i]
        hi = u[i + 1]
        u[i] = cs * lo + sn * hi
        u[i + 1] = cs * hi - sn * lo
    last = k - 1
    u_last = u[last]
    for j in range(k):
        if j != p:
            l[j - 1 if j > p else j] = l[j] + u_last * li[last, j]
    for i in range(p, last):
        rows[i] = rows[i + 1]
        lp[i] = lp[i + 1]
        for q in range(p, i + 1):
            li[i, q] = li[i, q + 1]
        li[i, i + 1] = 0.0


@register_jitable
def _lowest_row(c, m):
    """(c[r], r), r the first row of the lowest of c[:m], as a scan in order finds it (NaN
    at row 0 answers (NaN, 0), a later NaN is passed over): four scans, of the rows r ≡ 0, 1,
    2, 3 mod 4 (four chains of comparisons in flight instead of one), merged by value, then
    row."""
    l0, w0 = c[0], 0
    l1, w1, l2, w2, l3, w3 = math.inf, m, math.inf, m, math.inf, m
    r = 0
    while r < m:
        if r > 0 and c[r] < l0:
            l0, w0 = c[r], r
        if r + 1 < m and c[r + 1] < l1:
            l1, w1 = c[r + 1], r + 1
        if r + 2 < m and c[r + 2] < l2:
            l2, w2 = c[r + 2], r + 2
        if r + 3 < m and c[r + 3] < l3:
            l3, w3 = c[r + 3], r + 3
        r += 4
    if l1 < l0 or (l1 == l0 and w1 < w0):
        l0, w0 = l1, w1
    if l2 < l0 or (l2 == l0 and w2 < w0):
        l0, w0 = l2, w2
    if l3 < l0 or (l3 == l0 and w3 < w0):
        l0, w0 = l3, w3
    return l0, w0


@register_jitable
def icls_voxel(b, project, B, Bt, G, L, lambda_min_norm, max_iterations, x,
               y_u, c_u, c, l, lp, u, v, active, rows, li):
    """Minimise ‖H x − b‖ subject to A x ≥ 0 for one voxel by MRtrix3's dual active-set method
    (``Math::ICLS::Solver``, ``core/math/constrained_least_squares.h``), in the preconditioned
    frame of :class:`gpu.fod.msmt_problem.MsmtProblem`.

    From y = y_u, the most violated constraint (lowest c = B y) joins the active set; the
    multipliers of the active rows solve (B_a B_aᵀ + λ I) l = −B_a y_u. While some are
    negative, the row whose multiplier reaches zero first on the way from the previous
    feasible ones leaves (ties: the lowest row); then y = y_u + B_aᵀ l. This repeats until
    no constraint is violated, the active set stops changing, or after ``max_iterations``.
    Finally x = L⁻ᵀ y. The active set goes through the same steps as MRtrix3's, which factors
    the Gram matrix afresh at each; here the inverse of its Cholesky factor, u = L⁻¹ c_u[rows]
    and the multipliers l = −L⁻ᵀu are updated as a row joins or leaves (:func:`_append_row`,
    :func:`_remove_row`), and c = B y is c_u + G[:, rows] l (the CUDA kernel's math, the same
    steps; docs/decisions/fod-warp-per-voxel.md).

    Parameters
    ----------
    b : (n_volumes,) the signal.
    project : (N, n_volumes); B : (M, N), Bt = Bᵀ (contiguous); G = B Bᵀ (M, M); L : (N, N)
    — from the problem.
    lambda_min_norm : float; max_iterations : int.
    x : (N,) output.
    y_u : (N,); c_u, c, l, lp, u : (M,), v : (2 M,) float64; active, rows : (M,) integer;
    li : (M, M + 2) — work arrays.

    Returns
    -------
    int
        Outer iterations (> max_iterations: not converged).
    """
    n = project.shape[0]
    m = B.shape[0]
    matvec(project, b, y_u)
    matvec_columns(Bt, y_u, c_u)
    for r in range(m):
        c[r] = c_u[r]
        active[r] = 0
    k = 0
    niter = 0
    while True:
        lowest, worst = _lowest_row(c, m)
        if not lowest < 0.0:
            break
        changed = active[worst] == 0
        if changed:
            _append_row(G, rows, k, worst, c_u[worst], lambda_min_norm, li, u, v, l, lp)
            k += 1
            active[worst] = 1
        else:
            for p in range(k):
                l[p] = lp[p]
        while True:
            s_min = math.inf
            s_row = m
            s_pos = 0
            for p in range(k):
                r = rows[p]
                if l[p] < 0.0:
                    s = lp[p] / (lp[p] - l[p])
                    if s < s_min or (s == s_min and r < s_row):
                        s_min = s
                        s_row = r
                        s_pos = p
            if s_min == math.inf:
                break
            changed = True
            active[s_row] = 0
            _remove_row(rows, k, s_pos, li, u, l, lp, v)
            k -= 1
        for p in range(k):
            lp[p] = l[p]
        niter += 1
        if not changed or niter > max_iterations:
            break
        # c = c_u + G[:, rows] l (G symmetric: a row of G an active row)
        _add_rows(c_u, G, rows, l, k, c)
    _add_rows(y_u, B, rows, l, k, x)
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
