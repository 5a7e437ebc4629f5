"""Order-independent pieces of SS-HOPM, compiled for both the CUDA and the CPU backend.

Every function here is ``register_jitable``: plain Python that numba compiles into whichever
target calls it (a ``numba.cuda`` kernel or an ``@njit`` loop), so the math is written once.
The order-specific polynomial code (A x^m, A x^(m−1), A x^(m−2)) is generated into
:mod:`gpu.peaks.sshopm_generated` by :mod:`gpu.peaks.sshopm_codegen`.

Notation (Kolda & Mayo 2011; Ballard, Kolda & Plantenga 2011): A symmetric of order m in
R^3, x on the unit sphere, f(x) = A x^m = λ, and the 3×3 symmetric matrix
M = A x^(m−2), from which A x^(m−1) = M x and A x^m = xᵀ M x (Ballard et al., Def. 2 with
p = 2, 1, 0). The Euclidean Hessian of f is m(m−1) M, so on the tangent plane spanned by an
orthonormal (u, v) ⟂ x the Riemannian Hessian of f on the sphere, divided by m, is

    H = (m−1) [uᵀMu  uᵀMv; vᵀMu  vᵀMv] − λ I₂,

and the Riemannian gradient divided by m is (uᵀg, vᵀg) with g = A x^(m−1).

Working precision follows the data: the CUDA kernels run in float32, the CPU backend in
float64. Literal constants go through :func:`like` so that float32 code stays float32.
"""

from __future__ import annotations

import math

import numpy as np
from numba import types
from numba.extending import overload, register_jitable

from gpu.peaks.sshopm_layout import CLIMB_CAPPED, CLIMB_PEAK

__all__ = [
    "like",
    "tangent_basis",
    "sshopm_step",
    "is_seed",
    "seed_floor",
    "climb_status",
    "climb_flags",
    "CLIMBING",
    "STOPPED_CONVERGED",
    "STOPPED_CAPPED",
    "select_peaks",
]

# A higher neighbour blocks a start only within 30° of the start's gradient (cos 30°): wider
# cones missed weak shoulder maxima of close crossings (docs/peaks.md, "Shoulder maxima").
CONE_COS = 0.866


def like(x, value):
    """``value`` as a scalar of x's floating type (float32 stays float32 on the GPU)."""
    if isinstance(x, np.floating):
        return type(x)(value)
    return float(value)


@overload(like)
def _like_impl(x, value):
    if x == types.float32:
        return lambda x, value: np.float32(value)
    return lambda x, value: np.float64(value)


@register_jitable
def tangent_basis(x, y, z):
    """An orthonormal pair (u, v) spanning the tangent plane of the sphere at unit (x, y, z).

    u = e × x / |e × x| for the axis e least aligned with x (well conditioned), v = x × u.
    """
    ax, ay, az = abs(x), abs(y), abs(z)
    if ax <= ay and ax <= az:
        ux, uy, uz = like(x, 0.0), -z, y
    elif ay <= az:
        ux, uy, uz = z, like(x, 0.0), -x
    else:
        ux, uy, uz = -y, x, like(x, 0.0)
    n = math.sqrt(ux * ux + uy * uy + uz * uz)
    ux, uy, uz = ux / n, uy / n, uz / n
    vx = y * uz - z * uy
    vy = z * ux - x * uz
    vz = x * uy - y * ux
    return ux, uy, uz, vx, vy, vz


@register_jitable
def sshopm_step(order, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step):
    """One iteration from unit (x, y, z) given M = A x^(m−2).

    Returns (x', y', z', λ, step, negdef): the next iterate, λ = A x^m at the *current*
    iterate, the angle moved (radians; sign-blind, since f(−x) = f(x) for even m) and
    whether the tangent Hessian H was negative definite (x is then in the basin of a
    strict local maximum).

    * Newton (H negative definite): solve H s = −(uᵀg, vᵀg) on the tangent plane, cap |s|
      at ``max_step`` and retract x' = (x + s_u u + s_v v)/|·|. Quadratic convergence,
      which is what makes the 0.01° accuracy affordable.
    * Otherwise the shifted power step of SS-HOPM (Kolda & Mayo 2011, Alg. 1):
      x' = (A x^(m−1) + α x)/|·| with the adaptive shift of GEAP (Kolda & Mayo 2014, Alg. 3),
      α = max(0, −μ_min) where μ_min is the least eigenvalue of (m−1)[uᵀMu uᵀMv; vᵀMu vᵀMv]:
      just enough to make f + α‖x‖^m locally convex, so λ increases monotonically.
    """
    gx = mxx * x + mxy * y + mxz * z
    gy = mxy * x + myy * y + myz * z
    gz = mxz * x + myz * y + mzz * z
    lam = x * gx + y * gy + z * gz
    ux, uy, uz, vx, vy, vz = tangent_basis(x, y, z)
    mux = mxx * ux + mxy * uy + mxz * uz
    muy = mxy * ux + myy * uy + myz * uz
    muz = mxz * ux + myz * uy + mzz * uz
    mvx = mxx * vx + mxy * vy + mxz * vz
    mvy = mxy * vx + myy * vy + myz * vz
    mvz = mxz * vx + myz * vy + mzz * vz
    k = like(x, order - 1)
    cuu = k * (ux * mux + uy * muy + uz * muz)
    cuv = k * (ux * mvx + uy * mvy + uz * mvz)
    cvv = k * (vx * mvx + vy * mvy + vz * mvz)
    huu = cuu - lam
    hvv = cvv - lam
    det = huu * hvv - cuv * cuv
    negdef = huu < 0 and det > 0
    if negdef:
        gu = ux * gx + uy * gy + uz * gz
        gv = vx * gx + vy * gy + vz * gz
        su = (cuv * gv - hvv * gu) / det
        sv = (cuv * gu - huu * gv) / det
        step = math.sqrt(su * su + sv * sv)
        if step > max_step:
            su = su * (max_step / step)
            sv = sv * (max_step / step)
        nx = x + su * ux + sv * vx
        ny = y + su * uy + sv * vy
        nz = z + su * uz + sv * vz
    else:
        half = like(x, 0.5)
        mean = half * (cuu + cvv)
        gap = math.sqrt(half * half * (cuu - cvv) * (cuu - cvv) + cuv * cuv)
        alpha = max(like(x, 0.0), gap - mean)
        nx = gx + alpha * x
        ny = gy + alpha * y
        nz = gz + alpha * z
        gu = ux * gx + uy * gy + uz * gz
        gv = vx * gx + vy * gy + vz * gz
        n = math.sqrt(nx * nx + ny * ny + nz * nz)
        if huu + hvv > 0 or det < 0:
            # H has a positive eigenvalue μ: near a saddle or on a ridge the shifted power
            # step crawls (its length is |∇f|/(λ+α)), so when it is shorter than max_step
            # move max_step along μ's eigenvector instead, uphill: f grows by ≈ ½μ·max_step².
            half = like(x, 0.5)
            mean = half * (huu + hvv)
            gap = math.sqrt(half * half * (huu - hvv) * (huu - hvv) + cuv * cuv)
            mu = mean + gap
            if math.sqrt(gu * gu + gv * gv) < max_step * n:
                if abs(cuv) > abs(mu - huu) * like(x, 1e-6):
                    eu, ev = cuv, mu - huu
                elif huu >= hvv:
                    eu, ev = like(x, 1.0), like(x, 0.0)
                else:
                    eu, ev = like(x, 0.0), like(x, 1.0)
                scale = max_step / math.sqrt(eu * eu + ev * ev)
                if eu * gu + ev * gv < 0:
                    scale = -scale
                nx = x + scale * (eu * ux + ev * vx)
                ny = y + scale * (eu * uy + ev * vy)
                nz = z + scale * (eu * uz + ev * vz)
    n = math.sqrt(nx * nx + ny * ny + nz * nz)
    nx, ny, nz = nx / n, ny / n, nz / n
    # |x' − x| for the nearer of ±x', from differences: 1 − x'·x loses the small angles
    # of a converging float32 iterate to rounding.
    if nx * x + ny * y + nz * z < 0:
        nx, ny, nz = -nx, -ny, -nz
    dx, dy, dz = nx - x, ny - y, nz - z
    step = math.sqrt(dx * dx + dy * dy + dz * dz)
    return nx, ny, nz, lam, step, negdef


@register_jitable
def is_seed(t, x, y, z, f, gx, gy, gz, neighbors, steps, local_only, floor):
    """Whether start t, the unit (x, y, z), climbs: its FOD value f[t] = A x^m is positive
    and ≥ ``floor`` and, with ``local_only``, no neighbour uphill of it lies within 30° of
    its tangent gradient (gx, gy, gz) = A x^(m−1); ``steps[t, q]`` is the step to neighbour
    q and its length (:func:`gpu.peaks.sshopm_starts.neighbor_steps`). Discrete local maxima
    always qualify; so does the start nearest a small lobe that sits on a larger lobe's
    flank, which a plain discrete-maximum test misses (its neighbours towards the larger
    lobe are higher, but not where the gradient points). A climb only increases λ, so starts
    below ``floor`` would only find peaks that are dropped anyway (see
    PeaksOptions.seed_fraction)."""
    ft = f[t]
    if ft <= 0 or ft < floor:
        return False
    if not local_only:
        return True
    ux = gx - ft * x
    uy = gy - ft * y
    uz = gz - ft * z
    unorm = math.sqrt(ux * ux + uy * uy + uz * uz)
    for q in range(neighbors.shape[1]):
        j = neighbors[t, q]
        if f[j] > ft or (f[j] == ft and j < t):
            along = steps[t, q, 0] * ux + steps[t, q, 1] * uy + steps[t, q, 2] * uz
            if along >= like(x, CONE_COS) * unorm * steps[t, q, 3]:
                return False
    return True


@register_jitable
def seed_floor(fmax, threshold, rel_threshold, seed_fraction):
    """Least start value that may seed: seed_fraction × the least amplitude a peak may have."""
    return seed_fraction * max(threshold, rel_threshold * fmax)


# climb_status: whether a climb goes on, or why it stopped
CLIMBING = 0
STOPPED_CONVERGED = 1
STOPPED_CAPPED = 2


@register_jitable
def climb_status(lam, lam_prev, step, iterations, max_iter, step_tol, tol_lambda):
    """Whether a climb stops after a step (:func:`sshopm_step`) that was its
    ``iterations``-th, to a point where f = lam (lam_prev one step before):
    STOPPED_CONVERGED when the step is below step_tol radians and |Δλ| ≤ tol_lambda·|λ|
    (a step rule is needed because λ is stationary at a maximum), STOPPED_CAPPED after
    max_iter iterations (both end at the new iterate), else CLIMBING."""
    if step <= step_tol and abs(lam - lam_prev) <= tol_lambda * abs(lam):
        return STOPPED_CONVERGED
    if iterations >= max_iter:
        return STOPPED_CAPPED
    return CLIMBING


@register_jitable
def climb_flags(capped, negdef, lam):
    """CLIMB_* flags of a finished climb: a peak when it ended, not capped, at a strict
    local maximum (negative definite tangent Hessian) of positive value."""
    flags = 0
    if capped:
        flags += CLIMB_CAPPED
    elif negdef and lam > 0:
        flags += CLIMB_PEAK
    return flags


@register_jitable
def _ranks_above(lam_j, j, lam_i, i):
    """Candidate j, of λ ``lam_j``, ranks above candidate i, of λ ``lam_i``: larger λ, ties
    broken by the lower index."""
    return lam_j > lam_i or (lam_j == lam_i and j < i)


@register_jitable
def select_peaks(count, cx, cy, cz, lam, valid, walked, cos_merge, npeaks, threshold, rel_threshold, dirs, amps):
    """A voxel's reported peaks from its ``count`` climbs; writes ``dirs[r, 0:3]`` and
    ``amps[r]`` for r = 0, 1, ... and returns how many.

    The valid climbs are walked from the best down (:func:`_ranks_above`'s order): one that
    lies within the merge angle (|x_i·x_j| ≥ cos_merge, antipodes included) of a climb walked
    before it is a duplicate of a better climb, any other is the next peak. The walk ends at ``npeaks`` peaks or at the first peak below
    ``threshold`` or ``rel_threshold`` × the first (all after it are lower), so its work
    grows with the climbs it walks, not with count², and noisy voxels with many climbs cost
    little more than clean ones. ``walked`` is scratch (≥ count).
    """
    found = 0
    steps = 0
    last = -1
    lam_last = lam[0] if count > 0 else threshold  # λ's type; read only once last ≥ 0
    best = threshold
    while found < npeaks:
        # the best valid climb below the last one walked; λ of the last and of the pick kept
        # at hand (a GPU thread otherwise reloads both for every i)
        pick = -1
        lam_pick = lam_last
        for i in range(count):
            if valid[i] != 0:
                li = lam[i]
                if ((last < 0 or _ranks_above(lam_last, last, li, i))
                        and (pick < 0 or _ranks_above(li, i, lam_pick, pick))):
                    pick = i
                    lam_pick = li
        if pick < 0:
            break
        duplicate = False
        for k in range(steps):
            j = walked[k]
            if abs(cx[pick] * cx[j] + cy[pick] * cy[j] + cz[pick] * cz[j]) >= cos_merge:
                duplicate = True
                break
        walked[steps] = pick
        steps += 1
        last = pick
        lam_last = lam_pick
        if duplicate:
            continue
        if found == 0:
            best = lam[pick]
        if lam[pick] < threshold or lam[pick] < rel_threshold * best:
            break
        dirs[found, 0] = cx[pick]
        dirs[found, 1] = cy[pick]
        dirs[found, 2] = cz[pick]
        amps[found] = lam[pick]
        found += 1
    return found
