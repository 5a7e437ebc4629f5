"""SS-HOPM CPU loops for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); the polynomial
code and the climb they call are in gpu/peaks/sshopm_generated.py.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_generated.py sha256 294ac8f7126946017539e8d001b585b31c401c552ecdbbc704375c0c6102ea89
# sshopm_math.py sha256 6961578a724483193e3119a60fc3cad3f46ecb18319c756e8d6d6a503d073fef
# sshopm_layout.py sha256 47381b90bbe135b1554b677d2744f7c21b951c5f74a839f602b5bf1f8e64c711

from types import FunctionType

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from gpu.peaks import sshopm_math as sm
from gpu.peaks.sshopm_generated import (
    axm_m2, axm_m4, axm_m6, axm_m8, axm_m10, axm_m12, S2, S3, S4, S5, S6, S7, S8, S9, S10, S11, S12,
    S15, S20, S21, S28, S30, S35, S36, S42, S45, S55, S56, S60, S70, S72, S84, S90, S105, S110,
    S120, S126, S140, S165, S168, S210, S252, S280, S330, S360, S420, S462, S495, S504, S560, S630,
    S756, S840, S1260, S1320, S1680, S1980, S2310, S2520, S2772, S3150, S4200, S4620, S6930, S9240,
    S11550,
)
from gpu.peaks.sshopm_layout import (
    CLIMB_CAPPED, CLIMB_PEAK, P_COS_MERGE, P_MAX_ITER, P_MAX_STEP, P_NPEAKS, P_REL_THRESHOLD, P_SEED_FRACTION,
    P_SEED_LOCAL, P_STEP_TOL, P_THRESHOLD, P_TOL_LAMBDA, S_CAPPED, S_ITERATIONS, S_MAX_ITERATIONS, S_SEEDS,
)

# sshopm_step compiled into its caller's IR, not called: LLVM vectorizes no loop with a call in
# it. It branches (Newton or shifted power step), which LLVM turns into masked vector code
# given numpy's error model (a division by zero in a lane not taken gives inf, not an
# exception); each lane's result is that of the scalar step.
sshopm_step_inline = register_jitable(inline="always")(
    FunctionType(sm.sshopm_step.__code__, sm.sshopm_step.__globals__, "sshopm_step_inline")
)


# ---- order 2: 6 unique entries ----


@register_jitable
def axm1_points_m2(a, points, k, out):
    """axm1_m2 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        gx = (
            a0 * x
            + a1 * y
            + a2 * z
        )
        gy = (
            a1 * x
            + a3 * y
            + a4 * z
        )
        gz = (
            a2 * x
            + a4 * y
            + a5 * z
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m2(a, points, k, out):
    """axm2_m2 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    for j in range(k):
        mxx = (
            a0
        )
        mxy = (
            a1
        )
        mxz = (
            a2
        )
        myy = (
            a3
        )
        myz = (
            a4
        )
        mzz = (
            a5
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m2(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^2 = f[s]),
    all at once: each round computes A x^0 (axm2_points_m2) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m2
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^0, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m2(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                2, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m2(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m2(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 2, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(6, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(6):
                total = 0.0
                for j in range(6):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m2(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m2(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )


# ---- order 4: 15 unique entries ----


@register_jitable
def axm1_points_m4(a, points, k, out):
    """axm1_m4 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        y2 = y * y
        y3 = y2 * y
        z2 = z * z
        z3 = z2 * z
        t1 = x2 * y
        t2 = x2 * z
        t3 = x * y2
        t4 = x * y * z
        t5 = x * z2
        t7 = y2 * z
        t8 = y * z2
        gx = (
            a0 * x3
            + S3 * a1 * t1
            + S3 * a2 * t2
            + S3 * a3 * t3
            + S6 * a4 * t4
            + S3 * a5 * t5
            + a6 * y3
            + S3 * a7 * t7
            + S3 * a8 * t8
            + a9 * z3
        )
        gy = (
            a1 * x3
            + S3 * a3 * t1
            + S3 * a4 * t2
            + S3 * a6 * t3
            + S6 * a7 * t4
            + S3 * a8 * t5
            + a10 * y3
            + S3 * a11 * t7
            + S3 * a12 * t8
            + a13 * z3
        )
        gz = (
            a2 * x3
            + S3 * a4 * t1
            + S3 * a5 * t2
            + S3 * a7 * t3
            + S6 * a8 * t4
            + S3 * a9 * t5
            + a11 * y3
            + S3 * a12 * t7
            + S3 * a13 * t8
            + a14 * z3
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m4(a, points, k, out):
    """axm2_m4 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        y2 = y * y
        z2 = z * z
        t1 = x * y
        t2 = x * z
        t4 = y * z
        mxx = (
            a0 * x2
            + S2 * a1 * t1
            + S2 * a2 * t2
            + a3 * y2
            + S2 * a4 * t4
            + a5 * z2
        )
        mxy = (
            a1 * x2
            + S2 * a3 * t1
            + S2 * a4 * t2
            + a6 * y2
            + S2 * a7 * t4
            + a8 * z2
        )
        mxz = (
            a2 * x2
            + S2 * a4 * t1
            + S2 * a5 * t2
            + a7 * y2
            + S2 * a8 * t4
            + a9 * z2
        )
        myy = (
            a3 * x2
            + S2 * a6 * t1
            + S2 * a7 * t2
            + a10 * y2
            + S2 * a11 * t4
            + a12 * z2
        )
        myz = (
            a4 * x2
            + S2 * a7 * t1
            + S2 * a8 * t2
            + a11 * y2
            + S2 * a12 * t4
            + a13 * z2
        )
        mzz = (
            a5 * x2
            + S2 * a8 * t1
            + S2 * a9 * t2
            + a12 * y2
            + S2 * a13 * t4
            + a14 * z2
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m4(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^4 = f[s]),
    all at once: each round computes A x^2 (axm2_points_m4) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m4
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^2, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m4(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                4, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m4(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m4(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 4, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(15, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(15):
                total = 0.0
                for j in range(15):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m4(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m4(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )


# ---- order 6: 28 unique entries ----


@register_jitable
def axm1_points_m6(a, points, k, out):
    """axm1_m6 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        t1 = x4 * y
        t2 = x4 * z
        t3 = x3 * y2
        t4 = x3 * y * z
        t5 = x3 * z2
        t6 = x2 * y3
        t7 = x2 * y2 * z
        t8 = x2 * y * z2
        t9 = x2 * z3
        t10 = x * y4
        t11 = x * y3 * z
        t12 = x * y2 * z2
        t13 = x * y * z3
        t14 = x * z4
        t16 = y4 * z
        t17 = y3 * z2
        t18 = y2 * z3
        t19 = y * z4
        gx = (
            a0 * x5
            + S5 * a1 * t1
            + S5 * a2 * t2
            + S10 * a3 * t3
            + S20 * a4 * t4
            + S10 * a5 * t5
            + S10 * a6 * t6
            + S30 * a7 * t7
            + S30 * a8 * t8
            + S10 * a9 * t9
            + S5 * a10 * t10
            + S20 * a11 * t11
            + S30 * a12 * t12
            + S20 * a13 * t13
            + S5 * a14 * t14
            + a15 * y5
            + S5 * a16 * t16
            + S10 * a17 * t17
            + S10 * a18 * t18
            + S5 * a19 * t19
            + a20 * z5
        )
        gy = (
            a1 * x5
            + S5 * a3 * t1
            + S5 * a4 * t2
            + S10 * a6 * t3
            + S20 * a7 * t4
            + S10 * a8 * t5
            + S10 * a10 * t6
            + S30 * a11 * t7
            + S30 * a12 * t8
            + S10 * a13 * t9
            + S5 * a15 * t10
            + S20 * a16 * t11
            + S30 * a17 * t12
            + S20 * a18 * t13
            + S5 * a19 * t14
            + a21 * y5
            + S5 * a22 * t16
            + S10 * a23 * t17
            + S10 * a24 * t18
            + S5 * a25 * t19
            + a26 * z5
        )
        gz = (
            a2 * x5
            + S5 * a4 * t1
            + S5 * a5 * t2
            + S10 * a7 * t3
            + S20 * a8 * t4
            + S10 * a9 * t5
            + S10 * a11 * t6
            + S30 * a12 * t7
            + S30 * a13 * t8
            + S10 * a14 * t9
            + S5 * a16 * t10
            + S20 * a17 * t11
            + S30 * a18 * t12
            + S20 * a19 * t13
            + S5 * a20 * t14
            + a22 * y5
            + S5 * a23 * t16
            + S10 * a24 * t17
            + S10 * a25 * t18
            + S5 * a26 * t19
            + a27 * z5
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m6(a, points, k, out):
    """axm2_m6 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        t1 = x3 * y
        t2 = x3 * z
        t3 = x2 * y2
        t4 = x2 * y * z
        t5 = x2 * z2
        t6 = x * y3
        t7 = x * y2 * z
        t8 = x * y * z2
        t9 = x * z3
        t11 = y3 * z
        t12 = y2 * z2
        t13 = y * z3
        mxx = (
            a0 * x4
            + S4 * a1 * t1
            + S4 * a2 * t2
            + S6 * a3 * t3
            + S12 * a4 * t4
            + S6 * a5 * t5
            + S4 * a6 * t6
            + S12 * a7 * t7
            + S12 * a8 * t8
            + S4 * a9 * t9
            + a10 * y4
            + S4 * a11 * t11
            + S6 * a12 * t12
            + S4 * a13 * t13
            + a14 * z4
        )
        mxy = (
            a1 * x4
            + S4 * a3 * t1
            + S4 * a4 * t2
            + S6 * a6 * t3
            + S12 * a7 * t4
            + S6 * a8 * t5
            + S4 * a10 * t6
            + S12 * a11 * t7
            + S12 * a12 * t8
            + S4 * a13 * t9
            + a15 * y4
            + S4 * a16 * t11
            + S6 * a17 * t12
            + S4 * a18 * t13
            + a19 * z4
        )
        mxz = (
            a2 * x4
            + S4 * a4 * t1
            + S4 * a5 * t2
            + S6 * a7 * t3
            + S12 * a8 * t4
            + S6 * a9 * t5
            + S4 * a11 * t6
            + S12 * a12 * t7
            + S12 * a13 * t8
            + S4 * a14 * t9
            + a16 * y4
            + S4 * a17 * t11
            + S6 * a18 * t12
            + S4 * a19 * t13
            + a20 * z4
        )
        myy = (
            a3 * x4
            + S4 * a6 * t1
            + S4 * a7 * t2
            + S6 * a10 * t3
            + S12 * a11 * t4
            + S6 * a12 * t5
            + S4 * a15 * t6
            + S12 * a16 * t7
            + S12 * a17 * t8
            + S4 * a18 * t9
            + a21 * y4
            + S4 * a22 * t11
            + S6 * a23 * t12
            + S4 * a24 * t13
            + a25 * z4
        )
        myz = (
            a4 * x4
            + S4 * a7 * t1
            + S4 * a8 * t2
            + S6 * a11 * t3
            + S12 * a12 * t4
            + S6 * a13 * t5
            + S4 * a16 * t6
            + S12 * a17 * t7
            + S12 * a18 * t8
            + S4 * a19 * t9
            + a22 * y4
            + S4 * a23 * t11
            + S6 * a24 * t12
            + S4 * a25 * t13
            + a26 * z4
        )
        mzz = (
            a5 * x4
            + S4 * a8 * t1
            + S4 * a9 * t2
            + S6 * a12 * t3
            + S12 * a13 * t4
            + S6 * a14 * t5
            + S4 * a17 * t6
            + S12 * a18 * t7
            + S12 * a19 * t8
            + S4 * a20 * t9
            + a23 * y4
            + S4 * a24 * t11
            + S6 * a25 * t12
            + S4 * a26 * t13
            + a27 * z4
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m6(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^6 = f[s]),
    all at once: each round computes A x^4 (axm2_points_m6) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m6
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^4, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m6(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                6, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m6(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m6(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 6, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(28, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(28):
                total = 0.0
                for j in range(28):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m6(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m6(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )


# ---- order 8: 45 unique entries ----


@register_jitable
def axm1_points_m8(a, points, k, out):
    """axm1_m8 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        x7 = x6 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        y7 = y6 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        z7 = z6 * z
        t1 = x6 * y
        t2 = x6 * z
        t3 = x5 * y2
        t4 = x5 * y * z
        t5 = x5 * z2
        t6 = x4 * y3
        t7 = x4 * y2 * z
        t8 = x4 * y * z2
        t9 = x4 * z3
        t10 = x3 * y4
        t11 = x3 * y3 * z
        t12 = x3 * y2 * z2
        t13 = x3 * y * z3
        t14 = x3 * z4
        t15 = x2 * y5
        t16 = x2 * y4 * z
        t17 = x2 * y3 * z2
        t18 = x2 * y2 * z3
        t19 = x2 * y * z4
        t20 = x2 * z5
        t21 = x * y6
        t22 = x * y5 * z
        t23 = x * y4 * z2
        t24 = x * y3 * z3
        t25 = x * y2 * z4
        t26 = x * y * z5
        t27 = x * z6
        t29 = y6 * z
        t30 = y5 * z2
        t31 = y4 * z3
        t32 = y3 * z4
        t33 = y2 * z5
        t34 = y * z6
        gx = (
            a0 * x7
            + S7 * a1 * t1
            + S7 * a2 * t2
            + S21 * a3 * t3
            + S42 * a4 * t4
            + S21 * a5 * t5
            + S35 * a6 * t6
            + S105 * a7 * t7
            + S105 * a8 * t8
            + S35 * a9 * t9
            + S35 * a10 * t10
            + S140 * a11 * t11
            + S210 * a12 * t12
            + S140 * a13 * t13
            + S35 * a14 * t14
            + S21 * a15 * t15
            + S105 * a16 * t16
            + S210 * a17 * t17
            + S210 * a18 * t18
            + S105 * a19 * t19
            + S21 * a20 * t20
            + S7 * a21 * t21
            + S42 * a22 * t22
            + S105 * a23 * t23
            + S140 * a24 * t24
            + S105 * a25 * t25
            + S42 * a26 * t26
            + S7 * a27 * t27
            + a28 * y7
            + S7 * a29 * t29
            + S21 * a30 * t30
            + S35 * a31 * t31
            + S35 * a32 * t32
            + S21 * a33 * t33
            + S7 * a34 * t34
            + a35 * z7
        )
        gy = (
            a1 * x7
            + S7 * a3 * t1
            + S7 * a4 * t2
            + S21 * a6 * t3
            + S42 * a7 * t4
            + S21 * a8 * t5
            + S35 * a10 * t6
            + S105 * a11 * t7
            + S105 * a12 * t8
            + S35 * a13 * t9
            + S35 * a15 * t10
            + S140 * a16 * t11
            + S210 * a17 * t12
            + S140 * a18 * t13
            + S35 * a19 * t14
            + S21 * a21 * t15
            + S105 * a22 * t16
            + S210 * a23 * t17
            + S210 * a24 * t18
            + S105 * a25 * t19
            + S21 * a26 * t20
            + S7 * a28 * t21
            + S42 * a29 * t22
            + S105 * a30 * t23
            + S140 * a31 * t24
            + S105 * a32 * t25
            + S42 * a33 * t26
            + S7 * a34 * t27
            + a36 * y7
            + S7 * a37 * t29
            + S21 * a38 * t30
            + S35 * a39 * t31
            + S35 * a40 * t32
            + S21 * a41 * t33
            + S7 * a42 * t34
            + a43 * z7
        )
        gz = (
            a2 * x7
            + S7 * a4 * t1
            + S7 * a5 * t2
            + S21 * a7 * t3
            + S42 * a8 * t4
            + S21 * a9 * t5
            + S35 * a11 * t6
            + S105 * a12 * t7
            + S105 * a13 * t8
            + S35 * a14 * t9
            + S35 * a16 * t10
            + S140 * a17 * t11
            + S210 * a18 * t12
            + S140 * a19 * t13
            + S35 * a20 * t14
            + S21 * a22 * t15
            + S105 * a23 * t16
            + S210 * a24 * t17
            + S210 * a25 * t18
            + S105 * a26 * t19
            + S21 * a27 * t20
            + S7 * a29 * t21
            + S42 * a30 * t22
            + S105 * a31 * t23
            + S140 * a32 * t24
            + S105 * a33 * t25
            + S42 * a34 * t26
            + S7 * a35 * t27
            + a37 * y7
            + S7 * a38 * t29
            + S21 * a39 * t30
            + S35 * a40 * t31
            + S35 * a41 * t32
            + S21 * a42 * t33
            + S7 * a43 * t34
            + a44 * z7
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m8(a, points, k, out):
    """axm2_m8 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        t1 = x5 * y
        t2 = x5 * z
        t3 = x4 * y2
        t4 = x4 * y * z
        t5 = x4 * z2
        t6 = x3 * y3
        t7 = x3 * y2 * z
        t8 = x3 * y * z2
        t9 = x3 * z3
        t10 = x2 * y4
        t11 = x2 * y3 * z
        t12 = x2 * y2 * z2
        t13 = x2 * y * z3
        t14 = x2 * z4
        t15 = x * y5
        t16 = x * y4 * z
        t17 = x * y3 * z2
        t18 = x * y2 * z3
        t19 = x * y * z4
        t20 = x * z5
        t22 = y5 * z
        t23 = y4 * z2
        t24 = y3 * z3
        t25 = y2 * z4
        t26 = y * z5
        mxx = (
            a0 * x6
            + S6 * a1 * t1
            + S6 * a2 * t2
            + S15 * a3 * t3
            + S30 * a4 * t4
            + S15 * a5 * t5
            + S20 * a6 * t6
            + S60 * a7 * t7
            + S60 * a8 * t8
            + S20 * a9 * t9
            + S15 * a10 * t10
            + S60 * a11 * t11
            + S90 * a12 * t12
            + S60 * a13 * t13
            + S15 * a14 * t14
            + S6 * a15 * t15
            + S30 * a16 * t16
            + S60 * a17 * t17
            + S60 * a18 * t18
            + S30 * a19 * t19
            + S6 * a20 * t20
            + a21 * y6
            + S6 * a22 * t22
            + S15 * a23 * t23
            + S20 * a24 * t24
            + S15 * a25 * t25
            + S6 * a26 * t26
            + a27 * z6
        )
        mxy = (
            a1 * x6
            + S6 * a3 * t1
            + S6 * a4 * t2
            + S15 * a6 * t3
            + S30 * a7 * t4
            + S15 * a8 * t5
            + S20 * a10 * t6
            + S60 * a11 * t7
            + S60 * a12 * t8
            + S20 * a13 * t9
            + S15 * a15 * t10
            + S60 * a16 * t11
            + S90 * a17 * t12
            + S60 * a18 * t13
            + S15 * a19 * t14
            + S6 * a21 * t15
            + S30 * a22 * t16
            + S60 * a23 * t17
            + S60 * a24 * t18
            + S30 * a25 * t19
            + S6 * a26 * t20
            + a28 * y6
            + S6 * a29 * t22
            + S15 * a30 * t23
            + S20 * a31 * t24
            + S15 * a32 * t25
            + S6 * a33 * t26
            + a34 * z6
        )
        mxz = (
            a2 * x6
            + S6 * a4 * t1
            + S6 * a5 * t2
            + S15 * a7 * t3
            + S30 * a8 * t4
            + S15 * a9 * t5
            + S20 * a11 * t6
            + S60 * a12 * t7
            + S60 * a13 * t8
            + S20 * a14 * t9
            + S15 * a16 * t10
            + S60 * a17 * t11
            + S90 * a18 * t12
            + S60 * a19 * t13
            + S15 * a20 * t14
            + S6 * a22 * t15
            + S30 * a23 * t16
            + S60 * a24 * t17
            + S60 * a25 * t18
            + S30 * a26 * t19
            + S6 * a27 * t20
            + a29 * y6
            + S6 * a30 * t22
            + S15 * a31 * t23
            + S20 * a32 * t24
            + S15 * a33 * t25
            + S6 * a34 * t26
            + a35 * z6
        )
        myy = (
            a3 * x6
            + S6 * a6 * t1
            + S6 * a7 * t2
            + S15 * a10 * t3
            + S30 * a11 * t4
            + S15 * a12 * t5
            + S20 * a15 * t6
            + S60 * a16 * t7
            + S60 * a17 * t8
            + S20 * a18 * t9
            + S15 * a21 * t10
            + S60 * a22 * t11
            + S90 * a23 * t12
            + S60 * a24 * t13
            + S15 * a25 * t14
            + S6 * a28 * t15
            + S30 * a29 * t16
            + S60 * a30 * t17
            + S60 * a31 * t18
            + S30 * a32 * t19
            + S6 * a33 * t20
            + a36 * y6
            + S6 * a37 * t22
            + S15 * a38 * t23
            + S20 * a39 * t24
            + S15 * a40 * t25
            + S6 * a41 * t26
            + a42 * z6
        )
        myz = (
            a4 * x6
            + S6 * a7 * t1
            + S6 * a8 * t2
            + S15 * a11 * t3
            + S30 * a12 * t4
            + S15 * a13 * t5
            + S20 * a16 * t6
            + S60 * a17 * t7
            + S60 * a18 * t8
            + S20 * a19 * t9
            + S15 * a22 * t10
            + S60 * a23 * t11
            + S90 * a24 * t12
            + S60 * a25 * t13
            + S15 * a26 * t14
            + S6 * a29 * t15
            + S30 * a30 * t16
            + S60 * a31 * t17
            + S60 * a32 * t18
            + S30 * a33 * t19
            + S6 * a34 * t20
            + a37 * y6
            + S6 * a38 * t22
            + S15 * a39 * t23
            + S20 * a40 * t24
            + S15 * a41 * t25
            + S6 * a42 * t26
            + a43 * z6
        )
        mzz = (
            a5 * x6
            + S6 * a8 * t1
            + S6 * a9 * t2
            + S15 * a12 * t3
            + S30 * a13 * t4
            + S15 * a14 * t5
            + S20 * a17 * t6
            + S60 * a18 * t7
            + S60 * a19 * t8
            + S20 * a20 * t9
            + S15 * a23 * t10
            + S60 * a24 * t11
            + S90 * a25 * t12
            + S60 * a26 * t13
            + S15 * a27 * t14
            + S6 * a30 * t15
            + S30 * a31 * t16
            + S60 * a32 * t17
            + S60 * a33 * t18
            + S30 * a34 * t19
            + S6 * a35 * t20
            + a38 * y6
            + S6 * a39 * t22
            + S15 * a40 * t23
            + S20 * a41 * t24
            + S15 * a42 * t25
            + S6 * a43 * t26
            + a44 * z6
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m8(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^8 = f[s]),
    all at once: each round computes A x^6 (axm2_points_m8) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m8
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^6, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m8(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                8, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m8(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m8(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 8, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(45, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(45):
                total = 0.0
                for j in range(45):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m8(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m8(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )


# ---- order 10: 66 unique entries ----


@register_jitable
def axm1_points_m10(a, points, k, out):
    """axm1_m10 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    a45 = a[45]
    a46 = a[46]
    a47 = a[47]
    a48 = a[48]
    a49 = a[49]
    a50 = a[50]
    a51 = a[51]
    a52 = a[52]
    a53 = a[53]
    a54 = a[54]
    a55 = a[55]
    a56 = a[56]
    a57 = a[57]
    a58 = a[58]
    a59 = a[59]
    a60 = a[60]
    a61 = a[61]
    a62 = a[62]
    a63 = a[63]
    a64 = a[64]
    a65 = a[65]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        x7 = x6 * x
        x8 = x7 * x
        x9 = x8 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        y7 = y6 * y
        y8 = y7 * y
        y9 = y8 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        z7 = z6 * z
        z8 = z7 * z
        z9 = z8 * z
        t1 = x8 * y
        t2 = x8 * z
        t3 = x7 * y2
        t4 = x7 * y * z
        t5 = x7 * z2
        t6 = x6 * y3
        t7 = x6 * y2 * z
        t8 = x6 * y * z2
        t9 = x6 * z3
        t10 = x5 * y4
        t11 = x5 * y3 * z
        t12 = x5 * y2 * z2
        t13 = x5 * y * z3
        t14 = x5 * z4
        t15 = x4 * y5
        t16 = x4 * y4 * z
        t17 = x4 * y3 * z2
        t18 = x4 * y2 * z3
        t19 = x4 * y * z4
        t20 = x4 * z5
        t21 = x3 * y6
        t22 = x3 * y5 * z
        t23 = x3 * y4 * z2
        t24 = x3 * y3 * z3
        t25 = x3 * y2 * z4
        t26 = x3 * y * z5
        t27 = x3 * z6
        t28 = x2 * y7
        t29 = x2 * y6 * z
        t30 = x2 * y5 * z2
        t31 = x2 * y4 * z3
        t32 = x2 * y3 * z4
        t33 = x2 * y2 * z5
        t34 = x2 * y * z6
        t35 = x2 * z7
        t36 = x * y8
        t37 = x * y7 * z
        t38 = x * y6 * z2
        t39 = x * y5 * z3
        t40 = x * y4 * z4
        t41 = x * y3 * z5
        t42 = x * y2 * z6
        t43 = x * y * z7
        t44 = x * z8
        t46 = y8 * z
        t47 = y7 * z2
        t48 = y6 * z3
        t49 = y5 * z4
        t50 = y4 * z5
        t51 = y3 * z6
        t52 = y2 * z7
        t53 = y * z8
        gx = (
            a0 * x9
            + S9 * a1 * t1
            + S9 * a2 * t2
            + S36 * a3 * t3
            + S72 * a4 * t4
            + S36 * a5 * t5
            + S84 * a6 * t6
            + S252 * a7 * t7
            + S252 * a8 * t8
            + S84 * a9 * t9
            + S126 * a10 * t10
            + S504 * a11 * t11
            + S756 * a12 * t12
            + S504 * a13 * t13
            + S126 * a14 * t14
            + S126 * a15 * t15
            + S630 * a16 * t16
            + S1260 * a17 * t17
            + S1260 * a18 * t18
            + S630 * a19 * t19
            + S126 * a20 * t20
            + S84 * a21 * t21
            + S504 * a22 * t22
            + S1260 * a23 * t23
            + S1680 * a24 * t24
            + S1260 * a25 * t25
            + S504 * a26 * t26
            + S84 * a27 * t27
            + S36 * a28 * t28
            + S252 * a29 * t29
            + S756 * a30 * t30
            + S1260 * a31 * t31
            + S1260 * a32 * t32
            + S756 * a33 * t33
            + S252 * a34 * t34
            + S36 * a35 * t35
            + S9 * a36 * t36
            + S72 * a37 * t37
            + S252 * a38 * t38
            + S504 * a39 * t39
            + S630 * a40 * t40
            + S504 * a41 * t41
            + S252 * a42 * t42
            + S72 * a43 * t43
            + S9 * a44 * t44
            + a45 * y9
            + S9 * a46 * t46
            + S36 * a47 * t47
            + S84 * a48 * t48
            + S126 * a49 * t49
            + S126 * a50 * t50
            + S84 * a51 * t51
            + S36 * a52 * t52
            + S9 * a53 * t53
            + a54 * z9
        )
        gy = (
            a1 * x9
            + S9 * a3 * t1
            + S9 * a4 * t2
            + S36 * a6 * t3
            + S72 * a7 * t4
            + S36 * a8 * t5
            + S84 * a10 * t6
            + S252 * a11 * t7
            + S252 * a12 * t8
            + S84 * a13 * t9
            + S126 * a15 * t10
            + S504 * a16 * t11
            + S756 * a17 * t12
            + S504 * a18 * t13
            + S126 * a19 * t14
            + S126 * a21 * t15
            + S630 * a22 * t16
            + S1260 * a23 * t17
            + S1260 * a24 * t18
            + S630 * a25 * t19
            + S126 * a26 * t20
            + S84 * a28 * t21
            + S504 * a29 * t22
            + S1260 * a30 * t23
            + S1680 * a31 * t24
            + S1260 * a32 * t25
            + S504 * a33 * t26
            + S84 * a34 * t27
            + S36 * a36 * t28
            + S252 * a37 * t29
            + S756 * a38 * t30
            + S1260 * a39 * t31
            + S1260 * a40 * t32
            + S756 * a41 * t33
            + S252 * a42 * t34
            + S36 * a43 * t35
            + S9 * a45 * t36
            + S72 * a46 * t37
            + S252 * a47 * t38
            + S504 * a48 * t39
            + S630 * a49 * t40
            + S504 * a50 * t41
            + S252 * a51 * t42
            + S72 * a52 * t43
            + S9 * a53 * t44
            + a55 * y9
            + S9 * a56 * t46
            + S36 * a57 * t47
            + S84 * a58 * t48
            + S126 * a59 * t49
            + S126 * a60 * t50
            + S84 * a61 * t51
            + S36 * a62 * t52
            + S9 * a63 * t53
            + a64 * z9
        )
        gz = (
            a2 * x9
            + S9 * a4 * t1
            + S9 * a5 * t2
            + S36 * a7 * t3
            + S72 * a8 * t4
            + S36 * a9 * t5
            + S84 * a11 * t6
            + S252 * a12 * t7
            + S252 * a13 * t8
            + S84 * a14 * t9
            + S126 * a16 * t10
            + S504 * a17 * t11
            + S756 * a18 * t12
            + S504 * a19 * t13
            + S126 * a20 * t14
            + S126 * a22 * t15
            + S630 * a23 * t16
            + S1260 * a24 * t17
            + S1260 * a25 * t18
            + S630 * a26 * t19
            + S126 * a27 * t20
            + S84 * a29 * t21
            + S504 * a30 * t22
            + S1260 * a31 * t23
            + S1680 * a32 * t24
            + S1260 * a33 * t25
            + S504 * a34 * t26
            + S84 * a35 * t27
            + S36 * a37 * t28
            + S252 * a38 * t29
            + S756 * a39 * t30
            + S1260 * a40 * t31
            + S1260 * a41 * t32
            + S756 * a42 * t33
            + S252 * a43 * t34
            + S36 * a44 * t35
            + S9 * a46 * t36
            + S72 * a47 * t37
            + S252 * a48 * t38
            + S504 * a49 * t39
            + S630 * a50 * t40
            + S504 * a51 * t41
            + S252 * a52 * t42
            + S72 * a53 * t43
            + S9 * a54 * t44
            + a56 * y9
            + S9 * a57 * t46
            + S36 * a58 * t47
            + S84 * a59 * t48
            + S126 * a60 * t49
            + S126 * a61 * t50
            + S84 * a62 * t51
            + S36 * a63 * t52
            + S9 * a64 * t53
            + a65 * z9
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m10(a, points, k, out):
    """axm2_m10 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    a45 = a[45]
    a46 = a[46]
    a47 = a[47]
    a48 = a[48]
    a49 = a[49]
    a50 = a[50]
    a51 = a[51]
    a52 = a[52]
    a53 = a[53]
    a54 = a[54]
    a55 = a[55]
    a56 = a[56]
    a57 = a[57]
    a58 = a[58]
    a59 = a[59]
    a60 = a[60]
    a61 = a[61]
    a62 = a[62]
    a63 = a[63]
    a64 = a[64]
    a65 = a[65]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        x7 = x6 * x
        x8 = x7 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        y7 = y6 * y
        y8 = y7 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        z7 = z6 * z
        z8 = z7 * z
        t1 = x7 * y
        t2 = x7 * z
        t3 = x6 * y2
        t4 = x6 * y * z
        t5 = x6 * z2
        t6 = x5 * y3
        t7 = x5 * y2 * z
        t8 = x5 * y * z2
        t9 = x5 * z3
        t10 = x4 * y4
        t11 = x4 * y3 * z
        t12 = x4 * y2 * z2
        t13 = x4 * y * z3
        t14 = x4 * z4
        t15 = x3 * y5
        t16 = x3 * y4 * z
        t17 = x3 * y3 * z2
        t18 = x3 * y2 * z3
        t19 = x3 * y * z4
        t20 = x3 * z5
        t21 = x2 * y6
        t22 = x2 * y5 * z
        t23 = x2 * y4 * z2
        t24 = x2 * y3 * z3
        t25 = x2 * y2 * z4
        t26 = x2 * y * z5
        t27 = x2 * z6
        t28 = x * y7
        t29 = x * y6 * z
        t30 = x * y5 * z2
        t31 = x * y4 * z3
        t32 = x * y3 * z4
        t33 = x * y2 * z5
        t34 = x * y * z6
        t35 = x * z7
        t37 = y7 * z
        t38 = y6 * z2
        t39 = y5 * z3
        t40 = y4 * z4
        t41 = y3 * z5
        t42 = y2 * z6
        t43 = y * z7
        mxx = (
            a0 * x8
            + S8 * a1 * t1
            + S8 * a2 * t2
            + S28 * a3 * t3
            + S56 * a4 * t4
            + S28 * a5 * t5
            + S56 * a6 * t6
            + S168 * a7 * t7
            + S168 * a8 * t8
            + S56 * a9 * t9
            + S70 * a10 * t10
            + S280 * a11 * t11
            + S420 * a12 * t12
            + S280 * a13 * t13
            + S70 * a14 * t14
            + S56 * a15 * t15
            + S280 * a16 * t16
            + S560 * a17 * t17
            + S560 * a18 * t18
            + S280 * a19 * t19
            + S56 * a20 * t20
            + S28 * a21 * t21
            + S168 * a22 * t22
            + S420 * a23 * t23
            + S560 * a24 * t24
            + S420 * a25 * t25
            + S168 * a26 * t26
            + S28 * a27 * t27
            + S8 * a28 * t28
            + S56 * a29 * t29
            + S168 * a30 * t30
            + S280 * a31 * t31
            + S280 * a32 * t32
            + S168 * a33 * t33
            + S56 * a34 * t34
            + S8 * a35 * t35
            + a36 * y8
            + S8 * a37 * t37
            + S28 * a38 * t38
            + S56 * a39 * t39
            + S70 * a40 * t40
            + S56 * a41 * t41
            + S28 * a42 * t42
            + S8 * a43 * t43
            + a44 * z8
        )
        mxy = (
            a1 * x8
            + S8 * a3 * t1
            + S8 * a4 * t2
            + S28 * a6 * t3
            + S56 * a7 * t4
            + S28 * a8 * t5
            + S56 * a10 * t6
            + S168 * a11 * t7
            + S168 * a12 * t8
            + S56 * a13 * t9
            + S70 * a15 * t10
            + S280 * a16 * t11
            + S420 * a17 * t12
            + S280 * a18 * t13
            + S70 * a19 * t14
            + S56 * a21 * t15
            + S280 * a22 * t16
            + S560 * a23 * t17
            + S560 * a24 * t18
            + S280 * a25 * t19
            + S56 * a26 * t20
            + S28 * a28 * t21
            + S168 * a29 * t22
            + S420 * a30 * t23
            + S560 * a31 * t24
            + S420 * a32 * t25
            + S168 * a33 * t26
            + S28 * a34 * t27
            + S8 * a36 * t28
            + S56 * a37 * t29
            + S168 * a38 * t30
            + S280 * a39 * t31
            + S280 * a40 * t32
            + S168 * a41 * t33
            + S56 * a42 * t34
            + S8 * a43 * t35
            + a45 * y8
            + S8 * a46 * t37
            + S28 * a47 * t38
            + S56 * a48 * t39
            + S70 * a49 * t40
            + S56 * a50 * t41
            + S28 * a51 * t42
            + S8 * a52 * t43
            + a53 * z8
        )
        mxz = (
            a2 * x8
            + S8 * a4 * t1
            + S8 * a5 * t2
            + S28 * a7 * t3
            + S56 * a8 * t4
            + S28 * a9 * t5
            + S56 * a11 * t6
            + S168 * a12 * t7
            + S168 * a13 * t8
            + S56 * a14 * t9
            + S70 * a16 * t10
            + S280 * a17 * t11
            + S420 * a18 * t12
            + S280 * a19 * t13
            + S70 * a20 * t14
            + S56 * a22 * t15
            + S280 * a23 * t16
            + S560 * a24 * t17
            + S560 * a25 * t18
            + S280 * a26 * t19
            + S56 * a27 * t20
            + S28 * a29 * t21
            + S168 * a30 * t22
            + S420 * a31 * t23
            + S560 * a32 * t24
            + S420 * a33 * t25
            + S168 * a34 * t26
            + S28 * a35 * t27
            + S8 * a37 * t28
            + S56 * a38 * t29
            + S168 * a39 * t30
            + S280 * a40 * t31
            + S280 * a41 * t32
            + S168 * a42 * t33
            + S56 * a43 * t34
            + S8 * a44 * t35
            + a46 * y8
            + S8 * a47 * t37
            + S28 * a48 * t38
            + S56 * a49 * t39
            + S70 * a50 * t40
            + S56 * a51 * t41
            + S28 * a52 * t42
            + S8 * a53 * t43
            + a54 * z8
        )
        myy = (
            a3 * x8
            + S8 * a6 * t1
            + S8 * a7 * t2
            + S28 * a10 * t3
            + S56 * a11 * t4
            + S28 * a12 * t5
            + S56 * a15 * t6
            + S168 * a16 * t7
            + S168 * a17 * t8
            + S56 * a18 * t9
            + S70 * a21 * t10
            + S280 * a22 * t11
            + S420 * a23 * t12
            + S280 * a24 * t13
            + S70 * a25 * t14
            + S56 * a28 * t15
            + S280 * a29 * t16
            + S560 * a30 * t17
            + S560 * a31 * t18
            + S280 * a32 * t19
            + S56 * a33 * t20
            + S28 * a36 * t21
            + S168 * a37 * t22
            + S420 * a38 * t23
            + S560 * a39 * t24
            + S420 * a40 * t25
            + S168 * a41 * t26
            + S28 * a42 * t27
            + S8 * a45 * t28
            + S56 * a46 * t29
            + S168 * a47 * t30
            + S280 * a48 * t31
            + S280 * a49 * t32
            + S168 * a50 * t33
            + S56 * a51 * t34
            + S8 * a52 * t35
            + a55 * y8
            + S8 * a56 * t37
            + S28 * a57 * t38
            + S56 * a58 * t39
            + S70 * a59 * t40
            + S56 * a60 * t41
            + S28 * a61 * t42
            + S8 * a62 * t43
            + a63 * z8
        )
        myz = (
            a4 * x8
            + S8 * a7 * t1
            + S8 * a8 * t2
            + S28 * a11 * t3
            + S56 * a12 * t4
            + S28 * a13 * t5
            + S56 * a16 * t6
            + S168 * a17 * t7
            + S168 * a18 * t8
            + S56 * a19 * t9
            + S70 * a22 * t10
            + S280 * a23 * t11
            + S420 * a24 * t12
            + S280 * a25 * t13
            + S70 * a26 * t14
            + S56 * a29 * t15
            + S280 * a30 * t16
            + S560 * a31 * t17
            + S560 * a32 * t18
            + S280 * a33 * t19
            + S56 * a34 * t20
            + S28 * a37 * t21
            + S168 * a38 * t22
            + S420 * a39 * t23
            + S560 * a40 * t24
            + S420 * a41 * t25
            + S168 * a42 * t26
            + S28 * a43 * t27
            + S8 * a46 * t28
            + S56 * a47 * t29
            + S168 * a48 * t30
            + S280 * a49 * t31
            + S280 * a50 * t32
            + S168 * a51 * t33
            + S56 * a52 * t34
            + S8 * a53 * t35
            + a56 * y8
            + S8 * a57 * t37
            + S28 * a58 * t38
            + S56 * a59 * t39
            + S70 * a60 * t40
            + S56 * a61 * t41
            + S28 * a62 * t42
            + S8 * a63 * t43
            + a64 * z8
        )
        mzz = (
            a5 * x8
            + S8 * a8 * t1
            + S8 * a9 * t2
            + S28 * a12 * t3
            + S56 * a13 * t4
            + S28 * a14 * t5
            + S56 * a17 * t6
            + S168 * a18 * t7
            + S168 * a19 * t8
            + S56 * a20 * t9
            + S70 * a23 * t10
            + S280 * a24 * t11
            + S420 * a25 * t12
            + S280 * a26 * t13
            + S70 * a27 * t14
            + S56 * a30 * t15
            + S280 * a31 * t16
            + S560 * a32 * t17
            + S560 * a33 * t18
            + S280 * a34 * t19
            + S56 * a35 * t20
            + S28 * a38 * t21
            + S168 * a39 * t22
            + S420 * a40 * t23
            + S560 * a41 * t24
            + S420 * a42 * t25
            + S168 * a43 * t26
            + S28 * a44 * t27
            + S8 * a47 * t28
            + S56 * a48 * t29
            + S168 * a49 * t30
            + S280 * a50 * t31
            + S280 * a51 * t32
            + S168 * a52 * t33
            + S56 * a53 * t34
            + S8 * a54 * t35
            + a57 * y8
            + S8 * a58 * t37
            + S28 * a59 * t38
            + S56 * a60 * t39
            + S70 * a61 * t40
            + S56 * a62 * t41
            + S28 * a63 * t42
            + S8 * a64 * t43
            + a65 * z8
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m10(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^10 = f[s]),
    all at once: each round computes A x^8 (axm2_points_m10) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m10
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^8, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m10(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                10, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m10(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m10(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 10, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(66, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(66):
                total = 0.0
                for j in range(66):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m10(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m10(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )


# ---- order 12: 91 unique entries ----


@register_jitable
def axm1_points_m12(a, points, k, out):
    """axm1_m12 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    a45 = a[45]
    a46 = a[46]
    a47 = a[47]
    a48 = a[48]
    a49 = a[49]
    a50 = a[50]
    a51 = a[51]
    a52 = a[52]
    a53 = a[53]
    a54 = a[54]
    a55 = a[55]
    a56 = a[56]
    a57 = a[57]
    a58 = a[58]
    a59 = a[59]
    a60 = a[60]
    a61 = a[61]
    a62 = a[62]
    a63 = a[63]
    a64 = a[64]
    a65 = a[65]
    a66 = a[66]
    a67 = a[67]
    a68 = a[68]
    a69 = a[69]
    a70 = a[70]
    a71 = a[71]
    a72 = a[72]
    a73 = a[73]
    a74 = a[74]
    a75 = a[75]
    a76 = a[76]
    a77 = a[77]
    a78 = a[78]
    a79 = a[79]
    a80 = a[80]
    a81 = a[81]
    a82 = a[82]
    a83 = a[83]
    a84 = a[84]
    a85 = a[85]
    a86 = a[86]
    a87 = a[87]
    a88 = a[88]
    a89 = a[89]
    a90 = a[90]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        x7 = x6 * x
        x8 = x7 * x
        x9 = x8 * x
        x10 = x9 * x
        x11 = x10 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        y7 = y6 * y
        y8 = y7 * y
        y9 = y8 * y
        y10 = y9 * y
        y11 = y10 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        z7 = z6 * z
        z8 = z7 * z
        z9 = z8 * z
        z10 = z9 * z
        z11 = z10 * z
        t1 = x10 * y
        t2 = x10 * z
        t3 = x9 * y2
        t4 = x9 * y * z
        t5 = x9 * z2
        t6 = x8 * y3
        t7 = x8 * y2 * z
        t8 = x8 * y * z2
        t9 = x8 * z3
        t10 = x7 * y4
        t11 = x7 * y3 * z
        t12 = x7 * y2 * z2
        t13 = x7 * y * z3
        t14 = x7 * z4
        t15 = x6 * y5
        t16 = x6 * y4 * z
        t17 = x6 * y3 * z2
        t18 = x6 * y2 * z3
        t19 = x6 * y * z4
        t20 = x6 * z5
        t21 = x5 * y6
        t22 = x5 * y5 * z
        t23 = x5 * y4 * z2
        t24 = x5 * y3 * z3
        t25 = x5 * y2 * z4
        t26 = x5 * y * z5
        t27 = x5 * z6
        t28 = x4 * y7
        t29 = x4 * y6 * z
        t30 = x4 * y5 * z2
        t31 = x4 * y4 * z3
        t32 = x4 * y3 * z4
        t33 = x4 * y2 * z5
        t34 = x4 * y * z6
        t35 = x4 * z7
        t36 = x3 * y8
        t37 = x3 * y7 * z
        t38 = x3 * y6 * z2
        t39 = x3 * y5 * z3
        t40 = x3 * y4 * z4
        t41 = x3 * y3 * z5
        t42 = x3 * y2 * z6
        t43 = x3 * y * z7
        t44 = x3 * z8
        t45 = x2 * y9
        t46 = x2 * y8 * z
        t47 = x2 * y7 * z2
        t48 = x2 * y6 * z3
        t49 = x2 * y5 * z4
        t50 = x2 * y4 * z5
        t51 = x2 * y3 * z6
        t52 = x2 * y2 * z7
        t53 = x2 * y * z8
        t54 = x2 * z9
        t55 = x * y10
        t56 = x * y9 * z
        t57 = x * y8 * z2
        t58 = x * y7 * z3
        t59 = x * y6 * z4
        t60 = x * y5 * z5
        t61 = x * y4 * z6
        t62 = x * y3 * z7
        t63 = x * y2 * z8
        t64 = x * y * z9
        t65 = x * z10
        t67 = y10 * z
        t68 = y9 * z2
        t69 = y8 * z3
        t70 = y7 * z4
        t71 = y6 * z5
        t72 = y5 * z6
        t73 = y4 * z7
        t74 = y3 * z8
        t75 = y2 * z9
        t76 = y * z10
        gx = (
            a0 * x11
            + S11 * a1 * t1
            + S11 * a2 * t2
            + S55 * a3 * t3
            + S110 * a4 * t4
            + S55 * a5 * t5
            + S165 * a6 * t6
            + S495 * a7 * t7
            + S495 * a8 * t8
            + S165 * a9 * t9
            + S330 * a10 * t10
            + S1320 * a11 * t11
            + S1980 * a12 * t12
            + S1320 * a13 * t13
            + S330 * a14 * t14
            + S462 * a15 * t15
            + S2310 * a16 * t16
            + S4620 * a17 * t17
            + S4620 * a18 * t18
            + S2310 * a19 * t19
            + S462 * a20 * t20
            + S462 * a21 * t21
            + S2772 * a22 * t22
            + S6930 * a23 * t23
            + S9240 * a24 * t24
            + S6930 * a25 * t25
            + S2772 * a26 * t26
            + S462 * a27 * t27
            + S330 * a28 * t28
            + S2310 * a29 * t29
            + S6930 * a30 * t30
            + S11550 * a31 * t31
            + S11550 * a32 * t32
            + S6930 * a33 * t33
            + S2310 * a34 * t34
            + S330 * a35 * t35
            + S165 * a36 * t36
            + S1320 * a37 * t37
            + S4620 * a38 * t38
            + S9240 * a39 * t39
            + S11550 * a40 * t40
            + S9240 * a41 * t41
            + S4620 * a42 * t42
            + S1320 * a43 * t43
            + S165 * a44 * t44
            + S55 * a45 * t45
            + S495 * a46 * t46
            + S1980 * a47 * t47
            + S4620 * a48 * t48
            + S6930 * a49 * t49
            + S6930 * a50 * t50
            + S4620 * a51 * t51
            + S1980 * a52 * t52
            + S495 * a53 * t53
            + S55 * a54 * t54
            + S11 * a55 * t55
            + S110 * a56 * t56
            + S495 * a57 * t57
            + S1320 * a58 * t58
            + S2310 * a59 * t59
            + S2772 * a60 * t60
            + S2310 * a61 * t61
            + S1320 * a62 * t62
            + S495 * a63 * t63
            + S110 * a64 * t64
            + S11 * a65 * t65
            + a66 * y11
            + S11 * a67 * t67
            + S55 * a68 * t68
            + S165 * a69 * t69
            + S330 * a70 * t70
            + S462 * a71 * t71
            + S462 * a72 * t72
            + S330 * a73 * t73
            + S165 * a74 * t74
            + S55 * a75 * t75
            + S11 * a76 * t76
            + a77 * z11
        )
        gy = (
            a1 * x11
            + S11 * a3 * t1
            + S11 * a4 * t2
            + S55 * a6 * t3
            + S110 * a7 * t4
            + S55 * a8 * t5
            + S165 * a10 * t6
            + S495 * a11 * t7
            + S495 * a12 * t8
            + S165 * a13 * t9
            + S330 * a15 * t10
            + S1320 * a16 * t11
            + S1980 * a17 * t12
            + S1320 * a18 * t13
            + S330 * a19 * t14
            + S462 * a21 * t15
            + S2310 * a22 * t16
            + S4620 * a23 * t17
            + S4620 * a24 * t18
            + S2310 * a25 * t19
            + S462 * a26 * t20
            + S462 * a28 * t21
            + S2772 * a29 * t22
            + S6930 * a30 * t23
            + S9240 * a31 * t24
            + S6930 * a32 * t25
            + S2772 * a33 * t26
            + S462 * a34 * t27
            + S330 * a36 * t28
            + S2310 * a37 * t29
            + S6930 * a38 * t30
            + S11550 * a39 * t31
            + S11550 * a40 * t32
            + S6930 * a41 * t33
            + S2310 * a42 * t34
            + S330 * a43 * t35
            + S165 * a45 * t36
            + S1320 * a46 * t37
            + S4620 * a47 * t38
            + S9240 * a48 * t39
            + S11550 * a49 * t40
            + S9240 * a50 * t41
            + S4620 * a51 * t42
            + S1320 * a52 * t43
            + S165 * a53 * t44
            + S55 * a55 * t45
            + S495 * a56 * t46
            + S1980 * a57 * t47
            + S4620 * a58 * t48
            + S6930 * a59 * t49
            + S6930 * a60 * t50
            + S4620 * a61 * t51
            + S1980 * a62 * t52
            + S495 * a63 * t53
            + S55 * a64 * t54
            + S11 * a66 * t55
            + S110 * a67 * t56
            + S495 * a68 * t57
            + S1320 * a69 * t58
            + S2310 * a70 * t59
            + S2772 * a71 * t60
            + S2310 * a72 * t61
            + S1320 * a73 * t62
            + S495 * a74 * t63
            + S110 * a75 * t64
            + S11 * a76 * t65
            + a78 * y11
            + S11 * a79 * t67
            + S55 * a80 * t68
            + S165 * a81 * t69
            + S330 * a82 * t70
            + S462 * a83 * t71
            + S462 * a84 * t72
            + S330 * a85 * t73
            + S165 * a86 * t74
            + S55 * a87 * t75
            + S11 * a88 * t76
            + a89 * z11
        )
        gz = (
            a2 * x11
            + S11 * a4 * t1
            + S11 * a5 * t2
            + S55 * a7 * t3
            + S110 * a8 * t4
            + S55 * a9 * t5
            + S165 * a11 * t6
            + S495 * a12 * t7
            + S495 * a13 * t8
            + S165 * a14 * t9
            + S330 * a16 * t10
            + S1320 * a17 * t11
            + S1980 * a18 * t12
            + S1320 * a19 * t13
            + S330 * a20 * t14
            + S462 * a22 * t15
            + S2310 * a23 * t16
            + S4620 * a24 * t17
            + S4620 * a25 * t18
            + S2310 * a26 * t19
            + S462 * a27 * t20
            + S462 * a29 * t21
            + S2772 * a30 * t22
            + S6930 * a31 * t23
            + S9240 * a32 * t24
            + S6930 * a33 * t25
            + S2772 * a34 * t26
            + S462 * a35 * t27
            + S330 * a37 * t28
            + S2310 * a38 * t29
            + S6930 * a39 * t30
            + S11550 * a40 * t31
            + S11550 * a41 * t32
            + S6930 * a42 * t33
            + S2310 * a43 * t34
            + S330 * a44 * t35
            + S165 * a46 * t36
            + S1320 * a47 * t37
            + S4620 * a48 * t38
            + S9240 * a49 * t39
            + S11550 * a50 * t40
            + S9240 * a51 * t41
            + S4620 * a52 * t42
            + S1320 * a53 * t43
            + S165 * a54 * t44
            + S55 * a56 * t45
            + S495 * a57 * t46
            + S1980 * a58 * t47
            + S4620 * a59 * t48
            + S6930 * a60 * t49
            + S6930 * a61 * t50
            + S4620 * a62 * t51
            + S1980 * a63 * t52
            + S495 * a64 * t53
            + S55 * a65 * t54
            + S11 * a67 * t55
            + S110 * a68 * t56
            + S495 * a69 * t57
            + S1320 * a70 * t58
            + S2310 * a71 * t59
            + S2772 * a72 * t60
            + S2310 * a73 * t61
            + S1320 * a74 * t62
            + S495 * a75 * t63
            + S110 * a76 * t64
            + S11 * a77 * t65
            + a79 * y11
            + S11 * a80 * t67
            + S55 * a81 * t68
            + S165 * a82 * t69
            + S330 * a83 * t70
            + S462 * a84 * t71
            + S462 * a85 * t72
            + S330 * a86 * t73
            + S165 * a87 * t74
            + S55 * a88 * t75
            + S11 * a89 * t76
            + a90 * z11
        )
        out[0, j] = gx
        out[1, j] = gy
        out[2, j] = gz


@register_jitable
def axm2_points_m12(a, points, k, out):
    """axm2_m12 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read
    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from
    vectorizing the loop over the points."""
    a0 = a[0]
    a1 = a[1]
    a2 = a[2]
    a3 = a[3]
    a4 = a[4]
    a5 = a[5]
    a6 = a[6]
    a7 = a[7]
    a8 = a[8]
    a9 = a[9]
    a10 = a[10]
    a11 = a[11]
    a12 = a[12]
    a13 = a[13]
    a14 = a[14]
    a15 = a[15]
    a16 = a[16]
    a17 = a[17]
    a18 = a[18]
    a19 = a[19]
    a20 = a[20]
    a21 = a[21]
    a22 = a[22]
    a23 = a[23]
    a24 = a[24]
    a25 = a[25]
    a26 = a[26]
    a27 = a[27]
    a28 = a[28]
    a29 = a[29]
    a30 = a[30]
    a31 = a[31]
    a32 = a[32]
    a33 = a[33]
    a34 = a[34]
    a35 = a[35]
    a36 = a[36]
    a37 = a[37]
    a38 = a[38]
    a39 = a[39]
    a40 = a[40]
    a41 = a[41]
    a42 = a[42]
    a43 = a[43]
    a44 = a[44]
    a45 = a[45]
    a46 = a[46]
    a47 = a[47]
    a48 = a[48]
    a49 = a[49]
    a50 = a[50]
    a51 = a[51]
    a52 = a[52]
    a53 = a[53]
    a54 = a[54]
    a55 = a[55]
    a56 = a[56]
    a57 = a[57]
    a58 = a[58]
    a59 = a[59]
    a60 = a[60]
    a61 = a[61]
    a62 = a[62]
    a63 = a[63]
    a64 = a[64]
    a65 = a[65]
    a66 = a[66]
    a67 = a[67]
    a68 = a[68]
    a69 = a[69]
    a70 = a[70]
    a71 = a[71]
    a72 = a[72]
    a73 = a[73]
    a74 = a[74]
    a75 = a[75]
    a76 = a[76]
    a77 = a[77]
    a78 = a[78]
    a79 = a[79]
    a80 = a[80]
    a81 = a[81]
    a82 = a[82]
    a83 = a[83]
    a84 = a[84]
    a85 = a[85]
    a86 = a[86]
    a87 = a[87]
    a88 = a[88]
    a89 = a[89]
    a90 = a[90]
    for j in range(k):
        x = points[0, j]
        y = points[1, j]
        z = points[2, j]
        x2 = x * x
        x3 = x2 * x
        x4 = x3 * x
        x5 = x4 * x
        x6 = x5 * x
        x7 = x6 * x
        x8 = x7 * x
        x9 = x8 * x
        x10 = x9 * x
        y2 = y * y
        y3 = y2 * y
        y4 = y3 * y
        y5 = y4 * y
        y6 = y5 * y
        y7 = y6 * y
        y8 = y7 * y
        y9 = y8 * y
        y10 = y9 * y
        z2 = z * z
        z3 = z2 * z
        z4 = z3 * z
        z5 = z4 * z
        z6 = z5 * z
        z7 = z6 * z
        z8 = z7 * z
        z9 = z8 * z
        z10 = z9 * z
        t1 = x9 * y
        t2 = x9 * z
        t3 = x8 * y2
        t4 = x8 * y * z
        t5 = x8 * z2
        t6 = x7 * y3
        t7 = x7 * y2 * z
        t8 = x7 * y * z2
        t9 = x7 * z3
        t10 = x6 * y4
        t11 = x6 * y3 * z
        t12 = x6 * y2 * z2
        t13 = x6 * y * z3
        t14 = x6 * z4
        t15 = x5 * y5
        t16 = x5 * y4 * z
        t17 = x5 * y3 * z2
        t18 = x5 * y2 * z3
        t19 = x5 * y * z4
        t20 = x5 * z5
        t21 = x4 * y6
        t22 = x4 * y5 * z
        t23 = x4 * y4 * z2
        t24 = x4 * y3 * z3
        t25 = x4 * y2 * z4
        t26 = x4 * y * z5
        t27 = x4 * z6
        t28 = x3 * y7
        t29 = x3 * y6 * z
        t30 = x3 * y5 * z2
        t31 = x3 * y4 * z3
        t32 = x3 * y3 * z4
        t33 = x3 * y2 * z5
        t34 = x3 * y * z6
        t35 = x3 * z7
        t36 = x2 * y8
        t37 = x2 * y7 * z
        t38 = x2 * y6 * z2
        t39 = x2 * y5 * z3
        t40 = x2 * y4 * z4
        t41 = x2 * y3 * z5
        t42 = x2 * y2 * z6
        t43 = x2 * y * z7
        t44 = x2 * z8
        t45 = x * y9
        t46 = x * y8 * z
        t47 = x * y7 * z2
        t48 = x * y6 * z3
        t49 = x * y5 * z4
        t50 = x * y4 * z5
        t51 = x * y3 * z6
        t52 = x * y2 * z7
        t53 = x * y * z8
        t54 = x * z9
        t56 = y9 * z
        t57 = y8 * z2
        t58 = y7 * z3
        t59 = y6 * z4
        t60 = y5 * z5
        t61 = y4 * z6
        t62 = y3 * z7
        t63 = y2 * z8
        t64 = y * z9
        mxx = (
            a0 * x10
            + S10 * a1 * t1
            + S10 * a2 * t2
            + S45 * a3 * t3
            + S90 * a4 * t4
            + S45 * a5 * t5
            + S120 * a6 * t6
            + S360 * a7 * t7
            + S360 * a8 * t8
            + S120 * a9 * t9
            + S210 * a10 * t10
            + S840 * a11 * t11
            + S1260 * a12 * t12
            + S840 * a13 * t13
            + S210 * a14 * t14
            + S252 * a15 * t15
            + S1260 * a16 * t16
            + S2520 * a17 * t17
            + S2520 * a18 * t18
            + S1260 * a19 * t19
            + S252 * a20 * t20
            + S210 * a21 * t21
            + S1260 * a22 * t22
            + S3150 * a23 * t23
            + S4200 * a24 * t24
            + S3150 * a25 * t25
            + S1260 * a26 * t26
            + S210 * a27 * t27
            + S120 * a28 * t28
            + S840 * a29 * t29
            + S2520 * a30 * t30
            + S4200 * a31 * t31
            + S4200 * a32 * t32
            + S2520 * a33 * t33
            + S840 * a34 * t34
            + S120 * a35 * t35
            + S45 * a36 * t36
            + S360 * a37 * t37
            + S1260 * a38 * t38
            + S2520 * a39 * t39
            + S3150 * a40 * t40
            + S2520 * a41 * t41
            + S1260 * a42 * t42
            + S360 * a43 * t43
            + S45 * a44 * t44
            + S10 * a45 * t45
            + S90 * a46 * t46
            + S360 * a47 * t47
            + S840 * a48 * t48
            + S1260 * a49 * t49
            + S1260 * a50 * t50
            + S840 * a51 * t51
            + S360 * a52 * t52
            + S90 * a53 * t53
            + S10 * a54 * t54
            + a55 * y10
            + S10 * a56 * t56
            + S45 * a57 * t57
            + S120 * a58 * t58
            + S210 * a59 * t59
            + S252 * a60 * t60
            + S210 * a61 * t61
            + S120 * a62 * t62
            + S45 * a63 * t63
            + S10 * a64 * t64
            + a65 * z10
        )
        mxy = (
            a1 * x10
            + S10 * a3 * t1
            + S10 * a4 * t2
            + S45 * a6 * t3
            + S90 * a7 * t4
            + S45 * a8 * t5
            + S120 * a10 * t6
            + S360 * a11 * t7
            + S360 * a12 * t8
            + S120 * a13 * t9
            + S210 * a15 * t10
            + S840 * a16 * t11
            + S1260 * a17 * t12
            + S840 * a18 * t13
            + S210 * a19 * t14
            + S252 * a21 * t15
            + S1260 * a22 * t16
            + S2520 * a23 * t17
            + S2520 * a24 * t18
            + S1260 * a25 * t19
            + S252 * a26 * t20
            + S210 * a28 * t21
            + S1260 * a29 * t22
            + S3150 * a30 * t23
            + S4200 * a31 * t24
            + S3150 * a32 * t25
            + S1260 * a33 * t26
            + S210 * a34 * t27
            + S120 * a36 * t28
            + S840 * a37 * t29
            + S2520 * a38 * t30
            + S4200 * a39 * t31
            + S4200 * a40 * t32
            + S2520 * a41 * t33
            + S840 * a42 * t34
            + S120 * a43 * t35
            + S45 * a45 * t36
            + S360 * a46 * t37
            + S1260 * a47 * t38
            + S2520 * a48 * t39
            + S3150 * a49 * t40
            + S2520 * a50 * t41
            + S1260 * a51 * t42
            + S360 * a52 * t43
            + S45 * a53 * t44
            + S10 * a55 * t45
            + S90 * a56 * t46
            + S360 * a57 * t47
            + S840 * a58 * t48
            + S1260 * a59 * t49
            + S1260 * a60 * t50
            + S840 * a61 * t51
            + S360 * a62 * t52
            + S90 * a63 * t53
            + S10 * a64 * t54
            + a66 * y10
            + S10 * a67 * t56
            + S45 * a68 * t57
            + S120 * a69 * t58
            + S210 * a70 * t59
            + S252 * a71 * t60
            + S210 * a72 * t61
            + S120 * a73 * t62
            + S45 * a74 * t63
            + S10 * a75 * t64
            + a76 * z10
        )
        mxz = (
            a2 * x10
            + S10 * a4 * t1
            + S10 * a5 * t2
            + S45 * a7 * t3
            + S90 * a8 * t4
            + S45 * a9 * t5
            + S120 * a11 * t6
            + S360 * a12 * t7
            + S360 * a13 * t8
            + S120 * a14 * t9
            + S210 * a16 * t10
            + S840 * a17 * t11
            + S1260 * a18 * t12
            + S840 * a19 * t13
            + S210 * a20 * t14
            + S252 * a22 * t15
            + S1260 * a23 * t16
            + S2520 * a24 * t17
            + S2520 * a25 * t18
            + S1260 * a26 * t19
            + S252 * a27 * t20
            + S210 * a29 * t21
            + S1260 * a30 * t22
            + S3150 * a31 * t23
            + S4200 * a32 * t24
            + S3150 * a33 * t25
            + S1260 * a34 * t26
            + S210 * a35 * t27
            + S120 * a37 * t28
            + S840 * a38 * t29
            + S2520 * a39 * t30
            + S4200 * a40 * t31
            + S4200 * a41 * t32
            + S2520 * a42 * t33
            + S840 * a43 * t34
            + S120 * a44 * t35
            + S45 * a46 * t36
            + S360 * a47 * t37
            + S1260 * a48 * t38
            + S2520 * a49 * t39
            + S3150 * a50 * t40
            + S2520 * a51 * t41
            + S1260 * a52 * t42
            + S360 * a53 * t43
            + S45 * a54 * t44
            + S10 * a56 * t45
            + S90 * a57 * t46
            + S360 * a58 * t47
            + S840 * a59 * t48
            + S1260 * a60 * t49
            + S1260 * a61 * t50
            + S840 * a62 * t51
            + S360 * a63 * t52
            + S90 * a64 * t53
            + S10 * a65 * t54
            + a67 * y10
            + S10 * a68 * t56
            + S45 * a69 * t57
            + S120 * a70 * t58
            + S210 * a71 * t59
            + S252 * a72 * t60
            + S210 * a73 * t61
            + S120 * a74 * t62
            + S45 * a75 * t63
            + S10 * a76 * t64
            + a77 * z10
        )
        myy = (
            a3 * x10
            + S10 * a6 * t1
            + S10 * a7 * t2
            + S45 * a10 * t3
            + S90 * a11 * t4
            + S45 * a12 * t5
            + S120 * a15 * t6
            + S360 * a16 * t7
            + S360 * a17 * t8
            + S120 * a18 * t9
            + S210 * a21 * t10
            + S840 * a22 * t11
            + S1260 * a23 * t12
            + S840 * a24 * t13
            + S210 * a25 * t14
            + S252 * a28 * t15
            + S1260 * a29 * t16
            + S2520 * a30 * t17
            + S2520 * a31 * t18
            + S1260 * a32 * t19
            + S252 * a33 * t20
            + S210 * a36 * t21
            + S1260 * a37 * t22
            + S3150 * a38 * t23
            + S4200 * a39 * t24
            + S3150 * a40 * t25
            + S1260 * a41 * t26
            + S210 * a42 * t27
            + S120 * a45 * t28
            + S840 * a46 * t29
            + S2520 * a47 * t30
            + S4200 * a48 * t31
            + S4200 * a49 * t32
            + S2520 * a50 * t33
            + S840 * a51 * t34
            + S120 * a52 * t35
            + S45 * a55 * t36
            + S360 * a56 * t37
            + S1260 * a57 * t38
            + S2520 * a58 * t39
            + S3150 * a59 * t40
            + S2520 * a60 * t41
            + S1260 * a61 * t42
            + S360 * a62 * t43
            + S45 * a63 * t44
            + S10 * a66 * t45
            + S90 * a67 * t46
            + S360 * a68 * t47
            + S840 * a69 * t48
            + S1260 * a70 * t49
            + S1260 * a71 * t50
            + S840 * a72 * t51
            + S360 * a73 * t52
            + S90 * a74 * t53
            + S10 * a75 * t54
            + a78 * y10
            + S10 * a79 * t56
            + S45 * a80 * t57
            + S120 * a81 * t58
            + S210 * a82 * t59
            + S252 * a83 * t60
            + S210 * a84 * t61
            + S120 * a85 * t62
            + S45 * a86 * t63
            + S10 * a87 * t64
            + a88 * z10
        )
        myz = (
            a4 * x10
            + S10 * a7 * t1
            + S10 * a8 * t2
            + S45 * a11 * t3
            + S90 * a12 * t4
            + S45 * a13 * t5
            + S120 * a16 * t6
            + S360 * a17 * t7
            + S360 * a18 * t8
            + S120 * a19 * t9
            + S210 * a22 * t10
            + S840 * a23 * t11
            + S1260 * a24 * t12
            + S840 * a25 * t13
            + S210 * a26 * t14
            + S252 * a29 * t15
            + S1260 * a30 * t16
            + S2520 * a31 * t17
            + S2520 * a32 * t18
            + S1260 * a33 * t19
            + S252 * a34 * t20
            + S210 * a37 * t21
            + S1260 * a38 * t22
            + S3150 * a39 * t23
            + S4200 * a40 * t24
            + S3150 * a41 * t25
            + S1260 * a42 * t26
            + S210 * a43 * t27
            + S120 * a46 * t28
            + S840 * a47 * t29
            + S2520 * a48 * t30
            + S4200 * a49 * t31
            + S4200 * a50 * t32
            + S2520 * a51 * t33
            + S840 * a52 * t34
            + S120 * a53 * t35
            + S45 * a56 * t36
            + S360 * a57 * t37
            + S1260 * a58 * t38
            + S2520 * a59 * t39
            + S3150 * a60 * t40
            + S2520 * a61 * t41
            + S1260 * a62 * t42
            + S360 * a63 * t43
            + S45 * a64 * t44
            + S10 * a67 * t45
            + S90 * a68 * t46
            + S360 * a69 * t47
            + S840 * a70 * t48
            + S1260 * a71 * t49
            + S1260 * a72 * t50
            + S840 * a73 * t51
            + S360 * a74 * t52
            + S90 * a75 * t53
            + S10 * a76 * t54
            + a79 * y10
            + S10 * a80 * t56
            + S45 * a81 * t57
            + S120 * a82 * t58
            + S210 * a83 * t59
            + S252 * a84 * t60
            + S210 * a85 * t61
            + S120 * a86 * t62
            + S45 * a87 * t63
            + S10 * a88 * t64
            + a89 * z10
        )
        mzz = (
            a5 * x10
            + S10 * a8 * t1
            + S10 * a9 * t2
            + S45 * a12 * t3
            + S90 * a13 * t4
            + S45 * a14 * t5
            + S120 * a17 * t6
            + S360 * a18 * t7
            + S360 * a19 * t8
            + S120 * a20 * t9
            + S210 * a23 * t10
            + S840 * a24 * t11
            + S1260 * a25 * t12
            + S840 * a26 * t13
            + S210 * a27 * t14
            + S252 * a30 * t15
            + S1260 * a31 * t16
            + S2520 * a32 * t17
            + S2520 * a33 * t18
            + S1260 * a34 * t19
            + S252 * a35 * t20
            + S210 * a38 * t21
            + S1260 * a39 * t22
            + S3150 * a40 * t23
            + S4200 * a41 * t24
            + S3150 * a42 * t25
            + S1260 * a43 * t26
            + S210 * a44 * t27
            + S120 * a47 * t28
            + S840 * a48 * t29
            + S2520 * a49 * t30
            + S4200 * a50 * t31
            + S4200 * a51 * t32
            + S2520 * a52 * t33
            + S840 * a53 * t34
            + S120 * a54 * t35
            + S45 * a57 * t36
            + S360 * a58 * t37
            + S1260 * a59 * t38
            + S2520 * a60 * t39
            + S3150 * a61 * t40
            + S2520 * a62 * t41
            + S1260 * a63 * t42
            + S360 * a64 * t43
            + S45 * a65 * t44
            + S10 * a68 * t45
            + S90 * a69 * t46
            + S360 * a70 * t47
            + S840 * a71 * t48
            + S1260 * a72 * t49
            + S1260 * a73 * t50
            + S840 * a74 * t51
            + S360 * a75 * t52
            + S90 * a76 * t53
            + S10 * a77 * t54
            + a80 * y10
            + S10 * a81 * t56
            + S45 * a82 * t57
            + S120 * a83 * t58
            + S210 * a84 * t59
            + S252 * a85 * t60
            + S210 * a86 * t61
            + S120 * a87 * t62
            + S45 * a88 * t63
            + S10 * a89 * t64
            + a90 * z10
        )
        out[0, j] = mxx
        out[1, j] = mxy
        out[2, j] = mxz
        out[3, j] = myy
        out[4, j] = myz
        out[5, j] = mzz


@register_jitable
def climbs_cpu_m12(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^12 = f[s]),
    all at once: each round computes A x^10 (axm2_points_m12) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m12
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^10, ``steps`` (6, ·) their step's x',
    y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(n):
        s = seeds[t]
        lanes[0, k] = points[0, s]
        lanes[1, k] = points[1, s]
        lanes[2, k] = points[2, s]
        lanes[3, k] = f[s]
        slot[k] = t
        k += 1
    it = 0
    while k > 0:
        axm2_points_m12(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                12, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
                max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            status = sm.climb_status(lam, lanes[3, j], step, it, max_iter, step_tol, tol_lambda)
            if status == sm.CLIMBING:
                lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                j += 1
                continue
            lam = axm_m12(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(status == sm.STOPPED_CAPPED, negdef, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m12(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order 12, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty(91, sh2t.dtype)
        f = np.empty(count, sh2t.dtype)
        g = np.empty((3, count), sh2t.dtype)
        seeds = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        walked = np.empty(count, np.int64)
        lanes = np.empty((4, count), sh2t.dtype)
        m = np.empty((6, count), sh2t.dtype)
        steps = np.empty((6, count), sh2t.dtype)
        slot = np.empty(count, np.int64)
        for v in range(c * n_voxels // n_chunks, (c + 1) * n_voxels // n_chunks):
            for k in range(91):
                total = 0.0
                for j in range(91):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m12(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m12(
                a, points, f, seeds, n, fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
                iparams[P_MAX_ITER], cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
            )
            for t in range(n):
                out_stats[v, S_ITERATIONS] += cits[t]
                out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                out_stats[v, S_SEEDS] += 1
                if cflags[t] & CLIMB_CAPPED:
                    out_stats[v, S_CAPPED] += 1
                iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                valid[t] = cflags[t] & CLIMB_PEAK
            out_count[v] = sm.select_peaks(
                n, cx, cy, cz, cl, valid, walked, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_THRESHOLD],
                fparams[P_REL_THRESHOLD], out_dirs[v], out_amps[v],
            )
