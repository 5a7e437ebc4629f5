"""The per-voxel math of FMLS segmentation, written once for the CPU and the CUDA backend.

Every function here is ``register_jitable``: plain Python that numba compiles into whichever
target calls it (an ``@njit`` loop or a ``numba.cuda`` kernel). They allocate nothing; the
caller hands in the scratch arrays. Precision is float64 throughout, as in MRtrix3.

FMLS (fast marching level sets; Smith et al. 2013, NeuroImage 67:298, Appendix 2) visits the
FOD's samples on a direction set from the largest amplitude down. A sample joins the one
lobe it touches (a neighbour already in it), seeds a new lobe if it touches none, and if it
touches several either merges them (when amplitude / the smaller lobe's peak exceeds the
lobe merge ratio) or is assigned after the sweep to the earliest of them. Lobes are numbered
as they are seeded; a merge keeps the lowest number. The result follows MRtrix3's
``FMLS::Segmenter`` (``src/dwi/fmls.cpp``) step for step, with two simplifications that change
no output: samples ≤ 0 are never visited, since negative lobes never touch positive ones and
are discarded, and the nearest-direction search of the Newton check walks the adjacency
uphill from the lobe's seed instead of scanning every direction (the same direction: on the
convex hull's triangulation a direction nearer than all its neighbours is the nearest of all,
its Voronoi cell being bounded by its neighbours alone).

A voxel runs in three steps, so that the CUDA backend can run the middle one a lane per lobe:
:func:`grow_lobes` (the sweep, sequential), :func:`refine_lobe` (each lobe's Newton peak,
independent of the others) and :func:`write_fixels` (thresholds and output, in lobe order).
"""

from __future__ import annotations

import math

from numba import uint64
from numba.extending import register_jitable

__all__ = ["sample_amplitudes", "sweep_blocked", "grow_lobes", "refine_lobe", "refine_start", "refine_end",
           "write_fixels", "segment_voxel", "sh_peak", "sh_peak_steps", "nearest_direction_from", "LOBE_OVERFLOW",
           "ANGLE_TOLERANCE", "MAX_DIR_CHANGE", "NEWTON_ITERATIONS"]

# MRtrix3's Math::SH::get_peak: stop once a step is below 1e-4 rad, steps capped at 0.2 rad,
# at most 50 iterations.
ANGLE_TOLERANCE = 1e-4
MAX_DIR_CHANGE = 0.2
NEWTON_ITERATIONS = 50
# segment_voxel's answer when the lobes outgrow the caller's scratch.
LOBE_OVERFLOW = -1
# The Newton step's indices are uint64, never mixed with int64 (numba types the two together
# as float64): numba makes a signed index a wraparound test and a signed // a floor division
# with sign fix-ups, integer work the CUDA Newton kernel would do at every step. Converted to
# float64 in the derivatives, they give the same values as signed ones.
_0 = uint64(0)
_1 = uint64(1)
_2 = uint64(2)
_4 = uint64(4)


@register_jitable
def sample_amplitudes(amp_from_sh, sh, amp):
    """FOD amplitudes ``amp`` (D,) at the sampling directions: the transposed SH → amplitude
    matrix ``amp_from_sh`` (n_coeffs, D) applied to ``sh``, each sum in coefficient order (the
    CUDA kernel sums in the same order), a coefficient at a time over all directions."""
    for d in range(amp.shape[0]):
        amp[d] = 0.0
    for c in range(sh.shape[0]):
        value = sh[c]
        for d in range(amp.shape[0]):
            amp[d] += amp_from_sh[c, d] * value


@register_jitable
def sweep_blocked(amp, n):
    """True when the sweep would start at a sample ≤ 0: the largest |amplitude| (earliest index
    among equals) is not positive, and then MRtrix3 finds no lobe at all."""
    best = 0.0
    positive = False
    for i in range(n):
        a = abs(amp[i])
        if a > best:
            best = a
            positive = amp[i] > 0.0
    return not positive


@register_jitable
def nearest_direction_from(unit, neighbours, start, x, y, z):
    """Index of the sampling direction with the largest |cos| to (x, y, z), found by walking
    from direction ``start`` to the neighbour with the largest |cos| until none is larger (on
    equal |cos| the lower index wins, as a scan in index order would pick it)."""
    best = start
    best_dot = abs(unit[start, 0] * x + unit[start, 1] * y + unit[start, 2] * z)
    while True:
        here = best
        for j in range(neighbours.shape[1]):
            nb = neighbours[here, j]
            if nb < 0:
                continue
            dot = abs(unit[nb, 0] * x + unit[nb, 1] * y + unit[nb, 2] * z)
            if dot > best_dot or (dot == best_dot and nb < best):
                best_dot = dot
                best = nb
        if best == here:
            return best


@register_jitable
def _legendre_at(legendre, step, elevation, al):
    """P̄_l^m(cos elevation) into ``al``, linearly interpolated between the rows of ``legendre``
    sampled every ``step`` rad (MRtrix3's ``PrecomputedAL``)."""
    rows = legendre.shape[0]
    position = elevation / step
    row = int(position)
    frac = position - row
    if position < 0.0:
        row = 0
        frac = 0.0
    elif row >= rows - 1:
        row = rows - 1
        frac = 0.0
    r = uint64(row)
    n = uint64(legendre.shape[1])
    k = _0
    while k < n:
        value = (1.0 - frac) * legendre[r, k]
        if frac != 0.0:
            value += frac * legendre[r + _1, k]
        al[k] = value
        k += _1


@register_jitable
def _sh_derivatives(sh, lmax, elevation, sel, caz1, saz1, legendre, step, factors, al):
    """Amplitude of SH series ``sh`` at (elevation, azimuth) and its first and second
    derivatives in both angles (MRtrix3's ``Math::SH::derivatives``), given sin(elevation)
    ``sel``, cos(azimuth) ``caz1`` and sin(azimuth) ``saz1`` (the caller's Newton step reuses
    them): the associated Legendre derivative identities dP̄_l^m/dθ = (√((l+m)(l−m+1))
    P̄_l^{m−1} − √((l−m)(l+m+1)) P̄_l^{m+1}) / 2 applied once and twice, their square roots
    read from ``factors`` (:attr:`gpu.fixels.fmls_tables.FmlsTables.derivative_factors`).
    Returns (amp, d_el, d_az, d2_el2, d2_el_az, d2_az2)."""
    at_pole = sel < 1e-4
    _legendre_at(legendre, step, elevation, al)
    amplitude = sh[0] * al[0]
    d_el = 0.0
    d_az = 0.0
    d2_el2 = 0.0
    d2_el_az = 0.0
    d2_az2 = 0.0
    top = uint64(lmax)
    l = _2
    while l <= top:
        v = sh[l * (l + _1) // _2]
        base = l * l // _4
        amplitude += v * al[base]
        d_el += v * factors[base, 1] * al[base + _1]
        d2_el2 += v * (factors[base, 3] * al[base + _2] - l * (l + _1) * al[base]) / 2.0
        l += _2
    # cos(m·azimuth) and sin(m·azimuth) by angle addition from m = 1, where MRtrix3 calls
    # cos and sin for each m: a few ulp apart, the same fixels, and float64 sines and cosines
    # are costly on the device (docs/decisions/fixels-fmls-phases.md)
    cm = caz1
    sm = saz1
    m = _1
    while m <= top:
        caz = math.sqrt(2.0) * cm
        saz = math.sqrt(2.0) * sm
        cm, sm = cm * caz1 - sm * saz1, sm * caz1 + cm * saz1
        l = m + (m & _1)
        while l <= top:
            centre = l * (l + _1) // _2
            vp = sh[centre + m]
            vm = sh[centre - m]
            base = l * l // _4
            f = base + m
            even = vp * caz + vm * saz
            odd = vm * caz - vp * saz
            amplitude += even * al[f]
            first = factors[f, 0] * al[f - _1]
            if l > m:
                first -= factors[f, 1] * al[f + _1]
            first /= -2.0
            d_el += even * first
            second = factors[f, 4] * al[f]
            if m == _1:
                second -= factors[f, 2] * al[base + _1]
            else:
                second += factors[f, 2] * al[f - _2]
            if l > m + _1:
                second += factors[f, 3] * al[f + _2]
            second /= 4.0
            d2_el2 += even * second
            if at_pole:
                d_az += odd * first
            else:
                d2_el_az += m * odd * first
                d_az += m * odd * al[f]
                d2_az2 -= even * m * m * al[f]
            l += _2
        m += _1
    if not at_pole:
        d_az /= sel
        d2_el_az /= sel
        d2_az2 /= sel * sel
    return amplitude, d_el, d_az, d2_el2, d2_el_az, d2_az2


@register_jitable
def sh_peak_steps(sh, lmax, x, y, z, steps, legendre, step, factors, al):
    """Up to ``steps`` of :func:`sh_peak`'s iterations from unit (x, y, z): (1, amplitude, x,
    y, z) once a step is under ANGLE_TOLERANCE, else (0, nan, x, y, z) where they leave off,
    so that more steps from (x, y, z) continue exactly as if never stopped (the iteration's
    state is the direction alone)."""
    for _ in range(steps):
        # MRtrix3 takes azimuth and elevation by atan2 and then their sines and cosines; these
        # are the same to an ulp or two from the direction itself, and only the elevation
        # itself is needed (for the Legendre table)
        rho = math.hypot(x, y)
        el = math.atan2(rho, z)
        caz = 1.0
        saz = 0.0
        if rho > 0.0:
            caz = x / rho
            saz = y / rho
        radius = math.hypot(rho, z)
        cel = z / radius
        sel = rho / radius
        amplitude, d_el, d_az, d2_el2, d2_el_az, d2_az2 = _sh_derivatives(sh, lmax, el, sel, caz, saz, legendre, step,
                                                                          factors, al)
        u_el = math.sqrt(d_el * d_el + d_az * d_az)
        u_az = 0.0
        if u_el != 0.0:
            u_az = d_az / u_el
            u_el = d_el / u_el
        slope = u_az * d_az + u_el * d_el
        curvature = u_az * u_az * d2_az2 + 2.0 * u_az * u_el * d2_el_az + u_el * u_el * d2_el2
        dt = MAX_DIR_CHANGE
        if curvature != 0.0:
            dt = abs(-slope / curvature)
        if dt > MAX_DIR_CHANGE:
            dt = MAX_DIR_CHANGE
        u_el *= dt
        u_az *= dt
        x += u_el * caz * cel - u_az * saz
        y += u_el * saz * cel + u_az * caz
        z -= u_el * sel
        norm = math.sqrt(x * x + y * y + z * z)
        x /= norm
        y /= norm
        z /= norm
        if dt < ANGLE_TOLERANCE:
            return 1, amplitude, x, y, z
    return 0, math.nan, x, y, z


@register_jitable
def sh_peak(sh, lmax, x, y, z, legendre, step, factors, al):
    """Local maximum of the SH series ``sh`` from unit (x, y, z): Newton steps along the
    gradient in spherical coordinates (MRtrix3's ``Math::SH::get_peak``; ``factors`` as
    :func:`_sh_derivatives`), each
    |f'/f''| capped at MAX_DIR_CHANGE, until a step is under ANGLE_TOLERANCE. Returns
    (amplitude, x, y, z), amplitude taken before the last step; all NaN when it does not
    converge in NEWTON_ITERATIONS."""
    done, amplitude, x, y, z = sh_peak_steps(sh, lmax, x, y, z, NEWTON_ITERATIONS, legendre, step, factors, al)
    if done == 0:
        return math.nan, math.nan, math.nan, math.nan
    return amplitude, x, y, z


@register_jitable
def _add_sample(lobe, d, value, weight, unit, label, mean, integral):
    """Sample d joins ``lobe``: its weighted unit vector is added to the mean, flipped to the
    mean's side, and its weighted amplitude to the integral (MRtrix3's ``FOD_lobe::add``)."""
    label[d] = lobe
    side = 1.0 if (mean[lobe, 0] * unit[d, 0] + mean[lobe, 1] * unit[d, 1] + mean[lobe, 2] * unit[d, 2]) > 0.0 else -1.0
    for k in range(3):
        mean[lobe, k] += unit[d, k] * side * abs(value) * weight
    integral[lobe] += abs(value * weight)


@register_jitable
def _merge_lobes(keep, gone, n_dirs, label, peak_value, mean, integral, head, tail, next_peak):
    """Lobe ``gone`` joins lobe ``keep`` (MRtrix3's ``FOD_lobe::merge``): samples, the peak list
    (the higher-peaked lobe's peaks first), the mean (weighted by ``gone``'s integral, flipped
    to ``keep``'s side), the integral, and the pending assignments (labels −2 − lobe)."""
    for d in range(n_dirs):
        if label[d] == gone:
            label[d] = keep
        elif label[d] == -2 - gone:
            label[d] = -2 - keep
    if peak_value[gone] > peak_value[keep]:
        peak_value[keep] = peak_value[gone]
        next_peak[tail[gone]] = head[keep]
        head[keep] = head[gone]
    else:
        next_peak[tail[keep]] = head[gone]
        tail[keep] = tail[gone]
    side = 1.0 if (mean[keep, 0] * mean[gone, 0] + mean[keep, 1] * mean[gone, 1] + mean[keep, 2] * mean[gone, 2]) > 0.0 else -1.0
    for k in range(3):
        mean[keep, k] += mean[gone, k] * integral[gone] * side
    integral[keep] += integral[gone]
    head[gone] = -1


@register_jitable
def grow_lobes(amp, order, n_positive, unit, neighbours, weights, merge_ratio, label, adjacent,
               peak_value, mean, integral, head, tail, seed, next_peak):
    """FMLS lobes of one voxel's samples: the sweep from the largest amplitude down.

    Parameters
    ----------
    amp : (D,) amplitudes at the sampling directions ``unit`` (D, 3).
    order : (≥ n_positive,) int, the positive samples' indices, largest amplitude first, equal
        amplitudes by index; overwritten (its first entries hold the pending assignments).
    neighbours : (D, K) int neighbour lists padded with −1; weights : (D,) integration weights.
    merge_ratio : see the module docstring.
    label : (D,) int, receives each sample's lobe (−1: none); adjacent : (K,) int scratch.
    peak_value, integral, head, tail, seed, next_peak : (L,) and mean : (L, 3) receive the
        lobes, L the most the caller allows: the largest sample, the integral and the
        amplitude-weighted mean direction of lobe i; its peaks as a list from ``head[i]``
        through ``next_peak`` to ``tail[i]`` (head −1: merged into another), each peak p
        being the largest sample ``seed[p]`` of the lobe seeded p-th.

    Returns
    -------
    n_lobes : int
        Lobes seeded, or LOBE_OVERFLOW when more than L.
    """
    n_dirs = amp.shape[0]
    n_lobes_max = peak_value.shape[0]
    for d in range(n_dirs):
        label[d] = -1
    n_lobes = 0
    n_retro = 0
    for k in range(n_positive):
        d = order[k]
        value = amp[d]
        # distinct lobes touching d, ascending
        n_adj = 0
        for j in range(neighbours.shape[1]):
            nb = neighbours[d, j]
            if nb < 0 or label[nb] < 0:
                continue
            lobe = label[nb]
            seen = False
            for a in range(n_adj):
                seen = seen or adjacent[a] == lobe
            if not seen:
                pos = n_adj
                while pos > 0 and adjacent[pos - 1] > lobe:
                    adjacent[pos] = adjacent[pos - 1]
                    pos -= 1
                adjacent[pos] = lobe
                n_adj += 1
        if n_adj == 0:
            if n_lobes == n_lobes_max:
                return LOBE_OVERFLOW
            lobe = n_lobes
            n_lobes += 1
            label[d] = lobe
            peak_value[lobe] = value
            seed[lobe] = d
            for c in range(3):
                mean[lobe, c] = unit[d, c] * value * weights[d]
            integral[lobe] = abs(value * weights[d])
            head[lobe] = lobe
            tail[lobe] = lobe
            next_peak[lobe] = -1
        elif n_adj == 1:
            _add_sample(adjacent[0], d, value, weights[d], unit, label, mean, integral)
        elif value / peak_value[adjacent[n_adj - 1]] > merge_ratio:
            for a in range(1, n_adj):
                _merge_lobes(adjacent[0], adjacent[a], n_dirs, label, peak_value, mean, integral, head, tail,
                             next_peak)
            _add_sample(adjacent[0], d, value, weights[d], unit, label, mean, integral)
        else:
            # pending: unlabelled for the sweep (−2 − lobe), assigned after it in sweep order;
            # order[:k] is read already, so it holds the queue
            label[d] = -2 - adjacent[0]
            order[n_retro] = d
            n_retro += 1
    for r in range(n_retro):
        d = order[r]
        _add_sample(-2 - label[d], d, amp[d], weights[d], unit, label, mean, integral)
    return n_lobes


@register_jitable
def refine_start(lobe, integral_threshold, unit, integral, head, seed, peak_dir):
    """The first of :func:`refine_lobe`'s steps: the seed direction d0 of ``lobe``'s first peak,
    which ``peak_dir[lobe]`` takes, or −1 where the lobe is not refined."""
    p = head[lobe]
    if p < 0 or integral[lobe] < integral_threshold:
        return -1
    d0 = seed[p]
    for c in range(3):
        peak_dir[lobe, c] = unit[d0, c]
    return d0


@register_jitable
def refine_end(lobe, d0, value, x, y, z, unit, neighbours, label, peak_value, head, seed, next_peak, peak_dir):
    """The last of :func:`refine_lobe`'s steps: the peak (value, x, y, z) that
    :func:`sh_peak` reached from seed direction d0 is kept if it is still nearest its own
    starting peak and its nearest sampling direction is in the lobe."""
    if not (math.isfinite(value) and math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return
    # the first of the lobe's (unrefined) peaks must stay the nearest
    best_dot = abs(x * unit[d0, 0] + y * unit[d0, 1] + z * unit[d0, 2])
    q = next_peak[head[lobe]]
    while q >= 0:
        d = seed[q]
        if abs(x * unit[d, 0] + y * unit[d, 1] + z * unit[d, 2]) > best_dot:
            return
        q = next_peak[q]
    if best_dot > 0.0 and label[nearest_direction_from(unit, neighbours, d0, x, y, z)] == lobe:
        peak_dir[lobe, 0] = x
        peak_dir[lobe, 1] = y
        peak_dir[lobe, 2] = z
        peak_value[lobe] = value


@register_jitable
def refine_lobe(lobe, sh, lmax, unit, neighbours, legendre, step, factors, integral_threshold, label, al,
                peak_value, integral, head, seed, next_peak, peak_dir):
    """Newton refinement of the first peak of a lobe of :func:`grow_lobes` (skipped for a
    merged-away lobe or one under ``integral_threshold``, which :func:`write_fixels` drops).

    The refined peak is kept only if it is still nearest its own starting peak among the
    lobe's peaks and its nearest sampling direction is in the lobe; then ``peak_dir[lobe]``
    (3,) takes its direction and ``peak_value[lobe]`` its amplitude, otherwise they stay the
    sampled ones. Later peaks of a merged lobe are not refined: their refined directions would
    only take part in the nearest-peak test of peaks after them, and no output reads those.
    ``legendre``, ``step``, ``factors``: the Newton step's tables; ``al`` scratch as in
    :func:`sh_peak`; the other arrays as :func:`grow_lobes` left them.
    """
    d0 = refine_start(lobe, integral_threshold, unit, integral, head, seed, peak_dir)
    if d0 < 0:
        return
    value, x, y, z = sh_peak(sh, lmax, unit[d0, 0], unit[d0, 1], unit[d0, 2], legendre, step, factors, al)
    refine_end(lobe, d0, value, x, y, z, unit, neighbours, label, peak_value, head, seed, next_peak, peak_dir)


@register_jitable
def write_fixels(n_lobes, integral_threshold, peak_threshold, maxnum, dir_from_peak, peak_value, mean, integral,
                 head, peak_dir, out_dir, out_afd, out_peak):
    """The fixels of lobes 0…n_lobes−1 refined by :func:`refine_lobe`, in lobe order (the order
    in which they were seeded: by their largest sample): lobes under either threshold are
    dropped, at most ``maxnum`` kept (0: all); direction the mean, or with ``dir_from_peak``
    the refined first peak. ``out_dir`` (F, 3), ``out_afd``, ``out_peak`` (F,) receive the
    first min(count, F); returns count."""
    count = 0
    for lobe in range(n_lobes):
        if head[lobe] < 0 or integral[lobe] < integral_threshold or peak_value[lobe] < peak_threshold:
            continue
        if maxnum > 0 and count == maxnum:
            break
        if count < out_afd.shape[0]:
            norm = math.sqrt(mean[lobe, 0] ** 2 + mean[lobe, 1] ** 2 + mean[lobe, 2] ** 2)
            for c in range(3):
                out_dir[count, c] = peak_dir[lobe, c] if dir_from_peak else mean[lobe, c] / norm
            out_afd[count] = integral[lobe]
            out_peak[count] = peak_value[lobe]
        count += 1
    return count


@register_jitable
def segment_voxel(sh, lmax, amp, order, n_positive, unit, neighbours, weights, legendre, step, factors,
                  integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak, label, adjacent, al,
                  peak_value, mean, integral, head, tail, seed, next_peak, peak_dir, out_dir, out_afd, out_peak):
    """FMLS fixels of one voxel: :func:`grow_lobes`, :func:`refine_lobe` for each lobe,
    :func:`write_fixels` (arguments as theirs; ``sh`` (n_coeffs,) of degree ``lmax``).
    Returns the voxel's fixel count, or LOBE_OVERFLOW."""
    n_lobes = grow_lobes(amp, order, n_positive, unit, neighbours, weights, merge_ratio, label, adjacent,
                         peak_value, mean, integral, head, tail, seed, next_peak)
    if n_lobes < 0:
        return n_lobes
    for lobe in range(n_lobes):
        refine_lobe(lobe, sh, lmax, unit, neighbours, legendre, step, factors, integral_threshold, label, al,
                    peak_value, integral, head, seed, next_peak, peak_dir)
    return write_fixels(n_lobes, integral_threshold, peak_threshold, maxnum, dir_from_peak, peak_value, mean,
                        integral, head, peak_dir, out_dir, out_afd, out_peak)
