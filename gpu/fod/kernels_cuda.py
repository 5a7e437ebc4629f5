"""CUDA kernels of CSD and MSMT-CSD: one voxel per block of one warp (32 threads), float64,
its work in shared memory.

The steps follow the CPU solvers of :mod:`gpu.fod.solver_math` (MRtrix3's); the threads
share the work of each step. A minimum over threads is written to shared memory and reduced
there by a tree whose order of comparisons is fixed (no atomics), so each voxel's result is
the same bytes on every run and any launch shape.

Only ``cuda.syncthreads`` and its predicate forms synchronise the threads (warp shuffles
and ``syncwarp`` have no counterpart in numba's CUDA simulator, where the tests run these
kernels); with one warp per block they cost what a warp barrier does. Every loop bound
and branch around a barrier is computed alike by all threads of the block.

MSMT-CSD (:func:`msmt_kernel`) takes the CPU solver's steps in its representation
(:func:`gpu.fod.solver_math.icls_voxel`): the inverse L⁻¹ of the Cholesky factor of the
active rows' Gram matrix (packed, in shared memory, for at most ``k_max`` rows),
u = L⁻¹ c_u[rows] and the multipliers l = −L⁻ᵀu, updated as a row joins (products with
L⁻¹) or leaves (Givens rotations that each thread applies to its own columns): no
triangular solve, whose column steps would each wait at a barrier. Between iterations the
constraint values are c_u + G[:, rows] l, G = B Bᵀ computed once per problem. Results equal
the CPU's to rounding (the GPU contracts multiply-adds; relative L2 of a few 1e-9) and take
its iterations (docs/decisions/fod-warp-per-voxel.md). A voxel whose active set would grow
beyond ``k_max``, or whose signal or constraint values are not finite, answers
:data:`gpu.fod.kernel_layout.REDO`, and the CPU backend solves it.
"""

from __future__ import annotations

import math

from numba import cuda, float64, int32, int64, uint64

from gpu.fod.kernel_layout import REDO, ROWS_A_THREAD, THREADS
from gpu.fod.solver_math import csd_initial_terms, inverse_pivot

__all__ = ["msmt_kernel", "csd_kernel"]

# Indices are uint64: numba makes a signed index a wraparound test and a signed range loop a
# count with sign fix-ups, which were most of these kernels' instructions; unsigned, they are
# plain address arithmetic (docs/decisions/fod-warp-per-voxel.md).
_0 = uint64(0)
_1 = uint64(1)
_2 = uint64(2)
_3 = uint64(3)
_T = uint64(THREADS)


@cuda.jit(device=True)
def _off(i):
    """Start of row i of the packed inverse factor, whose row i holds columns 0…i + 1 (the
    entry right of the diagonal is zero, room for the rotations of a row that leaves)."""
    return (i * (i + _3)) >> _1


@cuda.jit(device=True)
def _row_sums(li, vec, k, out, t, off0, off1):
    """out[i] = Σ_{j ≤ i} M[i, j] vec[j] for i < k, M = L⁻¹ packed in ``li``: thread t rows t
    and t + 32, one pass over j for both."""
    t1 = t + _T
    s0 = 0.0
    s1 = 0.0
    j = _0
    while j < k:
        vj = vec[j]
        if j <= t and t < k:
            s0 += li[off0 + j] * vj
        if j <= t1 and t1 < k:
            s1 += li[off1 + j] * vj
        j += _1
    if t < k:
        out[t] = s0
    if t1 < k:
        out[t1] = s1


@cuda.jit(device=True)
def _column_sums(li, vec, k, out, base, scale, t):
    """out[base + j] = scale · Σ_{j ≤ i < k} M[i, j] vec[i] for j < k, M = L⁻¹ packed in
    ``li``: thread t columns t and t + 32, whose entries of a row lie side by side."""
    t1 = t + _T
    s0 = 0.0
    s1 = 0.0
    i = _0
    oi = _0  # _off(i), moved on by addition
    while i < k:
        vi = vec[i]
        if t <= i:
            s0 += li[oi + t] * vi
        if t1 <= i:
            s1 += li[oi + t1] * vi
        oi += i + _2
        i += _1
    if t < k:
        out[base + t] = scale * s0
    if t1 < k:
        out[base + t1] = scale * s1


@cuda.jit(device=True)
def _append_row(G, rows, lp, cua, u, li, gk, w, l, k, r, cu_row, lambda_min_norm, t, off0, off1):
    """Row r joins the active set at position k: :func:`gpu.fod.solver_math._append_row` with
    threads (w = L⁻¹ G[rows, r] by rows t and t + 32, L⁻¹'s new row by columns t and t + 32,
    wᵀw and wᵀu by every thread, the same sums in the same order). ``l`` may be ``w``'s
    array."""
    t1 = t + _T
    if t < k:
        gk[t] = G[uint64(rows[t]), r]
    if t1 < k:
        gk[t1] = G[uint64(rows[t1]), r]
    cuda.syncthreads()
    _row_sums(li, gk, k, w, t, off0, off1)
    cuda.syncthreads()
    # every thread forms the pivot and u's new entry (the same operations, so the same
    # values): L⁻¹'s new row times c_u[rows] is (c_u[r] − wᵀu)/ρ
    ss = 0.0
    wu = 0.0
    j = _0
    while j < k:
        wj = w[j]
        ss += wj * wj
        wu += wj * u[j]
        j += _1
    rrho = inverse_pivot(G[r, r], ss, lambda_min_norm)
    base = _off(k)
    _column_sums(li, w, k, li, base, -rrho, t)
    uk = (cu_row - wu) * rrho
    if t == _0:
        li[base + k] = rrho
        li[base + k + _1] = 0.0
        rows[k] = r
        cua[k] = cu_row
        u[k] = uk
    cuda.syncthreads()
    if t < k:
        l[t] = lp[t] - uk * li[base + t]
    if t1 < k:
        l[t1] = lp[t1] - uk * li[base + t1]
    if t == _0:
        l[k] = -uk * rrho
        lp[k] = 0.0
    cuda.syncthreads()


@cuda.jit(device=True)
def _remove_row(rows, lp, cua, u, l, li, vcol, cs, sn, tmp, k, p, t, off0, off1):
    """Position p of k leaves the active set: :func:`gpu.fod.solver_math._remove_row` with
    threads. The rotations' cosines and sines follow from running sums of squares of L⁻¹'s
    column p (thread 0 sums, each thread forms its rotations' pair), and each thread turns
    its own two columns (t and t + 32) through all of them without waiting for the others;
    thread 0 turns u. ``cs`` may be ``l``'s array."""
    t1 = t + _T
    last = k - _1
    l0 = l[t] if t < k else 0.0
    l1 = l[t1] if t1 < k else 0.0
    # slower threads may still be reading the leaving row's reduction, in vcol's array
    cuda.syncthreads()
    if p <= t and t < k:
        vcol[t] = li[off0 + p]
    if p <= t1 and t1 < k:
        vcol[t1] = li[off1 + p]
    cuda.syncthreads()
    if t == _0:
        # the squares' running sums, in order
        a = 0.0
        i = p
        while i < k:
            a += vcol[i] * vcol[i]
            cs[i] = a
            i += _1
    cuda.syncthreads()
    # rotation i's cosine and sine into sn[i], cs[i] (read before written: one thread an i)
    s_i = 0.0
    s_n = 0.0
    i = p + t
    if i < last:
        ai = vcol[p] if i == p else math.sqrt(cs[i])
        rn = 1.0 / math.sqrt(cs[i + _1])
        s_i = vcol[i + _1] * rn
        s_n = -ai * rn
    i1 = p + t1
    s_i1 = 0.0
    s_n1 = 0.0
    if i1 < last:
        rn = 1.0 / math.sqrt(cs[i1 + _1])
        s_i1 = vcol[i1 + _1] * rn
        s_n1 = -math.sqrt(cs[i1]) * rn
    cuda.syncthreads()
    if i < last:
        cs[i] = s_i
        sn[i] = s_n
    if i1 < last:
        cs[i1] = s_i1
        sn[i1] = s_n1
    cuda.syncthreads()
    # the sweep: column j takes part from rotation max(p, j − 1) on (row j − 1's entry right
    # of the diagonal is zero); the last row's values are dropped
    j0 = t
    j1 = t1
    start0 = p if j0 <= p else j0 - _1
    start1 = p if j1 <= p else j1 - _1
    c0 = li[_off(start0) + j0] if j0 < k else 0.0
    c1 = li[_off(start1) + j1] if j1 < k else 0.0
    cu_ = u[p]
    lead = t == _0
    i = p
    oi = _off(p)
    while i < last:
        oi1 = oi + i + _2  # _off(i + 1)
        c = cs[i]
        s = sn[i]
        if j0 < k and start0 <= i:
            nx = li[oi1 + j0]
            li[oi + j0] = c * c0 + s * nx
            c0 = c * nx - s * c0
        if j1 < k and start1 <= i:
            nx = li[oi1 + j1]
            li[oi + j1] = c * c1 + s * nx
            c1 = c * nx - s * c1
        if lead:
            nx = u[i + _1]
            u[i] = c * cu_ + s * nx
            cu_ = c * nx - s * cu_
        oi = oi1
        i += _1
    if lead:
        u[last] = cu_  # u's dropped entry, for every thread's multipliers below
    # rows, lp and cua lose position p
    if p <= t and t < last:
        tmp[t] = rows[t + _1]
    if p <= t1 and t1 < last:
        tmp[t1] = rows[t1 + _1]
    lp0 = lp[t + _1] if p <= t and t < last else 0.0
    lp1 = lp[t1 + _1] if p <= t1 and t1 < last else 0.0
    cu0 = cua[t + _1] if p <= t and t < last else 0.0
    cu1 = cua[t1 + _1] if p <= t1 and t1 < last else 0.0
    cuda.syncthreads()
    if p <= t and t < last:
        rows[t] = tmp[t]
        lp[t] = lp0
        cua[t] = cu0
    if p <= t1 and t1 < last:
        rows[t1] = tmp[t1]
        lp[t1] = lp1
        cua[t1] = cu1
    u_last = u[last]
    if t < k and t != p:
        l[t - _1 if t > p else t] = l0 + u_last * c0
    if t1 < k and t1 != p:
        l[t1 - _1 if t1 > p else t1] = l1 + u_last * c1
    # column p leaves rows p … k − 2 (a thread its rows t and t + 32); each keeps a zero
    # right of its new diagonal
    if p <= t and t < last:
        q = p
        while q <= t:
            li[off0 + q] = li[off0 + q + _1]
            q += _1
        li[off0 + t + _1] = 0.0
    if p <= t1 and t1 < last:
        q = p
        while q <= t1:
            li[off1 + q] = li[off1 + q + _1]
            q += _1
        li[off1 + t1 + _1] = 0.0
    cuda.syncthreads()


@cuda.jit(device=True)
def _constraint_values(Bt, x, n, r, m):
    """(B x)[r + 32 j] for j < ROWS_A_THREAD, each a sum over the unknowns in order (the
    CPU's); rows past m answer +inf. The rows go together so that their loads from Bᵀ, which
    come from L2 (beside the blocks' shared memory, L1 is too small for Bᵀ), overlap instead
    of waiting one after another: a thread's rows of a 302-row problem in one pass. Bᵀ has
    zero columns up to a whole number of passes (:func:`gpu.fod.kernel_layout.padded_rows`),
    so a thread's rows lie at fixed distances from its first and their loads share one
    address an unknown."""
    a0 = 0.0
    a1 = 0.0
    a2 = 0.0
    a3 = 0.0
    a4 = 0.0
    a5 = 0.0
    a6 = 0.0
    a7 = 0.0
    a8 = 0.0
    a9 = 0.0
    i = _0
    while i < n:
        xi = x[i]
        a0 += Bt[i, r] * xi
        a1 += Bt[i, r + _T] * xi
        a2 += Bt[i, r + _2 * _T] * xi
        a3 += Bt[i, r + _3 * _T] * xi
        a4 += Bt[i, r + uint64(4) * _T] * xi
        a5 += Bt[i, r + uint64(5) * _T] * xi
        a6 += Bt[i, r + uint64(6) * _T] * xi
        a7 += Bt[i, r + uint64(7) * _T] * xi
        a8 += Bt[i, r + uint64(8) * _T] * xi
        a9 += Bt[i, r + uint64(9) * _T] * xi
        i += _1
    return (_valid(a0, r, 0, m), _valid(a1, r, 1, m), _valid(a2, r, 2, m), _valid(a3, r, 3, m),
            _valid(a4, r, 4, m), _valid(a5, r, 5, m), _valid(a6, r, 6, m), _valid(a7, r, 7, m),
            _valid(a8, r, 8, m), _valid(a9, r, 9, m))


@cuda.jit(device=True)
def _ten_rows(G, q, r):
    """G[q, r + 32 j] for j < ROWS_A_THREAD."""
    return (G[q, r], G[q, r + _T], G[q, r + _2 * _T], G[q, r + _3 * _T], G[q, r + uint64(4) * _T],
            G[q, r + uint64(5) * _T], G[q, r + uint64(6) * _T], G[q, r + uint64(7) * _T],
            G[q, r + uint64(8) * _T], G[q, r + uint64(9) * _T])


@cuda.jit(device=True)
def _add_scaled(a, g, s):
    """a + s g, entry by entry, for two tuples of ROWS_A_THREAD values."""
    return (a[0] + g[0] * s, a[1] + g[1] * s, a[2] + g[2] * s, a[3] + g[3] * s, a[4] + g[4] * s,
            a[5] + g[5] * s, a[6] + g[6] * s, a[7] + g[7] * s, a[8] + g[8] * s, a[9] + g[9] * s)


@cuda.jit(device=True)
def _gram_constraint_values(G, c_u, v, rows, l, k, r, m):
    """(B x)[r + 32 j] for j < ROWS_A_THREAD with x = y_u + B_aᵀ l: c_u + G[:, rows] l, a
    column of G an active row, summed in the rows' order (G and c_u padded like Bᵀ); rows past
    m answer +inf. Four active rows a step: their loads from G (in L2) are issued together,
    the compiler keeping some ten to eighteen ahead of the first multiply-add
    (docs/decisions/fod-warp-per-voxel.md)."""
    a = _ten_rows(c_u, v, r)
    p = _0
    while p + _3 < k:
        g0 = _ten_rows(G, uint64(rows[p]), r)
        g1 = _ten_rows(G, uint64(rows[p + _1]), r)
        g2 = _ten_rows(G, uint64(rows[p + _2]), r)
        g3 = _ten_rows(G, uint64(rows[p + _3]), r)
        a = _add_scaled(a, g0, l[p])
        a = _add_scaled(a, g1, l[p + _1])
        a = _add_scaled(a, g2, l[p + _2])
        a = _add_scaled(a, g3, l[p + _3])
        p += uint64(4)
    while p < k:
        a = _add_scaled(a, _ten_rows(G, uint64(rows[p]), r), l[p])
        p += _1
    return (_valid(a[0], r, 0, m), _valid(a[1], r, 1, m), _valid(a[2], r, 2, m), _valid(a[3], r, 3, m),
            _valid(a[4], r, 4, m), _valid(a[5], r, 5, m), _valid(a[6], r, 6, m), _valid(a[7], r, 7, m),
            _valid(a[8], r, 8, m), _valid(a[9], r, 9, m))


@cuda.jit(device=True)
def _valid(a, r, j, m):
    """a, the value of row r + 32 j, or +inf past m."""
    return a if r + uint64(j) * _T < m else math.inf


@cuda.jit(device=True)
def _keep_row(c_u, v, r, j, m, c):
    """c_u[v, r + 32 j] = c if that row is before m."""
    q = r + uint64(j) * _T
    if q < m:
        c_u[v, q] = c


@cuda.jit(device=True)
def _keep_rows(c_u, v, r, m, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9):
    """c_u[v, r + 32 j] = cj for the rows j < ROWS_A_THREAD before m."""
    _keep_row(c_u, v, r, 0, m, c0)
    _keep_row(c_u, v, r, 1, m, c1)
    _keep_row(c_u, v, r, 2, m, c2)
    _keep_row(c_u, v, r, 3, m, c3)
    _keep_row(c_u, v, r, 4, m, c4)
    _keep_row(c_u, v, r, 5, m, c5)
    _keep_row(c_u, v, r, 6, m, c6)
    _keep_row(c_u, v, r, 7, m, c7)
    _keep_row(c_u, v, r, 8, m, c8)
    _keep_row(c_u, v, r, 9, m, c9)


@cuda.jit(device=True)
def _lower(cr, r, best, best_row):
    """The running minimum (best, best_row) after row r's value cr; a NaN marks it −1 for good."""
    if cr != cr:
        return best, -1
    if cr < best and best_row >= 0:
        return cr, r
    return best, best_row


@cuda.jit(device=True)
def _lowest(value, key, t):
    """The least (value, key) of the block's 32 pairs, by value and then key, a negative key
    winning outright: a tree of five steps in shared memory, then every thread reads the
    root. The order is total over the pairs the kernel forms (keys name distinct rows, or
    are negative), so the result is what a scan in thread order finds, on any launch."""
    h = _T >> _1
    while h > _0:
        if t < h:
            a = value[t]
            ka = key[t]
            b = value[t + h]
            kb = key[t + h]
            if ka >= 0 and (kb < 0 or b < a or (b == a and kb < ka)):
                value[t] = b
                key[t] = kb
        cuda.syncthreads()
        h >>= _1
    return value[_0], key[_0]


@cuda.jit(cache=True)
def msmt_kernel(signals, project, B, Bt, G, L, lambda_min_norm, max_iterations, k_max, c_u, y_u, out, niter):
    """:func:`gpu.fod.solver_math.icls_voxel` for voxel ``blockIdx.x``.

    signals (V, n_volumes); project (N, n_volumes); B (M, N); Bt (N, Mp) = Bᵀ and G (M, Mp)
    = B Bᵀ with zero columns after the M-th, Mp = :func:`gpu.fod.kernel_layout.padded_rows`;
    L (N, N); c_u (≥ V, Mp) and y_u (≥ V, N) scratch; out (V, N); niter (V,): as the CPU
    solver's, or :data:`gpu.fod.kernel_layout.REDO`. Launch with
    :data:`gpu.fod.kernel_layout.THREADS` threads and
    :func:`gpu.fod.kernel_layout.msmt_shared_bytes` of dynamic shared memory. y_u and B y_u go
    to global memory (each thread reads only its own entries of y_u; B y_u as a row joins
    and in the constraint values), so that shared memory holds more voxels an SM (their
    latency is what hides each voxel's sequential steps).
    """
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = project.shape[0]
    nv = project.shape[1]
    m = B.shape[0]
    sh = cuda.shared.array(0, float64)
    x = sh[0:n]
    o = n
    lp = sh[o:o + k_max]
    cua = sh[o + k_max:o + 2 * k_max]
    u = sh[o + 2 * k_max:o + 3 * k_max]
    o += 3 * k_max
    # two scratch vectors, each several things at steps a barrier apart: ``work`` holds w as a
    # row joins, the multipliers l, and the rotations' sums and cosines as a row leaves;
    # ``aux`` holds G[rows, r] as a row joins, the reductions, and L⁻¹'s column p and the
    # rotations' sines as a row leaves
    scratch = max(k_max, THREADS)
    work = sh[o:o + scratch]
    l = work
    aux = sh[o + scratch:o + 2 * scratch]
    red_c = aux
    red_s = aux
    o += 2 * scratch
    li = sh[o:o + (k_max * (k_max + 3)) // 2]
    o = 2 * (o + (k_max * (k_max + 3)) // 2)
    ish = cuda.shared.array(0, int32)
    rows = ish[o:o + k_max]
    # tmp, _remove_row's scratch, is also the reductions' row buffer; the leaving row's
    # reduction packs its position into the low 6 bits (k_max ≤ 64)
    tmp = ish[o + k_max:o + k_max + scratch]
    red_row = tmp
    red_srow = tmp
    n = uint64(n)
    nv = uint64(nv)
    m = uint64(m)
    k_max = uint64(k_max)
    # thread t's rows of the factor (k_max ≤ 2 × THREADS): t and t + 32
    t1 = t + _T
    off0 = _off(t)
    off1 = _off(t1)

    bad = 0
    j = t
    while j < nv:
        if not math.isfinite(signals[v, j]):
            bad = 1
        j += _T
    if cuda.syncthreads_or(bad):
        if t == _0:
            niter[v] = REDO
        return
    i = t
    while i < n:
        s = 0.0
        j = _0
        while j < nv:
            s += project[i, j] * signals[v, j]
            j += _1
        y_u[v, i] = s
        x[i] = s
        i += _T
    cuda.syncthreads()

    k = _0
    it = 0
    first = True
    redo = False
    while True:
        # the most violated constraint: the lowest c = B x, ties to the lowest row
        best = math.inf
        best_row = int64(m)
        r = t
        while r < m:
            if first:
                # x = y_u: these are c_u, kept for the rows that join later
                c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = _constraint_values(Bt, x, n, r, m)
                _keep_rows(c_u, v, r, m, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9)
            else:
                c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = _gram_constraint_values(G, c_u, v, rows, l, k, r, m)
            # rows ascending, so ties go to the lowest
            best, best_row = _lower(c0, int64(r + uint64(0) * _T), best, best_row)
            best, best_row = _lower(c1, int64(r + uint64(1) * _T), best, best_row)
            best, best_row = _lower(c2, int64(r + uint64(2) * _T), best, best_row)
            best, best_row = _lower(c3, int64(r + uint64(3) * _T), best, best_row)
            best, best_row = _lower(c4, int64(r + uint64(4) * _T), best, best_row)
            best, best_row = _lower(c5, int64(r + uint64(5) * _T), best, best_row)
            best, best_row = _lower(c6, int64(r + uint64(6) * _T), best, best_row)
            best, best_row = _lower(c7, int64(r + uint64(7) * _T), best, best_row)
            best, best_row = _lower(c8, int64(r + uint64(8) * _T), best, best_row)
            best, best_row = _lower(c9, int64(r + uint64(9) * _T), best, best_row)
            r += uint64(ROWS_A_THREAD * THREADS)
        red_c[t] = best
        red_row[t] = best_row
        cuda.syncthreads()
        lowest, worst = _lowest(red_c, red_row, t)
        worst = int64(worst)
        if worst < 0:
            redo = True
        if redo or not lowest < 0.0:
            break
        found = 0
        if (t < k and rows[t] == worst) or (t1 < k and rows[t1] == worst):
            found = 1
        changed = cuda.syncthreads_or(found) == 0
        if changed:
            if k == k_max:
                redo = True
                break
            _append_row(G, rows, lp, cua, u, li, aux, work, l, k, uint64(worst), c_u[v, uint64(worst)],
                        lambda_min_norm, t, off0, off1)
            k += _1
        # l holds the multipliers of the active rows (updated as a row joins or leaves)
        while True:
            # the row whose multiplier reaches zero first leaves (ties: the lowest row)
            s_min = math.inf
            s_row = int64(m)
            s_pos = _0
            p = t
            while p < k:
                if l[p] < 0.0:
                    rr = int64(rows[p])
                    s = lp[p] / (lp[p] - l[p])
                    if s < s_min or (s == s_min and rr < s_row):
                        s_min = s
                        s_row = rr
                        s_pos = p
                p += _T
            red_s[t] = s_min
            red_srow[t] = (s_row << 6) | int64(s_pos)
            cuda.syncthreads()
            # by row, then position: the packed key orders as its row (the position fills the low bits)
            s_min, packed = _lowest(red_s, red_srow, t)
            s_pos = uint64(int64(packed) & 63)
            if s_min == math.inf:
                # the next c's reduction reuses this one's buffers, which slower threads may still read
                cuda.syncthreads()
                break
            changed = True
            _remove_row(rows, lp, cua, u, l, li, aux, work, aux, tmp, k, s_pos, t, off0, off1)
            k -= _1
        if t < k:
            lp[t] = l[t]
        if t1 < k:
            lp[t1] = l[t1]
        it += 1
        if not changed or it > max_iterations:
            break
        first = False
    if redo:
        if t == _0:
            niter[v] = REDO
        return
    # x = y_u + B_aᵀ l: unknowns t and t + 32 in one pass over the active rows
    s0 = y_u[v, t] if t < n else 0.0
    s1 = y_u[v, t1] if t1 < n else 0.0
    p = _0
    while p < k:
        rr = uint64(rows[p])
        lq = l[p]
        if t < n:
            s0 += B[rr, t] * lq
        if t1 < n:
            s1 += B[rr, t1] * lq
        p += _1
    if t < n:
        x[t] = s0
    if t1 < n:
        x[t1] = s1
    cuda.syncthreads()
    # x ← L⁻ᵀ x
    i = n
    while i > _0:
        i -= _1
        xi = x[i] / L[i, i]
        if t == _0:
            out[v, i] = xi
        j = t
        while j < i:
            x[j] -= L[i, j] * xi
            j += _T
        cuda.syncthreads()
    if t == _0:
        niter[v] = it


@cuda.jit(device=True)
def _tri(p):
    """Start of row p of a lower triangle packed by rows."""
    return (p * (p + _1)) >> _1


@cuda.jit(cache=True)
def csd_kernel(signals, init, Q, QtQ, P, threshold, max_iterations, out, niter):
    """:func:`gpu.fod.solver_math.csd_voxel` for voxel ``blockIdx.x``, its normal matrix summed
    afresh each iteration over the negative rows (the CPU's follows the rows that change:
    the same to rounding).

    signals (V, n); init, Q, QtQ, P as :class:`gpu.fod.csd_problem.CsdProblem`; out (V, N);
    niter (V,). Launch with :data:`gpu.fod.kernel_layout.THREADS` threads and
    :func:`gpu.fod.kernel_layout.csd_shared_bytes` of dynamic shared memory.
    """
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = Q.shape[0]
    nf = Q.shape[1]
    nk = P.shape[0]
    n_tri = nf * (nf + 1) // 2
    sh = cuda.shared.array(0, float64)
    data = sh[0:n]
    f = sh[n:n + nf]
    qtb = sh[n + nf:n + 2 * nf]
    diag = sh[n + 2 * nf:n + 3 * nf]
    z = sh[n + 3 * nf:n + 4 * nf]
    work = sh[n + 4 * nf:n + 4 * nf + n_tri]
    o = 2 * (n + 4 * nf + n_tri)
    ish = cuda.shared.array(0, int32)
    negative = ish[o:o + nk]
    was_negative = ish[o + nk:o + 2 * nk]
    neg_rows = ish[o + 2 * nk:o + 3 * nk]
    counts = ish[o + 3 * nk:o + 3 * nk + THREADS]
    n = uint64(n)
    nf = uint64(nf)
    nk = uint64(nk)
    n_tri = uint64(n_tri)

    bad = 0
    j = t
    while j < n:
        s = signals[v, j]
        if not math.isfinite(s):
            bad = 1
        data[j] = s if s > 0.0 else 0.0
        j += _T
    if cuda.syncthreads_or(bad):
        i = t
        while i < nf:
            out[v, i] = 0.0
            i += _T
        if t == _0:
            niter[v] = -1
        return
    i = t
    while i < nf:
        f[i], qtb[i] = csd_initial_terms(init, Q, data, i)
        i += _T
    cuda.syncthreads()
    # thread t owns a contiguous run of constraint rows, so that the negative ones are listed in order
    run = (nk + _T - _1) // _T
    first_row = t * run if t * run < nk else nk
    last_row = first_row + run if first_row + run < nk else nk
    result = max_iterations
    for it in range(max_iterations):
        differ = 0
        count = 0
        r = first_row
        while r < last_row:
            s = 0.0
            i = _0
            while i < nf:
                s += P[r, i] * f[i]
                i += _1
            neg = 1 if s < threshold else 0
            if neg != was_negative[r]:
                differ = 1
            negative[r] = neg
            was_negative[r] = neg
            count += neg
            r += _1
        counts[t] = count
        if cuda.syncthreads_or(differ) == 0 and it > 0:
            result = it
            break
        start = _0
        total = _0
        for q in range(THREADS):
            cq = uint64(counts[q])
            if uint64(q) < t:
                start += cq
            total += cq
        r = first_row
        while r < last_row:
            if negative[r] != 0:
                neg_rows[start] = r
                start += _1
            r += _1
        cuda.syncthreads()
        # QtQ + Pₙᵀ Pₙ, lower triangle packed by rows
        e = t
        while e < n_tri:
            p = uint64((math.sqrt(8.0 * e + 1.0) - 1.0) / 2.0)
            while _tri(p) > e:
                p -= _1
            while _tri(p + _1) <= e:
                p += _1
            q = e - _tri(p)
            acc = QtQ[p, q]
            a = _0
            while a < total:
                r = uint64(neg_rows[a])
                acc += P[r, p] * P[r, q]
                a += _1
            work[e] = acc
            e += _T
        cuda.syncthreads()
        # Cholesky by columns, each entry's sum in the CPU's order; the diagonal goes to diag
        failed = nf
        j = _0
        while j < nf:
            rj = _tri(j)
            s = work[rj + j]
            q = _0
            while q < j:
                s -= work[rj + q] * work[rj + q]
                q += _1
            if not s > 0.0:
                failed = j
                break
            d = math.sqrt(s)
            i = t
            while i < nf:
                if i > j:
                    ri = _tri(i)
                    u = work[ri + j]
                    q = _0
                    while q < j:
                        u -= work[ri + q] * work[rj + q]
                        q += _1
                    work[ri + j] = u / d
                i += _T
            if t == _0:
                diag[j] = d
            cuda.syncthreads()
            j += _1
        # as the CPU solver: columns from a failed pivot on stay unfactored
        i = t
        while i < nf:
            if i >= failed:
                diag[i] = work[_tri(i) + i]
            f[i] = qtb[i]
            i += _T
        cuda.syncthreads()
        j = _0
        while j < nf:
            wj = f[j] / diag[j]
            if j % _T == t:
                z[j] = wj
            i = t
            while i < nf:
                if i > j:
                    f[i] -= work[_tri(i) + j] * wj
                i += _T
            cuda.syncthreads()
            j += _1
        q = nf
        while q > _0:
            q -= _1
            xq = z[q] / diag[q]
            if q % _T == t:
                f[q] = xq
            base = _tri(q)
            i = t
            while i < q:
                z[i] -= work[base + i] * xq
                i += _T
            cuda.syncthreads()
    i = t
    while i < nf:
        out[v, i] = f[i]
        i += _T
    if t == _0:
        niter[v] = result
