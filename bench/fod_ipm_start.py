"""MSMT-CSD's dual active-set method started from an interior point's active set: how many
outer iterations are left, and how far the FODs move, against the cold start `dwi2fod` takes.

A reference in numpy, for a sample of voxels on the CPU (its times are indicative only): the
dual method as MRtrix3 runs it (:func:`dual_active_set`, which takes the CPU backend's
iterations), and a batched Mehrotra predictor–corrector (:func:`interior_point`) on each
voxel's projection of y_u onto the cone B y ≥ 0, whose rows with z > 10⁴ s (at most N − 1,
the largest z first) start the dual method (docs/decisions/fod-interior-point-start.md).
Also: how many of each voxel's final active rows are among its rows most violated by the
unconstrained solution (the lowest c_u), the subset an interior point on fewer rows would use.

    python3 -m bench.fod_ipm_start [--shape 12 12 8] [--voxels 200] [--iterations 12 14]
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from bench.harness import Column, Report, run_benchmark

__all__ = ["dual_active_set", "interior_point", "start_rows"]


def _multipliers(G: np.ndarray, c_u: np.ndarray, rows: list[int], lam: float) -> np.ndarray:
    """l solving (G_AA + λ I) l = −c_u[A] for the active rows A (``rows``)."""
    if not rows:
        return np.zeros(0)
    return np.linalg.solve(G[np.ix_(rows, rows)] + lam * np.eye(len(rows)), -c_u[rows])


def dual_active_set(c_u: np.ndarray, G: np.ndarray, lam: float, start: list[int],
                    max_iterations: int) -> tuple[list[int], np.ndarray, int]:
    """MRtrix3's dual active-set method (``Math::ICLS::Solver``; the steps of
    :func:`gpu.fod.solver_math.icls_voxel`) from the active rows ``start``, refactoring at
    each step.

    The start's rows whose multipliers are negative leave one at a time (the most negative
    first) until all are ≥ 0 (any such set starts the method: Goldfarb & Idnani 1983). Then,
    while some c = c_u + G_A l < 0, the lowest (ties: the lowest row) joins; while some
    multiplier is negative, the row whose multiplier reaches zero first on the way from the
    last feasible ones leaves (ties: the lowest row).

    Parameters
    ----------
    c_u : (M,) array
        B y_u of the voxel.
    G : (M, M) array
        B Bᵀ.
    lam : float
        Added to the active rows' Gram matrix (``-neg_lambda``).
    start : list of int
        Rows active at the start ([] for the cold start).
    max_iterations : int

    Returns
    -------
    rows : list of int
        The final active rows.
    l : (len(rows),) array
        Their multipliers: y = y_u + B[rows]ᵀ l.
    iterations : int
        Outer iterations after the start.
    """
    rows = list(start)
    l = _multipliers(G, c_u, rows, lam)
    while rows and (l < 0).any():
        del rows[int(np.argmin(l))]
        l = _multipliers(G, c_u, rows, lam)
    last = l.copy()
    iterations = 0
    while True:
        c = c_u + G[:, rows] @ l if rows else c_u
        joining = int(np.argmin(c))
        if not c[joining] < 0:
            break
        changed = joining not in rows
        if changed:
            rows.append(joining)
            last = np.append(last, 0.0)
        l = _multipliers(G, c_u, rows, lam)
        while (l < 0).any():
            negative = np.flatnonzero(l < 0)
            reach = last[negative] / (last[negative] - l[negative])
            leaving = negative[np.lexsort((np.asarray(rows)[negative], reach))[0]]
            changed = True
            del rows[leaving]
            last = np.delete(last, leaving)
            l = _multipliers(G, c_u, rows, lam)
        last = l.copy()
        iterations += 1
        if not changed or iterations > max_iterations:
            break
    return rows, l, iterations


def interior_point(B: np.ndarray, y_u, iterations: int, newton=None, xp=np, mark=None):
    """Slacks and multipliers (s, z), each (V, M), after ``iterations`` Mehrotra
    predictor–corrector steps on min ½‖y − y_u‖² s.t. B y ≥ 0 for every voxel at once (each
    voxel scaled by ‖y_u‖; start y = y_u, s = max(B y_u, 0) + 1, z = 1; one step length for
    primal and dual, 0.99 of the way to the boundary).

    Each step solves (I + Bᵀ D B) Δy = −r_d + Bᵀ(S⁻¹ r_c − D r_p), D = Z S⁻¹, twice (the
    predictor's r_c = −s∘z, the corrector's σμ − s∘z − Δs_aff∘Δz_aff, σ = (μ_aff / μ)³).

    Parameters
    ----------
    B : (M, N) array
    y_u : (V, N) array of ``xp``
    iterations : int
    newton : callable, optional
        ``newton(d)`` for d (V, M) returns ``solve(rhs)``, (V, N) → (V, N), with the voxels'
        matrices I + Bᵀ diag(d) B; default: numpy's dense solves.
    xp : module
        The arrays' module (numpy, or CuPy: bench/fod_ipm_gpu.py).
    mark : callable, optional
        ``mark(kind)`` as each kind of step begins (``None`` at the end), for timing.
    """
    mark = mark or (lambda kind: None)
    newton = newton or _dense_newton(B)
    b = xp.asarray(B)
    target = y_u / xp.linalg.norm(y_u, axis=1, keepdims=True)
    y = target.copy()
    s = xp.maximum(target @ b.T, 0) + 1
    z = xp.ones_like(s)

    def longest(ds, dz):
        with np.errstate(divide="ignore", invalid="ignore"):
            return xp.minimum(xp.where(ds < 0, -s / ds, xp.inf).min(axis=1),
                              xp.where(dz < 0, -z / dz, xp.inf).min(axis=1))

    for _ in range(iterations):
        mark("products with B")
        dual_residual = y - target - z @ b
        primal_residual = y @ b.T - s
        mark("elementwise and reductions")
        d = z / s
        solve = newton(d)

        def direction(complementarity):
            mark("elementwise and reductions")
            w = complementarity / s - d * primal_residual
            mark("products with B")
            rhs = -dual_residual + w @ b
            dy = solve(rhs)
            mark("products with B")
            ds = dy @ b.T + primal_residual
            mark("elementwise and reductions")
            return dy, ds, complementarity / s - d * ds

        mu = (s * z).mean(axis=1)
        dy, ds, dz = direction(-s * z)
        step = xp.minimum(1.0, longest(ds, dz))[:, None]
        mu_affine = ((s + step * ds) * (z + step * dz)).mean(axis=1)
        sigma = (mu_affine / mu) ** 3
        dy, ds, dz = direction((sigma * mu)[:, None] - s * z - ds * dz)
        step = xp.minimum(1.0, 0.99 * longest(ds, dz))[:, None]
        y += step * dy
        s += step * ds
        z += step * dz
    mark(None)
    return s, z


def _dense_newton(B: np.ndarray):
    """:func:`interior_point`'s Newton systems by numpy: the dense matrices, LAPACK's solves."""
    n = B.shape[1]
    products = np.einsum("mi,mj->mij", B, B).reshape(B.shape[0], n * n)

    def newton(d):
        matrices = np.eye(n) + (d @ products).reshape(-1, n, n)
        return lambda rhs: np.linalg.solve(matrices, rhs[..., None])[..., 0]
    return newton


def start_rows(s: np.ndarray, z: np.ndarray, most: int, ratio: float = 1e4) -> list[int]:
    """A voxel's rows with z > ``ratio`` · s, at most ``most`` of them (the largest z), ascending."""
    marked = np.flatnonzero(z > ratio * s)
    return sorted(int(r) for r in marked[np.argsort(-z[marked], kind="stable")][:most])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--shape", type=int, nargs=3, default=(12, 12, 8), metavar=("X", "Y", "Z"),
                        help="phantom grid (gpu.fod.dwi_phantom, b = 0 ×5, 1000 ×50, 2000 ×50)")
    parser.add_argument("--snr", type=float, default=20.0)
    parser.add_argument("--voxels", type=int, default=200, help="voxels sampled from the phantom")
    parser.add_argument("--iterations", type=int, nargs="+", default=[12, 14],
                        help="interior-point iterations, one row each")
    parser.add_argument("--seed", type=int, default=2)


def run(args: argparse.Namespace, report: Report) -> None:
    from gpu.fod import dwi_phantom, shell_scheme, tissue_responses
    from gpu.fod.backend_cpu import msmt_csd_cpu
    from gpu.fod.msmt_problem import constraint_gram, msmt_problem

    bvals, bvecs = shell_scheme(5, ((1000, 50), (2000, 50)))
    signals = dwi_phantom(tuple(args.shape), bvals, bvecs, snr=args.snr, seed=args.seed)["dwi"]
    signals = signals.reshape(-1, bvals.size).astype(np.float64)
    signals = signals[np.random.default_rng(args.seed).choice(len(signals), min(args.voxels, len(signals)),
                                                              replace=False)]
    problem = msmt_problem(bvals, bvecs, tissue_responses([0, 1000, 2000]))
    B, lam, limit = problem.B, problem.constraint_norm_lambda, problem.max_iterations
    G = constraint_gram(B)
    cold_x, cold_iterations = msmt_csd_cpu(problem, signals)
    y_u = signals @ problem.project.T
    c_u = y_u @ B.T

    def fod(v: int, rows: list[int], l: np.ndarray) -> np.ndarray:
        return np.linalg.solve(problem.L.T, y_u[v] + (B[rows].T @ l if rows else 0))

    def compare(starts: list[list[int]]) -> dict:
        iterations, moved = [], []
        for v, start in enumerate(starts):
            rows, l, count = dual_active_set(c_u[v], G, lam, start, limit)
            iterations.append(count)
            moved.append(np.linalg.norm(fod(v, rows, l) - cold_x[v]) / np.linalg.norm(cold_x[v]))
        iterations = np.array(iterations)
        return {"start": float(np.mean([len(s) for s in starts])), "mean": iterations.mean(),
                "p99": np.quantile(iterations, 0.99), "max": iterations.max(), "median_rel": np.median(moved),
                "max_rel": np.max(moved)}

    cold = compare([[] for _ in range(len(signals))])
    finals = [set(dual_active_set(c_u[v], G, lam, [], limit)[0]) for v in range(len(signals))]
    rows = [{"start_from": "cold (dwi2fod's)", **cold}]
    for iterations in args.iterations:
        started = time.perf_counter()
        s, z = interior_point(B, y_u, iterations)
        seconds = time.perf_counter() - started
        rows.append({"start_from": f"interior point, {iterations} iterations", "ipm_s": seconds,
                     **compare([start_rows(s[v], z[v], B.shape[1] - 1) for v in range(len(signals))])})
    report.table(
        f"MSMT-CSD from an interior point's active set: {len(signals)} voxels of a {'×'.join(map(str, args.shape))} "
        f"phantom (SNR {args.snr:g}), N = {B.shape[1]}, M = {B.shape[0]}; the CPU backend's cold iterations "
        f"{cold_iterations.mean():.1f} a voxel", rows,
        [Column("start_from", "start"), Column("ipm_s", "interior point s (numpy)", ".2f"),
         Column("start", "start rows", ".1f"), Column("mean", "outer iterations: mean", ".2f"),
         Column("p99", "p99", ".0f"), Column("max", "max", ".0f"),
         Column("median_rel", "FOD vs cold: median rel. L2", ".1e"), Column("max_rel", "max", ".1e")],
        note="FOD: all tissues' coefficients; cold: the CPU backend's solve (the cold row checks the reference)")
    lowest = np.argsort(c_u, axis=1, kind="stable")
    report.table(
        "The final active rows among each voxel's rows of lowest c_u (most violated by y_u)",
        [{"rows": k, "share": np.mean([len(f & set(lowest[v, :k])) / max(1, len(f)) for v, f in enumerate(finals)]),
          "all": np.mean([f <= set(lowest[v, :k]) for v, f in enumerate(finals)])} for k in (64, 128, 192)],
        [Column("rows", "lowest rows"), Column("share", "share of the final rows among them", ".3f"),
         Column("all", "voxels with all", ".3f")],
        note=f"final active rows {np.mean([len(f) for f in finals]):.1f} a voxel (mean)")


def main() -> None:
    run_benchmark(__doc__, add_arguments, run)


if __name__ == "__main__":
    main()
