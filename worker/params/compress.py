"""Parameters of the ``compress`` and ``decompress`` job kinds (``fibertensor compress|decompress``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["CompressParams", "DecompressParams", "DEFAULT_TOL", "TARGET_FIELDS"]

#: The relative error target when no target is given.
DEFAULT_TOL = 1e-3
#: The error targets, of which a request gives at most one.
TARGET_FIELDS = ("tol", "abs", "psnr")


class CompressParams(JobParams):
    """Error-bounded Tucker compression (:func:`gpu.compress.error_bounded.encode_tensor`) to one
    target: ``tol`` (relative Frobenius error, default 1e-3), ``abs`` (largest absolute error,
    guaranteed) or ``psnr`` (dB)."""

    tol: float | None = Field(
        None, gt=0, lt=1, description=f"relative error target ||X - X^||_F / ||X||_F ({DEFAULT_TOL:g} when no "
        "target is given)")
    abs: float | None = Field(
        None, gt=0, description="largest absolute error max |X - X^| allowed, in the volume's units (guaranteed)")
    psnr: float | None = Field(
        None, gt=0, le=200, description="PSNR target in dB: 20 log10((max X - min X) / RMSE)")
    ranks: Annotated[list[Annotated[int, Field(ge=1)]], Field(min_length=3, max_length=5)] | None = Field(
        None, description="fixed Tucker ranks, one per axis, instead of the ones the budget search picks (the "
        "residual still meets the target)", examples=[[8, 8, 4]])
    report_dwi: bool = Field(
        False, description="also fit DTI (FA, MD) and CSD peaks on the original and the decompressed DWI and "
        "report their differences (needs the bval and bvec inputs)")
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
    def _one_target(self) -> "CompressParams":
        given = [name for name in TARGET_FIELDS if getattr(self, name) is not None]
        if len(given) > 1:
            raise FieldRuleError(given[1], f"give one error target (tol, abs or psnr), not {' and '.join(given)}")
        if not given:
            self.tol = DEFAULT_TOL
        return self

    @property
    def target(self) -> tuple[str, float]:
        """The error target as ``(mode, value)``."""
        return next((name, getattr(self, name)) for name in TARGET_FIELDS if getattr(self, name) is not None)


class DecompressParams(JobParams):
    """No options: the archive carries everything needed."""
