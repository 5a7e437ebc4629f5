"""Newton systems of an interior-point start for MSMT-CSD: a warp-per-system Cholesky kernel
against cuSOLVER's batched factorisation, on the whole brain's count of systems.

An interior point run for every voxel at once finds nearly each voxel's final active set, from
which MRtrix3's dual active-set method needs 2.4 outer iterations instead of 137
(docs/decisions/fod-interior-point-start.md). Each of its ~14 iterations solves, per voxel,
(I + Bᵀ D B) Δy = r (N = 47 at lmax 8 with GM and CSF), twice with one factorisation
(Mehrotra's predictor and corrector). The matrices come from one product over the voxels,
D (V, M) times the rows' packed outer products b_i b_iᵀ (M, N(N + 1)/2); what was measured
to bound the start was the factorisation: 28 ms for 260,000 matrices by cuSOLVER's
``potrfBatched``. This times, side by side in one run: that product (cuBLAS through CuPy),
cuSOLVER's batched factorisation and cuBLAS's triangular solves (CuPy), and
:func:`newton_kernel` (factor and two solves, one warp a system, the matrix in shared
memory), and checks the kernel's solutions against CuPy's.

    python3 -m bench.fod_newton [--voxels 260412] [--repeats 5]
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from numba import cuda, float64, uint64

from bench.harness import Column, Report, gpu_time, ratio, run_benchmark

__all__ = ["newton_kernel", "factor_kernel", "solve_kernel", "shared_bytes", "triangle_places", "packed_products", "newton_matrices", "solve_newton_systems"]

_0 = uint64(0)
_1 = uint64(1)
_T = uint64(32)


@cuda.jit(device=True)
def _off(i):
    """Start of row i of a packed lower triangle (row i holds columns 0…i)."""
    return (i * (i + _1)) >> _1


@cuda.jit(device=True)
def _at(a, i, q, n):
    """Entry (i, q), i ≥ q, of the packed matrix, or of the identity past row n − 1 (a block
    of columns running past the last is completed by unit columns)."""
    if i < n:
        return a[_off(i) + q]
    return 1.0 if i == q else 0.0


@cuda.jit(device=True)
def _block(a, rdiag, b, n):
    """The factor's diagonal block at rows and columns b … b + 3: its six entries below the
    diagonal and its four diagonal reciprocals (unit past n)."""
    return (_at(a, b + _1, b, n), _at(a, b + uint64(2), b, n), _at(a, b + uint64(3), b, n),
            _at(a, b + uint64(2), b + _1, n), _at(a, b + uint64(3), b + _1, n), _at(a, b + uint64(3), b + uint64(2), n),
            rdiag[b], rdiag[b + _1], rdiag[b + uint64(2)], rdiag[b + uint64(3)])


@cuda.jit(device=True)
def _solve(a, rdiag, y, z, out, v, k, n, t):
    """out[v, k] ← (L Lᵀ)⁻¹ y, L packed in ``a`` with its diagonal's reciprocals in ``rdiag``
    (4 past n, unit): forward into z (y updated in place), back by rows of L, four rows a
    barrier (every thread solves the diagonal block, each then updates its entries t, t + 32)."""
    b = _0
    while b < n:
        l10, l20, l30, l21, l31, l32, r0, r1, r2, r3 = _block(a, rdiag, b, n)
        y0 = y[b] * r0
        y1 = (y[b + _1] - l10 * y0) * r1 if b + _1 < n else 0.0
        y2 = (y[b + uint64(2)] - l20 * y0 - l21 * y1) * r2 if b + uint64(2) < n else 0.0
        y3 = (y[b + uint64(3)] - l30 * y0 - l31 * y1 - l32 * y2) * r3 if b + uint64(3) < n else 0.0
        i = b + uint64(4) + t
        while i < n:
            o = _off(i) + b
            y[i] -= a[o] * y0 + a[o + _1] * y1 + a[o + uint64(2)] * y2 + a[o + uint64(3)] * y3
            i += _T
        if t < uint64(4) and b + t < n:
            z[b + t] = y0 if t == _0 else (y1 if t == _1 else (y2 if t == uint64(2) else y3))
        cuda.syncthreads()
        b += uint64(4)
    while b > _0:
        b -= uint64(4)
        l10, l20, l30, l21, l31, l32, r0, r1, r2, r3 = _block(a, rdiag, b, n)
        x3 = z[b + uint64(3)] * r3 if b + uint64(3) < n else 0.0
        x2 = (z[b + uint64(2)] - l32 * x3) * r2 if b + uint64(2) < n else 0.0
        x1 = (z[b + _1] - l21 * x2 - l31 * x3) * r1 if b + _1 < n else 0.0
        x0 = (z[b] - l10 * x1 - l20 * x2 - l30 * x3) * r0
        # rows past n (x 0 there) read row b instead, inside the matrix
        o0 = _off(b)
        o1 = _off(b + _1) if b + _1 < n else o0
        o2 = _off(b + uint64(2)) if b + uint64(2) < n else o0
        o3 = _off(b + uint64(3)) if b + uint64(3) < n else o0
        q = t
        while q < b:
            z[q] -= a[o0 + q] * x0 + a[o1 + q] * x1 + a[o2 + q] * x2 + a[o3 + q] * x3
            q += _T
        if t < uint64(4) and b + t < n:
            out[v, k, b + t] = x0 if t == _0 else (x1 if t == _1 else (x2 if t == uint64(2) else x3))
        cuda.syncthreads()


@cuda.jit(device=True)
def _factor(a, rdiag, cols, places, n, t):
    """The packed matrix ``a`` (n × n, in shared memory) replaced by its Cholesky factor L,
    the reciprocals of L's diagonal into ``rdiag`` (n + 3, unit past n); ``cols`` (4 (n + 3))
    holds a step's four columns. Right-looking, four columns a step: every thread factors the
    4 × 4 diagonal block alike, each then its rows' four entries below it (rows t, t + 32 of
    the step), and the trailing triangle's entries, dealt to the threads in packed order
    (``places``: :func:`triangle_places`), take the four columns' rank-4 update at once."""
    n4 = n + uint64(3)
    b = _0
    while b < n:
        # the diagonal block, by every thread alike
        a00 = a[_off(b) + b]
        d0 = math.sqrt(a00)
        r0 = 1.0 / d0
        l10 = _at(a, b + _1, b, n) * r0
        l20 = _at(a, b + uint64(2), b, n) * r0
        l30 = _at(a, b + uint64(3), b, n) * r0
        d1 = math.sqrt(_at(a, b + _1, b + _1, n) - l10 * l10)
        r1 = 1.0 / d1
        l21 = (_at(a, b + uint64(2), b + _1, n) - l20 * l10) * r1
        l31 = (_at(a, b + uint64(3), b + _1, n) - l30 * l10) * r1
        d2 = math.sqrt(_at(a, b + uint64(2), b + uint64(2), n) - l20 * l20 - l21 * l21)
        r2 = 1.0 / d2
        l32 = (_at(a, b + uint64(3), b + uint64(2), n) - l30 * l20 - l31 * l21) * r2
        d3 = math.sqrt(_at(a, b + uint64(3), b + uint64(3), n) - l30 * l30 - l31 * l31 - l32 * l32)
        r3 = 1.0 / d3
        # the rows below it (all four columns exist there)
        i = b + uint64(4) + t
        while i < n:
            o = _off(i) + b
            c0 = a[o] * r0
            c1 = (a[o + _1] - c0 * l10) * r1
            c2 = (a[o + uint64(2)] - c0 * l20 - c1 * l21) * r2
            c3 = (a[o + uint64(3)] - c0 * l30 - c1 * l31 - c2 * l32) * r3
            a[o] = c0
            a[o + _1] = c1
            a[o + uint64(2)] = c2
            a[o + uint64(3)] = c3
            cols[i] = c0
            cols[n4 + i] = c1
            cols[2 * n4 + i] = c2
            cols[3 * n4 + i] = c3
            i += _T
        cuda.syncthreads()
        # the block itself, now that no thread reads it
        if t == _0:
            rdiag[b] = r0
            rdiag[b + _1] = r1
            rdiag[b + uint64(2)] = r2
            rdiag[b + uint64(3)] = r3
            a[_off(b) + b] = d0
            if b + _1 < n:
                a[_off(b + _1) + b] = l10
                a[_off(b + _1) + b + _1] = d1
            if b + uint64(2) < n:
                a[_off(b + uint64(2)) + b] = l20
                a[_off(b + uint64(2)) + b + _1] = l21
                a[_off(b + uint64(2)) + b + uint64(2)] = d2
            if b + uint64(3) < n:
                a[_off(b + uint64(3)) + b] = l30
                a[_off(b + uint64(3)) + b + _1] = l31
                a[_off(b + uint64(3)) + b + uint64(2)] = l32
                a[_off(b + uint64(3)) + b + uint64(3)] = d3
        # the trailing triangle (rows and columns b + 4 … n − 1), entry f of it in packed
        # order (row r, column q of the triangle: ``places[f]`` = r · 256 + q, whatever its
        # size): thread t the entries t, t + 32, …
        if b + uint64(4) < n:
            m = n - uint64(4) - b
            total = (m * (m + _1)) >> _1
            f = t
            while f < total:
                place = uint64(places[f])
                i = b + uint64(4) + (place >> uint64(8))
                q = b + uint64(4) + (place & uint64(255))
                a[_off(i) + q] -= (cols[i] * cols[q] + cols[n4 + i] * cols[n4 + q]
                                   + cols[2 * n4 + i] * cols[2 * n4 + q] + cols[3 * n4 + i] * cols[3 * n4 + q])
                f += _T
        cuda.syncthreads()
        b += uint64(4)


@cuda.jit
def newton_kernel(packed, rhs, out, places):
    """Solve system ``blockIdx.x``: packed (V, n(n + 1)/2) symmetric positive definite
    matrices, lower triangles row by row; rhs and out (V, R, n). One warp a system, the
    matrix in shared memory, factored by :func:`_factor`, then each right-hand side's forward
    and back substitution, four rows a step. ``places`` is :func:`triangle_places` of n.
    Launch with 32 threads and :func:`shared_bytes` of dynamic shared memory."""
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = uint64(rhs.shape[2])
    a, rdiag, cols, y, z = _shared(uint64(packed.shape[1]), n)
    _load(packed, v, a, t)
    _factor(a, rdiag, cols, places, n, t)
    _solve_each(a, rdiag, y, z, rhs, out, v, n, t)


@cuda.jit
def factor_kernel(packed, rdiags, places):
    """:func:`newton_kernel`'s factor of system ``blockIdx.x``, written over ``packed`` (V,
    n(n + 1)/2), its diagonal's reciprocals into ``rdiags`` (V, n + 3): for right-hand
    sides that come later (:func:`solve_kernel`)."""
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = uint64(rdiags.shape[1] - 3)
    size = uint64(packed.shape[1])
    a, rdiag, cols, y, z = _shared(size, n)
    _load(packed, v, a, t)
    _factor(a, rdiag, cols, places, n, t)
    e = t
    while e < size:
        packed[v, e] = a[e]
        e += _T
    e = t
    while e < n + uint64(3):
        rdiags[v, e] = rdiag[e]
        e += _T


@cuda.jit
def solve_kernel(factors, rdiags, rhs, out):
    """Each right-hand side rhs[v] (R, n) of system v = ``blockIdx.x`` solved with the factor
    :func:`factor_kernel` wrote, into out[v]."""
    v = uint64(cuda.blockIdx.x)
    t = uint64(cuda.threadIdx.x)
    n = uint64(rhs.shape[2])
    a, rdiag, cols, y, z = _shared(uint64(factors.shape[1]), n)
    _load(factors, v, a, t)
    e = t
    while e < n + uint64(3):
        rdiag[e] = rdiags[v, e]
        e += _T
    cuda.syncthreads()
    _solve_each(a, rdiag, y, z, rhs, out, v, n, t)


@cuda.jit(device=True)
def _shared(size, n):
    """The block's shared memory: the packed matrix, the diagonal's reciprocals, a factor
    step's four columns, which the solves' two vectors reuse."""
    n4 = n + uint64(3)
    sh = cuda.shared.array(0, float64)
    cols = sh[size + n4:size + 5 * n4]
    return sh[0:size], sh[size:size + n4], cols, cols[0:n4], cols[n4:2 * n4]


@cuda.jit(device=True)
def _load(packed, v, a, t):
    e = t
    while e < uint64(packed.shape[1]):
        a[e] = packed[v, e]
        e += _T
    cuda.syncthreads()


@cuda.jit(device=True)
def _solve_each(a, rdiag, y, z, rhs, out, v, n, t):
    k = _0
    while k < uint64(rhs.shape[1]):
        i = t
        while i < n:
            y[i] = rhs[v, k, i]
            i += _T
        cuda.syncthreads()
        _solve(a, rdiag, y, z, out, v, k, n, t)
        k += _1


def shared_bytes(n: int) -> int:
    """Dynamic shared memory of the kernels for systems of n unknowns."""
    return 8 * (n * (n + 1) // 2 + 5 * (n + 3))


def triangle_places(n: int) -> np.ndarray:
    """(n(n + 1)/2,) int32: row · 256 + column of each entry of a packed lower triangle, in order."""
    rows, columns = np.tril_indices(n)
    return (rows * 256 + columns).astype(np.int32)


def packed_products(B: np.ndarray) -> np.ndarray:
    """(M, N(N + 1)/2): each row's outer product b bᵀ, its lower triangle row by row."""
    rows, columns = np.tril_indices(B.shape[1])
    return B[:, rows] * B[:, columns]


def newton_matrices(d, products, xp=np):
    """I + Bᵀ diag(d_v) B of every voxel, packed: (V, N(N + 1)/2) from d (V, M) and
    :func:`packed_products` of B; ``xp`` the array module of both (numpy or CuPy)."""
    n = int(round((math.sqrt(8 * products.shape[1] + 1) - 1) / 2))
    matrices = d @ products
    matrices[:, xp.asarray(np.cumsum(np.arange(1, n + 1)) - 1)] += 1.0
    return matrices


def solve_newton_systems(packed, rhs, out, places=None) -> None:
    """:func:`newton_kernel` over every system (device or host arrays)."""
    n = rhs.shape[2]
    places = triangle_places(n) if places is None else places
    newton_kernel[packed.shape[0], 32, 0, shared_bytes(n)](packed, rhs, out, places)


def _unpack(packed: np.ndarray, n: int, xp):
    rows, columns = (xp.asarray(index) for index in np.tril_indices(n))
    full = xp.zeros((packed.shape[0], n, n))
    full[:, rows, columns] = packed
    full[:, columns, rows] = packed
    return full


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--voxels", type=int, default=260412, help="systems (default: the bench phantom's brain)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace, report: Report) -> None:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy missing, or no GPU it can use
        raise SystemExit(f"bench.fod_newton compares GPU kernels and needs a GPU and CuPy: {error}")

    from gpu.fod.msmt_problem import msmt_problem
    from gpu.fod.phantom import shell_scheme, tissue_responses

    bvals, bvecs = shell_scheme(5, ((1000, 50), (2000, 50)))
    B = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000])).B
    m, n = B.shape
    rng = np.random.default_rng(args.seed)
    # z/s of an interior point's middle iterations: spread over many decades
    d = cupy.asarray(10.0 ** rng.uniform(-6, 6, (args.voxels, m)))
    products = cupy.asarray(packed_products(B))
    rhs = cupy.asarray(rng.standard_normal((args.voxels, 2, n)))
    packed = newton_matrices(d, products, cupy)
    out = cupy.empty_like(rhs)
    rows = []

    product_s, _ = gpu_time(lambda: d @ products, args.repeats)
    rows.append({"step": f"D B-products: ({args.voxels}, {m}) × ({m}, {products.shape[1]}), cuBLAS DGEMM",
                 "ms": product_s * 1e3})
    full = _unpack(packed, n, cupy)
    factor_s, _ = gpu_time(lambda: cupy.linalg.cholesky(full), args.repeats)
    lower = cupy.linalg.cholesky(full)
    solves_s, _ = gpu_time(lambda: [_peer_solve(lower, rhs[:, k]) for k in range(2)], args.repeats)
    peer = factor_s + solves_s
    rows.append({"step": "cuSOLVER potrfBatched (cupy.linalg.cholesky)", "ms": factor_s * 1e3})
    rows.append({"step": "two solves with that factor (CuPy's batched triangular solves, cuBLAS)",
                 "ms": solves_s * 1e3})
    places = cupy.asarray(triangle_places(n))
    factor_only_s, _ = gpu_time(lambda: solve_newton_systems(packed, rhs[:, :0], out, places), args.repeats)
    rows.append({"step": "newton_kernel: the factor alone", "ms": factor_only_s * 1e3,
                 "ratio": ratio(factor_s, factor_only_s)})
    ours_s, _ = gpu_time(lambda: solve_newton_systems(packed, rhs, out, places), args.repeats)
    rows.append({"step": "newton_kernel: factor and two solves, a warp a system", "ms": ours_s * 1e3,
                 "ratio": ratio(peer, ours_s)})
    theirs = cupy.stack([_peer_solve(lower, rhs[:, k]) for k in range(2)], axis=1)
    error = cupy.linalg.norm(out - theirs, axis=2) / cupy.linalg.norm(theirs, axis=2)
    report.table(f"Newton systems of an interior-point MSMT-CSD start: {args.voxels} voxels, N = {n}, M = {m}", rows,
                 [Column("step", "step"), Column("ms", "GPU ms", ".2f"),
                  Column("ratio", "CuPy ÷ ours, the same steps", ".2f")],
                 note=f"ours against CuPy's solutions: relative L2 median {float(cupy.median(error)):.1e}, "
                      f"max {float(error.max()):.1e}")


def _peer_solve(lower, b):
    """x of L Lᵀ x = b for every voxel: two batched triangular solves (CuPy's, cuBLAS)."""
    from cupyx.scipy.linalg import solve_triangular

    if lower.ndim == 2:
        return solve_triangular(lower, solve_triangular(lower, b, lower=True), lower=True, trans="T")
    try:  # batched where this CuPy takes a stack
        forward = solve_triangular(lower, b[..., None], lower=True)
        return solve_triangular(lower, forward, lower=True, trans="T")[..., 0]
    except (ValueError, TypeError) as error:
        raise SystemExit(f"this CuPy's solve_triangular takes no stack of matrices: {error}")


def main() -> None:
    run_benchmark(__doc__, add_arguments, run)


if __name__ == "__main__":
    main()
