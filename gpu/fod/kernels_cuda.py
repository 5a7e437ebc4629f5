"""CUDA kernels of CSD and MSMT-CSD: one voxel per block of one warp (32 threads), float64,
its work in shared memory.

The steps and the order of every sum follow the CPU solvers of :mod:`gpu.fod.solver_math`
(MRtrix3's), except that MSMT-CSD's triangular solves multiply by the diagonal's reciprocals
where the CPU divides (results equal to rounding): the threads share the work of each step. Sums over constraint rows, matrix
products and the columns of a triangular solve split over the threads; the sequential
parts (the solve's steps, a Givens rotation after another) are separated by barriers. The
triangular solves take two columns between barriers: every thread forms the second
column's value itself, with the operations (and so the rounding) the row's owner would
apply over two steps, so a solve of k columns waits at ⌈k/2⌉ barriers, not k, with the
same bytes (the kernel is bound by instruction latency along these chains of steps). A
minimum over threads is written to shared memory and reduced there by a tree whose order
of comparisons is fixed (no atomics), so each voxel's result is the same bytes on every
run and any launch shape.

Only ``cuda.syncthreads`` and its predicate forms synchronise the threads (warp shuffles
and ``syncwarp`` have no counterpart in numba's CUDA simulator, where the tests run these
kernels); with one warp per block they cost what a warp barrier does. Every loop bound
and branch around a barrier is computed alike by all threads of the block.

MSMT-CSD (:func:`msmt_kernel`) works with G = B Bᵀ, computed once per problem: a
constraint joining the active set reads its Gram entries from G (one forward solve), and
the factor of the active rows' Gram matrix lives in shared memory, packed, for at most
``k_max`` rows. A voxel whose active set would grow beyond that, or whose signal or
constraint values are not finite, answers :data:`gpu.fod.kernel_layout.REDO`, and the CPU
backend solves it.
"""

from __future__ import annotations

import math

from numba import cuda, float64, int32, int64, uint64

from gpu.fod.kernel_layout import REDO, ROWS_A_THREAD, THREADS
from gpu.fod.solver_math import csd_initial_terms

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
    """Start of row i of a packed factor whose row i holds columns 0…i + 1 (the entry right
    of the diagonal is room for a row moved up by one)."""
    return (i * (i + _3)) >> _1


@cuda.jit(device=True)
def _forward_pairs(low, rdiag, k, rhs, out, base, t, off0, off1):
    """Forward substitution with the packed factor L (diagonal's reciprocals in ``rdiag``):
    w = L⁻¹ rhs[:k] into out[base:base + k], thread 0 writing. Column-oriented: thread t
    keeps rows t and t + 32 of ``rhs`` (packed from off0 and off1) up to date, two columns
    between barriers: every thread forms w_{j+1} itself, with the operations (and so the
    rounding) of row j + 1's owner updating it by column j and then reading it; the rows
    below the pair take column j and then column j + 1. rhs[j + 1] itself is left without
    column j's update: nothing reads it after its column."""
    t1 = t + _T
    lead = t == _0
    own0 = t < k
    own1 = t1 < k
    j = _0
    offj1 = _off(_1)  # row j + 1's start, moved on as j grows
    while j + _1 < k:
        j1 = j + _1
        wj = rhs[j] * rdiag[j]
        u = rhs[j1]
        u -= low[offj1 + j] * wj
        wj1 = u * rdiag[j1]
        if lead:
            out[base + j] = wj
            out[base + j1] = wj1
        if own0 and j1 < t:
            a = rhs[t]
            a -= low[off0 + j] * wj
            a -= low[off0 + j1] * wj1
            rhs[t] = a
        if own1 and j1 < t1:
            a = rhs[t1]
            a -= low[off1 + j] * wj
            a -= low[off1 + j1] * wj1
            rhs[t1] = a
        cuda.syncthreads()
        offj1 += j1 + j1 + uint64(5)  # _off(j1 + 2) − _off(j1)
        j += _2
    if j < k:
        # the last column: no row below it
        if lead:
            out[base + j] = rhs[j] * rdiag[j]
        cuda.syncthreads()


@cuda.jit(device=True)
def _cholesky_solve_packed(low, rdiag, k, l, z, t, off0, off1):
    """l[:k] ← (L Lᵀ)⁻¹ l[:k], L packed in ``low`` with its diagonal's reciprocals in
    ``rdiag``; z is scratch. The forward half by :func:`_forward_pairs` into z, the backward
    half the same way by rows t and t + 32 of z (z[q − 1] keeps no partial update of its
    own: z is scratch, and l is written afresh). The values every thread forms, thread 0
    writes."""
    t1 = t + _T
    lead = t == _0
    _forward_pairs(low, rdiag, k, l, z, _0, t, off0, off1)
    q = k
    base = _off(q - _1) if q > _0 else _0  # row q − 1's start, moved back as q falls
    while q > _1:
        q -= _1
        # columns q and q − 1: every thread forms x_{q−1} as row q − 1's owner did in two steps
        q1 = q - _1
        base1 = base - q - _1  # _off(q1) = _off(q) − (q + 1)
        xq = z[q] * rdiag[q]
        u = z[q1]
        u -= low[base + q1] * xq
        xq1 = u * rdiag[q1]
        if lead:
            l[q] = xq
            l[q1] = xq1
        if t < q1:
            a = z[t]
            a -= low[base + t] * xq
            a -= low[base1 + t] * xq1
            z[t] = a
        if t1 < q1:
            a = z[t1]
            a -= low[base + t1] * xq
            a -= low[base1 + t1] * xq1
            z[t1] = a
        cuda.syncthreads()
        base = base1 - q if q1 > _0 else _0  # _off(q1 − 1) = _off(q1) − q (none before row 0)
        q = q1
    if q > _0:
        # the first column: no row above it
        if lead:
            l[_0] = z[_0] * rdiag[_0]
        cuda.syncthreads()


@cuda.jit(device=True)
def _append_row(G, rows, lp, cua, cu_row, low, rdiag, z, k, r, lambda_min_norm, t, off0, off1):
    """Extend the packed factor of the active rows' Gram matrix (G[rows, rows] + λ I) by row
    r: a forward solve against G[rows, r] (:func:`gpu.fod.solver_math._append_row`) by
    :func:`_forward_pairs` into row k; r's c_u (``cu_row``) goes beside it in ``cua``."""
    t1 = t + _T
    base = _off(k)
    if t < k:
        z[t] = G[uint64(rows[t]), r]
    if t1 < k:
        z[t1] = G[uint64(rows[t1]), r]
    cuda.syncthreads()
    _forward_pairs(low, rdiag, k, z, low, base, t, off0, off1)
    if t == _0:
        ss = 0.0
        j = _0
        while j < k:
            ss += low[base + j] * low[base + j]
            j += _1
        d = lambda_min_norm + G[r, r]
        d -= ss
        # the pivot is ≥ λ in exact arithmetic; rounding must not leave it ≤ 0
        if not d > lambda_min_norm:
            d = lambda_min_norm
        if not d > 1e-300:
            d = 1e-300
        d = math.sqrt(d)
        low[base + k] = d
        rdiag[k] = 1.0 / d
        rows[k] = r
        lp[k] = 0.0
        cua[k] = cu_row
    cuda.syncthreads()


@cuda.jit(device=True)
def _rotate_row(low, ab, j, off, i, last, h, cs, sn, parity):
    """Rotation i (columns i and i + 1, cosine cs, sine sn, new diagonal h) on row j of the
    packed factor (starting at off), for j < last."""
    if j == i:
        low[off + i] = h
    elif i < j and j < last:
        u = low[off + i]
        v = low[off + i + _1]
        low[off + i] = cs * u + sn * v
        nv = cs * v - sn * u
        low[off + i + _1] = nv
        if j == i + _1:
            # the next rotation's pair, apart from the entries read now
            ab[_2 * (_1 - parity)] = nv
            ab[_2 * (_1 - parity) + _1] = low[off + i + _2]


@cuda.jit(device=True)
def _remove_row(rows, lp, cua, low, rdiag, z, l, tmp, ab, k, p, t, off0, off1):
    """Drop position p of k from the packed factor, ``rows``, ``lp`` and ``cua``: Givens
    rotations of neighbouring columns (:func:`gpu.fod.solver_math._remove_row`). ``l`` is
    scratch here (the next solve writes it afresh)."""
    # z and tmp are also the reductions' buffers, which slower threads may still be reading
    cuda.syncthreads()
    t1 = t + _T
    last = k - _1
    if p <= t and t < last:
        tmp[t] = rows[t + _1]
        z[t] = lp[t + _1]
        l[t] = cua[t + _1]
    if p <= t1 and t1 < last:
        tmp[t1] = rows[t1 + _1]
        z[t1] = lp[t1 + _1]
        l[t1] = cua[t1 + _1]
    # thread t moves columns t and t + 32 of every row: no entry another thread reads
    i = p
    dst = _off(p)
    while i < last:
        src = dst + i + _2  # _off(i + 1)
        if t < i + _2:
            low[dst + t] = low[src + t]
        if t1 < i + _2:
            low[dst + t1] = low[src + t1]
        dst = src
        i += _1
    cuda.syncthreads()
    if p <= t and t < last:
        rows[t] = tmp[t]
        lp[t] = z[t]
        cua[t] = l[t]
    if p <= t1 and t1 < last:
        rows[t1] = tmp[t1]
        lp[t1] = z[t1]
        cua[t1] = l[t1]
    if t == _0:
        ab[0] = low[_off(p) + p]
        ab[1] = low[_off(p) + p + _1]
    cuda.syncthreads()
    parity = _0
    i = p
    while i < last:
        a = ab[_2 * parity]
        b = ab[_2 * parity + _1]
        h = math.hypot(a, b)
        cs = a / h
        sn = b / h
        _rotate_row(low, ab, t, off0, i, last, h, cs, sn, parity)
        _rotate_row(low, ab, t1, off1, i, last, h, cs, sn, parity)
        parity = _1 - parity
        cuda.syncthreads()
        i += _1
    # the rotations changed the diagonal from position p on
    if p <= t and t < last:
        rdiag[t] = 1.0 / low[off0 + t]
    if p <= t1 and t1 < last:
        rdiag[t1] = 1.0 / low[off1 + t1]
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

    signals (V, n_volumes); project (N, n_volumes); B (M, N); Bt (N, ≥ M) = Bᵀ with zero
    columns after the M-th (:func:`gpu.fod.kernel_layout.padded_rows`); G = B Bᵀ (M, M);
    L (N, N); c_u (≥ V, M) and y_u (≥ V, N) scratch; out (V, N); niter (V,): as the CPU
    solver's, or :data:`gpu.fod.kernel_layout.REDO`. Launch with
    :data:`gpu.fod.kernel_layout.THREADS` threads and
    :func:`gpu.fod.kernel_layout.msmt_shared_bytes` of dynamic shared memory. y_u and B y_u go
    to global memory (each thread reads only its own entries of y_u; B y_u only as a row
    joins), so that shared memory holds more voxels an SM (their latency is what hides each voxel's sequential steps).
    """
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = project.shape[0]
    nv = project.shape[1]
    m = B.shape[0]
    sh = cuda.shared.array(0, float64)
    x = sh[0:n]
    o = n
    l = sh[o:o + k_max]
    lp = sh[o + k_max:o + 2 * k_max]
    rdiag = sh[o + 2 * k_max:o + 3 * k_max]
    cua = sh[o + 3 * k_max:o + 4 * k_max]
    o += 4 * k_max
    # z, the solves' scratch, is also the reductions' buffer: they never overlap (barriers between)
    z = sh[o:o + max(k_max, THREADS)]
    red_c = z
    red_s = z
    o += max(k_max, THREADS)
    low = sh[o:o + (k_max * (k_max + 3)) // 2]
    o += (k_max * (k_max + 3)) // 2
    ab = sh[o:o + 4]
    o = 2 * (o + 4)
    ish = cuda.shared.array(0, int32)
    rows = ish[o:o + k_max]
    # tmp, _remove_row's scratch, is also the reductions' row buffer; the leaving row's
    # reduction packs its position into the low 6 bits (k_max ≤ 64)
    tmp = ish[o + k_max:o + k_max + max(k_max, THREADS)]
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
            c0, c1, c2, c3, c4, c5, c6, c7, c8, c9 = _constraint_values(Bt, x, n, r, m)
            if first:
                # x = y_u: these are c_u, kept for the rows that join later
                _keep_rows(c_u, v, r, m, c0, c1, c2, c3, c4, c5, c6, c7, c8, c9)
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
            _append_row(G, rows, lp, cua, c_u[v, uint64(worst)], low, rdiag, z, k, uint64(worst), lambda_min_norm, t,
                        off0, off1)
            k += _1
        while True:
            if t < k:
                l[t] = -cua[t]
            if t1 < k:
                l[t1] = -cua[t1]
            cuda.syncthreads()
            _cholesky_solve_packed(low, rdiag, k, l, z, t, off0, off1)
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
                i = t
                while i < n:
                    s = y_u[v, i]
                    p = _0
                    while p < k:
                        s += B[uint64(rows[p]), i] * l[p]
                        p += _1
                    x[i] = s
                    i += _T
                cuda.syncthreads()
                break
            changed = True
            _remove_row(rows, lp, cua, low, rdiag, z, l, tmp, ab, k, s_pos, t, off0, off1)
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
