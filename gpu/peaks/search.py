"""Fiber peaks of SH fiber orientation distributions by SS-HOPM: the public API.

Each voxel's even-order SH series of degree L equals A x^L for a symmetric tensor A of
order L (:mod:`gpu.peaks.symmetric_tensor`); fiber directions are the local maxima of A x^L on
the unit sphere, i.e. Z-eigenpairs (λ, x) of A with λ = A x^L and a negative-definite
Hessian on the tangent plane (Kolda & Mayo 2011, Sec. 3; Ballard, Kolda & Plantenga 2011,
Sec. IV for the DW-MRI application). They are found by the shifted symmetric higher-order
power method from many starts per voxel (Kolda & Mayo 2011, Alg. 1, with the adaptive shift
of Kolda & Mayo 2014) finished by Newton steps on the sphere, then merged, thresholded and
sorted by amplitude.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from typing import Callable, Literal

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.cuda.device import device_name
from gpu.sh_basis import lmax_from_ncoeffs, sh_degrees_orders
from gpu.peaks.limits import MAX_NPEAKS, MAX_STARTS
from gpu.peaks.sshopm_layout import (
    N_FPARAMS, N_IPARAMS, P_COS_MERGE, P_MAX_ITER, P_MAX_STEP, P_NPEAKS, P_REL_THRESHOLD, P_SEED_FRACTION,
    P_SEED_LOCAL, P_STEP_TOL, P_THRESHOLD, P_TOL_LAMBDA, S_CAPPED, S_ITERATIONS, S_MAX_ITERATIONS, S_SEEDS,
)
from gpu.peaks.sshopm_starts import hemisphere_starts, start_neighbors
from gpu.peaks.symmetric_tensor import sh_to_tensor_matrix

__all__ = ["PeaksOptions", "PeaksResult", "prepare_peaks", "sshopm_peaks", "finite_voxels"]


@dataclass(frozen=True)
class PeaksOptions:
    """Settings of :func:`sshopm_peaks`.

    Amplitudes are FOD values (the SH series) at the peak. A peak is reported when its
    amplitude is ≥ ``threshold`` and ≥ ``relative_threshold`` × the voxel's largest peak.

    Of the ``starts`` well-spread start vectors, a start climbs when its FOD value is at least
    ``seed_fraction`` × the least reportable amplitude (with the largest start value standing
    in for the largest peak) and, with ``seeding`` "local-max", no higher neighbour lies
    along its gradient (:func:`gpu.peaks.sshopm_math.is_seed`); "all" drops the second test. A
    start lies within half the start spacing of any lobe's peak, where an lmax ≤ 12 FOD lobe
    keeps well over half its height, so 0.5 loses no reportable peak; 0 climbs from every
    positive start that passes the neighbour test. A climb takes shifted power steps with
    GEAP's adaptive shift and Newton steps once the tangent Hessian is negative definite
    (:func:`gpu.peaks.sshopm_math.sshopm_step`); it stops when it moves less than
    ``step_tol`` radians and λ changes by less than ``tol_lambda``·|λ|, or after ``max_iter``
    iterations (then it is dropped and counted); no step moves more than ``max_step``
    radians. Peaks closer than ``merge_angle`` degrees are one.
    """

    npeaks: int = 3
    threshold: float = 0.0
    relative_threshold: float = 0.1
    starts: int = 128
    seeding: Literal["local-max", "all"] = "local-max"
    seed_fraction: float = 0.5
    max_iter: int = 30
    tol_lambda: float = 1e-6
    step_tol: float = 1e-4
    max_step: float = 0.25
    merge_angle: float = 2.0

    def __post_init__(self) -> None:
        if not 1 <= self.npeaks <= MAX_NPEAKS:
            raise ValueError(f"npeaks must be between 1 and {MAX_NPEAKS}, not {self.npeaks}")
        if not 1 <= self.starts <= MAX_STARTS:
            raise ValueError(f"starts must be between 1 and {MAX_STARTS}, not {self.starts}")
        if self.npeaks > self.starts:
            raise ValueError(f"npeaks ({self.npeaks}) cannot exceed the number of starts ({self.starts})")
        if not 0.0 <= self.relative_threshold <= 1.0:
            raise ValueError(f"relative_threshold must be in [0, 1], not {self.relative_threshold}")
        if not math.isfinite(self.threshold):
            raise ValueError("threshold must be a finite number")
        if self.seeding not in ("local-max", "all"):
            raise ValueError(f"seeding must be 'local-max' or 'all', not {self.seeding!r}")
        if not 0.0 <= self.seed_fraction <= 1.0:
            raise ValueError(f"seed_fraction must be in [0, 1], not {self.seed_fraction}")
        if self.max_iter < 1:
            raise ValueError("max_iter must be at least 1")


@dataclass
class PeaksResult:
    """Peaks of every voxel: ``directions`` (..., K, 3) unit vectors with z ≥ 0,
    ``amplitudes`` (..., K) sorted descending, both NaN past a voxel's ``count`` (...) and
    in masked-out or non-finite voxels; ``stats`` describes the run."""

    directions: np.ndarray
    amplitudes: np.ndarray
    count: np.ndarray
    stats: dict = field(default_factory=dict)


def _kernel_params(options: PeaksOptions) -> tuple[np.ndarray, np.ndarray]:
    fparams = np.zeros(N_FPARAMS)
    fparams[P_TOL_LAMBDA] = options.tol_lambda
    fparams[P_STEP_TOL] = options.step_tol
    fparams[P_MAX_STEP] = options.max_step
    fparams[P_COS_MERGE] = math.cos(math.radians(options.merge_angle))
    fparams[P_THRESHOLD] = options.threshold
    fparams[P_REL_THRESHOLD] = options.relative_threshold
    fparams[P_SEED_FRACTION] = options.seed_fraction
    iparams = np.zeros(N_IPARAMS, np.int64)
    iparams[P_MAX_ITER] = options.max_iter
    iparams[P_SEED_LOCAL] = int(options.seeding == "local-max")
    iparams[P_NPEAKS] = options.npeaks
    return fparams, iparams


def _iteration_summary(hist: np.ndarray) -> dict:
    total = int(hist.sum())
    if total == 0:
        return {"mean": 0.0, "p99": 0, "max": 0}
    bins = np.arange(hist.size)
    cumulative = np.cumsum(hist)
    return {
        "mean": float((hist * bins).sum() / total),
        "p99": int(np.searchsorted(cumulative, 0.99 * total)),
        "max": int(bins[hist > 0].max()),
    }


def _coefficients_by_voxel(sh: np.ndarray) -> tuple[np.ndarray, str]:
    """(coeffs, order): ``sh`` (..., n_coeffs) as (n_coeffs, voxels), voxels numbered in
    ``order`` ("C" or "F" over the spatial axes), a view where the memory allows: a NIfTI
    volume (x fastest, each coefficient's volume after the other), an MRtrix image with each
    voxel's coefficients together (``mrconvert -strides 2,3,4,1``, as ``dwi2fod`` writes
    them) and a C-ordered array. Any other layout is copied, in C order."""
    if sh.ndim > 1 and sh.flags.f_contiguous and not sh.flags.c_contiguous:
        return sh.reshape(-1, sh.shape[-1], order="F").T, "F"
    rows = _voxel_rows(sh)
    if rows is not None:
        return rows[0].T, rows[1]
    return sh.reshape(-1, sh.shape[-1]).T, "C"


def _to_spatial(per_voxel: np.ndarray, spatial: tuple[int, ...], order: str) -> np.ndarray:
    """(voxels, ...) → (*spatial, ...), voxels numbered in ``order`` (a view, no copy)."""
    rest = per_voxel.shape[1:]
    if order == "C":
        return per_voxel.reshape(*spatial, *rest)
    d = len(spatial)
    reversed_grid = per_voxel.reshape(*spatial[::-1], *rest)
    return reversed_grid.transpose(*range(d - 1, -1, -1), *range(d, d + len(rest)))


@dataclass(frozen=True)
class _Preparation:
    """What a run needs before it sees the data, for one lmax, basis and options: the
    SH→tensor matrix ``sh2t`` (unique entries, n_coeffs), the ``starts`` (S, 3), their
    ``neighbors``, the kernels' parameter vectors and ``npeaks``."""

    sh2t: np.ndarray
    starts: np.ndarray
    neighbors: np.ndarray
    fparams: np.ndarray
    iparams: np.ndarray
    npeaks: int


def _run_backend(backend: str, lmax: int, coeffs: np.ndarray, preparation: _Preparation, **kwargs) -> dict:
    if backend == "cuda":
        from gpu.peaks.backend_cuda import run_sshopm_cuda as run
    else:
        from gpu.peaks.backend_cpu import run_sshopm_cpu as run
    return run(lmax, coeffs, preparation.sh2t, preparation.starts, preparation.neighbors, preparation.fparams,
               preparation.iparams, preparation.npeaks, **kwargs)


def _one_fiber_voxel(lmax: int, amplitude: float) -> np.ndarray:
    """SH coefficients (n_coeffs, 1) of a single fiber along z, truncated at ``lmax``: the
    zonal series c_l0 = Y_l0(z) = sqrt((2l+1)/4π) (the same in both bases), scaled to a peak
    ``amplitude``. Seeds climb in it, so a run on it goes through every kernel."""
    degrees, orders = sh_degrees_orders(lmax)
    coeffs = np.where(orders == 0, np.sqrt((2 * degrees + 1) / (4 * np.pi)), 0.0)
    peak = float(np.sum((2 * degrees[orders == 0] + 1) / (4 * np.pi)))
    return (coeffs * amplitude / peak)[:, None]


def _prepare(lmax: int, basis: str, options: PeaksOptions, backend: str) -> _Preparation:
    """Make a :class:`_Preparation` and load the kernels of the resolved ``backend`` by a run on
    one single-fiber voxel: on a GPU from their saved cubins (gpu.cuda.cubin_cache), else from
    numba's on-disk cache (or compiled, with a notice). For the CUDA backend this first
    creates the CUDA context: the device's primary context, which every thread of the
    process (and numba) shares, so kernels loaded here launch from any thread."""
    fparams, iparams = _kernel_params(options)
    preparation = _Preparation(sh2t=sh_to_tensor_matrix(lmax, basis), starts=hemisphere_starts(options.starts),
                               neighbors=start_neighbors(options.starts), fparams=fparams, iparams=iparams,
                               npeaks=options.npeaks)
    if backend == "cuda":
        from gpu.peaks.backend_cuda import load_cuda_runtime

        load_cuda_runtime()
    # Above every threshold, so that its seeds climb and the climb kernel loads too.
    _run_backend(backend, lmax, _one_fiber_voxel(lmax, max(1.0, 2.0 * options.threshold)), preparation)
    return preparation


@dataclass
class _Slot:
    """One memoised preparation: made once, under its own lock, by the first caller."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    preparation: _Preparation | None = None


# Preparations a process keeps, the most recently used: a worker's jobs share a few settings,
# and options come from job parameters, which could otherwise grow the memo without end.
_KEPT_PREPARATIONS = 8
_preparations: OrderedDict[tuple, _Slot] = OrderedDict()
_preparations_lock = threading.Lock()


def _prepared(lmax: int, basis: str, options: PeaksOptions, backend: str) -> _Preparation:
    """The preparation for these settings (``backend`` resolved), made by the first caller and
    kept; a caller that comes while another makes it waits for that one. A preparation that
    fails is not kept: the next caller tries again (and gets the error itself)."""
    key = (lmax, basis, options, backend)
    with _preparations_lock:
        slot = _preparations.setdefault(key, _Slot())
        _preparations.move_to_end(key)
        while len(_preparations) > _KEPT_PREPARATIONS:
            _preparations.popitem(last=False)
    with slot.lock:
        if slot.preparation is None:
            slot.preparation = _prepare(lmax, basis, options, backend)
        return slot.preparation


def prepare_peaks(lmax: int, basis: str = "mrtrix", options: PeaksOptions = PeaksOptions(),
                  backend: str = "auto") -> float:
    """Make ready what :func:`sshopm_peaks` needs for data of ``lmax`` in ``basis`` with
    ``options`` on ``backend`` before it touches a voxel: the CUDA context on a GPU, the
    backend's kernels (loaded by a run on one voxel), the SH→tensor matrix and the starts.
    Once per process and settings (thread-safe; the most recent few are kept):
    :func:`sshopm_peaks` then finds it ready, or waits for the thread making it. A caller
    may run it ahead on a thread of its own, while it reads the volume. Returns the seconds
    this call took (about 0 when it was ready already)."""
    started = time.perf_counter()
    _prepared(lmax, basis, options, resolve_backend(backend))
    return time.perf_counter() - started


# Voxels whose sums are taken together where each voxel's coefficients lie together in memory.
_FINITE_GROUP = 64


def finite_voxels(sh: np.ndarray) -> np.ndarray:
    """Which voxels of ``sh`` (..., n_coeffs) have only finite coefficients: bool (...).

    One pass over the volume: a sum in the coefficients' own precision is finite unless a
    coefficient is NaN or infinite or the sum overflows, so only the voxels whose sum is not
    finite are looked at coefficient by coefficient (a float64 sum of float32 values never
    overflows, but converting every value costs more than the sum). Where each voxel's
    coefficients lie together in memory (C order, an MRtrix image as ``dwi2fod`` writes it),
    numpy would sum each voxel's few coefficients in a call of its inner loop of their own,
    several times the cost of reading them: there the sums are of groups of voxels
    contiguous in memory, and the coefficients of the voxels of a group whose sum is not
    finite (and of those past the last whole group) are looked at. The same flags in every
    layout."""
    sh = np.asarray(sh)
    rows = _voxel_rows(sh)
    if rows is None:
        return _finite_by_sums(sh)
    voxels, order = rows
    n, c = voxels.shape
    whole = n - n % _FINITE_GROUP
    with np.errstate(over="ignore", invalid="ignore"):  # what the look at the coefficients sorts out
        groups = np.isfinite(voxels[:whole].reshape(-1, _FINITE_GROUP * c).sum(axis=1))
    finite = np.empty(n, bool)
    finite[:whole].reshape(-1, _FINITE_GROUP)[...] = groups[:, None]
    suspect = np.concatenate([(np.flatnonzero(~groups)[:, None] * _FINITE_GROUP + np.arange(_FINITE_GROUP)).ravel(),
                              np.arange(whole, n)])
    finite[suspect] = np.isfinite(voxels[suspect]).all(axis=-1)
    return _to_spatial(finite, sh.shape[:-1], order)


def _voxel_rows(sh: np.ndarray) -> tuple[np.ndarray, str] | None:
    """``sh`` (..., n_coeffs) as a C-contiguous view (voxels, n_coeffs), voxels numbered in
    ``order`` ("C" or "F" over the spatial axes), where each voxel's coefficients lie
    together and the voxels one after the other in one of those orders; else None."""
    if sh.ndim < 2 or sh.size == 0:
        return None
    if sh.flags.c_contiguous:
        return sh.reshape(-1, sh.shape[-1]), "C"
    by_voxel = np.moveaxis(sh, -1, 0)
    if by_voxel.flags.f_contiguous:
        return by_voxel.reshape(sh.shape[-1], -1, order="F").T, "F"
    return None


def _finite_by_sums(sh: np.ndarray) -> np.ndarray:
    """:func:`finite_voxels` by one sum a voxel, then a look at the coefficients of those
    whose sum is not finite."""
    with np.errstate(over="ignore", invalid="ignore"):  # what the second look sorts out
        finite = np.isfinite(sh.sum(axis=-1, keepdims=True))[..., 0]  # an array also for one voxel
    suspect = ~finite
    if suspect.any():
        finite[suspect] = np.isfinite(sh[suspect]).all(axis=-1)
    return finite


def sshopm_peaks(
    sh: np.ndarray,
    mask: np.ndarray | None = None,
    options: PeaksOptions = PeaksOptions(),
    backend: str = "auto",
    *,
    basis: str = "mrtrix",
    finite: np.ndarray | None = None,
    progress: Callable[[float], None] | None = None,
    empty: Callable[..., np.ndarray] = np.empty,
    chunk_voxels: int | None = None,
) -> PeaksResult:
    """Fiber peaks of SH coefficients ``sh`` (..., n_coeffs) in ``basis`` (mrtrix|dipy).

    ``mask`` (...) selects voxels; voxels whose coefficients are not all finite give NaN
    peaks and are counted in ``stats["nonfinite_voxels"]``. ``finite``: :func:`finite_voxels`
    of ``sh``, where the caller has it (a job that warned about those voxels first); the
    same peaks, without a second pass over the volume. ``progress(fraction)`` is called
    between chunks of ``chunk_voxels`` voxels (the backend's default when None); an
    exception it raises stops the run (cancellation). ``empty``: how to allocate, like
    ``np.empty``, the host copy of the selected voxels made when some are left out
    (``gpu.cuda.host_memory.host_empty(backend)`` gives page-locked memory, which a GPU reads by
    DMA). The backend's kernels and matrices come from :func:`prepare_peaks`, made here
    if no earlier call made them.
    """
    started = time.perf_counter()
    sh = np.asarray(sh)
    if sh.ndim < 1:
        raise ValueError("sh must have the SH coefficients along its last axis")
    lmax = lmax_from_ncoeffs(sh.shape[-1])
    spatial = sh.shape[:-1]
    coeffs_t, order = _coefficients_by_voxel(sh)
    selected = np.ones(coeffs_t.shape[1], bool)
    if mask is not None:
        mask = np.asarray(mask)
        if mask.shape != spatial:
            raise ValueError(f"mask shape {mask.shape} does not match the SH volume's spatial shape {spatial}")
        selected &= mask.reshape(-1, order=order).astype(bool)
    if finite is None:
        finite = finite_voxels(sh)
    elif np.shape(finite) != spatial:
        raise ValueError(f"finite has shape {np.shape(finite)}, not the SH volume's spatial shape {spatial}; "
                         "pass finite_voxels(sh), or none")
    finite = np.asarray(finite, bool).reshape(-1, order=order)
    nonfinite = int((selected & ~finite).sum())
    selected &= finite
    chosen = resolve_backend(backend)
    # np.compress gives the selected voxels contiguous, a boolean index does not (and the
    # backends would copy them again; docs/benchmarks.md, measured design choices); in the
    # layout they have, each voxel's coefficients together or each coefficient's voxels
    if selected.all():
        coeffs = coeffs_t
    else:
        n_coeffs, n_selected = coeffs_t.shape[0], int(np.count_nonzero(selected))
        if coeffs_t.T.flags.c_contiguous:
            coeffs = np.compress(selected, coeffs_t.T, axis=0, out=empty((n_selected, n_coeffs), coeffs_t.dtype)).T
        else:
            coeffs = np.compress(selected, coeffs_t, axis=1, out=empty((n_coeffs, n_selected), coeffs_t.dtype))
    waited = time.perf_counter()
    preparation = _prepared(lmax, basis, options, chosen)
    prepared_at = time.perf_counter()
    run = _run_backend(chosen, lmax, coeffs, preparation, progress=progress,
                       **({"chunk_voxels": chunk_voxels} if chunk_voxels else {}))
    n_total = coeffs_t.shape[1]
    k = options.npeaks
    if coeffs is coeffs_t:  # every voxel computed: the backend's arrays are the results
        directions = np.asarray(run["directions"], np.float32)
        amplitudes = np.asarray(run["amplitudes"], np.float32)
        count = np.asarray(run["count"], np.uint8)
    else:
        directions = np.full((n_total, k, 3), np.nan, np.float32)
        amplitudes = np.full((n_total, k), np.nan, np.float32)
        count = np.zeros(n_total, np.uint8)
        where = np.flatnonzero(selected)  # an integer index scatters faster than a boolean one
        directions[where] = run["directions"]
        amplitudes[where] = run["amplitudes"]
        count[where] = run["count"]
    voxel_stats = run["stats"]
    seeds = int(voxel_stats[:, S_SEEDS].sum())
    n_sel = int(selected.sum())
    stats = {
        "backend": chosen,
        "device": device_name() if chosen == "cuda" else "cpu",
        "lmax": lmax,
        "basis": basis,
        "voxels": n_total,
        "voxels_processed": n_sel,
        "nonfinite_voxels": nonfinite,
        "options": asdict(options),
        "starts_climbed_per_voxel": seeds / n_sel if n_sel else 0.0,
        "iterations_per_climb": _iteration_summary(run["hist"]),
        "max_iterations_in_a_voxel": int(voxel_stats[:, S_MAX_ITERATIONS].max(initial=0)),
        "iterations_total": int(voxel_stats[:, S_ITERATIONS].sum()),
        "starts_hit_cap": int(voxel_stats[:, S_CAPPED].sum()),
        "voxels_with_capped_starts": int((voxel_stats[:, S_CAPPED] > 0).sum()),
        "seconds": {
            "prepare": prepared_at - started,
            # of which making the backend ready (prepare_peaks), or waiting for the thread making it
            "prepare_kernels": prepared_at - waited,
            "compute": run["compute_seconds"],
            **({"kernel": run["kernel_seconds"]} if "kernel_seconds" in run else {}),
            **{f"kernel_{name}": value for name, value in run.get("kernel_seconds_by_phase", {}).items()},
            "total": time.perf_counter() - started,
        },
    }
    return PeaksResult(
        directions=_to_spatial(directions, spatial, order),
        amplitudes=_to_spatial(amplitudes, spatial, order),
        count=_to_spatial(count, spatial, order),
        stats=stats,
    )
