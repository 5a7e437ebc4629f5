"""SS-HOPM polynomials and climb for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); see that module for
what each function computes and gpu/peaks/sshopm_math.py for the order-independent steps.
The CPU loops are in gpu/peaks/sshopm_generated_cpu.py, the CUDA kernels in
gpu/peaks/sshopm_generated_cuda.py; both compile these functions into their own code.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_math.py sha256 6961578a724483193e3119a60fc3cad3f46ecb18319c756e8d6d6a503d073fef
# sshopm_layout.py sha256 47381b90bbe135b1554b677d2744f7c21b951c5f74a839f602b5bf1f8e64c711

import numpy as np
from numba.extending import register_jitable

from gpu.peaks import sshopm_math as sm

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
    """A x^1 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
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
    """A x^0 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
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
def climb_m2(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^2 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m2(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(2, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m2(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam


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
    """A x^3 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
    x2 = x * x
    x3 = x2 * x
    y2 = y * y
    y3 = y2 * y
    z2 = z * z
    z3 = z2 * z
    t1 = x2 * y
    u1 = S3 * t1
    t2 = x2 * z
    u2 = S3 * t2
    t3 = x * y2
    u3 = S3 * t3
    t4 = x * y * z
    u4 = S6 * t4
    t5 = x * z2
    u5 = S3 * t5
    t7 = y2 * z
    u7 = S3 * t7
    t8 = y * z2
    u8 = S3 * t8
    gx = (
        a[0] * x3
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * y3
        + a[7] * u7
        + a[8] * u8
        + a[9] * z3
    )
    gy = (
        a[1] * x3
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * y3
        + a[11] * u7
        + a[12] * u8
        + a[13] * z3
    )
    gz = (
        a[2] * x3
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * y3
        + a[12] * u7
        + a[13] * u8
        + a[14] * z3
    )
    return gx, gy, gz


@register_jitable
def axm2_m4(a, x, y, z):
    """A x^2 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
    x2 = x * x
    y2 = y * y
    z2 = z * z
    t1 = x * y
    u1 = S2 * t1
    t2 = x * z
    u2 = S2 * t2
    t4 = y * z
    u4 = S2 * t4
    mxx = (
        a[0] * x2
        + a[1] * u1
        + a[2] * u2
        + a[3] * y2
        + a[4] * u4
        + a[5] * z2
    )
    mxy = (
        a[1] * x2
        + a[3] * u1
        + a[4] * u2
        + a[6] * y2
        + a[7] * u4
        + a[8] * z2
    )
    mxz = (
        a[2] * x2
        + a[4] * u1
        + a[5] * u2
        + a[7] * y2
        + a[8] * u4
        + a[9] * z2
    )
    myy = (
        a[3] * x2
        + a[6] * u1
        + a[7] * u2
        + a[10] * y2
        + a[11] * u4
        + a[12] * z2
    )
    myz = (
        a[4] * x2
        + a[7] * u1
        + a[8] * u2
        + a[11] * y2
        + a[12] * u4
        + a[13] * z2
    )
    mzz = (
        a[5] * x2
        + a[8] * u1
        + a[9] * u2
        + a[12] * y2
        + a[13] * u4
        + a[14] * z2
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m4(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^4 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m4(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(4, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m4(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam


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
    """A x^5 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
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
    u1 = S5 * t1
    t2 = x4 * z
    u2 = S5 * t2
    t3 = x3 * y2
    u3 = S10 * t3
    t4 = x3 * y * z
    u4 = S20 * t4
    t5 = x3 * z2
    u5 = S10 * t5
    t6 = x2 * y3
    u6 = S10 * t6
    t7 = x2 * y2 * z
    u7 = S30 * t7
    t8 = x2 * y * z2
    u8 = S30 * t8
    t9 = x2 * z3
    u9 = S10 * t9
    t10 = x * y4
    u10 = S5 * t10
    t11 = x * y3 * z
    u11 = S20 * t11
    t12 = x * y2 * z2
    u12 = S30 * t12
    t13 = x * y * z3
    u13 = S20 * t13
    t14 = x * z4
    u14 = S5 * t14
    t16 = y4 * z
    u16 = S5 * t16
    t17 = y3 * z2
    u17 = S10 * t17
    t18 = y2 * z3
    u18 = S10 * t18
    t19 = y * z4
    u19 = S5 * t19
    gx = (
        a[0] * x5
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * y5
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * z5
    )
    gy = (
        a[1] * x5
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * y5
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * z5
    )
    gz = (
        a[2] * x5
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * y5
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * z5
    )
    return gx, gy, gz


@register_jitable
def axm2_m6(a, x, y, z):
    """A x^4 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
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
    u1 = S4 * t1
    t2 = x3 * z
    u2 = S4 * t2
    t3 = x2 * y2
    u3 = S6 * t3
    t4 = x2 * y * z
    u4 = S12 * t4
    t5 = x2 * z2
    u5 = S6 * t5
    t6 = x * y3
    u6 = S4 * t6
    t7 = x * y2 * z
    u7 = S12 * t7
    t8 = x * y * z2
    u8 = S12 * t8
    t9 = x * z3
    u9 = S4 * t9
    t11 = y3 * z
    u11 = S4 * t11
    t12 = y2 * z2
    u12 = S6 * t12
    t13 = y * z3
    u13 = S4 * t13
    mxx = (
        a[0] * x4
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * y4
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * z4
    )
    mxy = (
        a[1] * x4
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * y4
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * z4
    )
    mxz = (
        a[2] * x4
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * y4
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * z4
    )
    myy = (
        a[3] * x4
        + a[6] * u1
        + a[7] * u2
        + a[10] * u3
        + a[11] * u4
        + a[12] * u5
        + a[15] * u6
        + a[16] * u7
        + a[17] * u8
        + a[18] * u9
        + a[21] * y4
        + a[22] * u11
        + a[23] * u12
        + a[24] * u13
        + a[25] * z4
    )
    myz = (
        a[4] * x4
        + a[7] * u1
        + a[8] * u2
        + a[11] * u3
        + a[12] * u4
        + a[13] * u5
        + a[16] * u6
        + a[17] * u7
        + a[18] * u8
        + a[19] * u9
        + a[22] * y4
        + a[23] * u11
        + a[24] * u12
        + a[25] * u13
        + a[26] * z4
    )
    mzz = (
        a[5] * x4
        + a[8] * u1
        + a[9] * u2
        + a[12] * u3
        + a[13] * u4
        + a[14] * u5
        + a[17] * u6
        + a[18] * u7
        + a[19] * u8
        + a[20] * u9
        + a[23] * y4
        + a[24] * u11
        + a[25] * u12
        + a[26] * u13
        + a[27] * z4
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m6(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^6 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m6(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(6, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m6(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam


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
    """A x^7 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
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
    u1 = S7 * t1
    t2 = x6 * z
    u2 = S7 * t2
    t3 = x5 * y2
    u3 = S21 * t3
    t4 = x5 * y * z
    u4 = S42 * t4
    t5 = x5 * z2
    u5 = S21 * t5
    t6 = x4 * y3
    u6 = S35 * t6
    t7 = x4 * y2 * z
    u7 = S105 * t7
    t8 = x4 * y * z2
    u8 = S105 * t8
    t9 = x4 * z3
    u9 = S35 * t9
    t10 = x3 * y4
    u10 = S35 * t10
    t11 = x3 * y3 * z
    u11 = S140 * t11
    t12 = x3 * y2 * z2
    u12 = S210 * t12
    t13 = x3 * y * z3
    u13 = S140 * t13
    t14 = x3 * z4
    u14 = S35 * t14
    t15 = x2 * y5
    u15 = S21 * t15
    t16 = x2 * y4 * z
    u16 = S105 * t16
    t17 = x2 * y3 * z2
    u17 = S210 * t17
    t18 = x2 * y2 * z3
    u18 = S210 * t18
    t19 = x2 * y * z4
    u19 = S105 * t19
    t20 = x2 * z5
    u20 = S21 * t20
    t21 = x * y6
    u21 = S7 * t21
    t22 = x * y5 * z
    u22 = S42 * t22
    t23 = x * y4 * z2
    u23 = S105 * t23
    t24 = x * y3 * z3
    u24 = S140 * t24
    t25 = x * y2 * z4
    u25 = S105 * t25
    t26 = x * y * z5
    u26 = S42 * t26
    t27 = x * z6
    u27 = S7 * t27
    t29 = y6 * z
    u29 = S7 * t29
    t30 = y5 * z2
    u30 = S21 * t30
    t31 = y4 * z3
    u31 = S35 * t31
    t32 = y3 * z4
    u32 = S35 * t32
    t33 = y2 * z5
    u33 = S21 * t33
    t34 = y * z6
    u34 = S7 * t34
    gx = (
        a[0] * x7
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * u21
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * u27
        + a[28] * y7
        + a[29] * u29
        + a[30] * u30
        + a[31] * u31
        + a[32] * u32
        + a[33] * u33
        + a[34] * u34
        + a[35] * z7
    )
    gy = (
        a[1] * x7
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * u21
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * u27
        + a[36] * y7
        + a[37] * u29
        + a[38] * u30
        + a[39] * u31
        + a[40] * u32
        + a[41] * u33
        + a[42] * u34
        + a[43] * z7
    )
    gz = (
        a[2] * x7
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * u21
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * u27
        + a[37] * y7
        + a[38] * u29
        + a[39] * u30
        + a[40] * u31
        + a[41] * u32
        + a[42] * u33
        + a[43] * u34
        + a[44] * z7
    )
    return gx, gy, gz


@register_jitable
def axm2_m8(a, x, y, z):
    """A x^6 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
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
    u1 = S6 * t1
    t2 = x5 * z
    u2 = S6 * t2
    t3 = x4 * y2
    u3 = S15 * t3
    t4 = x4 * y * z
    u4 = S30 * t4
    t5 = x4 * z2
    u5 = S15 * t5
    t6 = x3 * y3
    u6 = S20 * t6
    t7 = x3 * y2 * z
    u7 = S60 * t7
    t8 = x3 * y * z2
    u8 = S60 * t8
    t9 = x3 * z3
    u9 = S20 * t9
    t10 = x2 * y4
    u10 = S15 * t10
    t11 = x2 * y3 * z
    u11 = S60 * t11
    t12 = x2 * y2 * z2
    u12 = S90 * t12
    t13 = x2 * y * z3
    u13 = S60 * t13
    t14 = x2 * z4
    u14 = S15 * t14
    t15 = x * y5
    u15 = S6 * t15
    t16 = x * y4 * z
    u16 = S30 * t16
    t17 = x * y3 * z2
    u17 = S60 * t17
    t18 = x * y2 * z3
    u18 = S60 * t18
    t19 = x * y * z4
    u19 = S30 * t19
    t20 = x * z5
    u20 = S6 * t20
    t22 = y5 * z
    u22 = S6 * t22
    t23 = y4 * z2
    u23 = S15 * t23
    t24 = y3 * z3
    u24 = S20 * t24
    t25 = y2 * z4
    u25 = S15 * t25
    t26 = y * z5
    u26 = S6 * t26
    mxx = (
        a[0] * x6
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * y6
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * z6
    )
    mxy = (
        a[1] * x6
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * y6
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * z6
    )
    mxz = (
        a[2] * x6
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * y6
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * z6
    )
    myy = (
        a[3] * x6
        + a[6] * u1
        + a[7] * u2
        + a[10] * u3
        + a[11] * u4
        + a[12] * u5
        + a[15] * u6
        + a[16] * u7
        + a[17] * u8
        + a[18] * u9
        + a[21] * u10
        + a[22] * u11
        + a[23] * u12
        + a[24] * u13
        + a[25] * u14
        + a[28] * u15
        + a[29] * u16
        + a[30] * u17
        + a[31] * u18
        + a[32] * u19
        + a[33] * u20
        + a[36] * y6
        + a[37] * u22
        + a[38] * u23
        + a[39] * u24
        + a[40] * u25
        + a[41] * u26
        + a[42] * z6
    )
    myz = (
        a[4] * x6
        + a[7] * u1
        + a[8] * u2
        + a[11] * u3
        + a[12] * u4
        + a[13] * u5
        + a[16] * u6
        + a[17] * u7
        + a[18] * u8
        + a[19] * u9
        + a[22] * u10
        + a[23] * u11
        + a[24] * u12
        + a[25] * u13
        + a[26] * u14
        + a[29] * u15
        + a[30] * u16
        + a[31] * u17
        + a[32] * u18
        + a[33] * u19
        + a[34] * u20
        + a[37] * y6
        + a[38] * u22
        + a[39] * u23
        + a[40] * u24
        + a[41] * u25
        + a[42] * u26
        + a[43] * z6
    )
    mzz = (
        a[5] * x6
        + a[8] * u1
        + a[9] * u2
        + a[12] * u3
        + a[13] * u4
        + a[14] * u5
        + a[17] * u6
        + a[18] * u7
        + a[19] * u8
        + a[20] * u9
        + a[23] * u10
        + a[24] * u11
        + a[25] * u12
        + a[26] * u13
        + a[27] * u14
        + a[30] * u15
        + a[31] * u16
        + a[32] * u17
        + a[33] * u18
        + a[34] * u19
        + a[35] * u20
        + a[38] * y6
        + a[39] * u22
        + a[40] * u23
        + a[41] * u24
        + a[42] * u25
        + a[43] * u26
        + a[44] * z6
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m8(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^8 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m8(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(8, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m8(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam


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
    """A x^9 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
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
    u1 = S9 * t1
    t2 = x8 * z
    u2 = S9 * t2
    t3 = x7 * y2
    u3 = S36 * t3
    t4 = x7 * y * z
    u4 = S72 * t4
    t5 = x7 * z2
    u5 = S36 * t5
    t6 = x6 * y3
    u6 = S84 * t6
    t7 = x6 * y2 * z
    u7 = S252 * t7
    t8 = x6 * y * z2
    u8 = S252 * t8
    t9 = x6 * z3
    u9 = S84 * t9
    t10 = x5 * y4
    u10 = S126 * t10
    t11 = x5 * y3 * z
    u11 = S504 * t11
    t12 = x5 * y2 * z2
    u12 = S756 * t12
    t13 = x5 * y * z3
    u13 = S504 * t13
    t14 = x5 * z4
    u14 = S126 * t14
    t15 = x4 * y5
    u15 = S126 * t15
    t16 = x4 * y4 * z
    u16 = S630 * t16
    t17 = x4 * y3 * z2
    u17 = S1260 * t17
    t18 = x4 * y2 * z3
    u18 = S1260 * t18
    t19 = x4 * y * z4
    u19 = S630 * t19
    t20 = x4 * z5
    u20 = S126 * t20
    t21 = x3 * y6
    u21 = S84 * t21
    t22 = x3 * y5 * z
    u22 = S504 * t22
    t23 = x3 * y4 * z2
    u23 = S1260 * t23
    t24 = x3 * y3 * z3
    u24 = S1680 * t24
    t25 = x3 * y2 * z4
    u25 = S1260 * t25
    t26 = x3 * y * z5
    u26 = S504 * t26
    t27 = x3 * z6
    u27 = S84 * t27
    t28 = x2 * y7
    u28 = S36 * t28
    t29 = x2 * y6 * z
    u29 = S252 * t29
    t30 = x2 * y5 * z2
    u30 = S756 * t30
    t31 = x2 * y4 * z3
    u31 = S1260 * t31
    t32 = x2 * y3 * z4
    u32 = S1260 * t32
    t33 = x2 * y2 * z5
    u33 = S756 * t33
    t34 = x2 * y * z6
    u34 = S252 * t34
    t35 = x2 * z7
    u35 = S36 * t35
    t36 = x * y8
    u36 = S9 * t36
    t37 = x * y7 * z
    u37 = S72 * t37
    t38 = x * y6 * z2
    u38 = S252 * t38
    t39 = x * y5 * z3
    u39 = S504 * t39
    t40 = x * y4 * z4
    u40 = S630 * t40
    t41 = x * y3 * z5
    u41 = S504 * t41
    t42 = x * y2 * z6
    u42 = S252 * t42
    t43 = x * y * z7
    u43 = S72 * t43
    t44 = x * z8
    u44 = S9 * t44
    t46 = y8 * z
    u46 = S9 * t46
    t47 = y7 * z2
    u47 = S36 * t47
    t48 = y6 * z3
    u48 = S84 * t48
    t49 = y5 * z4
    u49 = S126 * t49
    t50 = y4 * z5
    u50 = S126 * t50
    t51 = y3 * z6
    u51 = S84 * t51
    t52 = y2 * z7
    u52 = S36 * t52
    t53 = y * z8
    u53 = S9 * t53
    gx = (
        a[0] * x9
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * u21
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * u27
        + a[28] * u28
        + a[29] * u29
        + a[30] * u30
        + a[31] * u31
        + a[32] * u32
        + a[33] * u33
        + a[34] * u34
        + a[35] * u35
        + a[36] * u36
        + a[37] * u37
        + a[38] * u38
        + a[39] * u39
        + a[40] * u40
        + a[41] * u41
        + a[42] * u42
        + a[43] * u43
        + a[44] * u44
        + a[45] * y9
        + a[46] * u46
        + a[47] * u47
        + a[48] * u48
        + a[49] * u49
        + a[50] * u50
        + a[51] * u51
        + a[52] * u52
        + a[53] * u53
        + a[54] * z9
    )
    gy = (
        a[1] * x9
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * u21
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * u27
        + a[36] * u28
        + a[37] * u29
        + a[38] * u30
        + a[39] * u31
        + a[40] * u32
        + a[41] * u33
        + a[42] * u34
        + a[43] * u35
        + a[45] * u36
        + a[46] * u37
        + a[47] * u38
        + a[48] * u39
        + a[49] * u40
        + a[50] * u41
        + a[51] * u42
        + a[52] * u43
        + a[53] * u44
        + a[55] * y9
        + a[56] * u46
        + a[57] * u47
        + a[58] * u48
        + a[59] * u49
        + a[60] * u50
        + a[61] * u51
        + a[62] * u52
        + a[63] * u53
        + a[64] * z9
    )
    gz = (
        a[2] * x9
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * u21
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * u27
        + a[37] * u28
        + a[38] * u29
        + a[39] * u30
        + a[40] * u31
        + a[41] * u32
        + a[42] * u33
        + a[43] * u34
        + a[44] * u35
        + a[46] * u36
        + a[47] * u37
        + a[48] * u38
        + a[49] * u39
        + a[50] * u40
        + a[51] * u41
        + a[52] * u42
        + a[53] * u43
        + a[54] * u44
        + a[56] * y9
        + a[57] * u46
        + a[58] * u47
        + a[59] * u48
        + a[60] * u49
        + a[61] * u50
        + a[62] * u51
        + a[63] * u52
        + a[64] * u53
        + a[65] * z9
    )
    return gx, gy, gz


@register_jitable
def axm2_m10(a, x, y, z):
    """A x^8 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
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
    u1 = S8 * t1
    t2 = x7 * z
    u2 = S8 * t2
    t3 = x6 * y2
    u3 = S28 * t3
    t4 = x6 * y * z
    u4 = S56 * t4
    t5 = x6 * z2
    u5 = S28 * t5
    t6 = x5 * y3
    u6 = S56 * t6
    t7 = x5 * y2 * z
    u7 = S168 * t7
    t8 = x5 * y * z2
    u8 = S168 * t8
    t9 = x5 * z3
    u9 = S56 * t9
    t10 = x4 * y4
    u10 = S70 * t10
    t11 = x4 * y3 * z
    u11 = S280 * t11
    t12 = x4 * y2 * z2
    u12 = S420 * t12
    t13 = x4 * y * z3
    u13 = S280 * t13
    t14 = x4 * z4
    u14 = S70 * t14
    t15 = x3 * y5
    u15 = S56 * t15
    t16 = x3 * y4 * z
    u16 = S280 * t16
    t17 = x3 * y3 * z2
    u17 = S560 * t17
    t18 = x3 * y2 * z3
    u18 = S560 * t18
    t19 = x3 * y * z4
    u19 = S280 * t19
    t20 = x3 * z5
    u20 = S56 * t20
    t21 = x2 * y6
    u21 = S28 * t21
    t22 = x2 * y5 * z
    u22 = S168 * t22
    t23 = x2 * y4 * z2
    u23 = S420 * t23
    t24 = x2 * y3 * z3
    u24 = S560 * t24
    t25 = x2 * y2 * z4
    u25 = S420 * t25
    t26 = x2 * y * z5
    u26 = S168 * t26
    t27 = x2 * z6
    u27 = S28 * t27
    t28 = x * y7
    u28 = S8 * t28
    t29 = x * y6 * z
    u29 = S56 * t29
    t30 = x * y5 * z2
    u30 = S168 * t30
    t31 = x * y4 * z3
    u31 = S280 * t31
    t32 = x * y3 * z4
    u32 = S280 * t32
    t33 = x * y2 * z5
    u33 = S168 * t33
    t34 = x * y * z6
    u34 = S56 * t34
    t35 = x * z7
    u35 = S8 * t35
    t37 = y7 * z
    u37 = S8 * t37
    t38 = y6 * z2
    u38 = S28 * t38
    t39 = y5 * z3
    u39 = S56 * t39
    t40 = y4 * z4
    u40 = S70 * t40
    t41 = y3 * z5
    u41 = S56 * t41
    t42 = y2 * z6
    u42 = S28 * t42
    t43 = y * z7
    u43 = S8 * t43
    mxx = (
        a[0] * x8
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * u21
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * u27
        + a[28] * u28
        + a[29] * u29
        + a[30] * u30
        + a[31] * u31
        + a[32] * u32
        + a[33] * u33
        + a[34] * u34
        + a[35] * u35
        + a[36] * y8
        + a[37] * u37
        + a[38] * u38
        + a[39] * u39
        + a[40] * u40
        + a[41] * u41
        + a[42] * u42
        + a[43] * u43
        + a[44] * z8
    )
    mxy = (
        a[1] * x8
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * u21
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * u27
        + a[36] * u28
        + a[37] * u29
        + a[38] * u30
        + a[39] * u31
        + a[40] * u32
        + a[41] * u33
        + a[42] * u34
        + a[43] * u35
        + a[45] * y8
        + a[46] * u37
        + a[47] * u38
        + a[48] * u39
        + a[49] * u40
        + a[50] * u41
        + a[51] * u42
        + a[52] * u43
        + a[53] * z8
    )
    mxz = (
        a[2] * x8
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * u21
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * u27
        + a[37] * u28
        + a[38] * u29
        + a[39] * u30
        + a[40] * u31
        + a[41] * u32
        + a[42] * u33
        + a[43] * u34
        + a[44] * u35
        + a[46] * y8
        + a[47] * u37
        + a[48] * u38
        + a[49] * u39
        + a[50] * u40
        + a[51] * u41
        + a[52] * u42
        + a[53] * u43
        + a[54] * z8
    )
    myy = (
        a[3] * x8
        + a[6] * u1
        + a[7] * u2
        + a[10] * u3
        + a[11] * u4
        + a[12] * u5
        + a[15] * u6
        + a[16] * u7
        + a[17] * u8
        + a[18] * u9
        + a[21] * u10
        + a[22] * u11
        + a[23] * u12
        + a[24] * u13
        + a[25] * u14
        + a[28] * u15
        + a[29] * u16
        + a[30] * u17
        + a[31] * u18
        + a[32] * u19
        + a[33] * u20
        + a[36] * u21
        + a[37] * u22
        + a[38] * u23
        + a[39] * u24
        + a[40] * u25
        + a[41] * u26
        + a[42] * u27
        + a[45] * u28
        + a[46] * u29
        + a[47] * u30
        + a[48] * u31
        + a[49] * u32
        + a[50] * u33
        + a[51] * u34
        + a[52] * u35
        + a[55] * y8
        + a[56] * u37
        + a[57] * u38
        + a[58] * u39
        + a[59] * u40
        + a[60] * u41
        + a[61] * u42
        + a[62] * u43
        + a[63] * z8
    )
    myz = (
        a[4] * x8
        + a[7] * u1
        + a[8] * u2
        + a[11] * u3
        + a[12] * u4
        + a[13] * u5
        + a[16] * u6
        + a[17] * u7
        + a[18] * u8
        + a[19] * u9
        + a[22] * u10
        + a[23] * u11
        + a[24] * u12
        + a[25] * u13
        + a[26] * u14
        + a[29] * u15
        + a[30] * u16
        + a[31] * u17
        + a[32] * u18
        + a[33] * u19
        + a[34] * u20
        + a[37] * u21
        + a[38] * u22
        + a[39] * u23
        + a[40] * u24
        + a[41] * u25
        + a[42] * u26
        + a[43] * u27
        + a[46] * u28
        + a[47] * u29
        + a[48] * u30
        + a[49] * u31
        + a[50] * u32
        + a[51] * u33
        + a[52] * u34
        + a[53] * u35
        + a[56] * y8
        + a[57] * u37
        + a[58] * u38
        + a[59] * u39
        + a[60] * u40
        + a[61] * u41
        + a[62] * u42
        + a[63] * u43
        + a[64] * z8
    )
    mzz = (
        a[5] * x8
        + a[8] * u1
        + a[9] * u2
        + a[12] * u3
        + a[13] * u4
        + a[14] * u5
        + a[17] * u6
        + a[18] * u7
        + a[19] * u8
        + a[20] * u9
        + a[23] * u10
        + a[24] * u11
        + a[25] * u12
        + a[26] * u13
        + a[27] * u14
        + a[30] * u15
        + a[31] * u16
        + a[32] * u17
        + a[33] * u18
        + a[34] * u19
        + a[35] * u20
        + a[38] * u21
        + a[39] * u22
        + a[40] * u23
        + a[41] * u24
        + a[42] * u25
        + a[43] * u26
        + a[44] * u27
        + a[47] * u28
        + a[48] * u29
        + a[49] * u30
        + a[50] * u31
        + a[51] * u32
        + a[52] * u33
        + a[53] * u34
        + a[54] * u35
        + a[57] * y8
        + a[58] * u37
        + a[59] * u38
        + a[60] * u39
        + a[61] * u40
        + a[62] * u41
        + a[63] * u42
        + a[64] * u43
        + a[65] * z8
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m10(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^10 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m10(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(10, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m10(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam


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
    """A x^11 (Ballard et al., Def. 2 and Fig. 3), the monomials scaled by
    their multiplicities once for all outputs; returns gx, gy, gz."""
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
    u1 = S11 * t1
    t2 = x10 * z
    u2 = S11 * t2
    t3 = x9 * y2
    u3 = S55 * t3
    t4 = x9 * y * z
    u4 = S110 * t4
    t5 = x9 * z2
    u5 = S55 * t5
    t6 = x8 * y3
    u6 = S165 * t6
    t7 = x8 * y2 * z
    u7 = S495 * t7
    t8 = x8 * y * z2
    u8 = S495 * t8
    t9 = x8 * z3
    u9 = S165 * t9
    t10 = x7 * y4
    u10 = S330 * t10
    t11 = x7 * y3 * z
    u11 = S1320 * t11
    t12 = x7 * y2 * z2
    u12 = S1980 * t12
    t13 = x7 * y * z3
    u13 = S1320 * t13
    t14 = x7 * z4
    u14 = S330 * t14
    t15 = x6 * y5
    u15 = S462 * t15
    t16 = x6 * y4 * z
    u16 = S2310 * t16
    t17 = x6 * y3 * z2
    u17 = S4620 * t17
    t18 = x6 * y2 * z3
    u18 = S4620 * t18
    t19 = x6 * y * z4
    u19 = S2310 * t19
    t20 = x6 * z5
    u20 = S462 * t20
    t21 = x5 * y6
    u21 = S462 * t21
    t22 = x5 * y5 * z
    u22 = S2772 * t22
    t23 = x5 * y4 * z2
    u23 = S6930 * t23
    t24 = x5 * y3 * z3
    u24 = S9240 * t24
    t25 = x5 * y2 * z4
    u25 = S6930 * t25
    t26 = x5 * y * z5
    u26 = S2772 * t26
    t27 = x5 * z6
    u27 = S462 * t27
    t28 = x4 * y7
    u28 = S330 * t28
    t29 = x4 * y6 * z
    u29 = S2310 * t29
    t30 = x4 * y5 * z2
    u30 = S6930 * t30
    t31 = x4 * y4 * z3
    u31 = S11550 * t31
    t32 = x4 * y3 * z4
    u32 = S11550 * t32
    t33 = x4 * y2 * z5
    u33 = S6930 * t33
    t34 = x4 * y * z6
    u34 = S2310 * t34
    t35 = x4 * z7
    u35 = S330 * t35
    t36 = x3 * y8
    u36 = S165 * t36
    t37 = x3 * y7 * z
    u37 = S1320 * t37
    t38 = x3 * y6 * z2
    u38 = S4620 * t38
    t39 = x3 * y5 * z3
    u39 = S9240 * t39
    t40 = x3 * y4 * z4
    u40 = S11550 * t40
    t41 = x3 * y3 * z5
    u41 = S9240 * t41
    t42 = x3 * y2 * z6
    u42 = S4620 * t42
    t43 = x3 * y * z7
    u43 = S1320 * t43
    t44 = x3 * z8
    u44 = S165 * t44
    t45 = x2 * y9
    u45 = S55 * t45
    t46 = x2 * y8 * z
    u46 = S495 * t46
    t47 = x2 * y7 * z2
    u47 = S1980 * t47
    t48 = x2 * y6 * z3
    u48 = S4620 * t48
    t49 = x2 * y5 * z4
    u49 = S6930 * t49
    t50 = x2 * y4 * z5
    u50 = S6930 * t50
    t51 = x2 * y3 * z6
    u51 = S4620 * t51
    t52 = x2 * y2 * z7
    u52 = S1980 * t52
    t53 = x2 * y * z8
    u53 = S495 * t53
    t54 = x2 * z9
    u54 = S55 * t54
    t55 = x * y10
    u55 = S11 * t55
    t56 = x * y9 * z
    u56 = S110 * t56
    t57 = x * y8 * z2
    u57 = S495 * t57
    t58 = x * y7 * z3
    u58 = S1320 * t58
    t59 = x * y6 * z4
    u59 = S2310 * t59
    t60 = x * y5 * z5
    u60 = S2772 * t60
    t61 = x * y4 * z6
    u61 = S2310 * t61
    t62 = x * y3 * z7
    u62 = S1320 * t62
    t63 = x * y2 * z8
    u63 = S495 * t63
    t64 = x * y * z9
    u64 = S110 * t64
    t65 = x * z10
    u65 = S11 * t65
    t67 = y10 * z
    u67 = S11 * t67
    t68 = y9 * z2
    u68 = S55 * t68
    t69 = y8 * z3
    u69 = S165 * t69
    t70 = y7 * z4
    u70 = S330 * t70
    t71 = y6 * z5
    u71 = S462 * t71
    t72 = y5 * z6
    u72 = S462 * t72
    t73 = y4 * z7
    u73 = S330 * t73
    t74 = y3 * z8
    u74 = S165 * t74
    t75 = y2 * z9
    u75 = S55 * t75
    t76 = y * z10
    u76 = S11 * t76
    gx = (
        a[0] * x11
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * u21
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * u27
        + a[28] * u28
        + a[29] * u29
        + a[30] * u30
        + a[31] * u31
        + a[32] * u32
        + a[33] * u33
        + a[34] * u34
        + a[35] * u35
        + a[36] * u36
        + a[37] * u37
        + a[38] * u38
        + a[39] * u39
        + a[40] * u40
        + a[41] * u41
        + a[42] * u42
        + a[43] * u43
        + a[44] * u44
        + a[45] * u45
        + a[46] * u46
        + a[47] * u47
        + a[48] * u48
        + a[49] * u49
        + a[50] * u50
        + a[51] * u51
        + a[52] * u52
        + a[53] * u53
        + a[54] * u54
        + a[55] * u55
        + a[56] * u56
        + a[57] * u57
        + a[58] * u58
        + a[59] * u59
        + a[60] * u60
        + a[61] * u61
        + a[62] * u62
        + a[63] * u63
        + a[64] * u64
        + a[65] * u65
        + a[66] * y11
        + a[67] * u67
        + a[68] * u68
        + a[69] * u69
        + a[70] * u70
        + a[71] * u71
        + a[72] * u72
        + a[73] * u73
        + a[74] * u74
        + a[75] * u75
        + a[76] * u76
        + a[77] * z11
    )
    gy = (
        a[1] * x11
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * u21
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * u27
        + a[36] * u28
        + a[37] * u29
        + a[38] * u30
        + a[39] * u31
        + a[40] * u32
        + a[41] * u33
        + a[42] * u34
        + a[43] * u35
        + a[45] * u36
        + a[46] * u37
        + a[47] * u38
        + a[48] * u39
        + a[49] * u40
        + a[50] * u41
        + a[51] * u42
        + a[52] * u43
        + a[53] * u44
        + a[55] * u45
        + a[56] * u46
        + a[57] * u47
        + a[58] * u48
        + a[59] * u49
        + a[60] * u50
        + a[61] * u51
        + a[62] * u52
        + a[63] * u53
        + a[64] * u54
        + a[66] * u55
        + a[67] * u56
        + a[68] * u57
        + a[69] * u58
        + a[70] * u59
        + a[71] * u60
        + a[72] * u61
        + a[73] * u62
        + a[74] * u63
        + a[75] * u64
        + a[76] * u65
        + a[78] * y11
        + a[79] * u67
        + a[80] * u68
        + a[81] * u69
        + a[82] * u70
        + a[83] * u71
        + a[84] * u72
        + a[85] * u73
        + a[86] * u74
        + a[87] * u75
        + a[88] * u76
        + a[89] * z11
    )
    gz = (
        a[2] * x11
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * u21
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * u27
        + a[37] * u28
        + a[38] * u29
        + a[39] * u30
        + a[40] * u31
        + a[41] * u32
        + a[42] * u33
        + a[43] * u34
        + a[44] * u35
        + a[46] * u36
        + a[47] * u37
        + a[48] * u38
        + a[49] * u39
        + a[50] * u40
        + a[51] * u41
        + a[52] * u42
        + a[53] * u43
        + a[54] * u44
        + a[56] * u45
        + a[57] * u46
        + a[58] * u47
        + a[59] * u48
        + a[60] * u49
        + a[61] * u50
        + a[62] * u51
        + a[63] * u52
        + a[64] * u53
        + a[65] * u54
        + a[67] * u55
        + a[68] * u56
        + a[69] * u57
        + a[70] * u58
        + a[71] * u59
        + a[72] * u60
        + a[73] * u61
        + a[74] * u62
        + a[75] * u63
        + a[76] * u64
        + a[77] * u65
        + a[79] * y11
        + a[80] * u67
        + a[81] * u68
        + a[82] * u69
        + a[83] * u70
        + a[84] * u71
        + a[85] * u72
        + a[86] * u73
        + a[87] * u74
        + a[88] * u75
        + a[89] * u76
        + a[90] * z11
    )
    return gx, gy, gz


@register_jitable
def axm2_m12(a, x, y, z):
    """A x^10 (Ballard et al., Def. 2 and Fig. 4), the monomials scaled by
    their multiplicities once for all outputs; returns mxx, mxy, mxz, myy, myz, mzz."""
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
    u1 = S10 * t1
    t2 = x9 * z
    u2 = S10 * t2
    t3 = x8 * y2
    u3 = S45 * t3
    t4 = x8 * y * z
    u4 = S90 * t4
    t5 = x8 * z2
    u5 = S45 * t5
    t6 = x7 * y3
    u6 = S120 * t6
    t7 = x7 * y2 * z
    u7 = S360 * t7
    t8 = x7 * y * z2
    u8 = S360 * t8
    t9 = x7 * z3
    u9 = S120 * t9
    t10 = x6 * y4
    u10 = S210 * t10
    t11 = x6 * y3 * z
    u11 = S840 * t11
    t12 = x6 * y2 * z2
    u12 = S1260 * t12
    t13 = x6 * y * z3
    u13 = S840 * t13
    t14 = x6 * z4
    u14 = S210 * t14
    t15 = x5 * y5
    u15 = S252 * t15
    t16 = x5 * y4 * z
    u16 = S1260 * t16
    t17 = x5 * y3 * z2
    u17 = S2520 * t17
    t18 = x5 * y2 * z3
    u18 = S2520 * t18
    t19 = x5 * y * z4
    u19 = S1260 * t19
    t20 = x5 * z5
    u20 = S252 * t20
    t21 = x4 * y6
    u21 = S210 * t21
    t22 = x4 * y5 * z
    u22 = S1260 * t22
    t23 = x4 * y4 * z2
    u23 = S3150 * t23
    t24 = x4 * y3 * z3
    u24 = S4200 * t24
    t25 = x4 * y2 * z4
    u25 = S3150 * t25
    t26 = x4 * y * z5
    u26 = S1260 * t26
    t27 = x4 * z6
    u27 = S210 * t27
    t28 = x3 * y7
    u28 = S120 * t28
    t29 = x3 * y6 * z
    u29 = S840 * t29
    t30 = x3 * y5 * z2
    u30 = S2520 * t30
    t31 = x3 * y4 * z3
    u31 = S4200 * t31
    t32 = x3 * y3 * z4
    u32 = S4200 * t32
    t33 = x3 * y2 * z5
    u33 = S2520 * t33
    t34 = x3 * y * z6
    u34 = S840 * t34
    t35 = x3 * z7
    u35 = S120 * t35
    t36 = x2 * y8
    u36 = S45 * t36
    t37 = x2 * y7 * z
    u37 = S360 * t37
    t38 = x2 * y6 * z2
    u38 = S1260 * t38
    t39 = x2 * y5 * z3
    u39 = S2520 * t39
    t40 = x2 * y4 * z4
    u40 = S3150 * t40
    t41 = x2 * y3 * z5
    u41 = S2520 * t41
    t42 = x2 * y2 * z6
    u42 = S1260 * t42
    t43 = x2 * y * z7
    u43 = S360 * t43
    t44 = x2 * z8
    u44 = S45 * t44
    t45 = x * y9
    u45 = S10 * t45
    t46 = x * y8 * z
    u46 = S90 * t46
    t47 = x * y7 * z2
    u47 = S360 * t47
    t48 = x * y6 * z3
    u48 = S840 * t48
    t49 = x * y5 * z4
    u49 = S1260 * t49
    t50 = x * y4 * z5
    u50 = S1260 * t50
    t51 = x * y3 * z6
    u51 = S840 * t51
    t52 = x * y2 * z7
    u52 = S360 * t52
    t53 = x * y * z8
    u53 = S90 * t53
    t54 = x * z9
    u54 = S10 * t54
    t56 = y9 * z
    u56 = S10 * t56
    t57 = y8 * z2
    u57 = S45 * t57
    t58 = y7 * z3
    u58 = S120 * t58
    t59 = y6 * z4
    u59 = S210 * t59
    t60 = y5 * z5
    u60 = S252 * t60
    t61 = y4 * z6
    u61 = S210 * t61
    t62 = y3 * z7
    u62 = S120 * t62
    t63 = y2 * z8
    u63 = S45 * t63
    t64 = y * z9
    u64 = S10 * t64
    mxx = (
        a[0] * x10
        + a[1] * u1
        + a[2] * u2
        + a[3] * u3
        + a[4] * u4
        + a[5] * u5
        + a[6] * u6
        + a[7] * u7
        + a[8] * u8
        + a[9] * u9
        + a[10] * u10
        + a[11] * u11
        + a[12] * u12
        + a[13] * u13
        + a[14] * u14
        + a[15] * u15
        + a[16] * u16
        + a[17] * u17
        + a[18] * u18
        + a[19] * u19
        + a[20] * u20
        + a[21] * u21
        + a[22] * u22
        + a[23] * u23
        + a[24] * u24
        + a[25] * u25
        + a[26] * u26
        + a[27] * u27
        + a[28] * u28
        + a[29] * u29
        + a[30] * u30
        + a[31] * u31
        + a[32] * u32
        + a[33] * u33
        + a[34] * u34
        + a[35] * u35
        + a[36] * u36
        + a[37] * u37
        + a[38] * u38
        + a[39] * u39
        + a[40] * u40
        + a[41] * u41
        + a[42] * u42
        + a[43] * u43
        + a[44] * u44
        + a[45] * u45
        + a[46] * u46
        + a[47] * u47
        + a[48] * u48
        + a[49] * u49
        + a[50] * u50
        + a[51] * u51
        + a[52] * u52
        + a[53] * u53
        + a[54] * u54
        + a[55] * y10
        + a[56] * u56
        + a[57] * u57
        + a[58] * u58
        + a[59] * u59
        + a[60] * u60
        + a[61] * u61
        + a[62] * u62
        + a[63] * u63
        + a[64] * u64
        + a[65] * z10
    )
    mxy = (
        a[1] * x10
        + a[3] * u1
        + a[4] * u2
        + a[6] * u3
        + a[7] * u4
        + a[8] * u5
        + a[10] * u6
        + a[11] * u7
        + a[12] * u8
        + a[13] * u9
        + a[15] * u10
        + a[16] * u11
        + a[17] * u12
        + a[18] * u13
        + a[19] * u14
        + a[21] * u15
        + a[22] * u16
        + a[23] * u17
        + a[24] * u18
        + a[25] * u19
        + a[26] * u20
        + a[28] * u21
        + a[29] * u22
        + a[30] * u23
        + a[31] * u24
        + a[32] * u25
        + a[33] * u26
        + a[34] * u27
        + a[36] * u28
        + a[37] * u29
        + a[38] * u30
        + a[39] * u31
        + a[40] * u32
        + a[41] * u33
        + a[42] * u34
        + a[43] * u35
        + a[45] * u36
        + a[46] * u37
        + a[47] * u38
        + a[48] * u39
        + a[49] * u40
        + a[50] * u41
        + a[51] * u42
        + a[52] * u43
        + a[53] * u44
        + a[55] * u45
        + a[56] * u46
        + a[57] * u47
        + a[58] * u48
        + a[59] * u49
        + a[60] * u50
        + a[61] * u51
        + a[62] * u52
        + a[63] * u53
        + a[64] * u54
        + a[66] * y10
        + a[67] * u56
        + a[68] * u57
        + a[69] * u58
        + a[70] * u59
        + a[71] * u60
        + a[72] * u61
        + a[73] * u62
        + a[74] * u63
        + a[75] * u64
        + a[76] * z10
    )
    mxz = (
        a[2] * x10
        + a[4] * u1
        + a[5] * u2
        + a[7] * u3
        + a[8] * u4
        + a[9] * u5
        + a[11] * u6
        + a[12] * u7
        + a[13] * u8
        + a[14] * u9
        + a[16] * u10
        + a[17] * u11
        + a[18] * u12
        + a[19] * u13
        + a[20] * u14
        + a[22] * u15
        + a[23] * u16
        + a[24] * u17
        + a[25] * u18
        + a[26] * u19
        + a[27] * u20
        + a[29] * u21
        + a[30] * u22
        + a[31] * u23
        + a[32] * u24
        + a[33] * u25
        + a[34] * u26
        + a[35] * u27
        + a[37] * u28
        + a[38] * u29
        + a[39] * u30
        + a[40] * u31
        + a[41] * u32
        + a[42] * u33
        + a[43] * u34
        + a[44] * u35
        + a[46] * u36
        + a[47] * u37
        + a[48] * u38
        + a[49] * u39
        + a[50] * u40
        + a[51] * u41
        + a[52] * u42
        + a[53] * u43
        + a[54] * u44
        + a[56] * u45
        + a[57] * u46
        + a[58] * u47
        + a[59] * u48
        + a[60] * u49
        + a[61] * u50
        + a[62] * u51
        + a[63] * u52
        + a[64] * u53
        + a[65] * u54
        + a[67] * y10
        + a[68] * u56
        + a[69] * u57
        + a[70] * u58
        + a[71] * u59
        + a[72] * u60
        + a[73] * u61
        + a[74] * u62
        + a[75] * u63
        + a[76] * u64
        + a[77] * z10
    )
    myy = (
        a[3] * x10
        + a[6] * u1
        + a[7] * u2
        + a[10] * u3
        + a[11] * u4
        + a[12] * u5
        + a[15] * u6
        + a[16] * u7
        + a[17] * u8
        + a[18] * u9
        + a[21] * u10
        + a[22] * u11
        + a[23] * u12
        + a[24] * u13
        + a[25] * u14
        + a[28] * u15
        + a[29] * u16
        + a[30] * u17
        + a[31] * u18
        + a[32] * u19
        + a[33] * u20
        + a[36] * u21
        + a[37] * u22
        + a[38] * u23
        + a[39] * u24
        + a[40] * u25
        + a[41] * u26
        + a[42] * u27
        + a[45] * u28
        + a[46] * u29
        + a[47] * u30
        + a[48] * u31
        + a[49] * u32
        + a[50] * u33
        + a[51] * u34
        + a[52] * u35
        + a[55] * u36
        + a[56] * u37
        + a[57] * u38
        + a[58] * u39
        + a[59] * u40
        + a[60] * u41
        + a[61] * u42
        + a[62] * u43
        + a[63] * u44
        + a[66] * u45
        + a[67] * u46
        + a[68] * u47
        + a[69] * u48
        + a[70] * u49
        + a[71] * u50
        + a[72] * u51
        + a[73] * u52
        + a[74] * u53
        + a[75] * u54
        + a[78] * y10
        + a[79] * u56
        + a[80] * u57
        + a[81] * u58
        + a[82] * u59
        + a[83] * u60
        + a[84] * u61
        + a[85] * u62
        + a[86] * u63
        + a[87] * u64
        + a[88] * z10
    )
    myz = (
        a[4] * x10
        + a[7] * u1
        + a[8] * u2
        + a[11] * u3
        + a[12] * u4
        + a[13] * u5
        + a[16] * u6
        + a[17] * u7
        + a[18] * u8
        + a[19] * u9
        + a[22] * u10
        + a[23] * u11
        + a[24] * u12
        + a[25] * u13
        + a[26] * u14
        + a[29] * u15
        + a[30] * u16
        + a[31] * u17
        + a[32] * u18
        + a[33] * u19
        + a[34] * u20
        + a[37] * u21
        + a[38] * u22
        + a[39] * u23
        + a[40] * u24
        + a[41] * u25
        + a[42] * u26
        + a[43] * u27
        + a[46] * u28
        + a[47] * u29
        + a[48] * u30
        + a[49] * u31
        + a[50] * u32
        + a[51] * u33
        + a[52] * u34
        + a[53] * u35
        + a[56] * u36
        + a[57] * u37
        + a[58] * u38
        + a[59] * u39
        + a[60] * u40
        + a[61] * u41
        + a[62] * u42
        + a[63] * u43
        + a[64] * u44
        + a[67] * u45
        + a[68] * u46
        + a[69] * u47
        + a[70] * u48
        + a[71] * u49
        + a[72] * u50
        + a[73] * u51
        + a[74] * u52
        + a[75] * u53
        + a[76] * u54
        + a[79] * y10
        + a[80] * u56
        + a[81] * u57
        + a[82] * u58
        + a[83] * u59
        + a[84] * u60
        + a[85] * u61
        + a[86] * u62
        + a[87] * u63
        + a[88] * u64
        + a[89] * z10
    )
    mzz = (
        a[5] * x10
        + a[8] * u1
        + a[9] * u2
        + a[12] * u3
        + a[13] * u4
        + a[14] * u5
        + a[17] * u6
        + a[18] * u7
        + a[19] * u8
        + a[20] * u9
        + a[23] * u10
        + a[24] * u11
        + a[25] * u12
        + a[26] * u13
        + a[27] * u14
        + a[30] * u15
        + a[31] * u16
        + a[32] * u17
        + a[33] * u18
        + a[34] * u19
        + a[35] * u20
        + a[38] * u21
        + a[39] * u22
        + a[40] * u23
        + a[41] * u24
        + a[42] * u25
        + a[43] * u26
        + a[44] * u27
        + a[47] * u28
        + a[48] * u29
        + a[49] * u30
        + a[50] * u31
        + a[51] * u32
        + a[52] * u33
        + a[53] * u34
        + a[54] * u35
        + a[57] * u36
        + a[58] * u37
        + a[59] * u38
        + a[60] * u39
        + a[61] * u40
        + a[62] * u41
        + a[63] * u42
        + a[64] * u43
        + a[65] * u44
        + a[68] * u45
        + a[69] * u46
        + a[70] * u47
        + a[71] * u48
        + a[72] * u49
        + a[73] * u50
        + a[74] * u51
        + a[75] * u52
        + a[76] * u53
        + a[77] * u54
        + a[80] * y10
        + a[81] * u56
        + a[82] * u57
        + a[83] * u58
        + a[84] * u59
        + a[85] * u60
        + a[86] * u61
        + a[87] * u62
        + a[88] * u63
        + a[89] * u64
        + a[90] * z10
    )
    return mxx, mxy, mxz, myy, myz, mzz


@register_jitable
def climb_m12(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^12 = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m12(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step(12, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m12(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam
