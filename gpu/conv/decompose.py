"""Decompose a dense conv kernel K (T, C, kh, kw) into CP or Tucker-2 factors.

* CP by alternating least squares: K ≈ Σ_r T[:,r] ∘ S[:,r] ∘ H[:,r] ∘ W[:,r] (Reustle et al.
  Eq. 6). Each sweep solves one factor exactly with the others fixed,
  A_m ← K_(m)·(⊙_{j≠m} A_j)·(∗_{j≠m} A_jᵀA_j)⁺ (Khatri–Rao product ⊙, Hadamard product ∗),
  from a fixed-seed start; the relative error ‖K − K̂‖_F / ‖K‖_F is reported.
* Tucker-2 by truncated HOSVD of modes 1 and 2 (Xiang et al. Eq. 1 and Sec. 4.1, "proj"):
  U_out, U_in are the leading left singular vectors of the output- and input-channel
  unfoldings, core = K ×_T U_outᵀ ×_C U_inᵀ. It is exact at full ranks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpu.conv.direct import cp_kernel, tucker_kernel

__all__ = ["CPDecomposition", "TuckerDecomposition", "cp_als", "tucker2_hosvd"]


@dataclass(frozen=True)
class CPDecomposition:
    s: np.ndarray
    h: np.ndarray
    w: np.ndarray
    t: np.ndarray
    relative_error: float
    iterations: int
    converged: bool


@dataclass(frozen=True)
class TuckerDecomposition:
    u_in: np.ndarray
    core: np.ndarray
    u_out: np.ndarray
    relative_error: float


def _check_kernel(kernel) -> np.ndarray:
    k = np.asarray(kernel)
    if k.ndim != 4:
        raise ValueError(f"the kernel must be 4-D (T, C, kh, kw), got shape {k.shape}")
    if k.size == 0:
        raise ValueError(f"the kernel is empty (shape {k.shape})")
    if not (np.issubdtype(k.dtype, np.floating) or np.issubdtype(k.dtype, np.integer)):
        raise ValueError(f"the kernel must hold real numbers, got dtype {k.dtype}")
    if not np.all(np.isfinite(k)):
        raise ValueError("the kernel contains NaN or infinite values")
    return k.astype(np.float64)


def _leading_vectors(unfolded: np.ndarray, count: int) -> np.ndarray:
    u, _, _ = np.linalg.svd(unfolded, full_matrices=False)
    return u[:, :count]


_MTTKRP = ("tshw,sr,hr,wr->tr", "tshw,tr,hr,wr->sr", "tshw,tr,sr,wr->hr", "tshw,tr,sr,hr->wr")


def cp_als(kernel, rank: int, max_iter: int = 1000, tol: float = 1e-10, seed: int = 0) -> CPDecomposition:
    """CP decomposition of a (T, C, kh, kw) kernel by ALS, in float64.

    Start: the leading left singular vectors of each unfolding where the rank allows,
    the rest of each factor from a normal draw with ``seed`` (deterministic). Stops when
    the relative error changes by less than ``tol`` between sweeps. Returns float32
    factors S (C×R), H (kh×R), W (kw×R), T (T×R) with the column norms balanced across
    the four factors.
    """
    k = _check_kernel(kernel)
    rank = int(rank)
    if rank < 1:
        raise ValueError(f"the CP rank must be at least 1, got {rank}")
    rng = np.random.default_rng(seed)
    norm = np.linalg.norm(k)
    if norm == 0:
        raise ValueError("the kernel is all zeros; there is nothing to decompose")
    factors = []
    for mode in range(4):
        unfolded = np.moveaxis(k, mode, 0).reshape(k.shape[mode], -1)
        a = rng.standard_normal((k.shape[mode], rank))
        lead = min(rank, k.shape[mode])
        a[:, :lead] = _leading_vectors(unfolded, lead)
        factors.append(a)
    err, prev, it = np.inf, np.inf, 0
    for it in range(1, max_iter + 1):
        for mode in range(4):
            others = [factors[j] for j in range(4) if j != mode]
            gram = np.ones((rank, rank))
            for a in others:
                gram *= a.T @ a
            m = np.einsum(_MTTKRP[mode], k, *others, optimize=True)
            factors[mode] = np.linalg.lstsq(gram.T, m.T, rcond=None)[0].T
            if mode < 3:
                # unit columns keep the normal equations well conditioned; W carries the scale
                scale = np.linalg.norm(factors[mode], axis=0)
                factors[mode] /= np.where(scale == 0, 1, scale)
        t, s, h, w = factors
        err = np.linalg.norm(k - cp_kernel(s, h, w, t)) / norm
        if abs(prev - err) < tol or err < tol:
            break
        prev = err
    t, s, h, w = factors
    # balance the column norms over the four factors (each gets the fourth root)
    norms = [np.linalg.norm(a, axis=0) for a in (t, s, h, w)]
    total = np.prod(norms, axis=0)
    safe = [np.where(nm == 0, 1, nm) for nm in norms]
    target = total ** 0.25
    t, s, h, w = (a / sf * target for a, sf in zip((t, s, h, w), safe))
    s, h, w, t = (np.ascontiguousarray(a, dtype=np.float32) for a in (s, h, w, t))
    # the error of what is returned: the float32 factors
    err = np.linalg.norm(k - cp_kernel(s, h, w, t)) / norm
    return CPDecomposition(s, h, w, t, relative_error=float(err), iterations=it, converged=it < max_iter)


def tucker2_hosvd(kernel, ranks: tuple[int, int]) -> TuckerDecomposition:
    """Tucker-2 of a (T, C, kh, kw) kernel by truncated HOSVD; ``ranks`` = (D1, D2) for the
    input and output channels. Returns float32 U_in (C×D1), core (D2×D1×kh×kw), U_out (T×D2)."""
    k = _check_kernel(kernel)
    d1, d2 = (int(r) for r in ranks)
    n_out, chans = k.shape[:2]
    if not (1 <= d1 <= chans):
        raise ValueError(f"the input rank D1 must be between 1 and the {chans} input channels, got {d1}")
    if not (1 <= d2 <= n_out):
        raise ValueError(f"the output rank D2 must be between 1 and the {n_out} output channels, got {d2}")
    u_out = _leading_vectors(k.reshape(n_out, -1), d2)
    u_in = _leading_vectors(np.moveaxis(k, 1, 0).reshape(chans, -1), d1)
    core = np.einsum("tchw,cd,te->edhw", k, u_in, u_out, optimize=True)
    u_in, core, u_out = (np.ascontiguousarray(a, dtype=np.float32) for a in (u_in, core, u_out))
    norm = np.linalg.norm(k)
    err = np.linalg.norm(k - tucker_kernel(u_in, core, u_out)) / norm if norm > 0 else 0.0
    return TuckerDecomposition(u_in, core, u_out, relative_error=float(err))
