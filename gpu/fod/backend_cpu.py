"""CPU backend of CSD and MSMT-CSD: the loops of :mod:`gpu.fod.cpu_loops` over voxels. Like
the fixels loop (:mod:`gpu.fixels.fmls`), a loop runs from its ahead-of-time build on the
host's threads where there is one, without numba's start-up (docs/decisions/cpu-ahead-of-time.md).
"""

from __future__ import annotations

import numpy as np

from gpu import ahead_of_time
from gpu.fod.csd_problem import CsdProblem
from gpu.fod.msmt_problem import MsmtProblem, constraint_gram

__all__ = ["msmt_csd_cpu", "csd_cpu", "LOOP_MODULE"]

#: The module of the loops ``msmt_loop`` and ``csd_loop``.
LOOP_MODULE = "gpu.fod.cpu_loops"


def _run(what: str, loop: str, signals: np.ndarray, n_coeffs: int, *args) -> tuple[np.ndarray, np.ndarray]:
    signals = np.ascontiguousarray(signals, np.float64)
    out = np.empty((signals.shape[0], n_coeffs))
    niter = np.empty(signals.shape[0], np.int32)
    args = (signals, *args, out, niter)
    build = ahead_of_time.lookup(f"{LOOP_MODULE}.{loop}", args)
    if build is not None:
        # the voxel rows: the signals in, the FODs and iteration counts out
        ahead_of_time.run_on_threads(build, args, (0, len(args) - 2, len(args) - 1), signals.shape[0])
    else:
        _run_on_every_core(what, loop, args)
    return out, niter


def _run_on_every_core(what: str, loop: str, args: tuple) -> None:
    """The loop ``loop`` through numba, its voxels over every thread."""
    from gpu.cpu_parallel import run_parallel_loop
    from gpu.cuda.compile_notice import announce_compile, is_compiled

    dispatcher = getattr(ahead_of_time.import_numba_module(LOOP_MODULE), loop)
    if not is_compiled(dispatcher, args):
        announce_compile(f"the {what} CPU loop", None)
    run_parallel_loop(dispatcher, *args)


def msmt_csd_cpu(problem: MsmtProblem, signals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve every voxel's MSMT-CSD problem.

    Parameters
    ----------
    problem : MsmtProblem
    signals : ndarray, shape (n_voxels, n_volumes)

    Returns
    -------
    x : ndarray, shape (n_voxels, N), float64
        The tissues' SH coefficients side by side.
    niter : ndarray, shape (n_voxels,), int32
    """
    return _run("MSMT-CSD", "msmt_loop", signals, problem.H.shape[1], *_contiguous(problem.project, problem.B,
                problem.B.T, constraint_gram(problem.B), problem.L), float(problem.constraint_norm_lambda),
                int(problem.max_iterations))


def csd_cpu(problem: CsdProblem, signals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Solve every voxel's CSD problem.

    Parameters
    ----------
    problem : CsdProblem
    signals : ndarray, shape (n_voxels, n)
        The values of ``problem.volumes``.

    Returns
    -------
    f : ndarray, shape (n_voxels, N), float64
    niter : ndarray, shape (n_voxels,), int32
    """
    return _run("CSD", "csd_loop", signals, problem.Q.shape[1], *_contiguous(problem.init, problem.Q, problem.QtQ,
                problem.P, problem.P.T), float(problem.threshold), int(problem.max_iterations))


def _contiguous(*arrays: np.ndarray) -> list[np.ndarray]:
    """C-contiguous float64 ``arrays`` (with Python scalars beside them: the one signature the
    warm-up compiles and builds, whatever layout a problem's matrix comes in)."""
    return [np.ascontiguousarray(array, np.float64) for array in arrays]
