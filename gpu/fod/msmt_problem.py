"""The multi-shell multi-tissue CSD problem (Jeurissen et al. 2014) in the form MRtrix3's
solver takes it (``MSMT_CSD::Shared::init``, ``Math::ICLS::Problem``).

Per voxel: minimise ‖H x − b‖² subject to A x ≥ 0 (Jeurissen et al. 2014, Eq. 3), x the
tissues' SH coefficients side by side, H the tissues' convolution matrices side by side
(:func:`gpu.fod.response.convolution_matrix`), b the voxel's signal. A holds, per tissue
with lmax > 0, its FOD amplitudes on the 300 constraint directions and, per isotropic
tissue, its Y_00 (one row).

MRtrix3 solves it in a preconditioned frame: with L Lᵀ = HᵀH + ε max(diag HᵀH) I (ε the
solution norm regularisation), y = Lᵀ x turns the cost into ‖y − y_u‖², y_u = L⁻¹ Hᵀ b,
and the constraints into B y ≥ 0, B = A L⁻ᵀ with unit rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from gpu.fod.constraint_directions import constraint_directions
from gpu.fod.gradient_scheme import normalise_scheme
from gpu.fod.response import convolution_matrix, response_lmax, sh_matrix, trim_response
from gpu.fod.shells import dw_shells
from gpu.sh_basis import n_coeffs

__all__ = ["DEFAULT_LMAX", "DEFAULT_NORM_LAMBDA", "DEFAULT_NEG_LAMBDA", "MsmtProblem", "msmt_problem",
           "constraint_gram"]

DEFAULT_LMAX = 8
DEFAULT_NORM_LAMBDA = 1e-10
DEFAULT_NEG_LAMBDA = 1e-10


@dataclass(frozen=True)
class MsmtProblem:
    """Matrices shared by every voxel.

    Attributes
    ----------
    lmax : tuple of int
        Per tissue.
    H : ndarray, shape (n_volumes, N)
        Forward model, N = Σ (lmax_t + 1)(lmax_t + 2) / 2.
    A : ndarray, shape (n_constraints, N)
        Non-negativity constraints.
    project : ndarray, shape (N, n_volumes)
        L⁻¹ Hᵀ: the signal → the unconstrained solution y_u.
    B : ndarray, shape (n_constraints, N)
        A L⁻ᵀ, unit rows.
    L : ndarray, shape (N, N)
        Lower Cholesky factor; x = L⁻ᵀ y.
    constraint_norm_lambda : float
        Added to the diagonal of the active constraints' Gram matrix.
    max_iterations : int
        10 N, as MRtrix3.
    """

    lmax: tuple[int, ...]
    H: np.ndarray
    A: np.ndarray
    project: np.ndarray
    B: np.ndarray
    L: np.ndarray
    constraint_norm_lambda: float
    max_iterations: int

    @property
    def n_coeffs(self) -> tuple[int, ...]:
        return tuple(n_coeffs(l) for l in self.lmax)


def msmt_problem(bvals: np.ndarray, bvecs: np.ndarray, responses: Sequence[np.ndarray],
                 lmax: Sequence[int] | None = None, norm_lambda: float = DEFAULT_NORM_LAMBDA,
                 neg_lambda: float = DEFAULT_NEG_LAMBDA) -> MsmtProblem:
    """Build the MSMT-CSD problem as ``dwi2fod msmt_csd`` does.

    Parameters
    ----------
    bvals : ndarray, shape (n_volumes,)
    bvecs : ndarray, shape (n_volumes, 3)
        In the frame the SH are expressed in (:func:`gpu.fod.gradient_scheme.normalise_scheme`).
    responses : sequence of ndarray, each (n_shells, n_l)
        One per tissue, rows in ascending shell order (b=0 first), as ``dwi2response`` writes them.
    lmax : sequence of int, optional
        Per tissue; default min(8, the response's degree).
    norm_lambda, neg_lambda : float
        ``-norm_lambda`` and ``-neg_lambda`` of ``dwi2fod msmt_csd``.

    Returns
    -------
    MsmtProblem
    """
    if not responses:
        raise ValueError("give at least one tissue response")
    if norm_lambda < 0 or neg_lambda < 0:
        raise ValueError("norm_lambda and neg_lambda must be ≥ 0")
    bvals, unit = normalise_scheme(bvals, bvecs)
    shells = dw_shells(bvals)
    trimmed = [trim_response(r) for r in responses]
    if lmax is None:
        lmax = [min(DEFAULT_LMAX, response_lmax(r)) for r in trimmed]
    lmax = tuple(int(l) for l in lmax)
    if len(lmax) != len(trimmed):
        raise ValueError(f"{len(lmax)} lmax values for {len(trimmed)} tissues: give one per tissue")
    if any(l < 0 or l % 2 for l in lmax):
        raise ValueError(f"each lmax must be an even integer ≥ 0, not {lmax}")
    for t, r in enumerate(trimmed):
        if r.shape[0] != len(shells):
            raise ValueError(
                f"response {t} has {r.shape[0]} rows but the data have {len(shells)} shells "
                f"(b = {', '.join(f'{s.mean_b:.0f}' for s in shells)}): give one row per shell"
            )
    volumes = [s.volumes for s in shells]
    H = np.concatenate([convolution_matrix(unit, volumes, r, l) for r, l in zip(trimmed, lmax)], axis=1)
    dirs = constraint_directions()
    blocks = [sh_matrix(dirs, l) if l > 0 else sh_matrix(dirs[:1], 0) for l in lmax]
    A = np.zeros((sum(b.shape[0] for b in blocks), H.shape[1]))
    row = col = 0
    for b in blocks:
        A[row:row + b.shape[0], col:col + b.shape[1]] = b
        row += b.shape[0]
        col += b.shape[1]
    HtH = H.T @ H
    HtH[np.diag_indices_from(HtH)] += norm_lambda * np.diag(HtH).max()
    try:
        L = np.linalg.cholesky(HtH)
    except np.linalg.LinAlgError:
        raise ValueError(
            f"the data cannot determine {H.shape[1]} SH coefficients (tissue lmax {lmax}): lower lmax or "
            f"check that the responses fit the shells"
        ) from None
    project = np.linalg.solve(L, H.T)
    Bt = np.linalg.solve(L, A.T)
    B = Bt.T / np.linalg.norm(Bt, axis=0)[:, None]
    return MsmtProblem(lmax, H, A, np.ascontiguousarray(project), np.ascontiguousarray(B), L,
                       float(neg_lambda), 10 * H.shape[1])


def constraint_gram(B: np.ndarray) -> np.ndarray:
    """G = B Bᵀ, shape (M, M): the constraint rows' inner products, which the solvers read as a
    row joins the active set and in the constraint values c = c_u + G[:, rows] l. Summed by
    numpy's own loops, not BLAS, whose product depends on its thread count (one thread and two
    give other bytes), so that a FOD's bytes do not depend on the process that fits it."""
    return np.einsum("ik,jk->ij", B, B)
