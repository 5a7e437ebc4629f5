"""SS-HOPM code for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); see that module for
what each function computes and gpu/peaks/sshopm_math.py for the order-independent steps.
The CUDA kernels are in gpu/peaks/sshopm_generated_cuda.py.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_math.py sha256 66e95471dd239bda07934c70a119be6fd13b9eb99454a997560a1c6fe4243d49
# sshopm_layout.py sha256 6899c18d967ba72e04ee0b6d6b5370955fb561a79821c49e62820b82a8c20289

from types import FunctionType

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from gpu.peaks import sshopm_math as sm
from gpu.peaks.sshopm_layout import (
    CLIMB_CAPPED, CLIMB_MERGED, CLIMB_PEAK, P_BOUNDED, P_COS_BASIN, P_COS_MERGE, P_MAX_ITER, P_MAX_STEP, P_NEWTON,
    P_NPEAKS, P_REL_THRESHOLD, P_SEED_FRACTION, P_SEED_LOCAL, P_SHIFT, P_STEP_TOL, P_THRESHOLD, P_TOL_LAMBDA, S_CAPPED,
    S_ITERATIONS, S_MAX_ITERATIONS, S_MERGED, S_SEEDS, S_SKIPPED,
)

# sshopm_step compiled into its caller's IR, not called: LLVM vectorizes no loop with a call in
# it. It branches (Newton or shifted power step), which LLVM turns into masked vector code
# given numpy's error model (a division by zero in a lane not taken gives inf, not an
# exception); each lane's result is that of the scalar step.
sshopm_step_inline = register_jitable(inline="always")(
    FunctionType(sm.sshopm_step.__code__, sm.sshopm_step.__globals__, "sshopm_step_inline")
)

# Multinomial multiplicities σ(k) as float32 constants: exact integers, and float32 keeps
# the CUDA kernels in single precision while float64 CPU data stays float64.
S2 = np.float32(2)
S3 = np.float32(3)
S4 = np.float32(4)
S5 = np.float32(5)
S6 = np.float32(6)
S7 = np.float32(7)
S8 = np.float32(8)
S9 = np.float32(9)
S10 = np.float32(10)
S11 = np.float32(11)
S12 = np.float32(12)
S15 = np.float32(15)
S20 = np.float32(20)
S21 = np.float32(21)
S28 = np.float32(28)
S30 = np.float32(30)
S35 = np.float32(35)
S36 = np.float32(36)
S42 = np.float32(42)
S45 = np.float32(45)
S55 = np.float32(55)
S56 = np.float32(56)
S60 = np.float32(60)
S66 = np.float32(66)
S70 = np.float32(70)
S72 = np.float32(72)
S84 = np.float32(84)
S90 = np.float32(90)
S105 = np.float32(105)
S110 = np.float32(110)
S120 = np.float32(120)
S126 = np.float32(126)
S132 = np.float32(132)
S140 = np.float32(140)
S165 = np.float32(165)
S168 = np.float32(168)
S210 = np.float32(210)
S220 = np.float32(220)
S252 = np.float32(252)
S280 = np.float32(280)
S330 = np.float32(330)
S360 = np.float32(360)
S420 = np.float32(420)
S462 = np.float32(462)
S495 = np.float32(495)
S504 = np.float32(504)
S560 = np.float32(560)
S630 = np.float32(630)
S660 = np.float32(660)
S756 = np.float32(756)
S792 = np.float32(792)
S840 = np.float32(840)
S924 = np.float32(924)
S1260 = np.float32(1260)
S1320 = np.float32(1320)
S1680 = np.float32(1680)
S1980 = np.float32(1980)
S2310 = np.float32(2310)
S2520 = np.float32(2520)
S2772 = np.float32(2772)
S2970 = np.float32(2970)
S3150 = np.float32(3150)
S3960 = np.float32(3960)
S4200 = np.float32(4200)
S4620 = np.float32(4620)
S5544 = np.float32(5544)
S6930 = np.float32(6930)
S7920 = np.float32(7920)
S9240 = np.float32(9240)
S11550 = np.float32(11550)
S13860 = np.float32(13860)
S16632 = np.float32(16632)
S18480 = np.float32(18480)
S27720 = np.float32(27720)
S34650 = np.float32(34650)



# ---- order 2: 6 unique entries ----


@register_jitable
def axm_m2(a, x, y, z):
    """A x^2 = Σ_k σ(k) a_k x^k over the 6 unique entries (Ballard et al., Eq. 3)."""
    x2 = x * x
    y2 = y * y
    z2 = z * z
    return (
        a[0] * x2
        + S2 * a[1] * x * y
        + S2 * a[2] * x * z
        + a[3] * y2
        + S2 * a[4] * y * z
        + a[5] * z2
    )


@register_jitable
def axm1_m2(a, x, y, z):
    """A x^1 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
    gx = (
        a[0] * x
        + a[1] * y
        + a[2] * z
    )
    gy = (
        a[1] * x
        + a[3] * y
        + a[4] * z
    )
    gz = (
        a[2] * x
        + a[4] * y
        + a[5] * z
    )
    return gx, gy, gz


@register_jitable
def axm2_m2(a, x, y, z):
    """A x^0 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
    mxx = (
        a[0]
    )
    mxy = (
        a[1]
    )
    mxz = (
        a[2]
    )
    myy = (
        a[3]
    )
    myz = (
        a[4]
    )
    mzz = (
        a[5]
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m2(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^2 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m2(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            2, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m2(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m2(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m2(a, points, k, out):
    """axm1_m2 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m2(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m2 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^2 = f[s]), all at once: each round computes A x^0 (axm2_points_m2) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m2, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^0, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m2(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m2(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m2(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1


# ---- order 4: 15 unique entries ----


@register_jitable
def axm_m4(a, x, y, z):
    """A x^4 = Σ_k σ(k) a_k x^k over the 15 unique entries (Ballard et al., Eq. 3)."""
    x2 = x * x
    x3 = x2 * x
    x4 = x3 * x
    y2 = y * y
    y3 = y2 * y
    y4 = y3 * y
    z2 = z * z
    z3 = z2 * z
    z4 = z3 * z
    return (
        a[0] * x4
        + S4 * a[1] * x3 * y
        + S4 * a[2] * x3 * z
        + S6 * a[3] * x2 * y2
        + S12 * a[4] * x2 * y * z
        + S6 * a[5] * x2 * z2
        + S4 * a[6] * x * y3
        + S12 * a[7] * x * y2 * z
        + S12 * a[8] * x * y * z2
        + S4 * a[9] * x * z3
        + a[10] * y4
        + S4 * a[11] * y3 * z
        + S6 * a[12] * y2 * z2
        + S4 * a[13] * y * z3
        + a[14] * z4
    )


@register_jitable
def axm1_m4(a, x, y, z):
    """A x^3 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
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
        a[0] * x3
        + S3 * a[1] * t1
        + S3 * a[2] * t2
        + S3 * a[3] * t3
        + S6 * a[4] * t4
        + S3 * a[5] * t5
        + a[6] * y3
        + S3 * a[7] * t7
        + S3 * a[8] * t8
        + a[9] * z3
    )
    gy = (
        a[1] * x3
        + S3 * a[3] * t1
        + S3 * a[4] * t2
        + S3 * a[6] * t3
        + S6 * a[7] * t4
        + S3 * a[8] * t5
        + a[10] * y3
        + S3 * a[11] * t7
        + S3 * a[12] * t8
        + a[13] * z3
    )
    gz = (
        a[2] * x3
        + S3 * a[4] * t1
        + S3 * a[5] * t2
        + S3 * a[7] * t3
        + S6 * a[8] * t4
        + S3 * a[9] * t5
        + a[11] * y3
        + S3 * a[12] * t7
        + S3 * a[13] * t8
        + a[14] * z3
    )
    return gx, gy, gz


@register_jitable
def axm2_m4(a, x, y, z):
    """A x^2 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
    x2 = x * x
    y2 = y * y
    z2 = z * z
    t1 = x * y
    t2 = x * z
    t4 = y * z
    mxx = (
        a[0] * x2
        + S2 * a[1] * t1
        + S2 * a[2] * t2
        + a[3] * y2
        + S2 * a[4] * t4
        + a[5] * z2
    )
    mxy = (
        a[1] * x2
        + S2 * a[3] * t1
        + S2 * a[4] * t2
        + a[6] * y2
        + S2 * a[7] * t4
        + a[8] * z2
    )
    mxz = (
        a[2] * x2
        + S2 * a[4] * t1
        + S2 * a[5] * t2
        + a[7] * y2
        + S2 * a[8] * t4
        + a[9] * z2
    )
    myy = (
        a[3] * x2
        + S2 * a[6] * t1
        + S2 * a[7] * t2
        + a[10] * y2
        + S2 * a[11] * t4
        + a[12] * z2
    )
    myz = (
        a[4] * x2
        + S2 * a[7] * t1
        + S2 * a[8] * t2
        + a[11] * y2
        + S2 * a[12] * t4
        + a[13] * z2
    )
    mzz = (
        a[5] * x2
        + S2 * a[8] * t1
        + S2 * a[9] * t2
        + a[12] * y2
        + S2 * a[13] * t4
        + a[14] * z2
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m4(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^4 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m4(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            4, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m4(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m4(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m4(a, points, k, out):
    """axm1_m4 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m4(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m4 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^4 = f[s]), all at once: each round computes A x^2 (axm2_points_m4) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m4, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^2, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m4(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m4(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m4(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1


# ---- order 6: 28 unique entries ----


@register_jitable
def axm_m6(a, x, y, z):
    """A x^6 = Σ_k σ(k) a_k x^k over the 28 unique entries (Ballard et al., Eq. 3)."""
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
    return (
        a[0] * x6
        + S6 * a[1] * x5 * y
        + S6 * a[2] * x5 * z
        + S15 * a[3] * x4 * y2
        + S30 * a[4] * x4 * y * z
        + S15 * a[5] * x4 * z2
        + S20 * a[6] * x3 * y3
        + S60 * a[7] * x3 * y2 * z
        + S60 * a[8] * x3 * y * z2
        + S20 * a[9] * x3 * z3
        + S15 * a[10] * x2 * y4
        + S60 * a[11] * x2 * y3 * z
        + S90 * a[12] * x2 * y2 * z2
        + S60 * a[13] * x2 * y * z3
        + S15 * a[14] * x2 * z4
        + S6 * a[15] * x * y5
        + S30 * a[16] * x * y4 * z
        + S60 * a[17] * x * y3 * z2
        + S60 * a[18] * x * y2 * z3
        + S30 * a[19] * x * y * z4
        + S6 * a[20] * x * z5
        + a[21] * y6
        + S6 * a[22] * y5 * z
        + S15 * a[23] * y4 * z2
        + S20 * a[24] * y3 * z3
        + S15 * a[25] * y2 * z4
        + S6 * a[26] * y * z5
        + a[27] * z6
    )


@register_jitable
def axm1_m6(a, x, y, z):
    """A x^5 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
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
        a[0] * x5
        + S5 * a[1] * t1
        + S5 * a[2] * t2
        + S10 * a[3] * t3
        + S20 * a[4] * t4
        + S10 * a[5] * t5
        + S10 * a[6] * t6
        + S30 * a[7] * t7
        + S30 * a[8] * t8
        + S10 * a[9] * t9
        + S5 * a[10] * t10
        + S20 * a[11] * t11
        + S30 * a[12] * t12
        + S20 * a[13] * t13
        + S5 * a[14] * t14
        + a[15] * y5
        + S5 * a[16] * t16
        + S10 * a[17] * t17
        + S10 * a[18] * t18
        + S5 * a[19] * t19
        + a[20] * z5
    )
    gy = (
        a[1] * x5
        + S5 * a[3] * t1
        + S5 * a[4] * t2
        + S10 * a[6] * t3
        + S20 * a[7] * t4
        + S10 * a[8] * t5
        + S10 * a[10] * t6
        + S30 * a[11] * t7
        + S30 * a[12] * t8
        + S10 * a[13] * t9
        + S5 * a[15] * t10
        + S20 * a[16] * t11
        + S30 * a[17] * t12
        + S20 * a[18] * t13
        + S5 * a[19] * t14
        + a[21] * y5
        + S5 * a[22] * t16
        + S10 * a[23] * t17
        + S10 * a[24] * t18
        + S5 * a[25] * t19
        + a[26] * z5
    )
    gz = (
        a[2] * x5
        + S5 * a[4] * t1
        + S5 * a[5] * t2
        + S10 * a[7] * t3
        + S20 * a[8] * t4
        + S10 * a[9] * t5
        + S10 * a[11] * t6
        + S30 * a[12] * t7
        + S30 * a[13] * t8
        + S10 * a[14] * t9
        + S5 * a[16] * t10
        + S20 * a[17] * t11
        + S30 * a[18] * t12
        + S20 * a[19] * t13
        + S5 * a[20] * t14
        + a[22] * y5
        + S5 * a[23] * t16
        + S10 * a[24] * t17
        + S10 * a[25] * t18
        + S5 * a[26] * t19
        + a[27] * z5
    )
    return gx, gy, gz


@register_jitable
def axm2_m6(a, x, y, z):
    """A x^4 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
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
        a[0] * x4
        + S4 * a[1] * t1
        + S4 * a[2] * t2
        + S6 * a[3] * t3
        + S12 * a[4] * t4
        + S6 * a[5] * t5
        + S4 * a[6] * t6
        + S12 * a[7] * t7
        + S12 * a[8] * t8
        + S4 * a[9] * t9
        + a[10] * y4
        + S4 * a[11] * t11
        + S6 * a[12] * t12
        + S4 * a[13] * t13
        + a[14] * z4
    )
    mxy = (
        a[1] * x4
        + S4 * a[3] * t1
        + S4 * a[4] * t2
        + S6 * a[6] * t3
        + S12 * a[7] * t4
        + S6 * a[8] * t5
        + S4 * a[10] * t6
        + S12 * a[11] * t7
        + S12 * a[12] * t8
        + S4 * a[13] * t9
        + a[15] * y4
        + S4 * a[16] * t11
        + S6 * a[17] * t12
        + S4 * a[18] * t13
        + a[19] * z4
    )
    mxz = (
        a[2] * x4
        + S4 * a[4] * t1
        + S4 * a[5] * t2
        + S6 * a[7] * t3
        + S12 * a[8] * t4
        + S6 * a[9] * t5
        + S4 * a[11] * t6
        + S12 * a[12] * t7
        + S12 * a[13] * t8
        + S4 * a[14] * t9
        + a[16] * y4
        + S4 * a[17] * t11
        + S6 * a[18] * t12
        + S4 * a[19] * t13
        + a[20] * z4
    )
    myy = (
        a[3] * x4
        + S4 * a[6] * t1
        + S4 * a[7] * t2
        + S6 * a[10] * t3
        + S12 * a[11] * t4
        + S6 * a[12] * t5
        + S4 * a[15] * t6
        + S12 * a[16] * t7
        + S12 * a[17] * t8
        + S4 * a[18] * t9
        + a[21] * y4
        + S4 * a[22] * t11
        + S6 * a[23] * t12
        + S4 * a[24] * t13
        + a[25] * z4
    )
    myz = (
        a[4] * x4
        + S4 * a[7] * t1
        + S4 * a[8] * t2
        + S6 * a[11] * t3
        + S12 * a[12] * t4
        + S6 * a[13] * t5
        + S4 * a[16] * t6
        + S12 * a[17] * t7
        + S12 * a[18] * t8
        + S4 * a[19] * t9
        + a[22] * y4
        + S4 * a[23] * t11
        + S6 * a[24] * t12
        + S4 * a[25] * t13
        + a[26] * z4
    )
    mzz = (
        a[5] * x4
        + S4 * a[8] * t1
        + S4 * a[9] * t2
        + S6 * a[12] * t3
        + S12 * a[13] * t4
        + S6 * a[14] * t5
        + S4 * a[17] * t6
        + S12 * a[18] * t7
        + S12 * a[19] * t8
        + S4 * a[20] * t9
        + a[23] * y4
        + S4 * a[24] * t11
        + S6 * a[25] * t12
        + S4 * a[26] * t13
        + a[27] * z4
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m6(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^6 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m6(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            6, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m6(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m6(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m6(a, points, k, out):
    """axm1_m6 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m6(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m6 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^6 = f[s]), all at once: each round computes A x^4 (axm2_points_m6) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m6, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^4, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m6(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m6(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m6(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1


# ---- order 8: 45 unique entries ----


@register_jitable
def axm_m8(a, x, y, z):
    """A x^8 = Σ_k σ(k) a_k x^k over the 45 unique entries (Ballard et al., Eq. 3)."""
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
    return (
        a[0] * x8
        + S8 * a[1] * x7 * y
        + S8 * a[2] * x7 * z
        + S28 * a[3] * x6 * y2
        + S56 * a[4] * x6 * y * z
        + S28 * a[5] * x6 * z2
        + S56 * a[6] * x5 * y3
        + S168 * a[7] * x5 * y2 * z
        + S168 * a[8] * x5 * y * z2
        + S56 * a[9] * x5 * z3
        + S70 * a[10] * x4 * y4
        + S280 * a[11] * x4 * y3 * z
        + S420 * a[12] * x4 * y2 * z2
        + S280 * a[13] * x4 * y * z3
        + S70 * a[14] * x4 * z4
        + S56 * a[15] * x3 * y5
        + S280 * a[16] * x3 * y4 * z
        + S560 * a[17] * x3 * y3 * z2
        + S560 * a[18] * x3 * y2 * z3
        + S280 * a[19] * x3 * y * z4
        + S56 * a[20] * x3 * z5
        + S28 * a[21] * x2 * y6
        + S168 * a[22] * x2 * y5 * z
        + S420 * a[23] * x2 * y4 * z2
        + S560 * a[24] * x2 * y3 * z3
        + S420 * a[25] * x2 * y2 * z4
        + S168 * a[26] * x2 * y * z5
        + S28 * a[27] * x2 * z6
        + S8 * a[28] * x * y7
        + S56 * a[29] * x * y6 * z
        + S168 * a[30] * x * y5 * z2
        + S280 * a[31] * x * y4 * z3
        + S280 * a[32] * x * y3 * z4
        + S168 * a[33] * x * y2 * z5
        + S56 * a[34] * x * y * z6
        + S8 * a[35] * x * z7
        + a[36] * y8
        + S8 * a[37] * y7 * z
        + S28 * a[38] * y6 * z2
        + S56 * a[39] * y5 * z3
        + S70 * a[40] * y4 * z4
        + S56 * a[41] * y3 * z5
        + S28 * a[42] * y2 * z6
        + S8 * a[43] * y * z7
        + a[44] * z8
    )


@register_jitable
def axm1_m8(a, x, y, z):
    """A x^7 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
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
        a[0] * x7
        + S7 * a[1] * t1
        + S7 * a[2] * t2
        + S21 * a[3] * t3
        + S42 * a[4] * t4
        + S21 * a[5] * t5
        + S35 * a[6] * t6
        + S105 * a[7] * t7
        + S105 * a[8] * t8
        + S35 * a[9] * t9
        + S35 * a[10] * t10
        + S140 * a[11] * t11
        + S210 * a[12] * t12
        + S140 * a[13] * t13
        + S35 * a[14] * t14
        + S21 * a[15] * t15
        + S105 * a[16] * t16
        + S210 * a[17] * t17
        + S210 * a[18] * t18
        + S105 * a[19] * t19
        + S21 * a[20] * t20
        + S7 * a[21] * t21
        + S42 * a[22] * t22
        + S105 * a[23] * t23
        + S140 * a[24] * t24
        + S105 * a[25] * t25
        + S42 * a[26] * t26
        + S7 * a[27] * t27
        + a[28] * y7
        + S7 * a[29] * t29
        + S21 * a[30] * t30
        + S35 * a[31] * t31
        + S35 * a[32] * t32
        + S21 * a[33] * t33
        + S7 * a[34] * t34
        + a[35] * z7
    )
    gy = (
        a[1] * x7
        + S7 * a[3] * t1
        + S7 * a[4] * t2
        + S21 * a[6] * t3
        + S42 * a[7] * t4
        + S21 * a[8] * t5
        + S35 * a[10] * t6
        + S105 * a[11] * t7
        + S105 * a[12] * t8
        + S35 * a[13] * t9
        + S35 * a[15] * t10
        + S140 * a[16] * t11
        + S210 * a[17] * t12
        + S140 * a[18] * t13
        + S35 * a[19] * t14
        + S21 * a[21] * t15
        + S105 * a[22] * t16
        + S210 * a[23] * t17
        + S210 * a[24] * t18
        + S105 * a[25] * t19
        + S21 * a[26] * t20
        + S7 * a[28] * t21
        + S42 * a[29] * t22
        + S105 * a[30] * t23
        + S140 * a[31] * t24
        + S105 * a[32] * t25
        + S42 * a[33] * t26
        + S7 * a[34] * t27
        + a[36] * y7
        + S7 * a[37] * t29
        + S21 * a[38] * t30
        + S35 * a[39] * t31
        + S35 * a[40] * t32
        + S21 * a[41] * t33
        + S7 * a[42] * t34
        + a[43] * z7
    )
    gz = (
        a[2] * x7
        + S7 * a[4] * t1
        + S7 * a[5] * t2
        + S21 * a[7] * t3
        + S42 * a[8] * t4
        + S21 * a[9] * t5
        + S35 * a[11] * t6
        + S105 * a[12] * t7
        + S105 * a[13] * t8
        + S35 * a[14] * t9
        + S35 * a[16] * t10
        + S140 * a[17] * t11
        + S210 * a[18] * t12
        + S140 * a[19] * t13
        + S35 * a[20] * t14
        + S21 * a[22] * t15
        + S105 * a[23] * t16
        + S210 * a[24] * t17
        + S210 * a[25] * t18
        + S105 * a[26] * t19
        + S21 * a[27] * t20
        + S7 * a[29] * t21
        + S42 * a[30] * t22
        + S105 * a[31] * t23
        + S140 * a[32] * t24
        + S105 * a[33] * t25
        + S42 * a[34] * t26
        + S7 * a[35] * t27
        + a[37] * y7
        + S7 * a[38] * t29
        + S21 * a[39] * t30
        + S35 * a[40] * t31
        + S35 * a[41] * t32
        + S21 * a[42] * t33
        + S7 * a[43] * t34
        + a[44] * z7
    )
    return gx, gy, gz


@register_jitable
def axm2_m8(a, x, y, z):
    """A x^6 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
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
        a[0] * x6
        + S6 * a[1] * t1
        + S6 * a[2] * t2
        + S15 * a[3] * t3
        + S30 * a[4] * t4
        + S15 * a[5] * t5
        + S20 * a[6] * t6
        + S60 * a[7] * t7
        + S60 * a[8] * t8
        + S20 * a[9] * t9
        + S15 * a[10] * t10
        + S60 * a[11] * t11
        + S90 * a[12] * t12
        + S60 * a[13] * t13
        + S15 * a[14] * t14
        + S6 * a[15] * t15
        + S30 * a[16] * t16
        + S60 * a[17] * t17
        + S60 * a[18] * t18
        + S30 * a[19] * t19
        + S6 * a[20] * t20
        + a[21] * y6
        + S6 * a[22] * t22
        + S15 * a[23] * t23
        + S20 * a[24] * t24
        + S15 * a[25] * t25
        + S6 * a[26] * t26
        + a[27] * z6
    )
    mxy = (
        a[1] * x6
        + S6 * a[3] * t1
        + S6 * a[4] * t2
        + S15 * a[6] * t3
        + S30 * a[7] * t4
        + S15 * a[8] * t5
        + S20 * a[10] * t6
        + S60 * a[11] * t7
        + S60 * a[12] * t8
        + S20 * a[13] * t9
        + S15 * a[15] * t10
        + S60 * a[16] * t11
        + S90 * a[17] * t12
        + S60 * a[18] * t13
        + S15 * a[19] * t14
        + S6 * a[21] * t15
        + S30 * a[22] * t16
        + S60 * a[23] * t17
        + S60 * a[24] * t18
        + S30 * a[25] * t19
        + S6 * a[26] * t20
        + a[28] * y6
        + S6 * a[29] * t22
        + S15 * a[30] * t23
        + S20 * a[31] * t24
        + S15 * a[32] * t25
        + S6 * a[33] * t26
        + a[34] * z6
    )
    mxz = (
        a[2] * x6
        + S6 * a[4] * t1
        + S6 * a[5] * t2
        + S15 * a[7] * t3
        + S30 * a[8] * t4
        + S15 * a[9] * t5
        + S20 * a[11] * t6
        + S60 * a[12] * t7
        + S60 * a[13] * t8
        + S20 * a[14] * t9
        + S15 * a[16] * t10
        + S60 * a[17] * t11
        + S90 * a[18] * t12
        + S60 * a[19] * t13
        + S15 * a[20] * t14
        + S6 * a[22] * t15
        + S30 * a[23] * t16
        + S60 * a[24] * t17
        + S60 * a[25] * t18
        + S30 * a[26] * t19
        + S6 * a[27] * t20
        + a[29] * y6
        + S6 * a[30] * t22
        + S15 * a[31] * t23
        + S20 * a[32] * t24
        + S15 * a[33] * t25
        + S6 * a[34] * t26
        + a[35] * z6
    )
    myy = (
        a[3] * x6
        + S6 * a[6] * t1
        + S6 * a[7] * t2
        + S15 * a[10] * t3
        + S30 * a[11] * t4
        + S15 * a[12] * t5
        + S20 * a[15] * t6
        + S60 * a[16] * t7
        + S60 * a[17] * t8
        + S20 * a[18] * t9
        + S15 * a[21] * t10
        + S60 * a[22] * t11
        + S90 * a[23] * t12
        + S60 * a[24] * t13
        + S15 * a[25] * t14
        + S6 * a[28] * t15
        + S30 * a[29] * t16
        + S60 * a[30] * t17
        + S60 * a[31] * t18
        + S30 * a[32] * t19
        + S6 * a[33] * t20
        + a[36] * y6
        + S6 * a[37] * t22
        + S15 * a[38] * t23
        + S20 * a[39] * t24
        + S15 * a[40] * t25
        + S6 * a[41] * t26
        + a[42] * z6
    )
    myz = (
        a[4] * x6
        + S6 * a[7] * t1
        + S6 * a[8] * t2
        + S15 * a[11] * t3
        + S30 * a[12] * t4
        + S15 * a[13] * t5
        + S20 * a[16] * t6
        + S60 * a[17] * t7
        + S60 * a[18] * t8
        + S20 * a[19] * t9
        + S15 * a[22] * t10
        + S60 * a[23] * t11
        + S90 * a[24] * t12
        + S60 * a[25] * t13
        + S15 * a[26] * t14
        + S6 * a[29] * t15
        + S30 * a[30] * t16
        + S60 * a[31] * t17
        + S60 * a[32] * t18
        + S30 * a[33] * t19
        + S6 * a[34] * t20
        + a[37] * y6
        + S6 * a[38] * t22
        + S15 * a[39] * t23
        + S20 * a[40] * t24
        + S15 * a[41] * t25
        + S6 * a[42] * t26
        + a[43] * z6
    )
    mzz = (
        a[5] * x6
        + S6 * a[8] * t1
        + S6 * a[9] * t2
        + S15 * a[12] * t3
        + S30 * a[13] * t4
        + S15 * a[14] * t5
        + S20 * a[17] * t6
        + S60 * a[18] * t7
        + S60 * a[19] * t8
        + S20 * a[20] * t9
        + S15 * a[23] * t10
        + S60 * a[24] * t11
        + S90 * a[25] * t12
        + S60 * a[26] * t13
        + S15 * a[27] * t14
        + S6 * a[30] * t15
        + S30 * a[31] * t16
        + S60 * a[32] * t17
        + S60 * a[33] * t18
        + S30 * a[34] * t19
        + S6 * a[35] * t20
        + a[38] * y6
        + S6 * a[39] * t22
        + S15 * a[40] * t23
        + S20 * a[41] * t24
        + S15 * a[42] * t25
        + S6 * a[43] * t26
        + a[44] * z6
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m8(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^8 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m8(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            8, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m8(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m8(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m8(a, points, k, out):
    """axm1_m8 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m8(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m8 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^8 = f[s]), all at once: each round computes A x^6 (axm2_points_m8) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m8, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^6, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m8(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m8(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m8(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1


# ---- order 10: 66 unique entries ----


@register_jitable
def axm_m10(a, x, y, z):
    """A x^10 = Σ_k σ(k) a_k x^k over the 66 unique entries (Ballard et al., Eq. 3)."""
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
    return (
        a[0] * x10
        + S10 * a[1] * x9 * y
        + S10 * a[2] * x9 * z
        + S45 * a[3] * x8 * y2
        + S90 * a[4] * x8 * y * z
        + S45 * a[5] * x8 * z2
        + S120 * a[6] * x7 * y3
        + S360 * a[7] * x7 * y2 * z
        + S360 * a[8] * x7 * y * z2
        + S120 * a[9] * x7 * z3
        + S210 * a[10] * x6 * y4
        + S840 * a[11] * x6 * y3 * z
        + S1260 * a[12] * x6 * y2 * z2
        + S840 * a[13] * x6 * y * z3
        + S210 * a[14] * x6 * z4
        + S252 * a[15] * x5 * y5
        + S1260 * a[16] * x5 * y4 * z
        + S2520 * a[17] * x5 * y3 * z2
        + S2520 * a[18] * x5 * y2 * z3
        + S1260 * a[19] * x5 * y * z4
        + S252 * a[20] * x5 * z5
        + S210 * a[21] * x4 * y6
        + S1260 * a[22] * x4 * y5 * z
        + S3150 * a[23] * x4 * y4 * z2
        + S4200 * a[24] * x4 * y3 * z3
        + S3150 * a[25] * x4 * y2 * z4
        + S1260 * a[26] * x4 * y * z5
        + S210 * a[27] * x4 * z6
        + S120 * a[28] * x3 * y7
        + S840 * a[29] * x3 * y6 * z
        + S2520 * a[30] * x3 * y5 * z2
        + S4200 * a[31] * x3 * y4 * z3
        + S4200 * a[32] * x3 * y3 * z4
        + S2520 * a[33] * x3 * y2 * z5
        + S840 * a[34] * x3 * y * z6
        + S120 * a[35] * x3 * z7
        + S45 * a[36] * x2 * y8
        + S360 * a[37] * x2 * y7 * z
        + S1260 * a[38] * x2 * y6 * z2
        + S2520 * a[39] * x2 * y5 * z3
        + S3150 * a[40] * x2 * y4 * z4
        + S2520 * a[41] * x2 * y3 * z5
        + S1260 * a[42] * x2 * y2 * z6
        + S360 * a[43] * x2 * y * z7
        + S45 * a[44] * x2 * z8
        + S10 * a[45] * x * y9
        + S90 * a[46] * x * y8 * z
        + S360 * a[47] * x * y7 * z2
        + S840 * a[48] * x * y6 * z3
        + S1260 * a[49] * x * y5 * z4
        + S1260 * a[50] * x * y4 * z5
        + S840 * a[51] * x * y3 * z6
        + S360 * a[52] * x * y2 * z7
        + S90 * a[53] * x * y * z8
        + S10 * a[54] * x * z9
        + a[55] * y10
        + S10 * a[56] * y9 * z
        + S45 * a[57] * y8 * z2
        + S120 * a[58] * y7 * z3
        + S210 * a[59] * y6 * z4
        + S252 * a[60] * y5 * z5
        + S210 * a[61] * y4 * z6
        + S120 * a[62] * y3 * z7
        + S45 * a[63] * y2 * z8
        + S10 * a[64] * y * z9
        + a[65] * z10
    )


@register_jitable
def axm1_m10(a, x, y, z):
    """A x^9 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
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
        a[0] * x9
        + S9 * a[1] * t1
        + S9 * a[2] * t2
        + S36 * a[3] * t3
        + S72 * a[4] * t4
        + S36 * a[5] * t5
        + S84 * a[6] * t6
        + S252 * a[7] * t7
        + S252 * a[8] * t8
        + S84 * a[9] * t9
        + S126 * a[10] * t10
        + S504 * a[11] * t11
        + S756 * a[12] * t12
        + S504 * a[13] * t13
        + S126 * a[14] * t14
        + S126 * a[15] * t15
        + S630 * a[16] * t16
        + S1260 * a[17] * t17
        + S1260 * a[18] * t18
        + S630 * a[19] * t19
        + S126 * a[20] * t20
        + S84 * a[21] * t21
        + S504 * a[22] * t22
        + S1260 * a[23] * t23
        + S1680 * a[24] * t24
        + S1260 * a[25] * t25
        + S504 * a[26] * t26
        + S84 * a[27] * t27
        + S36 * a[28] * t28
        + S252 * a[29] * t29
        + S756 * a[30] * t30
        + S1260 * a[31] * t31
        + S1260 * a[32] * t32
        + S756 * a[33] * t33
        + S252 * a[34] * t34
        + S36 * a[35] * t35
        + S9 * a[36] * t36
        + S72 * a[37] * t37
        + S252 * a[38] * t38
        + S504 * a[39] * t39
        + S630 * a[40] * t40
        + S504 * a[41] * t41
        + S252 * a[42] * t42
        + S72 * a[43] * t43
        + S9 * a[44] * t44
        + a[45] * y9
        + S9 * a[46] * t46
        + S36 * a[47] * t47
        + S84 * a[48] * t48
        + S126 * a[49] * t49
        + S126 * a[50] * t50
        + S84 * a[51] * t51
        + S36 * a[52] * t52
        + S9 * a[53] * t53
        + a[54] * z9
    )
    gy = (
        a[1] * x9
        + S9 * a[3] * t1
        + S9 * a[4] * t2
        + S36 * a[6] * t3
        + S72 * a[7] * t4
        + S36 * a[8] * t5
        + S84 * a[10] * t6
        + S252 * a[11] * t7
        + S252 * a[12] * t8
        + S84 * a[13] * t9
        + S126 * a[15] * t10
        + S504 * a[16] * t11
        + S756 * a[17] * t12
        + S504 * a[18] * t13
        + S126 * a[19] * t14
        + S126 * a[21] * t15
        + S630 * a[22] * t16
        + S1260 * a[23] * t17
        + S1260 * a[24] * t18
        + S630 * a[25] * t19
        + S126 * a[26] * t20
        + S84 * a[28] * t21
        + S504 * a[29] * t22
        + S1260 * a[30] * t23
        + S1680 * a[31] * t24
        + S1260 * a[32] * t25
        + S504 * a[33] * t26
        + S84 * a[34] * t27
        + S36 * a[36] * t28
        + S252 * a[37] * t29
        + S756 * a[38] * t30
        + S1260 * a[39] * t31
        + S1260 * a[40] * t32
        + S756 * a[41] * t33
        + S252 * a[42] * t34
        + S36 * a[43] * t35
        + S9 * a[45] * t36
        + S72 * a[46] * t37
        + S252 * a[47] * t38
        + S504 * a[48] * t39
        + S630 * a[49] * t40
        + S504 * a[50] * t41
        + S252 * a[51] * t42
        + S72 * a[52] * t43
        + S9 * a[53] * t44
        + a[55] * y9
        + S9 * a[56] * t46
        + S36 * a[57] * t47
        + S84 * a[58] * t48
        + S126 * a[59] * t49
        + S126 * a[60] * t50
        + S84 * a[61] * t51
        + S36 * a[62] * t52
        + S9 * a[63] * t53
        + a[64] * z9
    )
    gz = (
        a[2] * x9
        + S9 * a[4] * t1
        + S9 * a[5] * t2
        + S36 * a[7] * t3
        + S72 * a[8] * t4
        + S36 * a[9] * t5
        + S84 * a[11] * t6
        + S252 * a[12] * t7
        + S252 * a[13] * t8
        + S84 * a[14] * t9
        + S126 * a[16] * t10
        + S504 * a[17] * t11
        + S756 * a[18] * t12
        + S504 * a[19] * t13
        + S126 * a[20] * t14
        + S126 * a[22] * t15
        + S630 * a[23] * t16
        + S1260 * a[24] * t17
        + S1260 * a[25] * t18
        + S630 * a[26] * t19
        + S126 * a[27] * t20
        + S84 * a[29] * t21
        + S504 * a[30] * t22
        + S1260 * a[31] * t23
        + S1680 * a[32] * t24
        + S1260 * a[33] * t25
        + S504 * a[34] * t26
        + S84 * a[35] * t27
        + S36 * a[37] * t28
        + S252 * a[38] * t29
        + S756 * a[39] * t30
        + S1260 * a[40] * t31
        + S1260 * a[41] * t32
        + S756 * a[42] * t33
        + S252 * a[43] * t34
        + S36 * a[44] * t35
        + S9 * a[46] * t36
        + S72 * a[47] * t37
        + S252 * a[48] * t38
        + S504 * a[49] * t39
        + S630 * a[50] * t40
        + S504 * a[51] * t41
        + S252 * a[52] * t42
        + S72 * a[53] * t43
        + S9 * a[54] * t44
        + a[56] * y9
        + S9 * a[57] * t46
        + S36 * a[58] * t47
        + S84 * a[59] * t48
        + S126 * a[60] * t49
        + S126 * a[61] * t50
        + S84 * a[62] * t51
        + S36 * a[63] * t52
        + S9 * a[64] * t53
        + a[65] * z9
    )
    return gx, gy, gz


@register_jitable
def axm2_m10(a, x, y, z):
    """A x^8 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
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
        a[0] * x8
        + S8 * a[1] * t1
        + S8 * a[2] * t2
        + S28 * a[3] * t3
        + S56 * a[4] * t4
        + S28 * a[5] * t5
        + S56 * a[6] * t6
        + S168 * a[7] * t7
        + S168 * a[8] * t8
        + S56 * a[9] * t9
        + S70 * a[10] * t10
        + S280 * a[11] * t11
        + S420 * a[12] * t12
        + S280 * a[13] * t13
        + S70 * a[14] * t14
        + S56 * a[15] * t15
        + S280 * a[16] * t16
        + S560 * a[17] * t17
        + S560 * a[18] * t18
        + S280 * a[19] * t19
        + S56 * a[20] * t20
        + S28 * a[21] * t21
        + S168 * a[22] * t22
        + S420 * a[23] * t23
        + S560 * a[24] * t24
        + S420 * a[25] * t25
        + S168 * a[26] * t26
        + S28 * a[27] * t27
        + S8 * a[28] * t28
        + S56 * a[29] * t29
        + S168 * a[30] * t30
        + S280 * a[31] * t31
        + S280 * a[32] * t32
        + S168 * a[33] * t33
        + S56 * a[34] * t34
        + S8 * a[35] * t35
        + a[36] * y8
        + S8 * a[37] * t37
        + S28 * a[38] * t38
        + S56 * a[39] * t39
        + S70 * a[40] * t40
        + S56 * a[41] * t41
        + S28 * a[42] * t42
        + S8 * a[43] * t43
        + a[44] * z8
    )
    mxy = (
        a[1] * x8
        + S8 * a[3] * t1
        + S8 * a[4] * t2
        + S28 * a[6] * t3
        + S56 * a[7] * t4
        + S28 * a[8] * t5
        + S56 * a[10] * t6
        + S168 * a[11] * t7
        + S168 * a[12] * t8
        + S56 * a[13] * t9
        + S70 * a[15] * t10
        + S280 * a[16] * t11
        + S420 * a[17] * t12
        + S280 * a[18] * t13
        + S70 * a[19] * t14
        + S56 * a[21] * t15
        + S280 * a[22] * t16
        + S560 * a[23] * t17
        + S560 * a[24] * t18
        + S280 * a[25] * t19
        + S56 * a[26] * t20
        + S28 * a[28] * t21
        + S168 * a[29] * t22
        + S420 * a[30] * t23
        + S560 * a[31] * t24
        + S420 * a[32] * t25
        + S168 * a[33] * t26
        + S28 * a[34] * t27
        + S8 * a[36] * t28
        + S56 * a[37] * t29
        + S168 * a[38] * t30
        + S280 * a[39] * t31
        + S280 * a[40] * t32
        + S168 * a[41] * t33
        + S56 * a[42] * t34
        + S8 * a[43] * t35
        + a[45] * y8
        + S8 * a[46] * t37
        + S28 * a[47] * t38
        + S56 * a[48] * t39
        + S70 * a[49] * t40
        + S56 * a[50] * t41
        + S28 * a[51] * t42
        + S8 * a[52] * t43
        + a[53] * z8
    )
    mxz = (
        a[2] * x8
        + S8 * a[4] * t1
        + S8 * a[5] * t2
        + S28 * a[7] * t3
        + S56 * a[8] * t4
        + S28 * a[9] * t5
        + S56 * a[11] * t6
        + S168 * a[12] * t7
        + S168 * a[13] * t8
        + S56 * a[14] * t9
        + S70 * a[16] * t10
        + S280 * a[17] * t11
        + S420 * a[18] * t12
        + S280 * a[19] * t13
        + S70 * a[20] * t14
        + S56 * a[22] * t15
        + S280 * a[23] * t16
        + S560 * a[24] * t17
        + S560 * a[25] * t18
        + S280 * a[26] * t19
        + S56 * a[27] * t20
        + S28 * a[29] * t21
        + S168 * a[30] * t22
        + S420 * a[31] * t23
        + S560 * a[32] * t24
        + S420 * a[33] * t25
        + S168 * a[34] * t26
        + S28 * a[35] * t27
        + S8 * a[37] * t28
        + S56 * a[38] * t29
        + S168 * a[39] * t30
        + S280 * a[40] * t31
        + S280 * a[41] * t32
        + S168 * a[42] * t33
        + S56 * a[43] * t34
        + S8 * a[44] * t35
        + a[46] * y8
        + S8 * a[47] * t37
        + S28 * a[48] * t38
        + S56 * a[49] * t39
        + S70 * a[50] * t40
        + S56 * a[51] * t41
        + S28 * a[52] * t42
        + S8 * a[53] * t43
        + a[54] * z8
    )
    myy = (
        a[3] * x8
        + S8 * a[6] * t1
        + S8 * a[7] * t2
        + S28 * a[10] * t3
        + S56 * a[11] * t4
        + S28 * a[12] * t5
        + S56 * a[15] * t6
        + S168 * a[16] * t7
        + S168 * a[17] * t8
        + S56 * a[18] * t9
        + S70 * a[21] * t10
        + S280 * a[22] * t11
        + S420 * a[23] * t12
        + S280 * a[24] * t13
        + S70 * a[25] * t14
        + S56 * a[28] * t15
        + S280 * a[29] * t16
        + S560 * a[30] * t17
        + S560 * a[31] * t18
        + S280 * a[32] * t19
        + S56 * a[33] * t20
        + S28 * a[36] * t21
        + S168 * a[37] * t22
        + S420 * a[38] * t23
        + S560 * a[39] * t24
        + S420 * a[40] * t25
        + S168 * a[41] * t26
        + S28 * a[42] * t27
        + S8 * a[45] * t28
        + S56 * a[46] * t29
        + S168 * a[47] * t30
        + S280 * a[48] * t31
        + S280 * a[49] * t32
        + S168 * a[50] * t33
        + S56 * a[51] * t34
        + S8 * a[52] * t35
        + a[55] * y8
        + S8 * a[56] * t37
        + S28 * a[57] * t38
        + S56 * a[58] * t39
        + S70 * a[59] * t40
        + S56 * a[60] * t41
        + S28 * a[61] * t42
        + S8 * a[62] * t43
        + a[63] * z8
    )
    myz = (
        a[4] * x8
        + S8 * a[7] * t1
        + S8 * a[8] * t2
        + S28 * a[11] * t3
        + S56 * a[12] * t4
        + S28 * a[13] * t5
        + S56 * a[16] * t6
        + S168 * a[17] * t7
        + S168 * a[18] * t8
        + S56 * a[19] * t9
        + S70 * a[22] * t10
        + S280 * a[23] * t11
        + S420 * a[24] * t12
        + S280 * a[25] * t13
        + S70 * a[26] * t14
        + S56 * a[29] * t15
        + S280 * a[30] * t16
        + S560 * a[31] * t17
        + S560 * a[32] * t18
        + S280 * a[33] * t19
        + S56 * a[34] * t20
        + S28 * a[37] * t21
        + S168 * a[38] * t22
        + S420 * a[39] * t23
        + S560 * a[40] * t24
        + S420 * a[41] * t25
        + S168 * a[42] * t26
        + S28 * a[43] * t27
        + S8 * a[46] * t28
        + S56 * a[47] * t29
        + S168 * a[48] * t30
        + S280 * a[49] * t31
        + S280 * a[50] * t32
        + S168 * a[51] * t33
        + S56 * a[52] * t34
        + S8 * a[53] * t35
        + a[56] * y8
        + S8 * a[57] * t37
        + S28 * a[58] * t38
        + S56 * a[59] * t39
        + S70 * a[60] * t40
        + S56 * a[61] * t41
        + S28 * a[62] * t42
        + S8 * a[63] * t43
        + a[64] * z8
    )
    mzz = (
        a[5] * x8
        + S8 * a[8] * t1
        + S8 * a[9] * t2
        + S28 * a[12] * t3
        + S56 * a[13] * t4
        + S28 * a[14] * t5
        + S56 * a[17] * t6
        + S168 * a[18] * t7
        + S168 * a[19] * t8
        + S56 * a[20] * t9
        + S70 * a[23] * t10
        + S280 * a[24] * t11
        + S420 * a[25] * t12
        + S280 * a[26] * t13
        + S70 * a[27] * t14
        + S56 * a[30] * t15
        + S280 * a[31] * t16
        + S560 * a[32] * t17
        + S560 * a[33] * t18
        + S280 * a[34] * t19
        + S56 * a[35] * t20
        + S28 * a[38] * t21
        + S168 * a[39] * t22
        + S420 * a[40] * t23
        + S560 * a[41] * t24
        + S420 * a[42] * t25
        + S168 * a[43] * t26
        + S28 * a[44] * t27
        + S8 * a[47] * t28
        + S56 * a[48] * t29
        + S168 * a[49] * t30
        + S280 * a[50] * t31
        + S280 * a[51] * t32
        + S168 * a[52] * t33
        + S56 * a[53] * t34
        + S8 * a[54] * t35
        + a[57] * y8
        + S8 * a[58] * t37
        + S28 * a[59] * t38
        + S56 * a[60] * t39
        + S70 * a[61] * t40
        + S56 * a[62] * t41
        + S28 * a[63] * t42
        + S8 * a[64] * t43
        + a[65] * z8
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m10(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^10 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m10(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            10, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m10(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m10(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m10(a, points, k, out):
    """axm1_m10 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m10(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m10 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^10 = f[s]), all at once: each round computes A x^8 (axm2_points_m10) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m10, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^8, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m10(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m10(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m10(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1


# ---- order 12: 91 unique entries ----


@register_jitable
def axm_m12(a, x, y, z):
    """A x^12 = Σ_k σ(k) a_k x^k over the 91 unique entries (Ballard et al., Eq. 3)."""
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
    x12 = x11 * x
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
    y12 = y11 * y
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
    z12 = z11 * z
    return (
        a[0] * x12
        + S12 * a[1] * x11 * y
        + S12 * a[2] * x11 * z
        + S66 * a[3] * x10 * y2
        + S132 * a[4] * x10 * y * z
        + S66 * a[5] * x10 * z2
        + S220 * a[6] * x9 * y3
        + S660 * a[7] * x9 * y2 * z
        + S660 * a[8] * x9 * y * z2
        + S220 * a[9] * x9 * z3
        + S495 * a[10] * x8 * y4
        + S1980 * a[11] * x8 * y3 * z
        + S2970 * a[12] * x8 * y2 * z2
        + S1980 * a[13] * x8 * y * z3
        + S495 * a[14] * x8 * z4
        + S792 * a[15] * x7 * y5
        + S3960 * a[16] * x7 * y4 * z
        + S7920 * a[17] * x7 * y3 * z2
        + S7920 * a[18] * x7 * y2 * z3
        + S3960 * a[19] * x7 * y * z4
        + S792 * a[20] * x7 * z5
        + S924 * a[21] * x6 * y6
        + S5544 * a[22] * x6 * y5 * z
        + S13860 * a[23] * x6 * y4 * z2
        + S18480 * a[24] * x6 * y3 * z3
        + S13860 * a[25] * x6 * y2 * z4
        + S5544 * a[26] * x6 * y * z5
        + S924 * a[27] * x6 * z6
        + S792 * a[28] * x5 * y7
        + S5544 * a[29] * x5 * y6 * z
        + S16632 * a[30] * x5 * y5 * z2
        + S27720 * a[31] * x5 * y4 * z3
        + S27720 * a[32] * x5 * y3 * z4
        + S16632 * a[33] * x5 * y2 * z5
        + S5544 * a[34] * x5 * y * z6
        + S792 * a[35] * x5 * z7
        + S495 * a[36] * x4 * y8
        + S3960 * a[37] * x4 * y7 * z
        + S13860 * a[38] * x4 * y6 * z2
        + S27720 * a[39] * x4 * y5 * z3
        + S34650 * a[40] * x4 * y4 * z4
        + S27720 * a[41] * x4 * y3 * z5
        + S13860 * a[42] * x4 * y2 * z6
        + S3960 * a[43] * x4 * y * z7
        + S495 * a[44] * x4 * z8
        + S220 * a[45] * x3 * y9
        + S1980 * a[46] * x3 * y8 * z
        + S7920 * a[47] * x3 * y7 * z2
        + S18480 * a[48] * x3 * y6 * z3
        + S27720 * a[49] * x3 * y5 * z4
        + S27720 * a[50] * x3 * y4 * z5
        + S18480 * a[51] * x3 * y3 * z6
        + S7920 * a[52] * x3 * y2 * z7
        + S1980 * a[53] * x3 * y * z8
        + S220 * a[54] * x3 * z9
        + S66 * a[55] * x2 * y10
        + S660 * a[56] * x2 * y9 * z
        + S2970 * a[57] * x2 * y8 * z2
        + S7920 * a[58] * x2 * y7 * z3
        + S13860 * a[59] * x2 * y6 * z4
        + S16632 * a[60] * x2 * y5 * z5
        + S13860 * a[61] * x2 * y4 * z6
        + S7920 * a[62] * x2 * y3 * z7
        + S2970 * a[63] * x2 * y2 * z8
        + S660 * a[64] * x2 * y * z9
        + S66 * a[65] * x2 * z10
        + S12 * a[66] * x * y11
        + S132 * a[67] * x * y10 * z
        + S660 * a[68] * x * y9 * z2
        + S1980 * a[69] * x * y8 * z3
        + S3960 * a[70] * x * y7 * z4
        + S5544 * a[71] * x * y6 * z5
        + S5544 * a[72] * x * y5 * z6
        + S3960 * a[73] * x * y4 * z7
        + S1980 * a[74] * x * y3 * z8
        + S660 * a[75] * x * y2 * z9
        + S132 * a[76] * x * y * z10
        + S12 * a[77] * x * z11
        + a[78] * y12
        + S12 * a[79] * y11 * z
        + S66 * a[80] * y10 * z2
        + S220 * a[81] * y9 * z3
        + S495 * a[82] * y8 * z4
        + S792 * a[83] * y7 * z5
        + S924 * a[84] * y6 * z6
        + S792 * a[85] * y5 * z7
        + S495 * a[86] * y4 * z8
        + S220 * a[87] * y3 * z9
        + S66 * a[88] * y2 * z10
        + S12 * a[89] * y * z11
        + a[90] * z12
    )


@register_jitable
def axm1_m12(a, x, y, z):
    """A x^11 (Ballard et al., Def. 2 and Fig. 3); returns gx, gy, gz."""
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
        a[0] * x11
        + S11 * a[1] * t1
        + S11 * a[2] * t2
        + S55 * a[3] * t3
        + S110 * a[4] * t4
        + S55 * a[5] * t5
        + S165 * a[6] * t6
        + S495 * a[7] * t7
        + S495 * a[8] * t8
        + S165 * a[9] * t9
        + S330 * a[10] * t10
        + S1320 * a[11] * t11
        + S1980 * a[12] * t12
        + S1320 * a[13] * t13
        + S330 * a[14] * t14
        + S462 * a[15] * t15
        + S2310 * a[16] * t16
        + S4620 * a[17] * t17
        + S4620 * a[18] * t18
        + S2310 * a[19] * t19
        + S462 * a[20] * t20
        + S462 * a[21] * t21
        + S2772 * a[22] * t22
        + S6930 * a[23] * t23
        + S9240 * a[24] * t24
        + S6930 * a[25] * t25
        + S2772 * a[26] * t26
        + S462 * a[27] * t27
        + S330 * a[28] * t28
        + S2310 * a[29] * t29
        + S6930 * a[30] * t30
        + S11550 * a[31] * t31
        + S11550 * a[32] * t32
        + S6930 * a[33] * t33
        + S2310 * a[34] * t34
        + S330 * a[35] * t35
        + S165 * a[36] * t36
        + S1320 * a[37] * t37
        + S4620 * a[38] * t38
        + S9240 * a[39] * t39
        + S11550 * a[40] * t40
        + S9240 * a[41] * t41
        + S4620 * a[42] * t42
        + S1320 * a[43] * t43
        + S165 * a[44] * t44
        + S55 * a[45] * t45
        + S495 * a[46] * t46
        + S1980 * a[47] * t47
        + S4620 * a[48] * t48
        + S6930 * a[49] * t49
        + S6930 * a[50] * t50
        + S4620 * a[51] * t51
        + S1980 * a[52] * t52
        + S495 * a[53] * t53
        + S55 * a[54] * t54
        + S11 * a[55] * t55
        + S110 * a[56] * t56
        + S495 * a[57] * t57
        + S1320 * a[58] * t58
        + S2310 * a[59] * t59
        + S2772 * a[60] * t60
        + S2310 * a[61] * t61
        + S1320 * a[62] * t62
        + S495 * a[63] * t63
        + S110 * a[64] * t64
        + S11 * a[65] * t65
        + a[66] * y11
        + S11 * a[67] * t67
        + S55 * a[68] * t68
        + S165 * a[69] * t69
        + S330 * a[70] * t70
        + S462 * a[71] * t71
        + S462 * a[72] * t72
        + S330 * a[73] * t73
        + S165 * a[74] * t74
        + S55 * a[75] * t75
        + S11 * a[76] * t76
        + a[77] * z11
    )
    gy = (
        a[1] * x11
        + S11 * a[3] * t1
        + S11 * a[4] * t2
        + S55 * a[6] * t3
        + S110 * a[7] * t4
        + S55 * a[8] * t5
        + S165 * a[10] * t6
        + S495 * a[11] * t7
        + S495 * a[12] * t8
        + S165 * a[13] * t9
        + S330 * a[15] * t10
        + S1320 * a[16] * t11
        + S1980 * a[17] * t12
        + S1320 * a[18] * t13
        + S330 * a[19] * t14
        + S462 * a[21] * t15
        + S2310 * a[22] * t16
        + S4620 * a[23] * t17
        + S4620 * a[24] * t18
        + S2310 * a[25] * t19
        + S462 * a[26] * t20
        + S462 * a[28] * t21
        + S2772 * a[29] * t22
        + S6930 * a[30] * t23
        + S9240 * a[31] * t24
        + S6930 * a[32] * t25
        + S2772 * a[33] * t26
        + S462 * a[34] * t27
        + S330 * a[36] * t28
        + S2310 * a[37] * t29
        + S6930 * a[38] * t30
        + S11550 * a[39] * t31
        + S11550 * a[40] * t32
        + S6930 * a[41] * t33
        + S2310 * a[42] * t34
        + S330 * a[43] * t35
        + S165 * a[45] * t36
        + S1320 * a[46] * t37
        + S4620 * a[47] * t38
        + S9240 * a[48] * t39
        + S11550 * a[49] * t40
        + S9240 * a[50] * t41
        + S4620 * a[51] * t42
        + S1320 * a[52] * t43
        + S165 * a[53] * t44
        + S55 * a[55] * t45
        + S495 * a[56] * t46
        + S1980 * a[57] * t47
        + S4620 * a[58] * t48
        + S6930 * a[59] * t49
        + S6930 * a[60] * t50
        + S4620 * a[61] * t51
        + S1980 * a[62] * t52
        + S495 * a[63] * t53
        + S55 * a[64] * t54
        + S11 * a[66] * t55
        + S110 * a[67] * t56
        + S495 * a[68] * t57
        + S1320 * a[69] * t58
        + S2310 * a[70] * t59
        + S2772 * a[71] * t60
        + S2310 * a[72] * t61
        + S1320 * a[73] * t62
        + S495 * a[74] * t63
        + S110 * a[75] * t64
        + S11 * a[76] * t65
        + a[78] * y11
        + S11 * a[79] * t67
        + S55 * a[80] * t68
        + S165 * a[81] * t69
        + S330 * a[82] * t70
        + S462 * a[83] * t71
        + S462 * a[84] * t72
        + S330 * a[85] * t73
        + S165 * a[86] * t74
        + S55 * a[87] * t75
        + S11 * a[88] * t76
        + a[89] * z11
    )
    gz = (
        a[2] * x11
        + S11 * a[4] * t1
        + S11 * a[5] * t2
        + S55 * a[7] * t3
        + S110 * a[8] * t4
        + S55 * a[9] * t5
        + S165 * a[11] * t6
        + S495 * a[12] * t7
        + S495 * a[13] * t8
        + S165 * a[14] * t9
        + S330 * a[16] * t10
        + S1320 * a[17] * t11
        + S1980 * a[18] * t12
        + S1320 * a[19] * t13
        + S330 * a[20] * t14
        + S462 * a[22] * t15
        + S2310 * a[23] * t16
        + S4620 * a[24] * t17
        + S4620 * a[25] * t18
        + S2310 * a[26] * t19
        + S462 * a[27] * t20
        + S462 * a[29] * t21
        + S2772 * a[30] * t22
        + S6930 * a[31] * t23
        + S9240 * a[32] * t24
        + S6930 * a[33] * t25
        + S2772 * a[34] * t26
        + S462 * a[35] * t27
        + S330 * a[37] * t28
        + S2310 * a[38] * t29
        + S6930 * a[39] * t30
        + S11550 * a[40] * t31
        + S11550 * a[41] * t32
        + S6930 * a[42] * t33
        + S2310 * a[43] * t34
        + S330 * a[44] * t35
        + S165 * a[46] * t36
        + S1320 * a[47] * t37
        + S4620 * a[48] * t38
        + S9240 * a[49] * t39
        + S11550 * a[50] * t40
        + S9240 * a[51] * t41
        + S4620 * a[52] * t42
        + S1320 * a[53] * t43
        + S165 * a[54] * t44
        + S55 * a[56] * t45
        + S495 * a[57] * t46
        + S1980 * a[58] * t47
        + S4620 * a[59] * t48
        + S6930 * a[60] * t49
        + S6930 * a[61] * t50
        + S4620 * a[62] * t51
        + S1980 * a[63] * t52
        + S495 * a[64] * t53
        + S55 * a[65] * t54
        + S11 * a[67] * t55
        + S110 * a[68] * t56
        + S495 * a[69] * t57
        + S1320 * a[70] * t58
        + S2310 * a[71] * t59
        + S2772 * a[72] * t60
        + S2310 * a[73] * t61
        + S1320 * a[74] * t62
        + S495 * a[75] * t63
        + S110 * a[76] * t64
        + S11 * a[77] * t65
        + a[79] * y11
        + S11 * a[80] * t67
        + S55 * a[81] * t68
        + S165 * a[82] * t69
        + S330 * a[83] * t70
        + S462 * a[84] * t71
        + S462 * a[85] * t72
        + S330 * a[86] * t73
        + S165 * a[87] * t74
        + S55 * a[88] * t75
        + S11 * a[89] * t76
        + a[90] * z11
    )
    return gx, gy, gz


@register_jitable
def axm2_m12(a, x, y, z):
    """A x^10 (Ballard et al., Def. 2 and Fig. 4); returns mxx, mxy, mxz, myy, myz, mzz."""
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
        a[0] * x10
        + S10 * a[1] * t1
        + S10 * a[2] * t2
        + S45 * a[3] * t3
        + S90 * a[4] * t4
        + S45 * a[5] * t5
        + S120 * a[6] * t6
        + S360 * a[7] * t7
        + S360 * a[8] * t8
        + S120 * a[9] * t9
        + S210 * a[10] * t10
        + S840 * a[11] * t11
        + S1260 * a[12] * t12
        + S840 * a[13] * t13
        + S210 * a[14] * t14
        + S252 * a[15] * t15
        + S1260 * a[16] * t16
        + S2520 * a[17] * t17
        + S2520 * a[18] * t18
        + S1260 * a[19] * t19
        + S252 * a[20] * t20
        + S210 * a[21] * t21
        + S1260 * a[22] * t22
        + S3150 * a[23] * t23
        + S4200 * a[24] * t24
        + S3150 * a[25] * t25
        + S1260 * a[26] * t26
        + S210 * a[27] * t27
        + S120 * a[28] * t28
        + S840 * a[29] * t29
        + S2520 * a[30] * t30
        + S4200 * a[31] * t31
        + S4200 * a[32] * t32
        + S2520 * a[33] * t33
        + S840 * a[34] * t34
        + S120 * a[35] * t35
        + S45 * a[36] * t36
        + S360 * a[37] * t37
        + S1260 * a[38] * t38
        + S2520 * a[39] * t39
        + S3150 * a[40] * t40
        + S2520 * a[41] * t41
        + S1260 * a[42] * t42
        + S360 * a[43] * t43
        + S45 * a[44] * t44
        + S10 * a[45] * t45
        + S90 * a[46] * t46
        + S360 * a[47] * t47
        + S840 * a[48] * t48
        + S1260 * a[49] * t49
        + S1260 * a[50] * t50
        + S840 * a[51] * t51
        + S360 * a[52] * t52
        + S90 * a[53] * t53
        + S10 * a[54] * t54
        + a[55] * y10
        + S10 * a[56] * t56
        + S45 * a[57] * t57
        + S120 * a[58] * t58
        + S210 * a[59] * t59
        + S252 * a[60] * t60
        + S210 * a[61] * t61
        + S120 * a[62] * t62
        + S45 * a[63] * t63
        + S10 * a[64] * t64
        + a[65] * z10
    )
    mxy = (
        a[1] * x10
        + S10 * a[3] * t1
        + S10 * a[4] * t2
        + S45 * a[6] * t3
        + S90 * a[7] * t4
        + S45 * a[8] * t5
        + S120 * a[10] * t6
        + S360 * a[11] * t7
        + S360 * a[12] * t8
        + S120 * a[13] * t9
        + S210 * a[15] * t10
        + S840 * a[16] * t11
        + S1260 * a[17] * t12
        + S840 * a[18] * t13
        + S210 * a[19] * t14
        + S252 * a[21] * t15
        + S1260 * a[22] * t16
        + S2520 * a[23] * t17
        + S2520 * a[24] * t18
        + S1260 * a[25] * t19
        + S252 * a[26] * t20
        + S210 * a[28] * t21
        + S1260 * a[29] * t22
        + S3150 * a[30] * t23
        + S4200 * a[31] * t24
        + S3150 * a[32] * t25
        + S1260 * a[33] * t26
        + S210 * a[34] * t27
        + S120 * a[36] * t28
        + S840 * a[37] * t29
        + S2520 * a[38] * t30
        + S4200 * a[39] * t31
        + S4200 * a[40] * t32
        + S2520 * a[41] * t33
        + S840 * a[42] * t34
        + S120 * a[43] * t35
        + S45 * a[45] * t36
        + S360 * a[46] * t37
        + S1260 * a[47] * t38
        + S2520 * a[48] * t39
        + S3150 * a[49] * t40
        + S2520 * a[50] * t41
        + S1260 * a[51] * t42
        + S360 * a[52] * t43
        + S45 * a[53] * t44
        + S10 * a[55] * t45
        + S90 * a[56] * t46
        + S360 * a[57] * t47
        + S840 * a[58] * t48
        + S1260 * a[59] * t49
        + S1260 * a[60] * t50
        + S840 * a[61] * t51
        + S360 * a[62] * t52
        + S90 * a[63] * t53
        + S10 * a[64] * t54
        + a[66] * y10
        + S10 * a[67] * t56
        + S45 * a[68] * t57
        + S120 * a[69] * t58
        + S210 * a[70] * t59
        + S252 * a[71] * t60
        + S210 * a[72] * t61
        + S120 * a[73] * t62
        + S45 * a[74] * t63
        + S10 * a[75] * t64
        + a[76] * z10
    )
    mxz = (
        a[2] * x10
        + S10 * a[4] * t1
        + S10 * a[5] * t2
        + S45 * a[7] * t3
        + S90 * a[8] * t4
        + S45 * a[9] * t5
        + S120 * a[11] * t6
        + S360 * a[12] * t7
        + S360 * a[13] * t8
        + S120 * a[14] * t9
        + S210 * a[16] * t10
        + S840 * a[17] * t11
        + S1260 * a[18] * t12
        + S840 * a[19] * t13
        + S210 * a[20] * t14
        + S252 * a[22] * t15
        + S1260 * a[23] * t16
        + S2520 * a[24] * t17
        + S2520 * a[25] * t18
        + S1260 * a[26] * t19
        + S252 * a[27] * t20
        + S210 * a[29] * t21
        + S1260 * a[30] * t22
        + S3150 * a[31] * t23
        + S4200 * a[32] * t24
        + S3150 * a[33] * t25
        + S1260 * a[34] * t26
        + S210 * a[35] * t27
        + S120 * a[37] * t28
        + S840 * a[38] * t29
        + S2520 * a[39] * t30
        + S4200 * a[40] * t31
        + S4200 * a[41] * t32
        + S2520 * a[42] * t33
        + S840 * a[43] * t34
        + S120 * a[44] * t35
        + S45 * a[46] * t36
        + S360 * a[47] * t37
        + S1260 * a[48] * t38
        + S2520 * a[49] * t39
        + S3150 * a[50] * t40
        + S2520 * a[51] * t41
        + S1260 * a[52] * t42
        + S360 * a[53] * t43
        + S45 * a[54] * t44
        + S10 * a[56] * t45
        + S90 * a[57] * t46
        + S360 * a[58] * t47
        + S840 * a[59] * t48
        + S1260 * a[60] * t49
        + S1260 * a[61] * t50
        + S840 * a[62] * t51
        + S360 * a[63] * t52
        + S90 * a[64] * t53
        + S10 * a[65] * t54
        + a[67] * y10
        + S10 * a[68] * t56
        + S45 * a[69] * t57
        + S120 * a[70] * t58
        + S210 * a[71] * t59
        + S252 * a[72] * t60
        + S210 * a[73] * t61
        + S120 * a[74] * t62
        + S45 * a[75] * t63
        + S10 * a[76] * t64
        + a[77] * z10
    )
    myy = (
        a[3] * x10
        + S10 * a[6] * t1
        + S10 * a[7] * t2
        + S45 * a[10] * t3
        + S90 * a[11] * t4
        + S45 * a[12] * t5
        + S120 * a[15] * t6
        + S360 * a[16] * t7
        + S360 * a[17] * t8
        + S120 * a[18] * t9
        + S210 * a[21] * t10
        + S840 * a[22] * t11
        + S1260 * a[23] * t12
        + S840 * a[24] * t13
        + S210 * a[25] * t14
        + S252 * a[28] * t15
        + S1260 * a[29] * t16
        + S2520 * a[30] * t17
        + S2520 * a[31] * t18
        + S1260 * a[32] * t19
        + S252 * a[33] * t20
        + S210 * a[36] * t21
        + S1260 * a[37] * t22
        + S3150 * a[38] * t23
        + S4200 * a[39] * t24
        + S3150 * a[40] * t25
        + S1260 * a[41] * t26
        + S210 * a[42] * t27
        + S120 * a[45] * t28
        + S840 * a[46] * t29
        + S2520 * a[47] * t30
        + S4200 * a[48] * t31
        + S4200 * a[49] * t32
        + S2520 * a[50] * t33
        + S840 * a[51] * t34
        + S120 * a[52] * t35
        + S45 * a[55] * t36
        + S360 * a[56] * t37
        + S1260 * a[57] * t38
        + S2520 * a[58] * t39
        + S3150 * a[59] * t40
        + S2520 * a[60] * t41
        + S1260 * a[61] * t42
        + S360 * a[62] * t43
        + S45 * a[63] * t44
        + S10 * a[66] * t45
        + S90 * a[67] * t46
        + S360 * a[68] * t47
        + S840 * a[69] * t48
        + S1260 * a[70] * t49
        + S1260 * a[71] * t50
        + S840 * a[72] * t51
        + S360 * a[73] * t52
        + S90 * a[74] * t53
        + S10 * a[75] * t54
        + a[78] * y10
        + S10 * a[79] * t56
        + S45 * a[80] * t57
        + S120 * a[81] * t58
        + S210 * a[82] * t59
        + S252 * a[83] * t60
        + S210 * a[84] * t61
        + S120 * a[85] * t62
        + S45 * a[86] * t63
        + S10 * a[87] * t64
        + a[88] * z10
    )
    myz = (
        a[4] * x10
        + S10 * a[7] * t1
        + S10 * a[8] * t2
        + S45 * a[11] * t3
        + S90 * a[12] * t4
        + S45 * a[13] * t5
        + S120 * a[16] * t6
        + S360 * a[17] * t7
        + S360 * a[18] * t8
        + S120 * a[19] * t9
        + S210 * a[22] * t10
        + S840 * a[23] * t11
        + S1260 * a[24] * t12
        + S840 * a[25] * t13
        + S210 * a[26] * t14
        + S252 * a[29] * t15
        + S1260 * a[30] * t16
        + S2520 * a[31] * t17
        + S2520 * a[32] * t18
        + S1260 * a[33] * t19
        + S252 * a[34] * t20
        + S210 * a[37] * t21
        + S1260 * a[38] * t22
        + S3150 * a[39] * t23
        + S4200 * a[40] * t24
        + S3150 * a[41] * t25
        + S1260 * a[42] * t26
        + S210 * a[43] * t27
        + S120 * a[46] * t28
        + S840 * a[47] * t29
        + S2520 * a[48] * t30
        + S4200 * a[49] * t31
        + S4200 * a[50] * t32
        + S2520 * a[51] * t33
        + S840 * a[52] * t34
        + S120 * a[53] * t35
        + S45 * a[56] * t36
        + S360 * a[57] * t37
        + S1260 * a[58] * t38
        + S2520 * a[59] * t39
        + S3150 * a[60] * t40
        + S2520 * a[61] * t41
        + S1260 * a[62] * t42
        + S360 * a[63] * t43
        + S45 * a[64] * t44
        + S10 * a[67] * t45
        + S90 * a[68] * t46
        + S360 * a[69] * t47
        + S840 * a[70] * t48
        + S1260 * a[71] * t49
        + S1260 * a[72] * t50
        + S840 * a[73] * t51
        + S360 * a[74] * t52
        + S90 * a[75] * t53
        + S10 * a[76] * t54
        + a[79] * y10
        + S10 * a[80] * t56
        + S45 * a[81] * t57
        + S120 * a[82] * t58
        + S210 * a[83] * t59
        + S252 * a[84] * t60
        + S210 * a[85] * t61
        + S120 * a[86] * t62
        + S45 * a[87] * t63
        + S10 * a[88] * t64
        + a[89] * z10
    )
    mzz = (
        a[5] * x10
        + S10 * a[8] * t1
        + S10 * a[9] * t2
        + S45 * a[12] * t3
        + S90 * a[13] * t4
        + S45 * a[14] * t5
        + S120 * a[17] * t6
        + S360 * a[18] * t7
        + S360 * a[19] * t8
        + S120 * a[20] * t9
        + S210 * a[23] * t10
        + S840 * a[24] * t11
        + S1260 * a[25] * t12
        + S840 * a[26] * t13
        + S210 * a[27] * t14
        + S252 * a[30] * t15
        + S1260 * a[31] * t16
        + S2520 * a[32] * t17
        + S2520 * a[33] * t18
        + S1260 * a[34] * t19
        + S252 * a[35] * t20
        + S210 * a[38] * t21
        + S1260 * a[39] * t22
        + S3150 * a[40] * t23
        + S4200 * a[41] * t24
        + S3150 * a[42] * t25
        + S1260 * a[43] * t26
        + S210 * a[44] * t27
        + S120 * a[47] * t28
        + S840 * a[48] * t29
        + S2520 * a[49] * t30
        + S4200 * a[50] * t31
        + S4200 * a[51] * t32
        + S2520 * a[52] * t33
        + S840 * a[53] * t34
        + S120 * a[54] * t35
        + S45 * a[57] * t36
        + S360 * a[58] * t37
        + S1260 * a[59] * t38
        + S2520 * a[60] * t39
        + S3150 * a[61] * t40
        + S2520 * a[62] * t41
        + S1260 * a[63] * t42
        + S360 * a[64] * t43
        + S45 * a[65] * t44
        + S10 * a[68] * t45
        + S90 * a[69] * t46
        + S360 * a[70] * t47
        + S840 * a[71] * t48
        + S1260 * a[72] * t49
        + S1260 * a[73] * t50
        + S840 * a[74] * t51
        + S360 * a[75] * t52
        + S90 * a[76] * t53
        + S10 * a[77] * t54
        + a[80] * y10
        + S10 * a[81] * t56
        + S45 * a[82] * t57
        + S120 * a[83] * t58
        + S210 * a[84] * t59
        + S252 * a[85] * t60
        + S210 * a[86] * t61
        + S120 * a[87] * t62
        + S45 * a[88] * t63
        + S10 * a[89] * t64
        + a[90] * z10
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m12(a, x, y, z, lam_start, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol, max_iter,
             n_found, fx, fy, fz, flam, fflags, cos_basin):
    """SS-HOPM from the unit start (x, y, z), where A x^12 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|; a step rule
    is needed because λ is stationary at a maximum. Stops early, merged, inside the basin of
    one of the n_found peaks already found (gpu.peaks.sshopm_math.in_found_basin). Returns
    (x, y, z, λ, iterations, hit_cap, negative_definite, merged).
    """
    lam_prev = lam_start
    negdef = False
    for it in range(max_iter):
        mxx, mxy, mxz, myy, myz, mzz = axm2_m12(a, x, y, z)
        px, py, pz = x, y, z
        x, y, z, lam, step, negdef = sm.sshopm_step(
            12, x, y, z, mxx, mxy, mxz, myy, myz, mzz, shift_mode, alpha_fixed, newton, max_step
        )
        if negdef and sm.in_found_basin(px, py, pz, lam, n_found, fx, fy, fz, flam, fflags, cos_basin):
            return px, py, pz, lam, it + 1, False, negdef, True
        if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
            return x, y, z, axm_m12(a, x, y, z), it + 1, False, negdef, False
        lam_prev = lam
    return x, y, z, axm_m12(a, x, y, z), max_iter, True, negdef, False


@register_jitable
def axm1_points_m12(a, points, k, out):
    """axm1_m12 at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],
    the same operations in the same order, so the same values. The unique entries are read
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
    the same operations in the same order, so the same values. The unique entries are read
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
def climbs_cpu_m12(a, points, f, ranked, lo, hi, shift_mode, alpha_fixed, newton, max_step, tol_lambda, step_tol,
                  max_iter, n_found, cos_basin, cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot):
    """climb_m12 from each start s = ranked[t], t in lo…hi − 1 (unit points[:, s], where
    A x^12 = f[s]), all at once: each round computes A x^10 (axm2_points_m12) and
    then the step of every running climb in vectorized loops (one climb at a time leaves the SIMD
    lanes idle), then ends the climbs that stop. A climb runs the same operations as in
    climb_m12, so its result is bit for bit the same: (cx, cy, cz, cl)[t], CLIMB_* flags
    cflags[t] and iterations cits[t]. Scratch, columns ≥ hi − lo: ``lanes`` (4, ·) the running
    climbs' x, y, z and previous λ, ``m`` (6, ·) their M = A x^10, ``steps`` (6, ·) their
    step's x', y', z', λ, length and negative definiteness, ``slot`` (·) their t."""
    k = 0
    for t in range(lo, hi):
        s = ranked[t]
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
                shift_mode, alpha_fixed, newton, max_step,
            )
            steps[5, j] = 1.0 if negdef else 0.0
        it += 1
        j = 0
        while j < k:
            px, py, pz = lanes[0, j], lanes[1, j], lanes[2, j]
            x, y, z, lam, step = steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j]
            negdef = steps[5, j] != 0
            merged = negdef and sm.in_found_basin(px, py, pz, lam, n_found, cx, cy, cz, cl, cflags, cos_basin)
            capped = False
            if merged:
                x, y, z = px, py, pz
            elif not (step <= step_tol and abs(lam - lanes[3, j]) <= tol_lambda * abs(lam)):
                if it < max_iter:
                    lanes[0, j], lanes[1, j], lanes[2, j], lanes[3, j] = x, y, z, lam
                    j += 1
                    continue
                capped = True
            if not merged:
                lam = axm_m12(a, x, y, z)
            t = slot[j]
            if z < 0:
                x, y, z = -x, -y, -z
            cx[t], cy[t], cz[t], cl[t] = x, y, z, lam
            cits[t] = it
            cflags[t] = sm.climb_flags(capped, negdef, merged, lam)
            # The last running climb moves into this lane, its step computed, not yet taken.
            k -= 1
            for r in range(4):
                lanes[r, j] = lanes[r, k]
            for r in range(6):
                steps[r, j] = steps[r, k]
            slot[j] = slot[k]


@njit(parallel=True, cache=True, error_model="numpy")
def sshopm_cpu_m12(coeffs, sh2t, alphas, starts, neighbors, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
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
        seed_start = np.empty(count, np.int64)
        seed_value = np.empty(count, sh2t.dtype)
        ranked = np.empty(count, np.int64)
        cx = np.empty(count, sh2t.dtype)
        cy = np.empty(count, sh2t.dtype)
        cz = np.empty(count, sh2t.dtype)
        cl = np.empty(count, sh2t.dtype)
        cflags = np.zeros(count, np.int32)
        cits = np.zeros(count, np.int64)
        valid = np.zeros(count, np.int32)
        keep = np.zeros(count, np.int32)
        rank = np.empty(count, np.int64)
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
                if sm.is_seed(t, f, g[0, t], g[1, t], g[2, t], starts, neighbors, iparams[P_SEED_LOCAL] != 0, floor):
                    seed_start[n] = t
                    seed_value[n] = f[t]
                    n += 1
            two_passes = sm.in_two_passes(iparams[P_BOUNDED], fparams[P_COS_BASIN])
            for t in range(n):
                ranked[sm.value_rank(t, n, seed_value) if two_passes else t] = seed_start[t]
            # In two passes (the CUDA backend's phases 2-4), seeds climb by decreasing start
            # value; after the first n_first, only those that reach the floor the first climbs
            # set, and those climbs stop inside the first climbs' basins.
            n_first = sm.first_climbs(n, iparams[P_NPEAKS], two_passes)
            climbed = n
            for lo, hi in ((0, n_first), (n_first, n)):
                if lo == n_first and iparams[P_BOUNDED] != 0 and n_first < n:
                    later_floor = sm.later_seed_floor(
                        n_first, cx, cy, cz, cl, valid, keep, fparams[P_COS_MERGE], iparams[P_NPEAKS], fparams[P_SEED_FRACTION],
                    )
                    for t in range(n_first, n):
                        if f[ranked[t]] < later_floor:
                            climbed = t
                            break
                    hi = climbed
                climbs_cpu_m12(
                    a, points, f, ranked, lo, hi, iparams[P_SHIFT], alphas[v], iparams[P_NEWTON] != 0,
                    fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL], iparams[P_MAX_ITER], lo, fparams[P_COS_BASIN],
                    cx, cy, cz, cl, cflags, cits, lanes, m, steps, slot,
                )
                for t in range(lo, hi):
                    out_stats[v, S_ITERATIONS] += cits[t]
                    out_stats[v, S_MAX_ITERATIONS] = max(out_stats[v, S_MAX_ITERATIONS], cits[t])
                    out_stats[v, S_SEEDS] += 1
                    if cflags[t] & CLIMB_CAPPED:
                        out_stats[v, S_CAPPED] += 1
                    if cflags[t] & CLIMB_MERGED:
                        out_stats[v, S_MERGED] += 1
                    iter_hist[c, min(cits[t], iter_hist.shape[1] - 1)] += 1
                    valid[t] = cflags[t] & CLIMB_PEAK
            out_stats[v, S_SKIPPED] = n - climbed
            n = climbed
            for t in range(n):
                keep[t] = 1 if valid[t] != 0 and not sm.is_duplicate(t, n, cx, cy, cz, cl, valid, fparams[P_COS_MERGE]) else 0
            best = cl[0]
            for t in range(n):
                rank[t] = count
                if keep[t] != 0:
                    rank[t] = sm.unique_rank(t, n, cl, keep)
                    if rank[t] == 0:
                        best = cl[t]
            for t in range(n):
                if rank[t] < iparams[P_NPEAKS] and cl[t] >= fparams[P_THRESHOLD] and cl[t] >= fparams[P_REL_THRESHOLD] * best:
                    out_dirs[v, rank[t], 0] = cx[t]
                    out_dirs[v, rank[t], 1] = cy[t]
                    out_dirs[v, rank[t], 2] = cz[t]
                    out_amps[v, rank[t]] = cl[t]
                    out_count[v] += 1
