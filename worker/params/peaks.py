"""Parameters of the ``peaks`` job kind (``fibertensor peaks``, ``POST /v1/jobs/peaks``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gpu.peaks.limits import MAX_NPEAKS, MAX_STARTS
from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["PeaksParams", "METRICS", "OUTPUT_FORMATS"]

#: The fODF metric maps a job can write beside the peaks (:data:`gpu.peaks.fodf_metrics.METRIC_NAMES`;
#: named here too so that the schema loads without numpy).
METRICS = ("afd_max", "afd_total", "afd_sum", "peak_fraction", "rgb")
#: Output formats: NIfTI or MRtrix images, an MRtrix3 fixel directory, a DIPY .pam5 file.
OUTPUT_FORMATS = ("nifti", "mif", "fixel", "pam5")


class PeaksParams(JobParams):
    """Parameters of a peaks job: what :func:`gpu.peaks.search.sshopm_peaks` reports and
    how it searches (see :class:`gpu.peaks.search.PeaksOptions`), and which outputs it writes."""

    basis: Literal["mrtrix", "dipy"] = Field(
        "mrtrix", description="SH basis of the input: MRtrix3's or DIPY's legacy descoteaux07")
    peaks_frame: Literal["scanner", "voxel"] = Field(
        "scanner", description="frame of the directions in the peaks image: scanner (as sh2peaks writes an MRtrix3 "
        "FOD's, what mrview and TractSeg expect) or voxel (along the image axes, as DIPY keeps them); a DIPY-basis "
        "FOD's SH are along the image axes, so its peaks are rotated by the affine's rotation for scanner, an "
        "MRtrix3-basis FOD's the other way for voxel")
    npeaks: int = Field(3, ge=1, le=MAX_NPEAKS, description="number of peaks K written per voxel, no more than starts")
    threshold: float = Field(0.0, ge=0.0, description="least peak amplitude (FOD value) reported")
    relative_threshold: float = Field(
        0.1, ge=0.0, le=1.0, description="least peak amplitude as a fraction of the voxel's largest")
    starts: int = Field(128, ge=1, le=MAX_STARTS, description="start vectors per voxel, one GPU thread each")
    seeding: Literal["local-max", "all"] = Field(
        "local-max", description="climb from the starts with no higher neighbour along their gradient (fast), "
        "or from every start above the thresholds (exhaustive, slower)")
    metrics: list[Literal[("all", "none") + METRICS]] = Field(
        ["all"], validate_default=True, description="fODF metric maps written beside the peaks: all, none, or some of "
        f"{', '.join(METRICS)}", examples=[["afd_max", "rgb"]])
    qc: bool = Field(True, description="write the quality-control picture qc.png")
    format: list[Literal[OUTPUT_FORMATS]] = Field(
        [], description="output formats, any of nifti, mif (MRtrix image), fixel (MRtrix3 fixel directory), "
        "pam5 (DIPY PeaksAndMetrics); default: the input's image format", examples=[["nifti", "fixel"]])
    # docs/decisions/checksums-option.md
    checksums: bool = Field(
        True, description="record each input file's sha256 in the sidecar (which files made these outputs); "
        "hashing every input byte is the largest host cost of a cohort of .mif files: --no-checksums for a "
        "large cohort whose files are checksummed already")
    backend: Backend = "auto"

    @field_validator("metrics")
    @classmethod
    def _expand_metrics(cls, names: list[str]) -> list[str]:
        # Stored as the explicit list, so a sidecar says which maps were written.
        if ("all" in names or "none" in names) and len(names) > 1:
            raise ValueError(f"{','.join(names)}: give all, none, or a list of metric names, not a mix")
        if names == ["all"]:
            return list(METRICS)
        if names == ["none"]:
            return []
        return [name for name in METRICS if name in names]

    @field_validator("format")
    @classmethod
    def _distinct_formats(cls, names: list[str]) -> list[str]:
        return [name for name in OUTPUT_FORMATS if name in names]

    @model_validator(mode="after")
    def _npeaks_within_starts(self) -> "PeaksParams":
        # Each peak is the end of a climb from one start, so a voxel has at most `starts` peaks.
        if self.npeaks > self.starts:
            raise FieldRuleError(
                "npeaks", f"{self.npeaks} peaks cannot come from {self.starts} starts (one peak per start at most); "
                f"lower npeaks or raise starts to at least {self.npeaks}")
        return self
