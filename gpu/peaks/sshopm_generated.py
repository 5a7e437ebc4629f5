"""SS-HOPM polynomials and climb for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); see that module for
what each function computes and gpu/peaks/sshopm_math.py for the order-independent steps.
The CPU loops are in gpu/peaks/sshopm_generated_cpu.py, the CUDA kernels in
gpu/peaks/sshopm_generated_cuda.py; both compile these functions into their own code.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_math.py sha256 1b13a5625a9f66cb07776694faef11b48f73296f0cf82939e54f66437f15299d
# sshopm_layout.py sha256 6899c18d967ba72e04ee0b6d6b5370955fb561a79821c49e62820b82a8c20289

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
