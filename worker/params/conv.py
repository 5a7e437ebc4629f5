"""Parameters of the ``cp-conv`` and ``tucker-conv`` job kinds (``fibertensor conv cp|tucker``)
and of the dense-kernel decompositions (``fibertensor decompose cp|tucker``)."""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["CPConvParams", "TuckerConvParams", "CPDecomposeParams", "TuckerDecomposeParams"]

# A bound on the work one job may ask for: the kernels loop over rank chunks with no limit
# of their own.
_Rank = Annotated[int, Field(ge=1, le=1024)]


class _ConvParams(JobParams):
    stride: int = Field(1, ge=1, le=64, description="stride (both axes)")
    padding: Union[Literal["same"], Annotated[int, Field(ge=0, le=1024)]] = Field(
        "same", description="zero padding: 'same' (output on the input grid, needs stride 1) or a number of pixels")
    dilation: int = Field(1, ge=1, le=64, description="kernel dilation (both axes)")

    @model_validator(mode="after")
    def _same_needs_stride_1(self):
        if self.padding == "same" and self.stride != 1:
            raise FieldRuleError(
                "padding", f"padding 'same' needs stride 1 (as in PyTorch), not stride {self.stride}; "
                "give the padding in pixels or use stride 1")
        return self


class CPConvParams(_ConvParams):
    """Parameters of a CP conv job (fused kernel after Reustle, Rabbani & Huang)."""

    rank: _Rank | None = Field(None, description="CP rank R a dense kernel is decomposed at (with a kernel, not factors)")
    backend: Backend = "auto"


class TuckerConvParams(_ConvParams):
    """Parameters of a Tucker-2 conv job (1x1, core conv after Xiang et al. TDC, 1x1)."""

    rank_in: _Rank | None = Field(
        None, description="Tucker rank D1 over input channels a dense kernel is decomposed at (with a kernel, not factors)")
    rank_out: _Rank | None = Field(
        None, description="Tucker rank D2 over output channels a dense kernel is decomposed at (with a kernel, not factors)")
    tiling: Literal["model", "tdc", "exhaustive"] = Field(
        "model", description="core tiles from the fitted cost model, TDC's analytic rule (Xiang et al., "
        "Eqs. 14-19) or by timing every candidate on the GPU")
    backend: Backend = "auto"

    @model_validator(mode="after")
    def _both_ranks(self):
        if (self.rank_in is None) != (self.rank_out is None):
            missing = "rank_out" if self.rank_out is None else "rank_in"
            raise FieldRuleError(missing, "give both rank_in (D1) and rank_out (D2) to decompose a dense kernel")
        return self


class CPDecomposeParams(JobParams):
    """CP decomposition of a dense kernel by ALS (:func:`gpu.conv.decompose.cp_als`)."""

    rank: _Rank = Field(description="CP rank R")
    seed: int = Field(0, ge=0, description="seed of the ALS start")
    max_iter: int = Field(1000, ge=1, le=100_000, description="ALS sweeps at most")


class TuckerDecomposeParams(JobParams):
    """Tucker-2 decomposition of a dense kernel by truncated HOSVD (:func:`gpu.conv.decompose.tucker2_hosvd`)."""

    rank_in: _Rank = Field(description="Tucker rank D1 (input channels)")
    rank_out: _Rank = Field(description="Tucker rank D2 (output channels)")
