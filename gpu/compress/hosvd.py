"""Tucker compression: ST-HOSVD with a tolerance or fixed ranks, optional HOOI sweeps, and
the core computed by the low-precision TTMc of :mod:`gpu.compress.ttmc`.

Sequentially truncated HOSVD (Vannieuwenhoven, Vandebril & Meerbergen 2012, Algorithm 3.2;
Tensor Toolbox ``sthosvd``, TuckerMPI): for each mode n, the Gram matrix
``G_n = Y_(n) Y_(n)ᵀ`` of the partially truncated tensor gives eigenpairs (λ_i, v_i); the rank
is the smallest r with ``Σ_{i>r} λ_i ≤ τ²‖X‖²/N`` and ``Y ← Y ×_n U_nᵀ`` with
``U_n = [v_1 … v_r]``. Then ``‖X − G ×_n U_n‖² = ‖X‖² − ‖G‖² ≤ τ²‖X‖²``.
HOOI (De Lathauwer, De Moor & Vandewalle 2000, Algorithm 4.2) refines each U_n as the
leading left singular vectors of ``(X ×_{m≠n} U_mᵀ)_(n)``.

The stored core ``Ĝ`` is the TTMc ``X ×_1 U_1ᵀ … ×_N U_Nᵀ`` in the requested precision. The
error of the decompressed volume is exact, not estimated: with orthonormal U_n the two parts
are orthogonal, ``‖X − Ĝ ×_n U_n‖² = (‖X‖² − ‖G‖²) + ‖G − Ĝ‖²``, where G is the float64 core.
To meet τ with an FP16 core, truncation gets ``τ²(1 − ρ)`` and the core's rounding the rest
(ρ ≤ ½, from the FP16 unit roundoff); if the achieved error still exceeds τ, the core is
recomputed in FP32 and the report says so.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from gpu.cuda.backend import resolve_backend
from gpu.compress.ttmc import TTMcReport, ttmc
from gpu.compress.bound import get_precision

__all__ = ["TuckerDecomposition", "st_hosvd", "tucker_reconstruct", "mode_products", "recover_core", "select_rank",
           "array_module", "namespace_of", "to_host"]

# Float16 and float32 values (2^-149 to 2^128) times powers of two whose exponents add up to at
# most this stay inside float64's normal range (2^-1022 to 2^1024), so each product is exact.
_EXACT_REACH = 800


@dataclass
class TuckerDecomposition:
    """``X ≈ core ×_n diag(2^{−core_exp[n]}) ×_n factors[n]``.

    ``core`` is stored in ``core_precision`` (FP16 values stay Kronecker-scaled so they fit
    the FP16 range; ``core_exp`` undoes that exactly), where the volume was: a host array, or
    a CuPy array for a volume on the device. Errors are absolute Frobenius norms.
    """

    core: np.ndarray
    core_exp: list[np.ndarray]
    factors: list[np.ndarray]
    norm_x: float
    truncation_error: float
    core_error: float
    tolerance: float | None
    precision: str
    core_precision: str
    ttmc_report: TTMcReport
    times: dict[str, float] = field(default_factory=dict)

    @property
    def ranks(self) -> tuple[int, ...]:
        return tuple(int(f.shape[1]) for f in self.factors)

    @property
    def relative_error(self) -> float:
        if self.norm_x == 0:
            return 0.0
        return math.hypot(self.truncation_error, self.core_error) / self.norm_x

    @property
    def bound(self) -> float:
        """The TTMc forward error bound on the core, relative to ‖X‖."""
        return self.ttmc_report.bound / self.norm_x if self.norm_x else 0.0


def select_rank(eigenvalues: np.ndarray, threshold: float) -> int:
    """Smallest r ≥ 1 with ``Σ_{i>r} λ_i ≤ threshold`` (λ descending, negatives as 0)."""
    lam = np.clip(np.asarray(eigenvalues, dtype=np.float64), 0.0, None)
    tail = np.concatenate([np.cumsum(lam[::-1])[::-1], [0.0]])  # tail[r] = Σ_{i≥r} λ_i
    return int(max(1, np.argmax(tail <= threshold)))


def array_module(backend: str):
    """CuPy on the CUDA backend when it is installed, else numpy."""
    if resolve_backend(backend) == "cuda":
        try:
            import cupy

            return cupy
        except ImportError:
            pass
    return np


def namespace_of(a):
    """CuPy for a CuPy array, else numpy."""
    cupy = sys.modules.get("cupy")
    return cupy if cupy is not None and isinstance(a, cupy.ndarray) else np


def to_host(a) -> np.ndarray:
    """A host copy of a CuPy or numba device array; a host array as it is."""
    if hasattr(a, "copy_to_host"):
        return a.copy_to_host()
    return a.get() if namespace_of(a) is not np else np.asarray(a)


def _unfolded(xp, y, mode):
    """C-contiguous ``y`` as (A, I_mode, B), the modes before ``mode`` and after it merged (a view)."""
    y = xp.ascontiguousarray(y)
    return y.reshape(math.prod(y.shape[:mode]), y.shape[mode], math.prod(y.shape[mode + 1:]))


def _mode_product(xp, g, m, mode):
    """``G ×_mode M`` (M is J × I_mode), C-contiguous: a matrix product per slice of the
    unfolding, no transposed copy of ``g``; on the device one strided-batched cuBLAS GEMM
    (CuPy's matmul costs several times its host time: the budget search makes dozens)."""
    if xp is not np and g.dtype == m.dtype == np.float64:
        from gpu.compress.backend_cuda import mode_product_launch

        out, launch = mode_product_launch(xp, g, m, mode, get_precision("fp64"))
        launch()
        return out
    y = _unfolded(xp, g, mode)
    if y.shape[2] == 1:  # the last mode: one product
        out = y.reshape(y.shape[0], y.shape[1]) @ m.T
    else:
        out = xp.matmul(m, y)
    return out.reshape(*g.shape[:mode], m.shape[0], *g.shape[mode + 1:])


def _mode_product_t(xp, y, u, mode):
    """``Y ×_mode Uᵀ`` in float64 (U is I × r)."""
    return _mode_product(xp, y, u.T, mode)


def _gram(xp, y, mode):
    """``Y_(mode) Y_(mode)ᵀ``: per slice of the unfolding, summed (no transposed copy of ``y``)."""
    z = _unfolded(xp, y, mode)
    if z.shape[0] == 1:
        return z[0] @ z[0].T
    if z.shape[2] == 1:
        flat = z.reshape(z.shape[0], z.shape[1])
        return flat.T @ flat
    return xp.matmul(z, z.transpose(0, 2, 1)).sum(axis=0)


def recover_core(core, core_exp: list[np.ndarray]):
    """``core ×_n diag(2^{−e_n})`` in float64 (exact), where ``core`` is (host or device)."""
    xp = namespace_of(core)
    exponents = [np.asarray(to_host(e), dtype=np.int64) for e in core_exp]
    g = core.astype(xp.float64)
    shapes = [[len(e) if m == n else 1 for m in range(core.ndim)] for n, e in enumerate(exponents)]
    reach = sum(int(np.abs(e).max(initial=0)) for e in exponents)
    if reach and (core.dtype.itemsize > 4 or reach > _EXACT_REACH):
        # a product by one power of two after another could leave float64's normal range
        total = xp.zeros(core.shape, dtype=xp.int64)
        for e, shape in zip(exponents, shapes):
            total -= xp.asarray(e.reshape(shape))
        return xp.ldexp(g, total)
    for e, shape in zip(exponents, shapes):  # by powers of two, a mode at a time: exact
        g *= xp.asarray(np.ldexp(1.0, -e).reshape(shape))
    return g


def mode_products(g, factors):
    """``G ×_1 U_1 … ×_N U_N`` (U_n is I_n × r_n), a mode at a time in mode order, where ``g``
    is (numpy on the host, CuPy on the device); the factors must be there too. C-contiguous."""
    xp = namespace_of(g)
    for n, u in enumerate(factors):
        g = _mode_product(xp, g, u, n)
    return g


def tucker_reconstruct(core: np.ndarray, factors: list[np.ndarray], core_exp=None) -> np.ndarray:
    """``Ĝ ×_1 U_1 … ×_N U_N`` in float64 on the CPU (the decompression)."""
    g = recover_core(core, core_exp) if core_exp is not None else np.asarray(core, dtype=np.float64)
    return mode_products(g, [np.asarray(u, dtype=np.float64) for u in factors])


def st_hosvd(
    x,
    *,
    tol: float | None = None,
    ranks: tuple[int, ...] | None = None,
    precision: str = "fp16",
    scaling: str = "kronecker",
    order: str = "ssf",
    hooi_sweeps: int = 0,
    backend: str = "auto",
    on_overflow: str = "fallback",
    progress=lambda fraction: None,
) -> TuckerDecomposition:
    """Tucker-compress ``x`` (order 3–5) to relative error ``tol`` or to fixed ``ranks``."""
    if (tol is None) == (ranks is None):
        raise ValueError("give exactly one of tol (relative error) or ranks")
    if tol is not None and not 0 < tol < 1:
        raise ValueError(f"tol must lie in (0, 1), got {tol}")
    if ranks is not None:
        ranks = tuple(int(r) for r in ranks)
        if len(ranks) != x.ndim or any(not 1 <= r <= s for r, s in zip(ranks, x.shape)):
            raise ValueError(f"ranks must give one rank per mode, each in 1..I_n, for shape {x.shape}; got {ranks}")
    if hooi_sweeps < 0:
        raise ValueError("hooi_sweeps must be ≥ 0")
    prec = get_precision(precision)
    xp = array_module(backend)
    times: dict[str, float] = {}
    start = time.perf_counter()
    x64 = xp.asarray(x, dtype=xp.float64)
    norm2 = float(xp.sum(x64 * x64))
    n_modes = x64.ndim
    reserve = 0.0 if tol is None else min(0.5, (2 * prec.u_store * math.sqrt(n_modes) / tol) ** 2)
    threshold = None if tol is None else tol**2 * (1 - reserve) * norm2 / n_modes
    factors: list = [None] * n_modes
    y = x64
    for n in range(n_modes):
        lam, vec = xp.linalg.eigh(_gram(xp, y, n))
        lam, vec = lam[::-1], vec[:, ::-1]
        r = ranks[n] if ranks is not None else select_rank(to_host(lam), threshold)
        factors[n] = vec[:, :r]
        y = _mode_product_t(xp, y, factors[n], n)
        progress(0.5 * (n + 1) / n_modes)
    times["sthosvd"] = time.perf_counter() - start
    if hooi_sweeps:
        start = time.perf_counter()
        for _ in range(hooi_sweeps):
            for n in range(n_modes):
                z = x64
                for m in range(n_modes):
                    if m != n:
                        z = _mode_product_t(xp, z, factors[m], m)
                lam, vec = xp.linalg.eigh(_gram(xp, z, n))
                factors[n] = vec[:, ::-1][:, : factors[n].shape[1]]
        y = x64
        for m in range(n_modes):
            y = _mode_product_t(xp, y, factors[m], m)
        times["hooi"] = time.perf_counter() - start
    g64 = y  # the float64 core, where it was computed
    truncation = math.sqrt(max(norm2 - float(xp.sum(g64 * g64)), 0.0))
    factors_host = [np.ascontiguousarray(to_host(f)) for f in factors]
    progress(0.6)
    del x64, y

    core_precision = precision
    while True:
        core, core_exp, report = _core(x, factors_host, core_precision, scaling, order, backend, on_overflow)
        core_error = float(xp.linalg.norm(recover_core(xp.asarray(core), core_exp) - g64))
        achieved = math.hypot(truncation, core_error)
        if tol is None or achieved <= tol * math.sqrt(norm2) or core_precision == "fp64":
            break
        core_precision = {"fp16": "fp32", "fp32": "fp64"}[core_precision]
    times["ttmc"] = report.total_time
    progress(1.0)
    return TuckerDecomposition(
        core=core,
        core_exp=core_exp,
        factors=factors_host,
        norm_x=math.sqrt(norm2),
        truncation_error=truncation,
        core_error=core_error,
        tolerance=tol,
        precision=precision,
        core_precision=core_precision,
        ttmc_report=report,
        times=times,
    )


def _core(x, factors, precision, scaling, order, backend, on_overflow):
    """The core by the TTMc; Kronecker-scaled FP16 stays scaled (exponents kept)."""
    keep_scaled = scaling == "kronecker" and precision == "fp16"
    result = ttmc(
        x, [f.T for f in factors], precision=precision, scaling=scaling, order=order,
        backend=backend, on_overflow=on_overflow, recover=not keep_scaled,
    )
    xp = namespace_of(x)
    y = to_host(result.y) if xp is np else xp.asarray(result.y)  # where the volume is
    if result.row_exp is not None:
        return y, result.row_exp, result.report
    with np.errstate(over="ignore"):
        core = y.astype(get_precision(result.report.precision).storage)
    if not bool(xp.all(xp.isfinite(core))):
        # An unscaled FP16 core can exceed 65504 even when the chain did not: keep it in FP32.
        core = y.astype(np.float32)
    return core, [np.zeros(s, np.int64) for s in core.shape], result.report
