"""Parameters of the ``compress`` and ``decompress`` job kinds (``fibertensor compress|decompress``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["CompressParams", "DecompressParams", "DEFAULT_TOL"]

#: The relative error target when neither ``tol`` nor ``ranks`` is given.
DEFAULT_TOL = 1e-3


class CompressParams(JobParams):
    """Tucker compression by ST-HOSVD (:func:`gpu.compress.hosvd.st_hosvd`): either ``tol``
    (relative Frobenius error, default 1e-3) or ``ranks`` (one per axis of a 3D–5D volume)."""

    tol: float | None = Field(
        None, gt=0, lt=1, description=f"relative error target ||X - X^||_F / ||X||_F, {DEFAULT_TOL:g} unless ranks are given")
    ranks: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=3, max_length=5)] | None = Field(
        None, description="fixed Tucker ranks, one per axis, instead of tol", examples=[[8, 8, 4]])
    precision: Literal["fp16", "fp32", "fp64"] = Field("fp16", description="precision of the TTMc chain")
    scaling: Literal["kronecker", "onesided", "none"] = Field(
        "kronecker", description="scaling that keeps an FP16 TTMc from overflowing: Kronecker-product, one-sided or none")
    order: Literal["ssf", "given", "best"] = Field(
        "ssf", description="TTM order: smallest shared dimension first, as given, or least error bound")
    hooi_sweeps: int = Field(0, ge=0, le=10, description="HOOI refinement sweeps after ST-HOSVD")
    on_overflow: Literal["fallback", "fail"] = Field(
        "fallback", description="on a non-finite TTMc result: recompute in a wider precision, or stop")
    backend: Backend = "auto"

    @model_validator(mode="after")
    def _tol_or_ranks(self) -> "CompressParams":
        if self.tol is not None and self.ranks is not None:
            raise FieldRuleError("ranks", "give either tol or ranks, not both")
        if self.ranks is None and self.tol is None:
            self.tol = DEFAULT_TOL
        return self


class DecompressParams(JobParams):
    """No options: the archive carries everything needed."""
