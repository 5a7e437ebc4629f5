"""Generate :mod:`gpu.peaks.sshopm_generated`, :mod:`gpu.peaks.sshopm_generated_cpu` and
:mod:`gpu.peaks.sshopm_generated_cuda`: fully unrolled SS-HOPM code for each tensor order.

For each even order m in 2…12 the generated modules hold

* ``axm_m{m}(a, x, y, z)``   → A x^m (a scalar),
* ``axm1_m{m}(a, x, y, z)``  → A x^(m−1) (3 components),
* ``axm2_m{m}(a, x, y, z)``  → A x^(m−2) (the 6 entries of a symmetric 3×3 matrix),

written out term by term over the unique entries a (lexicographic index classes) with the
multinomial multiplicities baked in as constants (Ballard, Kolda & Plantenga 2011, Eqs. 3–6,
Figs. 2–4, "loop unrolling", Sec. III-C); then the per-start iteration ``climb_m{m}``; in the
``_cpu`` module the CPU loop ``sshopm_cpu_m{m}`` (numba ``prange`` over voxels; within a voxel it evaluates A x^(m−1)
at every start and A x^(m−2) at every running climb in vectorized loops over points,
``axm1_points_m{m}`` and ``axm2_points_m{m}``, climbing the seeds in lockstep,
``climbs_cpu_m{m}``), and, in the ``_cuda`` module, the
CUDA kernels ``seed_cuda_m{m}`` (one block per voxel, one thread per start) and
``climb_cuda_m{m}`` (one thread per seed; see :mod:`gpu.peaks.backend_cuda`), which run the
same algorithm and differ only in how the work is spread over threads. Order-independent
math lives in :mod:`gpu.peaks.sshopm_math`. The kernels sit in a module of their own so that
the CPU backend never imports ``numba.cuda`` and the kernels' dispatchers.

The generated files are committed so they can be read and so numba can cache the compiled
kernels on disk; ``python -m gpu.peaks.sshopm_codegen`` rewrites them and a test checks they
are current. Each records hashes of the modules it inlines, so editing them changes it and
invalidates numba's cache, which watches only the file a function is defined in.
"""

from __future__ import annotations

import hashlib
import re
import textwrap
from pathlib import Path


from gpu.peaks.limits import MAX_STARTS
from gpu.peaks.sshopm_starts import N_NEIGHBORS
from gpu.peaks.symmetric_tensor import index_classes, monomial_exponents, multiplicities

__all__ = ["ORDERS", "generate_module", "generate_cpu_module", "generate_cuda_module", "generated_path",
           "generated_cpu_path", "generated_cuda_path", "write_module"]

ORDERS = (2, 4, 6, 8, 10, 12)
_AXES = "xyz"
_PAIRS = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def _monomial(exponents) -> list[str]:
    """Factors of x^a y^b z^c using the precomputed powers (``x3`` for x³)."""
    factors = []
    for axis, power in zip(_AXES, exponents):
        if power == 1:
            factors.append(axis)
        elif power > 1:
            factors.append(f"{axis}{power}")
    return factors


def _powers(degree: int) -> list[str]:
    """Lines computing x², …, x^degree (and y, z) by repeated multiplication."""
    lines = []
    for axis in _AXES:
        for p in range(2, degree + 1):
            previous = axis if p == 2 else f"{axis}{p - 1}"
            lines.append(f"    {axis}{p} = {previous} * {axis}")
    return lines


def _term(coefficient: int, entry: int, factors: list[str], entry_name: str = "a[{}]") -> str:
    parts = ([f"S{coefficient}"] if coefficient != 1 else []) + [entry_name.format(entry)] + factors
    return " * ".join(parts)


def _sum(terms: list[str], indent: str = "        ") -> str:
    return ("\n" + indent + "+ ").join(terms)


def _class_index(order: int) -> dict[tuple[int, ...], int]:
    return {tuple(c): k for k, c in enumerate(index_classes(order))}


def _contraction(order: int, free: tuple[int, ...]) -> list[tuple[int, int, tuple[int, ...]]]:
    """(multiplicity, entry, monomial exponents) of (A x^(m−p))_free, p = len(free).

    (A x^(m−p))_{j_1…j_p} = Σ_{J ∈ classes(m−p)} σ_{m−p}(J) a_{J ∪ {j_1…j_p}} x^J
    (Ballard et al., Def. 2).
    """
    lower = order - len(free)
    index = _class_index(order)
    terms = []
    for cls, exps, sigma in zip(index_classes(lower), monomial_exponents(lower), multiplicities(lower)):
        entry = index[tuple(sorted(tuple(cls) + free))]
        terms.append((int(sigma), entry, tuple(int(e) for e in exps)))
    return terms


def _axm(order: int) -> str:
    terms = [
        _term(int(s), k, _monomial(e))
        for k, (e, s) in enumerate(zip(monomial_exponents(order), multiplicities(order)))
    ]
    return "\n".join(
        [
            "@register_jitable",
            f"def axm_m{order}(a, x, y, z):",
            f'    """A x^{order} = Σ_k σ(k) a_k x^k over the {len(terms)} unique entries (Ballard et al., Eq. 3)."""',
            *_powers(order),
            f"    return (\n        {_sum(terms)}\n    )",
        ]
    )


def _contraction_lines(order: int, frees: tuple[tuple[int, ...], ...], outputs: list[str], indent: str,
                       entry_name: str = "a[{}]", scaled: bool = False) -> list[str]:
    """Lines computing the outputs (A x^(m−p))_free for each free index tuple from x, y, z and
    the unique entries (``entry_name`` of k): the powers, the monomials the outputs share, the sums.

    ``scaled``: the outputs share each monomial times its multiplicity, u_J = σ(J) x^J, and
    sum a_k u_J, one multiplication a term fewer than σ(J) a_k x^J (the 6 outputs of
    A x^(m−2) share each monomial). The CPU loops keep the unscaled form of their stored results."""
    lower = order - len(frees[0])
    monomials = [_monomial(e) for e in monomial_exponents(lower)]
    sigmas = [int(sigma) for sigma in multiplicities(lower)]
    lines = [indent + line.lstrip() for line in _powers(lower)]
    names = []
    for j, (factors, sigma) in enumerate(zip(monomials, sigmas)):
        if len(factors) > 1:
            lines.append(f"{indent}t{j} = {' * '.join(factors)}")
            factors = [f"t{j}"]
        if scaled and sigma != 1:
            lines.append(f"{indent}u{j} = S{sigma} * {factors[0]}")
            factors = [f"u{j}"]
        names.append(factors)
    for out, free in zip(outputs, frees):
        terms = [_term(1 if scaled else sigma, entry, names[j], entry_name)
                 for j, (sigma, entry, _) in enumerate(_contraction(order, free))]
        lines.append(f"{indent}{out} = (\n{indent}    {_sum(terms, indent + '    ')}\n{indent})")
    return lines


def _contracted(order: int, name: str, frees: tuple[tuple[int, ...], ...], what: str, outputs: list[str]) -> str:
    return "\n".join(
        [
            "@register_jitable",
            f"def {name}_m{order}(a, x, y, z):",
            f'    """{what} (Ballard et al., Def. 2 and Fig. {3 if len(frees[0]) == 1 else 4}), the monomials scaled by',
            f'    their multiplicities once for all outputs; returns {", ".join(outputs)}."""',
            *_contraction_lines(order, frees, outputs, "    ", scaled=True),
            f"    return {', '.join(outputs)}",
        ]
    )


def _contracted_points(order: int, name: str, frees: tuple[tuple[int, ...], ...], outputs: list[str]) -> str:
    """``{name}_points_m{order}``: ``{name}_m{order}`` at many points, for the CPU loop."""
    n_unique = len(index_classes(order))
    rows = [f"        out[{r}, j] = {out}" for r, out in enumerate(outputs)]
    terms = _contraction_lines(order, frees, outputs, "        ", entry_name="a{}")
    # Only the coordinates the terms use (A x^0 at order 2 uses none).
    coordinates = [f"        {axis} = points[{i}, j]" for i, axis in enumerate(_AXES)
                   if any(re.search(rf"\b{axis}\b", line) for line in terms)]
    return "\n".join(
        [
            "@register_jitable",
            f"def {name}_points_m{order}(a, points, k, out):",
            f'    """{name}_m{order} at the k points (points[0, j], points[1, j], points[2, j]) into out[:, j],',
            "    with each term's multiplicity applied to its entry (σ(J) a_k x^J). The unique entries are read",
            "    into locals once: stores to ``out`` could otherwise alias them, which keeps LLVM from",
            '    vectorizing the loop over the points."""',
            *[f"    a{e} = a[{e}]" for e in range(n_unique)],
            "    for j in range(k):",
            *coordinates,
            *terms,
            *rows,
        ]
    )


def _axm1(order: int) -> str:
    return _contracted(order, "axm1", ((0,), (1,), (2,)), f"A x^{order - 1}", ["gx", "gy", "gz"])


def _axm2(order: int) -> str:
    return _contracted(order, "axm2", _PAIRS, f"A x^{order - 2}", ["mxx", "mxy", "mxz", "myy", "myz", "mzz"])


def _climb(order: int) -> str:
    return f'''@register_jitable
def climb_m{order}(a, x, y, z, lam_start, max_step, tol_lambda, step_tol, max_iter):
    """SS-HOPM from the unit start (x, y, z), where A x^{order} = lam_start (gpu.peaks.sshopm_math.sshopm_step).

    Stops by gpu.peaks.sshopm_math.climb_status: converged, or after max_iter iterations.
    Returns (x, y, z, λ, iterations, hit_cap, negative_definite).
    """
    lam_prev = lam_start
    its = 0
    while True:
        mxx, mxy, mxz, myy, myz, mzz = axm2_m{order}(a, x, y, z)
        x, y, z, lam, step, negdef = sm.sshopm_step({order}, x, y, z, mxx, mxy, mxz, myy, myz, mzz, max_step)
        its += 1
        status = sm.climb_status(lam, lam_prev, step, its, max_iter, step_tol, tol_lambda)
        if status != sm.CLIMBING:
            return x, y, z, axm_m{order}(a, x, y, z), its, status == sm.STOPPED_CAPPED, negdef
        lam_prev = lam'''


def _cuda_seed_kernel(order: int, n_unique: int) -> str:
    return f'''@cuda.jit(**SEED_OPTIONS)
def seed_cuda_m{order}(tensors, starts, neighbors, hops, fparams, iparams, seed_slots, n_seeds):
    """Phase 1, one thread per start and SEED_VOXELS voxels a block, one after the other, the
    tensor's unique entries in shared memory (Ballard et al., Sec. III-D): A x^{order - 1} and
    A x^{order} at every start, then the voxel's seeds in start order (block maximum and seed
    slots: gpu.peaks.sshopm_block). The starts and their neighbour lists are read once a
    block, the lists into shared memory: the seed test reads a neighbour's index, then its
    value, then its step (``hops``, gpu.peaks.sshopm_starts.neighbor_steps), one load
    waiting on the other."""
    # uint64 indices: numba makes a signed index a wraparound test and a range loop a signed
    # count; unsigned, far less integer work (ncu, docs/benchmarks.md)
    t = uint64(cuda.threadIdx.x)
    count = uint64(cuda.blockDim.x)
    a = cuda.shared.array({n_unique}, float32)
    near = cuda.shared.array((MAX_STARTS, N_NEIGHBORS), uint32)
    f = cuda.shared.array(MAX_STARTS, float32)
    flag = cuda.shared.array(MAX_STARTS, int32)
    warp_max = cuda.shared.array(MAX_WARPS, float32)
    warp_seeds = cuda.shared.array(MAX_WARPS, uint32)
    x = starts[t, 0]
    y = starts[t, 1]
    z = starts[t, 2]
    for q in range(N_NEIGHBORS):
        # a start with fewer neighbours lists itself in the spare places, which never block it
        near[t, q] = t
        if q < neighbors.shape[1]:
            near[t, q] = neighbors[t, q]
    v = uint64(cuda.blockIdx.x) * uint64(SEED_VOXELS)
    last = min(v + uint64(SEED_VOXELS), uint64(tensors.shape[1]))
    # No barrier is needed between voxels: a thread writes the next voxel's entries only
    # after the previous voxel's last read of them (the barrier after A x^{order - 1}), and
    # everything else only after the next barrier, which waits for every thread to finish.
    while v < last:
        k = t
        while k < uint64({n_unique}):
            a[k] = tensors[k, v]
            k += count
        cuda.syncthreads()
        gx, gy, gz = axm1_m{order}(a, x, y, z)
        f[t] = gx * x + gy * y + gz * z
        cuda.syncthreads()
        floor = sm.seed_floor(block_max(f, t, count, warp_max), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
        mine = 1 if sm.is_seed(t, x, y, z, f, gx, gy, gz, near, hops, iparams[P_SEED_LOCAL] != 0, floor) else 0
        slot, total = seed_slot(mine, t, count, flag, warp_seeds)
        if mine != 0:
            seed_slots[v, slot] = t
        if t == 0:
            n_seeds[v] = total
        v += uint64(1)'''


def _cuda_climb_kernel(order: int) -> str:
    return f'''@cuda.jit(**CLIMB_OPTIONS)
def climb_cuda_m{order}(tensors, starts, seed_slots, first_climb, owners, n_climbs, fparams, iparams, climb_dirs, climb_lams, climb_its, climb_flags):
    """Phase 2, one thread per climb, the climbs of all voxels packed end to end so every
    warp lane climbs (a block per voxel would leave most of a warp's lanes idle here).
    Climb i is voxel v's seed i − first_climb[v], where v = owners[i]
    (gpu.peaks.kernels_cuda.climb_owners); its result goes to slot i. Iterations are
    counted afterwards (gpu.peaks.kernels_cuda.iteration_histogram)."""
    i = cuda.grid(1)
    if i >= n_climbs:
        return
    v = owners[i]
    s = seed_slots[v, i - first_climb[v]]
    a = tensors[:, v]
    x = starts[s, 0]
    y = starts[s, 1]
    z = starts[s, 2]
    x, y, z, lam, its, capped, negdef = climb_m{order}(
        a, x, y, z, axm_m{order}(a, x, y, z), fparams[P_MAX_STEP], fparams[P_TOL_LAMBDA], fparams[P_STEP_TOL],
        iparams[P_MAX_ITER],
    )
    if z < 0:
        x, y, z = -x, -y, -z
    climb_dirs[i, 0] = x
    climb_dirs[i, 1] = y
    climb_dirs[i, 2] = z
    climb_lams[i] = lam
    climb_its[i] = its
    climb_flags[i] = sm.climb_flags(capped, negdef, lam)'''


def _cpu_climbs(order: int) -> str:
    return f'''@register_jitable
def climbs_cpu_m{order}(a, points, f, seeds, n, max_step, tol_lambda, step_tol, max_iter, cx, cy, cz, cl, cflags, cits,
                  lanes, m, steps, slot):
    """SS-HOPM from each start s = seeds[t], t < n (unit points[:, s], where A x^{order} = f[s]),
    all at once: each round computes A x^{order - 2} (axm2_points_m{order}) and then the step of
    every running climb in vectorized loops (one climb at a time leaves the SIMD lanes idle),
    then ends the climbs that stop. A climb runs the same operations as climb_m{order}
    (sm.sshopm_step, stopping by sm.climb_status): (cx, cy, cz, cl)[t], CLIMB_* flags cflags[t]
    and iterations cits[t]. Scratch, columns ≥ n: ``lanes`` (4, ·) the running climbs' x, y, z
    and previous λ, ``m`` (6, ·) their M = A x^{order - 2}, ``steps`` (6, ·) their step's x',
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
        axm2_points_m{order}(a, lanes, k, m)
        for j in range(k):
            steps[0, j], steps[1, j], steps[2, j], steps[3, j], steps[4, j], negdef = sshopm_step_inline(
                {order}, lanes[0, j], lanes[1, j], lanes[2, j], m[0, j], m[1, j], m[2, j], m[3, j], m[4, j], m[5, j],
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
            lam = axm_m{order}(a, x, y, z)
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
            slot[j] = slot[k]'''


def _cpu_loop(order: int, n_unique: int) -> str:
    # nogil: the loop's ahead-of-time build runs on several host threads (gpu.ahead_of_time.map_on_threads)
    return f'''@njit(parallel=True, cache=True, nogil=True, error_model="numpy")
def sshopm_cpu_m{order}(coeffs, sh2t, starts, neighbors, hops, fparams, iparams, out_dirs, out_amps, out_count, out_stats, iter_hist):
    """The CUDA kernels' algorithm for order {order}, voxels spread over CPU threads."""
    n_chunks = iter_hist.shape[0]
    n_voxels = coeffs.shape[1]
    count = starts.shape[0]
    # x, y, z of the starts as contiguous rows, for the vectorized loops over points.
    points = np.ascontiguousarray(starts.T)
    for c in prange(n_chunks):
        a = np.empty({n_unique}, sh2t.dtype)
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
            for k in range({n_unique}):
                total = 0.0
                for j in range({n_unique}):
                    total += sh2t[k, j] * coeffs[j, v]
                a[k] = total
            axm1_points_m{order}(a, points, count, g)
            for t in range(count):
                f[t] = g[0, t] * points[0, t] + g[1, t] * points[1, t] + g[2, t] * points[2, t]
            floor = sm.seed_floor(f.max(), fparams[P_THRESHOLD], fparams[P_REL_THRESHOLD], fparams[P_SEED_FRACTION])
            n = 0
            for t in range(count):
                if sm.is_seed(t, starts[t, 0], starts[t, 1], starts[t, 2], f, g[0, t], g[1, t], g[2, t], neighbors, hops, iparams[P_SEED_LOCAL] != 0, floor):
                    seeds[n] = t
                    n += 1
            climbs_cpu_m{order}(
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
            )'''


_HEADER = '''"""SS-HOPM polynomials and climb for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); see that module for
what each function computes and gpu/peaks/sshopm_math.py for the order-independent steps.
The CPU loops are in gpu/peaks/sshopm_generated_cpu.py, the CUDA kernels in
gpu/peaks/sshopm_generated_cuda.py; both compile these functions into their own code.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_math.py sha256 {math_hash}
# sshopm_layout.py sha256 {layout_hash}

import numpy as np
from numba.extending import register_jitable

from gpu.peaks import sshopm_math as sm

# Multinomial multiplicities σ(k) as float32 constants: exact integers, and float32 keeps
# the CUDA kernels in single precision while float64 CPU data stays float64.
{constants}
'''

_CPU_HEADER = '''"""SS-HOPM CPU loops for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); the polynomial
code and the climb they call are in gpu/peaks/sshopm_generated.py.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_generated.py sha256 {generated_hash}
# sshopm_math.py sha256 {math_hash}
# sshopm_layout.py sha256 {layout_hash}

from types import FunctionType

import numpy as np
from numba import njit, prange
from numba.extending import register_jitable

from gpu.peaks import sshopm_math as sm
from gpu.peaks.sshopm_generated import (
{functions}
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
'''

_CUDA_HEADER = '''"""SS-HOPM CUDA kernels for symmetric tensors of order 2–12 in R^3 — GENERATED, do not edit.

Written by gpu/peaks/sshopm_codegen.py (``python -m gpu.peaks.sshopm_codegen``); the polynomial
code and the climb they call are in gpu/peaks/sshopm_generated.py.
"""

# numba's on-disk cache is keyed on this file alone, so it records the code it inlines:
# sshopm_generated.py sha256 {generated_hash}
# sshopm_math.py sha256 {math_hash}
# sshopm_layout.py sha256 {layout_hash}
# sshopm_block.py sha256 {block_hash}

from numba import config, cuda, float32, int32, uint32, uint64

from gpu.peaks import sshopm_math as sm
from gpu.peaks.sshopm_block import MAX_WARPS, block_max, seed_slot
from gpu.peaks.sshopm_generated import (
{functions}
)
from gpu.peaks.sshopm_layout import (
    P_MAX_ITER, P_MAX_STEP, P_REL_THRESHOLD, P_SEED_FRACTION, P_SEED_LOCAL, P_STEP_TOL, P_THRESHOLD, P_TOL_LAMBDA,
    SEED_VOXELS,
)

MAX_STARTS = {max_starts}
N_NEIGHBORS = {n_neighbors}

# Fully unrolled code keeps every monomial live: uncapped, many registers a thread. Register caps:
# 64 for the block-per-voxel kernels, where the cap lets 4x more blocks share an SM; 168 for
# the thread-per-climb kernel, the most that fits three 128-thread blocks an SM (65,536 / 384,
# in steps of 8). Each was the fastest cap measured (docs/benchmarks.md, "Measured design
# choices"). The simulator takes no register limit.
SEED_OPTIONS = {{"cache": True}} if config.ENABLE_CUDASIM else {{"cache": True, "max_registers": 64}}
CLIMB_OPTIONS = {{"cache": True}} if config.ENABLE_CUDASIM else {{"cache": True, "max_registers": 168}}
'''


def _hashes(*names: str) -> dict[str, str]:
    here = Path(__file__).parent
    return {f"{name}_hash": hashlib.sha256((here / f"sshopm_{name}.py").read_bytes()).hexdigest() for name in names}


def _sigmas() -> list[int]:
    return sorted({int(s) for m in ORDERS for k in (m, m - 1, m - 2) for s in multiplicities(k)} - {1})


def generate_module() -> str:
    """The full source of :mod:`gpu.peaks.sshopm_generated`: the polynomials and the climb."""
    constants = "\n".join(f"S{s} = np.float32({s})" for s in _sigmas())
    parts = [_HEADER.format(constants=constants, **_hashes("math", "layout"))]
    for m in ORDERS:
        n_unique = len(index_classes(m))
        parts += [f"# ---- order {m}: {n_unique} unique entries ----", _axm(m), _axm1(m), _axm2(m), _climb(m)]
    return "\n\n\n".join(parts).rstrip() + "\n"


def generate_cpu_module() -> str:
    """The full source of :mod:`gpu.peaks.sshopm_generated_cpu`: the CPU loops."""
    parts = []
    for m in ORDERS:
        n_unique = len(index_classes(m))
        parts += [f"# ---- order {m}: {n_unique} unique entries ----",
                  _contracted_points(m, "axm1", ((0,), (1,), (2,)), ["gx", "gy", "gz"]),
                  _contracted_points(m, "axm2", _PAIRS, ["mxx", "mxy", "mxz", "myy", "myz", "mzz"]),
                  _cpu_climbs(m), _cpu_loop(m, n_unique)]
    body = "\n\n\n".join(parts)
    # what the loops use of the shared module: its polynomials and multiplicity constants
    shared = [f"axm_m{m}" for m in ORDERS] + [f"S{s}" for s in _sigmas()]
    used = [name for name in shared if re.search(rf"\b{name}\b", body)]
    functions = "\n".join(textwrap.wrap(", ".join(used) + ",", 100, initial_indent="    ", subsequent_indent="    "))
    generated_hash = hashlib.sha256(generate_module().encode()).hexdigest()
    header = _CPU_HEADER.format(functions=functions, generated_hash=generated_hash, **_hashes("math", "layout"))
    return (header + "\n\n" + body).rstrip() + "\n"


def generate_cuda_module() -> str:
    """The full source of :mod:`gpu.peaks.sshopm_generated_cuda`."""
    functions = "\n".join(f"    axm_m{m}, axm1_m{m}, climb_m{m}," for m in ORDERS)
    generated_hash = hashlib.sha256(generate_module().encode()).hexdigest()
    parts = [_CUDA_HEADER.format(functions=functions, max_starts=MAX_STARTS, n_neighbors=N_NEIGHBORS,
                                 generated_hash=generated_hash,
                                 **_hashes("math", "layout", "block"))]
    for m in ORDERS:
        n_unique = len(index_classes(m))
        parts += [f"# ---- order {m}: {n_unique} unique entries ----", _cuda_seed_kernel(m, n_unique),
                  _cuda_climb_kernel(m)]
    return "\n\n\n".join(parts).rstrip() + "\n"


def generated_path() -> Path:
    return Path(__file__).with_name("sshopm_generated.py")


def generated_cpu_path() -> Path:
    return Path(__file__).with_name("sshopm_generated_cpu.py")


def generated_cuda_path() -> Path:
    return Path(__file__).with_name("sshopm_generated_cuda.py")


def write_module() -> tuple[Path, Path, Path]:
    """Write the three generated modules; returns their paths."""
    generated_path().write_text(generate_module())
    generated_cpu_path().write_text(generate_cpu_module())
    generated_cuda_path().write_text(generate_cuda_module())
    return generated_path(), generated_cpu_path(), generated_cuda_path()


if __name__ == "__main__":
    print(*write_module())
