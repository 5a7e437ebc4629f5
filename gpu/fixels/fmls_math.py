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
are discarded, and the nearest-direction search of the Newton check is exhaustive.
"""

from __future__ import annotations

import math

from numba.extending import register_jitable

__all__ = ["sample_amplitude", "positive_order_rank", "sweep_blocked", "segment_voxel", "sh_peak", "nearest_direction",
           "LOBE_OVERFLOW", "ANGLE_TOLERANCE", "MAX_DIR_CHANGE", "NEWTON_ITERATIONS"]

# MRtrix3's Math::SH::get_peak: stop once a step is below 1e-4 rad, steps capped at 0.2 rad,
# at most 50 iterations.
ANGLE_TOLERANCE = 1e-4
MAX_DIR_CHANGE = 0.2
NEWTON_ITERATIONS = 50
# segment_voxel's answer when the lobes outgrow the caller's scratch.
LOBE_OVERFLOW = -1


@register_jitable
def sample_amplitude(sh_to_amp, sh, d):
    """FOD amplitude at sampling direction d: row d of the SH → amplitude matrix times ``sh``,
    summed in coefficient order on every backend."""
    total = 0.0
    for c in range(sh.shape[0]):
        total += sh_to_amp[d, c] * sh[c]
    return total


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
def positive_order_rank(amp, n, i):
    """Rank of sample i among the positive samples, largest first, equal amplitudes by index:
    the order of MRtrix3's multimap of samples (a stable sort), one sample at a time so that
    threads can rank in parallel."""
    a = amp[i]
    rank = 0
    for j in range(n):
        b = amp[j]
        if b > a or (b == a and j < i):
            rank += 1
    return rank


@register_jitable
def nearest_direction(unit, x, y, z):
    """Index of the sampling direction with the largest |cos| to (x, y, z), the first on ties."""
    best = 0
    best_dot = abs(unit[0, 0] * x + unit[0, 1] * y + unit[0, 2] * z)
    for d in range(1, unit.shape[0]):
        dot = abs(unit[d, 0] * x + unit[d, 1] * y + unit[d, 2] * z)
        if dot > best_dot:
            best_dot = dot
            best = d
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
    for k in range(legendre.shape[1]):
        value = (1.0 - frac) * legendre[row, k]
        if frac != 0.0:
            value += frac * legendre[row + 1, k]
        al[k] = value


@register_jitable
def _sh_derivatives(sh, lmax, elevation, azimuth, legendre, step, al):
    """Amplitude of SH series ``sh`` at (elevation, azimuth) and its first and second
    derivatives in both angles (MRtrix3's ``Math::SH::derivatives``): the associated
    Legendre derivative identities dP̄_l^m/dθ = (√((l+m)(l−m+1)) P̄_l^{m−1} −
    √((l−m)(l+m+1)) P̄_l^{m+1}) / 2 applied once and twice. Returns (amp, d_el, d_az,
    d2_el2, d2_el_az, d2_az2)."""
    sel = math.sin(elevation)
    at_pole = sel < 1e-4
    _legendre_at(legendre, step, elevation, al)
    amplitude = sh[0] * al[0]
    d_el = 0.0
    d_az = 0.0
    d2_el2 = 0.0
    d2_el_az = 0.0
    d2_az2 = 0.0
    for l in range(2, lmax + 1, 2):
        v = sh[l * (l + 1) // 2]
        base = l * l // 4
        amplitude += v * al[base]
        d_el += v * math.sqrt(float(l * (l + 1))) * al[base + 1]
        d2_el2 += v * (math.sqrt(float(l * (l + 1) * (l - 1) * (l + 2))) * al[base + 2] - l * (l + 1) * al[base]) / 2.0
    for m in range(1, lmax + 1):
        caz = math.sqrt(2.0) * math.cos(m * azimuth)
        saz = math.sqrt(2.0) * math.sin(m * azimuth)
        for l in range(m + (m & 1), lmax + 1, 2):
            centre = l * (l + 1) // 2
            vp = sh[centre + m]
            vm = sh[centre - m]
            base = l * l // 4
            even = vp * caz + vm * saz
            odd = vm * caz - vp * saz
            amplitude += even * al[base + m]
            first = math.sqrt(float((l + m) * (l - m + 1))) * al[base + m - 1]
            if l > m:
                first -= math.sqrt(float((l - m) * (l + m + 1))) * al[base + m + 1]
            first /= -2.0
            d_el += even * first
            second = -float((l + m) * (l - m + 1) + (l - m) * (l + m + 1)) * al[base + m]
            outer = math.sqrt(float((l + m) * (l - m + 1) * (l + m - 1) * (l - m + 2)))
            if m == 1:
                second -= outer * al[base + 1]
            else:
                second += outer * al[base + m - 2]
            if l > m + 1:
                second += math.sqrt(float((l - m) * (l + m + 1) * (l - m - 1) * (l + m + 2))) * al[base + m + 2]
            second /= 4.0
            d2_el2 += even * second
            if at_pole:
                d_az += odd * first
            else:
                d2_el_az += m * odd * first
                d_az += m * odd * al[base + m]
                d2_az2 -= even * m * m * al[base + m]
    if not at_pole:
        d_az /= sel
        d2_el_az /= sel
        d2_az2 /= sel * sel
    return amplitude, d_el, d_az, d2_el2, d2_el_az, d2_az2


@register_jitable
def sh_peak(sh, lmax, x, y, z, legendre, step, al):
    """Local maximum of the SH series ``sh`` from unit (x, y, z): Newton steps along the
    gradient in spherical coordinates (MRtrix3's ``Math::SH::get_peak``), each
    |f'/f''| capped at MAX_DIR_CHANGE, until a step is under ANGLE_TOLERANCE. Returns
    (amplitude, x, y, z), amplitude taken before the last step; all NaN when it does not
    converge in NEWTON_ITERATIONS."""
    for _ in range(NEWTON_ITERATIONS):
        az = math.atan2(y, x)
        el = math.atan2(math.hypot(x, y), z)
        amplitude, d_el, d_az, d2_el2, d2_el_az, d2_az2 = _sh_derivatives(sh, lmax, el, az, legendre, step, al)
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
        dt = min(dt, MAX_DIR_CHANGE)
        u_el *= dt
        u_az *= dt
        x += u_el * math.cos(az) * math.cos(el) - u_az * math.sin(az)
        y += u_el * math.sin(az) * math.cos(el) + u_az * math.cos(az)
        z -= u_el * math.sin(el)
        norm = math.sqrt(x * x + y * y + z * z)
        x /= norm
        y /= norm
        z /= norm
        if dt < ANGLE_TOLERANCE:
            return amplitude, x, y, z
    return math.nan, math.nan, math.nan, math.nan


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
def _merge_lobes(keep, gone, n_dirs, label, peak_value, mean, integral, head, tail, next_peak,
                 n_retro, retro_lobe):
    """Lobe ``gone`` joins lobe ``keep`` (MRtrix3's ``FOD_lobe::merge``): samples, the peak list
    (the higher-peaked lobe's peaks first), the mean (weighted by ``gone``'s integral, flipped
    to ``keep``'s side), the integral, and the pending assignments."""
    for d in range(n_dirs):
        if label[d] == gone:
            label[d] = keep
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
    for r in range(n_retro):
        if retro_lobe[r] == gone:
            retro_lobe[r] = keep


@register_jitable
def segment_voxel(sh, lmax, amp, order, n_positive, unit, neighbours, weights, legendre, step,
                  integral_threshold, peak_threshold, merge_ratio, maxnum, dir_from_peak,
                  label, retro_dir, retro_lobe, adjacent, al,
                  peak_value, mean, integral, head, tail, peak_dir, next_peak,
                  out_dir, out_afd, out_peak):
    """FMLS lobes of one voxel, thresholded, their peaks refined, written as fixels.

    Parameters
    ----------
    sh : (n_coeffs,) float64 SH coefficients; lmax their degree.
    amp : (D,) amplitudes at the sampling directions ``unit`` (D, 3).
    order : (≥ n_positive,) the positive samples' indices, largest amplitude first, equal
        amplitudes by index (:func:`positive_order_rank`).
    neighbours : (D, K) int neighbour lists padded with −1; weights : (D,) integration weights.
    legendre, step : sampled Legendre functions (:class:`gpu.fixels.fmls_tables.FmlsTables`).
    integral_threshold, peak_threshold : lobes with a smaller integral, or a smaller peak
        after refinement, are dropped; merge_ratio : see the module docstring.
    maxnum : at most this many fixels (0: all); dir_from_peak : the fixel direction is the
        largest peak's, not the lobe's amplitude-weighted mean direction.
    label, retro_dir, retro_lobe : (D,) int scratch; adjacent : (K,) int scratch;
    al : ((lmax/2+1)²,) float scratch; peak_value, integral, head, tail, next_peak : (L,)
    and mean, peak_dir : (L, 3) lobe scratch, L the most lobes the caller allows.
    out_dir : (F, 3), out_afd, out_peak : (F,) receive the first min(count, F) fixels in
        lobe order (the order in which the lobes were seeded: by their largest sample).

    Returns
    -------
    count : int
        The number of fixels of the voxel (may exceed F: only F were written), or
        LOBE_OVERFLOW when more than L lobes were seeded.
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
            for c in range(3):
                peak_dir[lobe, c] = unit[d, c]
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
                             next_peak, n_retro, retro_lobe)
            _add_sample(adjacent[0], d, value, weights[d], unit, label, mean, integral)
        else:
            retro_dir[n_retro] = d
            retro_lobe[n_retro] = adjacent[0]
            n_retro += 1
    for r in range(n_retro):
        d = retro_dir[r]
        _add_sample(retro_lobe[r], d, amp[d], weights[d], unit, label, mean, integral)

    count = 0
    for lobe in range(n_lobes):
        if head[lobe] < 0 or integral[lobe] < integral_threshold:
            continue
        index = 0
        p = head[lobe]
        while p >= 0:
            value, x, y, z = sh_peak(sh, lmax, peak_dir[p, 0], peak_dir[p, 1], peak_dir[p, 2], legendre, step, al)
            if math.isfinite(value) and math.isfinite(x) and math.isfinite(y) and math.isfinite(z):
                # keep the refined peak only if it is still nearest its own starting peak and
                # still inside the lobe
                best_dot = 0.0
                nearest = -1
                q = head[lobe]
                j = 0
                while q >= 0:
                    dot = abs(x * peak_dir[q, 0] + y * peak_dir[q, 1] + z * peak_dir[q, 2])
                    if dot > best_dot:
                        best_dot = dot
                        nearest = j
                    q = next_peak[q]
                    j += 1
                if nearest == index and label[nearest_direction(unit, x, y, z)] == lobe:
                    peak_dir[p, 0] = x
                    peak_dir[p, 1] = y
                    peak_dir[p, 2] = z
                    if index == 0:
                        peak_value[lobe] = value
            p = next_peak[p]
            index += 1
        if peak_value[lobe] < peak_threshold:
            continue
        if maxnum > 0 and count == maxnum:
            break
        if count < out_afd.shape[0]:
            first = head[lobe]
            norm = math.sqrt(mean[lobe, 0] ** 2 + mean[lobe, 1] ** 2 + mean[lobe, 2] ** 2)
            for c in range(3):
                out_dir[count, c] = peak_dir[first, c] if dir_from_peak else mean[lobe, c] / norm
            out_afd[count] = integral[lobe]
            out_peak[count] = peak_value[lobe]
        count += 1
    return count
