"""MSMT-CSD's interior-point start on the GPU, step by step as the numpy reference takes it
(:func:`bench.fod_ipm_start.interior_point`): the time of its iterations for a whole brain,
by kind of step, and its start sets against the reference's on a sample of voxels.

Each iteration: the residuals and right-hand sides as products with B (cuBLAS through CuPy),
the Newton matrices I + Bᵀ D B as one product with the rows' packed outer products, their
factors by :func:`bench.fod_newton.factor_kernel`, kept for the predictor's and the
corrector's solves (:func:`bench.fod_newton.solve_kernel`), and the step lengths and updates
as CuPy's elementwise passes and reductions, unfused: an upper bound for what fused kernels
would take (docs/decisions/fod-interior-point-start.md).

    python3 -m bench.fod_ipm_gpu [--shape 96 96 60] [--iterations 14] [--check-voxels 400]
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

from bench.harness import Column, Report, run_benchmark

__all__ = ["interior_point_gpu"]


class _Steps:
    """GPU milliseconds by kind of step, between CUDA events."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.ms = defaultdict(float)
        self.last = None

    def mark(self, kind: str | None) -> None:
        event = self.cupy.cuda.Event()
        event.record()
        if self.last is not None:
            event.synchronize()
            self.ms[self.last[0]] += self.cupy.cuda.get_elapsed_time(self.last[1], event)
        self.last = (kind, event) if kind else None


def interior_point_gpu(B: np.ndarray, y_u, iterations: int, steps: _Steps | None = None, xp=None):
    """:func:`bench.fod_ipm_start.interior_point` on the GPU: (s, z) (V, M) for y_u (V, N),
    arrays of ``xp`` (CuPy by default; numpy runs the kernels in numba's simulator)."""
    if xp is None:
        import cupy as xp
    from bench.fod_ipm_start import interior_point

    return interior_point(B, y_u, iterations, _kernel_newton(B, y_u.shape[0], xp, steps), xp,
                          steps.mark if steps is not None else None)


def _kernel_newton(B: np.ndarray, voxels: int, xp, steps: _Steps | None):
    """Newton systems for :func:`bench.fod_ipm_start.interior_point`: the matrices as one
    product with the rows' packed outer products, factored by
    :func:`bench.fod_newton.factor_kernel` once an iteration and kept for both solves
    (:func:`bench.fod_newton.solve_kernel`)."""
    from bench.fod_newton import factor_kernel, packed_products, shared_bytes, solve_kernel, triangle_places

    mark = steps.mark if steps is not None else (lambda kind: None)
    n = B.shape[1]
    products = xp.asarray(packed_products(B))
    diagonal = xp.asarray(np.cumsum(np.arange(1, n + 1)) - 1)
    places = xp.asarray(triangle_places(n))
    shared = shared_bytes(n)
    rdiags = xp.empty((voxels, n + 3))
    rhs = xp.empty((voxels, 1, n))
    solution = xp.empty((voxels, 1, n))

    def newton(d):
        mark("Newton matrices (one product)")
        factors = d @ products
        mark("elementwise and reductions")
        factors[:, diagonal] += 1.0
        mark("factors")
        factor_kernel[voxels, 32, 0, shared](factors, rdiags, places)

        def solve(right):
            mark("elementwise and reductions")
            rhs[:, 0] = right
            mark("solves")
            solve_kernel[voxels, 32, 0, shared](factors, rdiags, rhs, solution)
            mark("elementwise and reductions")
            return solution[:, 0].copy()
        return solve
    return newton


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", type=int, nargs=3, default=(96, 96, 60), metavar=("X", "Y", "Z"),
                        help="phantom grid (its ellipsoid mask's voxels; b = 0 ×5, 1000 ×50, 2000 ×50)")
    parser.add_argument("--iterations", type=int, default=14)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--check-voxels", type=int, default=400,
                        help="voxels whose start sets are checked against the numpy reference")


def run(args: argparse.Namespace, report: Report) -> None:
    try:
        import cupy

        cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # CuPy missing, or no GPU it can use
        raise SystemExit(f"bench.fod_ipm_gpu needs a GPU and CuPy: {error}")
    from bench.fod import ellipsoid_mask
    from bench.fod_ipm_start import dual_active_set, interior_point, start_rows
    from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
    from gpu.fod.msmt_problem import constraint_gram, msmt_problem

    shape = tuple(args.shape)
    bvals, bvecs = shell_scheme(5, ((1000, 50), (2000, 50)))
    signals = dwi_phantom(shape, bvals, bvecs, snr=20.0, seed=1)["dwi"][ellipsoid_mask(shape)].astype(np.float64)
    problem = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000]))
    B = problem.B
    y_u = cupy.asarray(signals) @ cupy.asarray(problem.project).T
    Report.progress(f"{len(signals)} voxels; y_u on the GPU")

    interior_point_gpu(B, y_u[:1000], 1)  # compiles the kernels
    totals = []
    for _ in range(args.repeats):
        start, stop = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        interior_point_gpu(B, y_u, args.iterations)
        stop.record()
        stop.synchronize()
        totals.append(cupy.cuda.get_elapsed_time(start, stop))
    steps = _Steps(cupy)
    interior_point_gpu(B, y_u, args.iterations, steps)
    rows = [{"step": kind, "ms": ms, "per_iteration": ms / args.iterations}
            for kind, ms in sorted(steps.ms.items(), key=lambda item: -item[1])]
    rows.append({"step": f"the whole run, unmarked (best of {args.repeats})", "ms": min(totals),
                 "per_iteration": min(totals) / args.iterations})

    # the start sets against the numpy reference's on a sample
    sample = np.random.default_rng(0).choice(len(signals), min(args.check_voxels, len(signals)), replace=False)
    s_gpu, z_gpu = (cupy.asnumpy(a) for a in interior_point_gpu(B, y_u[cupy.asarray(sample)], args.iterations))
    y_sample = cupy.asnumpy(y_u[cupy.asarray(sample)])
    s_ref, z_ref = interior_point(B, y_sample, args.iterations)
    G = constraint_gram(B)
    same, warm = 0, []
    for v in range(len(sample)):
        ours = start_rows(s_gpu[v], z_gpu[v], B.shape[1] - 1)
        same += ours == start_rows(s_ref[v], z_ref[v], B.shape[1] - 1)
        c_u = B @ y_sample[v]
        warm.append(dual_active_set(c_u, G, problem.constraint_norm_lambda, ours, problem.max_iterations)[2])
    report.table(
        f"Interior-point start on the GPU: {len(signals)} voxels ({'×'.join(map(str, shape))} phantom), "
        f"{args.iterations} iterations", rows,
        [Column("step", "step"), Column("ms", "GPU ms", ".1f"), Column("per_iteration", "ms an iteration", ".2f")],
        note=f"steps timed between CUDA events at each change of kind, in a run of their own (each mark waits for "
             f"the GPU); start sets equal to "
             f"the numpy reference's in {same} of {len(sample)} voxels; the dual method from them "
             f"{np.mean(warm):.2f} outer iterations a voxel (max {max(warm)})")


def main() -> None:
    run_benchmark(__doc__, add_arguments, run)


if __name__ == "__main__":
    main()
