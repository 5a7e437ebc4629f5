"""CUDA backend of the TTMc: numba.cuda kernels for norms, scaling, recovery and the GEMM.

Kernels (all on the C-ordered tensor, no transposed copies):

* ``scale_scan``: the one pass over X of a TTMc: ``X̃ = X ×_n diag(2^{e_n})`` rounded once
  to the storage format (or no output, for a scan alone) together with ``‖X‖_F²`` for the
  bound (poster Section 3), ``max |X̃|`` for the headroom of the Kronecker scales (poster
  Section 2), the non-finite inputs and the values the cast overflows;
* ``gather``: the sampled entries from which the Kronecker scales are chosen;
* ``stats``: every mode's exact slice maxima ``max |X|`` (with ``‖X‖_F²`` and the
  non-finite count), for exact Kronecker scales. The tensor is viewed as rows (leading
  modes) × columns (trailing modes); column maxima stay in shared memory, row maxima are
  reduced in groups.
* ``kron_scale``: ``X̃ = X ×_n diag(2^{e_n})`` rounded once to the storage format; it also
  recovers ``Y = Ỹ ×_n diag(2^{−r_n})`` and counts non-finite outputs.
* ``fiber_scale`` / ``fiber_unscale``: the one-sided scaling of ``X_(n)``'s columns.
* ``strided_gemm``: a shared-memory tiled batched GEMM ``C[b] = A[b] B[b]`` with element
  strides, accumulating in FP32 (FP16/FP32) or FP64; the mode-n product runs on the
  ``(P, I_n, Q)`` view as ``Y[p] = U X[p]``.

Dense GEMMs go through cuBLAS (``cublasGemmStridedBatchedEx`` through CuPy's bindings:
FP32 accumulation for FP16, no TF32; :func:`_cublas_mode_product` says why not a
higher-level CuPy call) when CuPy is installed, because it measures faster
(``python3 -m bench.ttmc``, docs/decisions/ttmc-cublas-direct.md); numba has no access to
the tensor cores. ``gemm='numba'`` forces our kernel; CuPy stays optional.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
import warnings

import numpy as np
from numba import cuda, float32, float64

from gpu.compress.bound import Precision
from gpu.compress.backend_cpu import mode_view
from gpu.compress.scaled_ttm import fused_shape_ok, padded_factor, scaled_ttm_launch

__all__ = ["CudaTTMcOps", "mode_product_launch", "strided_gemm_kernel", "stats_kernel", "kron_scale_kernel",
           "scale_scan_kernel"]

_BLOCK = 256
_GROUP = 32  # rows whose maxima are reduced together (one pair of barriers per group)
_PARTS = _BLOCK // _GROUP  # threads per row in the first reduction stage
_CHUNK = 2048  # column maxima kept in shared memory per block
_TILE = 16
_UNROLL = 8  # loads in flight per thread in the scale-and-scan pass (16 measured slower for FP16 data)
_ROW_GROUP = 8  # rows a scale-and-scan block takes per column chunk
_SCAN_BLOCKS = 8192  # most scale-and-scan blocks per launch (they stride over the chunks)


@cuda.jit(device=True)
def _block_reduce(buf, t, value, take_max):
    """Sum (or max) of ``value`` over the _BLOCK threads of a block (tree in shared ``buf``)."""
    cuda.syncthreads()
    buf[t] = value
    cuda.syncthreads()
    half = _BLOCK // 2
    while half > 0:
        if t < half:
            if take_max:
                buf[t] = max(buf[t], buf[t + half])
            else:
                buf[t] += buf[t + half]
        cuda.syncthreads()
        half //= 2
    return buf[0]


@cuda.jit
def stats_kernel(x, n_rows, n_cols, rows_per_block, lead_dims, lead_off, trail_dims, trail_off,
                 maxima, sumsq, nonfinite):
    """Slice maxima of every mode, Σx² and the non-finite count of the (rows × cols) view.

    Maxima are rounded to float32 (as the CPU backend does, so both choose the same scales)
    and gathered with float64 atomics into one buffer that is copied back once.
    """
    colmax = cuda.shared.array(_CHUNK, float32)
    buf = cuda.shared.array((_GROUP, _BLOCK), float32)
    buf2 = cuda.shared.array((_GROUP, _PARTS), float32)
    ssbuf = cuda.shared.array(_BLOCK, float64)
    t = cuda.threadIdx.x
    c0 = cuda.blockIdx.y * _CHUNK
    c1 = min(c0 + _CHUNK, n_cols)
    r_start = cuda.blockIdx.x * rows_per_block
    r_end = min(r_start + rows_per_block, n_rows)
    for c in range(t, _CHUNK, _BLOCK):
        colmax[c] = 0.0
    ss = 0.0
    bad = 0
    cuda.syncthreads()
    for rg in range(r_start, r_end, _GROUP):
        for j in range(_GROUP):
            r = rg + j
            vmax = float32(0.0)
            if r < r_end:
                for c in range(c0 + t, c1, _BLOCK):
                    a = abs(float64(x[r * n_cols + c]))
                    if not math.isfinite(a):
                        bad += 1
                        a = 0.0
                    af = float32(a)
                    if af > colmax[c - c0]:
                        colmax[c - c0] = af
                    if af > vmax:
                        vmax = af
                    ss += a * a
            buf[j, t] = vmax
        cuda.syncthreads()
        j = t // _PARTS
        part = t % _PARTS
        m = float32(0.0)
        for k in range(part * (_BLOCK // _PARTS), (part + 1) * (_BLOCK // _PARTS)):
            if buf[j, k] > m:
                m = buf[j, k]
        buf2[j, part] = m
        cuda.syncthreads()
        if t < _GROUP and rg + t < r_end:
            m = float32(0.0)
            for k in range(_PARTS):
                if buf2[t, k] > m:
                    m = buf2[t, k]
            r = rg + t
            for n in range(lead_dims.shape[0] - 1, -1, -1):
                cuda.atomic.max(maxima, lead_off[n] + r % lead_dims[n], float64(m))
                r //= lead_dims[n]
        cuda.syncthreads()
    for c in range(c0 + t, c1, _BLOCK):
        m = colmax[c - c0]
        rest = c
        for n in range(trail_dims.shape[0] - 1, -1, -1):
            cuda.atomic.max(maxima, trail_off[n] + rest % trail_dims[n], float64(m))
            rest //= trail_dims[n]
    total = _block_reduce(ssbuf, t, ss, False)
    if t == 0:
        cuda.atomic.add(sumsq, 0, total)
    if bad > 0:
        cuda.atomic.add(nonfinite, 0, float64(bad))


@cuda.jit
def kron_scale_kernel(x, out, n_rows, n_cols, row_factor, col_factor, limit, nonfinite):
    """``out[r, c] = x[r, c] · f_row[r] · f_col[c]`` (powers of two, one rounding).

    Blocks stride over rows, threads over the contiguous columns (coalesced, no division).
    Counts the values that are NaN or round to ±inf in ``out``'s format: ``|v| ≥ limit``,
    the first value that rounds to infinity (65520 for FP16), so ``out`` is not read back.
    """
    bad = 0
    for r in range(cuda.blockIdx.x, n_rows, cuda.gridDim.x):
        f_row = row_factor[r]
        base = r * n_cols
        for c in range(cuda.threadIdx.x, n_cols, cuda.blockDim.x):
            v = float64(x[base + c]) * (f_row * col_factor[c])
            out[base + c] = v
            if not abs(v) < limit:
                bad += 1
    if bad > 0:
        cuda.atomic.add(nonfinite, 0, bad)


@functools.cache
def scale_scan_kernel(work_dtype: np.dtype, unroll: int):
    """The scale-and-scan kernel for a working type and loads in flight per thread."""
    work = float32 if np.dtype(work_dtype) == np.float32 else float64

    @cuda.jit
    def scale_scan(x, out, write, n_rows, n_cols, row_factor, col_factor, scan):
        """``out[r, c] = x[r, c] · f_row[r] · f_col[c]`` (if ``write``), ``scan = [Σx², max |X̃|]``.

        One read of X gives X̃, the norm for the bound and the measured headroom of the
        Kronecker scales. Non-finite inputs make Σx² non-finite and values the cast
        overflows show in ``max |X̃|``, so the rare exact counts are a separate pass
        (:meth:`CudaTTMcOps.read_scan`) and the loop does per entry only the load, scale,
        store, square and max. A block takes a chunk of unroll·_BLOCK contiguous columns
        for _ROW_GROUP rows: each thread keeps its ``unroll`` column factors in registers
        and has ``unroll`` loads in flight (a few outstanding loads per thread do not cover
        HBM latency). ``work`` is float32 where that is exact (FP16/FP32 data, factors whose
        products stay normal in float32); Σx² stays float64.
        """
        red = cuda.shared.array(_BLOCK, float64)
        vals = cuda.local.array(unroll, work)
        facs = cuda.local.array(unroll, work)
        t = cuda.threadIdx.x
        n_chunks = (n_cols + unroll * _BLOCK - 1) // (unroll * _BLOCK)
        n_groups = (n_rows + _ROW_GROUP - 1) // _ROW_GROUP
        ss = 0.0
        top = work(0.0)
        for seg in range(cuda.blockIdx.x, n_chunks * n_groups, cuda.gridDim.x):
            group = seg // n_chunks
            c0 = (seg - group * n_chunks) * (unroll * _BLOCK) + t
            full = c0 + (unroll - 1) * _BLOCK < n_cols
            for u in range(unroll):
                c = c0 + u * _BLOCK
                facs[u] = work(col_factor[c]) if c < n_cols else work(0.0)
            for r in range(group * _ROW_GROUP, min(group * _ROW_GROUP + _ROW_GROUP, n_rows)):
                f_row = work(row_factor[r])
                base = r * n_cols + c0
                if full:
                    for u in range(unroll):
                        vals[u] = work(x[base + u * _BLOCK])
                    for u in range(unroll):
                        a = vals[u]
                        v = a * (f_row * facs[u])
                        if write:
                            out[base + u * _BLOCK] = v
                        ss += float64(a) * float64(a)
                        top = max(top, abs(v))
                else:
                    for u in range(unroll):
                        if c0 + u * _BLOCK < n_cols:
                            a = work(x[base + u * _BLOCK])
                            v = a * (f_row * facs[u])
                            if write:
                                out[base + u * _BLOCK] = v
                            ss += float64(a) * float64(a)
                            top = max(top, abs(v))
        ss = _block_reduce(red, t, ss, False)
        peak = _block_reduce(red, t, float64(top), True)
        if t == 0:
            cuda.atomic.add(scan, 0, ss)
            cuda.atomic.max(scan, 1, peak)

    return scale_scan




@cuda.jit
def gather_kernel(x, flat_index, values):
    for k in range(cuda.grid(1), flat_index.shape[0], cuda.gridsize(1)):
        values[k] = float64(x[flat_index[k]])


@cuda.jit
def count_nonfinite_kernel(x, nonfinite):
    bad = 0
    for idx in range(cuda.grid(1), x.shape[0], cuda.gridsize(1)):
        if not math.isfinite(float64(x[idx])):
            bad += 1
    if bad > 0:
        cuda.atomic.add(nonfinite, 0, bad)


@cuda.jit
def fiber_scale_kernel(x, out, n_p, n_i, n_q, target, s_out, inv_sq):
    """One-sided column scaling: fiber (p, ·, q) of ``X_(n)`` to max ≤ 2^target; Σ 2^{−2s}."""
    ssbuf = cuda.shared.array(_BLOCK, float64)
    t = cuda.threadIdx.x
    acc = 0.0
    for f in range(cuda.grid(1), n_p * n_q, cuda.gridsize(1)):
        p = f // n_q
        q = f - p * n_q
        base = p * n_i * n_q + q
        m = 0.0
        for i in range(n_i):
            a = abs(float64(x[base + i * n_q]))
            if a > m:
                m = a
        s = 0
        if m > 0.0:
            mant, e = math.frexp(m)
            if mant == 0.5:
                e -= 1
            s = target - e
        s_out[f] = s
        factor = math.ldexp(1.0, s)
        for i in range(n_i):
            out[base + i * n_q] = float64(x[base + i * n_q]) * factor
        acc += math.ldexp(1.0, -2 * s)
    total = _block_reduce(ssbuf, t, acc, False)
    if t == 0:
        cuda.atomic.add(inv_sq, 0, total)


@cuda.jit
def fiber_unscale_kernel(y, out, n_j, n_q, row_factor, s):
    """``out[p, j, q] = y[p, j, q] · 2^{−r_j} · 2^{−s_{pq}}`` (exact)."""
    for idx in range(cuda.grid(1), y.shape[0], cuda.gridsize(1)):
        q = idx % n_q
        pj = idx // n_q
        j = pj % n_j
        p = pj // n_j
        out[idx] = float64(y[idx]) * row_factor[j] * math.ldexp(1.0, -int(s[p * n_q + q]))


def _make_gemm(acc_t):
    @cuda.jit
    def gemm(a, b, c, m_dim, n_dim, k_dim, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn, batch):
        """``C[z] = A[z] B[z]`` in tiles of 16×16×16 with ``acc_t`` accumulation."""
        a_tile = cuda.shared.array((_TILE, _TILE), acc_t)
        b_tile = cuda.shared.array((_TILE, _TILE), acc_t)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        row = cuda.blockIdx.y * _TILE + ty
        col = cuda.blockIdx.x * _TILE + tx
        for z in range(cuda.blockIdx.z, batch, cuda.gridDim.z):
            acc = acc_t(0.0)
            for k0 in range(0, k_dim, _TILE):
                ka = k0 + tx
                kb = k0 + ty
                if row < m_dim and ka < k_dim:
                    a_tile[ty, tx] = acc_t(a[z * sab + row * sam + ka * sak])
                else:
                    a_tile[ty, tx] = acc_t(0.0)
                if kb < k_dim and col < n_dim:
                    b_tile[ty, tx] = acc_t(b[z * sbb + kb * sbk + col * sbn])
                else:
                    b_tile[ty, tx] = acc_t(0.0)
                cuda.syncthreads()
                for kk in range(_TILE):
                    acc += a_tile[ty, kk] * b_tile[kk, tx]
                cuda.syncthreads()
            if row < m_dim and col < n_dim:
                c[z * scb + row * scm + col * scn] = acc

    return gemm


strided_gemm_kernel = {np.dtype(np.float32): _make_gemm(float32), np.dtype(np.float64): _make_gemm(float64)}


def _on_device(a) -> bool:
    return hasattr(a, "copy_to_host") or hasattr(a, "__cuda_array_interface__")


def _flat(a):
    """A 1-D numba view of a C-contiguous device array (CuPy arrays without a stream sync)."""
    arr = a if hasattr(a, "copy_to_host") else cuda.as_cuda_array(a, sync=False)
    return arr.reshape(arr.size)


def _launch_1d(n: int) -> tuple[int, int]:
    return max(1, min(math.ceil(n / _BLOCK), 4096)), _BLOCK


def _split(shape: tuple[int, ...], min_cols: int = 128) -> int:
    """Leading modes [0, k) become rows, trailing [k, N) columns, ≥ ``min_cols`` columns if possible."""
    k = len(shape)
    cols = 1
    while k > 0 and cols < min_cols:
        k -= 1
        cols *= shape[k]
    return k


# cudaDataType and cublasComputeType_t values (cuBLAS ≥ 11).
_CUDA_TYPE = {np.dtype(np.float16): 2, np.dtype(np.float32): 0, np.dtype(np.float64): 1}
_COMPUTE_32F, _COMPUTE_64F, _GEMM_DEFAULT = 68, 70, -1
_verified: set = set()
_direct_cublas = [True]  # cleared for the process if the direct call fails its check
_fused_ok = [True]  # cleared for the process if the fused kernel cannot be built


def _gemm_arguments(x, u, y, p: int, i: int, q: int, j: int) -> tuple:
    """The arguments of one cublasGemmStridedBatchedEx computing ``Y[p] = U X[p]`` on the
    C-ordered ``(P, I, Q)`` view of X and ``(P, J, Q)`` view of Y, with U (J×I) C-ordered:
    (transa, transb, m, n, k, A, lda, strideA, B, ldb, strideB, C, ldc, strideC, batch).

    cuBLAS is column-major, so it computes ``Y[p]ᵀ = X[p]ᵀ Uᵀ`` on the same buffers:
    m = Q, n = J, k = I, U shared by every batch (stride 0); for Q = 1, ``Yᵀ = U X₂ᵀ`` in
    one GEMM."""
    if q == 1:
        return 1, 0, j, p, i, u, i, 0, x, i, 0, y, j, 0, 1
    return 0, 0, q, j, i, x, q, i * q, u, i, 0, y, q, j * q, p


def _cublas_mode_product(cp, x, u, y, p, i, q, j, precision: Precision):
    """A launch of ``Y[p] = U X[p]`` as one cublasGemmStridedBatchedEx (no copies), through
    ``cupy.cuda.cublas``: the name CuPy's cuBLAS bindings have in its user-facing
    ``cupy.cuda`` namespace (implemented in ``cupy_backends``, whose modules are internal).

    FP16 data use FP32 compute (tensor cores, FP32 accumulation), FP32 plain FP32 (no
    TF32), FP64 FP64. No higher-level CuPy call does this GEMM in this form:

    * ``cupy.cublas.gemm`` multiplies one pair of 2-D float32/float64/complex matrices: no
      float16, no batch.
    * ``cupy.matmul`` on batched (3-D) operands promotes float16 to float32 copies of X and
      Y (CuPy 13), and where it keeps float16 with FP32 compute, it passes U, which every
      batch shares, as an array of pointers (cublasGemmBatchedEx after a kernel that
      builds them) rather than as one strided batch with stride 0. Its float32 compute
      type follows the process-wide ``CUPY_TF32``; the TTMc's error bound needs plain FP32.
      It measured several times slower in FP16 (docs/decisions/ttmc-cublas-direct.md); it
      stays the fallback when the binding is missing or disagrees.
    * ``cupyx`` has no GEMM taking a compute type.
    """
    cublas = cp.cuda.cublas
    dtype = np.dtype(precision.storage)
    kind = _CUDA_TYPE[dtype]
    compute = _COMPUTE_64F if dtype == np.float64 else _COMPUTE_32F
    scalar = np.float64 if compute == _COMPUTE_64F else np.float32
    alpha, beta = np.ones(1, scalar), np.zeros(1, scalar)
    ta, tb, m, n, k, a, lda, sa, b, ldb, sb, c, ldc, sc, batch = _gemm_arguments(x, u, y, p, i, q, j)
    handle = cp.cuda.device.get_cublas_handle()

    def launch():
        mode = cublas.getPointerMode(handle)
        cublas.setPointerMode(handle, 0)  # alpha and beta live on the host
        try:
            cublas.gemmStridedBatchedEx(
                handle, ta, tb, m, n, k, alpha.ctypes.data, a.data.ptr, kind, lda, sa,
                b.data.ptr, kind, ldb, sb, beta.ctypes.data, c.data.ptr, kind, ldc, sc,
                batch, compute, _GEMM_DEFAULT,
            )
        finally:
            cublas.setPointerMode(handle, mode)

    if dtype not in _verified:
        # Once per process and precision: the layout mapping against CuPy's matmul.
        launch()
        if q == 1:
            ref = cp.matmul(x.reshape(p, i).astype(scalar), u.T.astype(scalar))
        else:
            ref = cp.matmul(u.astype(scalar), x.reshape(p, i, q).astype(scalar))
        got = y.reshape(ref.shape).astype(scalar)
        scale = float(cp.abs(ref).max()) or 1.0
        if float(cp.abs(got - ref).max()) > 1e-2 * scale:
            raise RuntimeError("cuBLAS strided-batched GEMM disagrees with CuPy's matmul; use gemm='numba'")
        _verified.add(dtype)
    return launch


def mode_product_launch(cp, x, u, mode: int, precision: Precision):
    """``X ×_mode U`` (U is J × I_mode) in ``precision``'s storage type: the new C-ordered
    CuPy array and the launch that fills it, one cublasGemmStridedBatchedEx
    (:func:`_cublas_mode_product`), or CuPy's matmul where that call is unusable."""
    shape = tuple(int(s) for s in x.shape)
    p, i, q = mode_view(shape, mode)
    j = int(u.shape[0])
    xc, uc = cp.ascontiguousarray(cp.asarray(x)), cp.ascontiguousarray(cp.asarray(u))
    y = cp.empty(shape[:mode] + (j,) + shape[mode + 1:], dtype=precision.storage)
    if _direct_cublas[0]:
        try:
            return y, _cublas_mode_product(cp, xc, uc, y, p, i, q, j, precision)
        except Exception as exc:  # bindings missing or disagreeing: CuPy's matmul then
            warnings.warn(f"direct cuBLAS GEMM unusable ({exc}); using cupy.matmul", RuntimeWarning)
            _direct_cublas[0] = False
    if q == 1:
        a, b, out = xc.reshape(p, i), uc.T, y.reshape(p, j)
    else:
        a, b, out = uc, xc.reshape(p, i, q), y.reshape(p, j, q)
    return y, lambda: cp.matmul(a, b, out=out)


def _overflow_limit(dtype) -> float:
    """The smallest magnitude that rounds to infinity in ``dtype`` (inf for float64)."""
    info = np.finfo(dtype)
    if info.bits == 64:
        return math.inf
    return float(info.max) + float(info.eps) / 2 * 2.0 ** float(info.maxexp - 1)


def _factor_vector(exps: list[np.ndarray]) -> np.ndarray:
    """:func:`_kron_vector` in float32 when every factor is a normal float32 (exact either
    way): the column factors are read once per element, so half the bytes in L2."""
    total = _kron_vector(exps)
    if total.size and np.all((total >= 2.0**-126) & (total <= 2.0**127)):
        return total.astype(np.float32)
    return total


def _float32_exact(rows: np.ndarray, cols: np.ndarray) -> bool:
    """Whether every product of a row and a column factor is a normal float32 (exact then)."""
    return (
        rows.dtype == cols.dtype == np.float32
        and 2.0**-126 <= float(rows.min()) * float(cols.min())
        and float(rows.max()) * float(cols.max()) <= 2.0**127
    )


def _kron_vector(exps: list[np.ndarray]) -> np.ndarray:
    """Flattened ``2^{Σ_n e_n[i_n]}`` over the given modes (C order), exact in float64."""
    total = np.zeros(1, dtype=np.int64)
    for e in exps:
        total = (total[:, None] + np.asarray(e, dtype=np.int64)[None, :]).reshape(-1)
    return np.ldexp(1.0, total)


class CudaTTMcOps:
    """The TTMc operations on the GPU (or numba's simulator); times phases with CUDA events.

    Counters (non-finite values, ``‖S⁻¹‖``) stay on the device until the driver reads them,
    so a call synchronises only after the norms pass and at the end. With
    :meth:`start_log` every launch is also recorded, so a benchmark can replay the call's
    device work back to back (:meth:`replay`) and time the GPU apart from the host.
    """

    name = "cuda"

    def __init__(self, gemm: str = "auto") -> None:
        if gemm not in ("auto", "cublas", "numba"):
            raise ValueError(f"gemm must be auto, cublas or numba, not {gemm!r}")
        self._cupy = None
        if gemm in ("auto", "cublas"):
            try:
                import cupy

                self._cupy = cupy
            except ImportError:
                if gemm == "cublas":
                    raise RuntimeError("gemm='cublas' needs CuPy (pip install fibertensor[cuda])") from None
        self.gemm = "cublas" if self._cupy is not None else "numba"
        self.fuse = True  # the first product scales X in its loads where it can (benchmarks clear it)
        self.times: list = []
        self._log: list | None = None
        self._phase = ""

    @contextlib.contextmanager
    def phase(self, name: str):
        self._phase = name
        if _simulating():
            start = time.perf_counter()
            yield
            self.times.append((name, time.perf_counter() - start))
            return
        begin, end = cuda.event(), cuda.event()
        begin.record()
        yield
        end.record()
        self.times.append((name, begin, end))

    def finish(self) -> list[tuple[str, float]]:
        if _simulating():
            return list(self.times)
        cuda.synchronize()
        return [(name, cuda.event_elapsed_time(b, e) / 1e3) for name, b, e in self.times]

    def start_log(self) -> None:
        self._log = []

    def stop_log(self) -> list[tuple[str, object]]:
        log, self._log = self._log or [], None
        return log

    @staticmethod
    def replay(log, phase: str | None = None) -> None:
        """Enqueue the logged launches again (all, or one phase's), without synchronising."""
        for name, launch in log:
            if phase is None or name == phase:
                launch()

    def _run(self, launch) -> None:
        launch()
        if self._log is not None:
            self._log.append((self._phase, launch))

    def _kernel(self, kernel, grid, block, *args) -> None:
        self._run(lambda: kernel[grid, block](*args))

    # Arrays: CuPy when present (pooled allocations; its matmul consumes them directly),
    # numba device arrays otherwise.
    def empty(self, shape, dtype):
        if self._cupy is not None:
            return self._cupy.empty(shape, dtype=dtype)
        return cuda.device_array(shape, dtype=dtype)

    def _upload(self, host: np.ndarray):
        host = np.ascontiguousarray(host)
        if self._cupy is not None:
            return _flat(self._cupy.asarray(host))
        return cuda.to_device(host)

    def _zeros(self, n: int, dtype):
        return self._upload(np.zeros(n, dtype=dtype))

    def asarray(self, a, dtype=None):
        if _on_device(a):
            if dtype is None or np.dtype(a.dtype) == np.dtype(dtype):
                return a
            return self.cast(a, dtype)
        host = np.ascontiguousarray(a, dtype=dtype)
        if self._cupy is not None:
            return self._cupy.asarray(host)
        return cuda.to_device(host)

    def to_host(self, a) -> np.ndarray:
        if hasattr(a, "copy_to_host"):
            return a.copy_to_host()
        return self._cupy.asnumpy(a)

    @staticmethod
    def read_int(counter) -> int:
        return int(counter.copy_to_host()[0])

    @staticmethod
    def read_float(counter) -> float:
        return float(counter.copy_to_host()[0])

    def stats(self, x):
        shape = tuple(int(s) for s in x.shape)
        k = _split(shape)
        lead, trail = shape[:k], shape[k:]
        n_rows = int(np.prod(lead, dtype=np.int64))
        n_cols = int(np.prod(trail, dtype=np.int64))
        offsets = np.concatenate([[0], np.cumsum(shape)]).astype(np.int64)
        total = int(offsets[-1])
        # One buffer, one copy back: maxima, a spare slot (row maxima when k == 0), Σx², count.
        out = self._zeros(total + 3, np.float64)
        dims = self._upload(np.concatenate([lead if lead else (1,), trail]).astype(np.int64))
        offs = self._upload(np.concatenate([offsets[:k] if k else [total], offsets[k:-1]]).astype(np.int64))
        n_lead = max(k, 1)
        row_blocks = max(1, min(math.ceil(n_rows / _GROUP), 1024))
        rows_per_block = math.ceil(n_rows / row_blocks)
        grid = (math.ceil(n_rows / rows_per_block), math.ceil(n_cols / _CHUNK))
        self._kernel(
            stats_kernel, grid, _BLOCK, _flat(x), n_rows, n_cols, rows_per_block,
            dims[:n_lead], offs[:n_lead], dims[n_lead:], offs[n_lead:],
            out[: total + 1], out[total + 1 : total + 2], out[total + 2 :],
        )
        host = out.copy_to_host()
        return (
            [host[offsets[n] : offsets[n + 1]] for n in range(len(shape))],
            float(host[total + 1]),
            int(host[total + 2]),
        )

    def kron_scale(self, x, exps, dtype):
        shape = tuple(int(s) for s in x.shape)
        k = _split(shape)
        out = self.empty(shape, dtype)
        bad = self._zeros(1, np.int64)
        n_cols = int(np.prod(shape[k:], dtype=np.int64))
        n_rows = int(np.prod(shape[:k], dtype=np.int64))
        self._kernel(
            kron_scale_kernel, max(1, min(n_rows, 8192)), _BLOCK, _flat(x), _flat(out), n_rows, n_cols,
            self._upload(_kron_vector(exps[:k])), self._upload(_kron_vector(exps[k:])),
            _overflow_limit(dtype), bad,
        )
        return out, bad

    def gather(self, x, positions) -> np.ndarray:
        flat = np.ravel_multi_index(tuple(positions), tuple(int(v) for v in x.shape)).astype(np.int64)
        values = self._zeros(flat.size, np.float64)
        blocks, threads = _launch_1d(flat.size)
        self._kernel(gather_kernel, blocks, threads, _flat(x), self._upload(flat), values)
        return values.copy_to_host()

    def scale_scan(self, x, exps, dtype):
        """The fused scale-and-scan pass; ``exps=None``: no scaling, ``dtype=None``: no output."""
        shape = tuple(int(s) for s in x.shape)
        unroll = _UNROLL
        k = _split(shape, unroll * _BLOCK)
        n_rows = int(np.prod(shape[:k], dtype=np.int64))
        n_cols = int(np.prod(shape[k:], dtype=np.int64))
        segments = math.ceil(n_cols / (unroll * _BLOCK)) * math.ceil(n_rows / _ROW_GROUP)
        exps = exps if exps is not None else [np.zeros(n, np.int64) for n in shape]
        out = self.empty(shape, dtype) if dtype is not None else x
        scan = self._zeros(2, np.float64)
        rows, cols = _factor_vector(exps[:k]), _factor_vector(exps[k:])
        # float32 arithmetic is exact here: X̃ = x · (f_row · f_col) with a normal float32
        # product of powers of two rounds only when cast, and a float32 result too small to be
        # normal is below FP16's subnormals as well.
        exact_in_f32 = (
            np.dtype(x.dtype).itemsize <= 4
            and (dtype is None or np.dtype(dtype).itemsize <= 4)
            and _float32_exact(rows, cols)
        )
        kernel = scale_scan_kernel(np.dtype(np.float32 if exact_in_f32 else np.float64), unroll)
        self._kernel(
            kernel, max(1, min(segments, _SCAN_BLOCKS)), _BLOCK, _flat(x), _flat(out), dtype is not None, n_rows, n_cols,
            self._upload(rows), self._upload(cols), scan,
        )
        written = out if dtype is not None else None
        return written, (scan, x, written, _overflow_limit(dtype if dtype is not None else np.float64))

    def read_scan(self, handle) -> tuple[float, float, int, int]:
        """``(Σx², max |X̃|, non-finite inputs, non-finite values written)``, as the CPU backend.

        The counts cost a pass each, run only when the totals show there is something to count.
        """
        scan, x, written, limit = handle
        ss, top = (float(v) for v in scan.copy_to_host())
        bad_in = 0 if math.isfinite(ss) else self.read_int(self.count_nonfinite(x))
        bad_out = 0
        if written is not None and (bad_in or top >= limit):
            bad_out = self.read_int(self.count_nonfinite(written))
        return ss, top, bad_in, bad_out

    def fused_ttm_factors(self, x, exps, mode: int, rows: int, precision: Precision):
        """The float32 row and column factors :meth:`scaled_ttm` takes, or None where the fused
        kernel does not run: it needs an FP16 chain, CuPy arrays on a real GPU, float32 X, a
        view the kernel takes and float32-exact factors. Computed once per call: they cost
        host time in proportion to X's size."""
        if not self.fuse or precision.name != "fp16" or self._cupy is None or _simulating() or not _fused_ok[0]:
            return None
        if np.dtype(x.dtype) != np.dtype(np.float32):
            return None
        p, i, q = mode_view(tuple(int(s) for s in x.shape), mode)
        if not fused_shape_ok(p, i, q, rows):
            return None
        rows_f, cols_f = _factor_vector(exps[: mode + 1]), _factor_vector(exps[mode + 1 :])
        return (rows_f, cols_f, exps) if _float32_exact(rows_f, cols_f) else None

    def scaled_ttm(self, x, factors, u, mode: int, precision: Precision):
        """``fp16(X ×_n diag(2^{e_n})) ×_mode U`` in one kernel (X̃ never stored) and the scan
        handle of :meth:`scale_scan` (nothing written, so no cast to count); ``factors`` from
        :meth:`fused_ttm_factors`. If the kernel
        cannot be built here (no NVRTC), it warns once and runs the two steps instead."""
        cp = self._cupy
        shape = tuple(int(s) for s in x.shape)
        p, i, q = mode_view(shape, mode)
        j = int(u.shape[0])
        xc = cp.ascontiguousarray(cp.asarray(x))
        y = cp.empty(shape[:mode] + (j,) + shape[mode + 1 :], dtype=np.float16)
        rows_f, cols_f, exps = factors
        u_pad = cp.asarray(padded_factor(u))
        f_row, f_col = cp.asarray(rows_f), cp.asarray(cols_f)
        scan = self._zeros(2, np.float64)
        launch = scaled_ttm_launch(
            xc.data.ptr, u_pad.data.ptr, y.data.ptr, f_row.data.ptr, f_col.data.ptr,
            _pointer(scan), p, i, q, j,
        )
        try:
            launch()
        except Exception as exc:  # NVRTC or the linker missing: the unfused steps, same numbers
            warnings.warn(f"fused scaled TTM unusable ({exc}); scaling and multiplying apart", RuntimeWarning)
            _fused_ok[0] = False
            written, handle = self.scale_scan(x, exps, np.float16)
            return self.ttm(written, self.asarray(u, np.float16), mode, precision), handle
        if self._log is not None:
            keep = (xc, u_pad, y, f_row, f_col, scan)  # the buffers the pointers name

            def replay(keep=keep):
                launch()

            self._log.append((self._phase, replay))
        return y, (scan, x, None, _overflow_limit(np.float16))

    def cast(self, x, dtype):
        out, _ = self.kron_scale(x, [np.zeros(int(s), np.int64) for s in x.shape], dtype)
        return out

    def count_nonfinite(self, x):
        bad = self._zeros(1, np.int64)
        blocks, threads = _launch_1d(int(x.size))
        self._kernel(count_nonfinite_kernel, blocks, threads, _flat(x), bad)
        return bad

    def ttm(self, x, u, mode: int, precision: Precision):
        shape = tuple(int(s) for s in x.shape)
        p, i, q = mode_view(shape, mode)
        j = int(u.shape[0])
        out_shape = shape[:mode] + (j,) + shape[mode + 1 :]
        if self.gemm == "cublas":
            y, launch = mode_product_launch(self._cupy, x, u, mode, precision)
            if not _direct_cublas[0]:
                self.gemm = "cupy-matmul"
            self._run(launch)
            return y
        y = self.empty(out_shape, precision.storage)
        kernel = strided_gemm_kernel[np.dtype(precision.accumulate)]
        if q == 1:
            # Y (P×J) = X (P×I) · Uᵀ (I×J): U read through strides, no transposed copy.
            args = (_flat(x), _flat(u), _flat(y), p, j, i, 0, i, 1, 0, 1, i, 0, j, 1, 1)
            grid = (math.ceil(j / _TILE), math.ceil(p / _TILE), 1)
        else:
            args = (_flat(u), _flat(x), _flat(y), j, q, i, 0, i, 1, i * q, q, 1, j * q, q, 1, p)
            grid = (math.ceil(q / _TILE), math.ceil(j / _TILE), min(p, 65535))
        self._kernel(kernel, grid, (_TILE, _TILE), *args)
        return y

    def fiber_scale(self, x, mode: int, target: int, dtype):
        shape = tuple(int(s) for s in x.shape)
        p, i, q = mode_view(shape, mode)
        out = self.empty(shape, dtype)
        s = self._zeros(p * q, np.int32)
        inv_sq = self._zeros(1, np.float64)
        blocks, threads = _launch_1d(p * q)
        self._kernel(fiber_scale_kernel, blocks, threads, _flat(x), _flat(out), p, i, q, target, s, inv_sq)
        return out, s, inv_sq

    def read_norm(self, inv_sq) -> float:
        return math.sqrt(self.read_float(inv_sq))

    def fiber_unscale(self, y, mode: int, row_exp, s, dtype):
        shape = tuple(int(v) for v in y.shape)
        _, j, q = mode_view(shape, mode)
        out = self.empty(shape, dtype)
        blocks, threads = _launch_1d(int(np.prod(shape, dtype=np.int64)))
        self._kernel(
            fiber_unscale_kernel, blocks, threads,
            _flat(y), _flat(out), j, q, self._upload(np.ldexp(1.0, -np.asarray(row_exp))), s,
        )
        return out


def _pointer(a) -> int:
    return int(a.__cuda_array_interface__["data"][0])


def _simulating() -> bool:
    from gpu.cuda.simulator import simulator_active

    return simulator_active()
