"""Parameters of the ``peaks`` job kind (``fibertensor peaks``, ``POST /v1/jobs/peaks``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gpu.peaks.limits import MAX_NPEAKS, MAX_STARTS
from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["PeaksParams"]


class PeaksParams(JobParams):
    """Parameters of a peaks job: what :func:`gpu.peaks.search.sshopm_peaks` reports and
    how it searches (see :class:`gpu.peaks.search.PeaksOptions`)."""

    basis: Literal["mrtrix", "dipy"] = Field(
        "mrtrix", description="SH basis of the input: MRtrix3's or DIPY's legacy descoteaux07")
    npeaks: int = Field(3, ge=1, le=MAX_NPEAKS, description="number of peaks K written per voxel, no more than starts")
    threshold: float = Field(0.0, ge=0.0, description="least peak amplitude (FOD value) reported")
    relative_threshold: float = Field(
        0.1, ge=0.0, le=1.0, description="least peak amplitude as a fraction of the voxel's largest")
    starts: int = Field(128, ge=1, le=MAX_STARTS, description="start vectors per voxel, one GPU thread each")
    seeding: Literal["local-max", "all"] = Field(
        "local-max", description="climb from the starts with no higher neighbour along their gradient (fast), "
        "or from every start above the thresholds (exhaustive, slower)")
    backend: Backend = "auto"

    @model_validator(mode="after")
    def _npeaks_within_starts(self) -> "PeaksParams":
        # Each peak is the end of a climb from one start, so a voxel has at most `starts` peaks.
        if self.npeaks > self.starts:
            raise FieldRuleError(
                "npeaks", f"{self.npeaks} peaks cannot come from {self.starts} starts (one peak per start at most); "
                f"lower npeaks or raise starts to at least {self.npeaks}")
        return self
