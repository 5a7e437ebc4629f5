"""Parameters of the ``fixels`` job kind (``fibertensor fixels``, ``POST /v1/jobs/fixels``),
named after MRtrix3 ``fod2fixel``'s options."""

from __future__ import annotations

from pydantic import Field

from worker.params.base import Backend, JobParams

__all__ = ["FixelsParams"]


class FixelsParams(JobParams):
    """FMLS segmentation settings (:class:`gpu.fixels.segment.FmlsOptions`)."""

    fmls_integral: float = Field(
        0.0, ge=0.0, description="drop FOD lobes whose integral (AFD) is below this (fod2fixel -fmls_integral)")
    fmls_peak_value: float = Field(
        0.1, ge=0.0, description="drop FOD lobes whose peak amplitude is below this (fod2fixel -fmls_peak_value)")
    fmls_no_thresholds: bool = Field(
        False, description="keep every positive FOD lobe; overrides both thresholds (fod2fixel -fmls_no_thresholds)")
    fmls_lobe_merge_ratio: float = Field(
        1.0, ge=0.0, le=1.0, description="merge two lobes when the FOD amplitude where they meet, over the smaller "
        "lobe's peak, exceeds this; 1 never merges, 0 always (fod2fixel -fmls_lobe_merge_ratio)")
    maxnum: int = Field(0, ge=0, description="most fixels per voxel, the largest lobes first; 0: no limit "
                        "(fod2fixel -maxnum)")
    dirpeak: bool = Field(False, description="fixel direction = the lobe's largest peak, not its amplitude-weighted "
                          "mean direction (fod2fixel -dirpeak)")
    backend: Backend = "auto"
