"""Parameters of the ``mask``, ``response``, ``fod`` and ``mtnormalise`` job kinds
(``fibertensor <kind>``, ``POST /v1/jobs/<kind>``), named after MRtrix3 ``dwi2mask``,
``dwi2response``, ``dwi2fod`` and ``mtnormalise``'s options. The fod job's peaks options are the peaks job's
(:class:`worker.params.peaks.PeaksParams`), each named ``peaks_<name>`` and declared there once."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, ValidationError, create_model, model_validator
from pydantic.fields import FieldInfo

from worker.params.base import Backend, FieldRuleError, JobParams, error_fields
from worker.params.peaks import PeaksParams

__all__ = ["MaskParams", "MtNormaliseParams", "ResponseParams", "FodParams", "peaks_option_name"]

#: The peaks options a fod job takes from its own: the FOD's SH basis and the backend; the
#: peaks sidecar always records the FOD's checksum.
_PEAKS_SHARED = ("basis", "backend", "checksums")


#: ``-shells`` of ``dwi2fod`` and ``dwi2response``, which both jobs take.
_Shells = Annotated[
    Annotated[list[Annotated[float, Field(ge=0.0, le=1e5)]], Field(min_length=1, max_length=32)] | None,
    Field(description="b-values (s/mm²) of the shells to use, as dwi2fod and dwi2response -shells: each takes the "
          "shell it lies in, or the nearest; b = 0 listed too, but for csd and tournier the one b > 0 shell alone; "
          "the other volumes are left out. Default: every shell (csd and tournier: the highest)",
          examples=[[0, 1000, 2000]])]


class MaskParams(JobParams):
    """No options, as ``dwi2mask`` (3.0) has none: every shell, b=0 too, makes the mask
    (:func:`gpu.fod.brain_mask.dwi_brain_mask`)."""


class MtNormaliseParams(JobParams):
    """``mtnormalise`` settings (:func:`gpu.fod.mtnormalise.mtnormalise`)."""

    order: int = Field(3, ge=0, le=3, description="order of the polynomial of scanner coordinates whose exponential "
                       "is the normalisation field (mtnormalise -order); 0: one factor for the whole image")
    niter: int = Field(15, ge=1, le=1000, description="passes of the main loop, each fitting the field once "
                       "(mtnormalise -niter, its first entry)")
    balance_niter: int = Field(7, ge=1, le=1000, description="most updates of the balance factors and outliers a "
                               "pass, while the outliers change (mtnormalise -niter, its second entry)")
    reference: float = Field(0.28209479177, gt=0.0, le=1e6, description="value the balanced sum of the tissues' "
                             "l = 0 terms is normalised to (mtnormalise -reference; the default is the SH DC term of "
                             "a unit angular integral)")
    balanced: bool = Field(False, description="also scale each output by its tissue's balance factor (mtnormalise "
                           "-balanced; this changes what AFD means: use it only knowing why)")


class ResponseParams(JobParams):
    """``dwi2response dhollander`` and ``tournier`` settings
    (:func:`gpu.fod.response_dhollander.dhollander_response`,
    :func:`gpu.fod.response_tournier.tournier_response`)."""

    algorithm: Literal["dhollander", "tournier"] = Field(
        "dhollander", description="response estimation algorithm: dhollander (WM, GM and CSF from the DWI alone, "
        "Dhollander et al. 2016/2019); tournier (single-fibre WM of the highest shell alone, by iterative voxel "
        "selection, Tournier et al. 2013)")
    lmax: int = Field(10, ge=2, le=10, multiple_of=2, description="harmonic degree of the WM response on each "
                      "b > 0 shell (dwi2response -lmax); GM and CSF are isotropic (degree 0)")
    shells: _Shells = None
    erode: int = Field(3, ge=0, le=10, description="erosion passes of the brain mask before selecting voxels "
                       "(dwi2response dhollander -erode)")
    fa: float = Field(0.2, gt=0.0, lt=1.0, description="FA threshold between crude WM and GM/CSF "
                      "(dwi2response dhollander -fa)")
    sfwm: float = Field(0.5, gt=0.0, le=100.0, description="percentage of refined WM voxels kept as single-fibre WM "
                        "(dwi2response dhollander -sfwm)")
    gm: float = Field(2.0, gt=0.0, le=100.0, description="percentage of refined GM voxels kept "
                      "(dwi2response dhollander -gm)")
    csf: float = Field(10.0, gt=0.0, le=100.0, description="percentage of refined CSF voxels kept "
                       "(dwi2response dhollander -csf)")
    number: int = Field(300, ge=1, le=100000, description="single-fibre voxels the WM response is fitted to "
                        "(dwi2response tournier -number)")
    iter_voxels: int = Field(0, ge=0, le=1000000, description="best voxels tested again, after dilation, in the "
                             "next iteration; 0: ten times number (dwi2response tournier -iter_voxels)")
    dilate: int = Field(1, ge=0, le=10, description="dilation passes of the voxels tested in the next iteration "
                        "(dwi2response tournier -dilate)")
    max_iters: int = Field(10, ge=2, le=100, description="most iterations of the voxel selection "
                           "(dwi2response tournier -max_iters)")
    backend: Backend = "auto"

    @model_validator(mode="after")
    def _iter_voxels_cover_number(self) -> "ResponseParams":
        # the voxels tested next must hold the ones selected now
        if self.iter_voxels and self.iter_voxels < self.number:
            raise FieldRuleError("iter_voxels", f"iter_voxels {self.iter_voxels} is below number {self.number}: "
                                 f"test at least {self.number} voxels per iteration, or give 0 for ten times number")
        return self


def peaks_option_name(name: str) -> str:
    """The fod job's name of peaks option ``name``: ``npeaks`` → ``peaks_npeaks``,
    ``peaks_frame`` as it is."""
    return name if name.startswith("peaks_") else f"peaks_{name}"


class _FodOptions(JobParams):
    algorithm: Literal["msmt_csd", "csd"] = Field(
        "msmt_csd", description="msmt_csd: WM FOD, GM and CSF from WM/GM/CSF responses (Jeurissen et al. 2014); "
        "csd: single-shell WM FOD from the highest shell and one WM response (Tournier et al. 2007)")
    lmax: int = Field(8, ge=2, le=12, multiple_of=2, description="harmonic degree of the WM FOD (dwi2fod -lmax); "
                      "lowered, with a warning, where the data or the response cannot support it")
    shells: _Shells = None
    basis: Literal["mrtrix", "dipy"] = Field(
        "mrtrix", description="SH basis of the written FOD: mrtrix (MRtrix3's, what dwi2fod writes) or dipy "
        "(DIPY's descoteaux07 legacy basis, the m ↔ −m swap of MRtrix3's)")
    mtnormalise: bool = Field(
        False, description="normalise the fitted compartments' intensities as mtnormalise does with its defaults "
        "(fibertensor mtnormalise) within the mask, or without one the brain mask dwi2mask would make, before "
        "they are written and their peaks found: what fixel-based analysis compares across subjects")
    predicted_signal: bool = Field(
        False, description="also write the signal the fitted compartments predict, <prefix>_predicted_signal, one "
        "volume per DWI volume (0 outside the mask and in volumes the fit leaves out), as dwi2fod msmt_csd "
        "-predicted_signal; the DWI minus it is the fit's residual. From the fit itself, before any mtnormalise")


_FodWithPeaksOptions = create_model(
    "_FodWithPeaksOptions", __base__=_FodOptions,
    peaks=(bool, Field(False, description="also find the FOD's peaks and write what fibertensor peaks writes "
                       "(peaks, amplitudes, count, fODF metrics, QC picture, fixels/pam5 on request), from the WM FOD "
                       "in memory; the peaks_* options are fibertensor peaks' options")),
    **{peaks_option_name(name): (info.annotation, FieldInfo.merge_field_infos(info, description=f"with peaks: "
                                                                                             f"{info.description}"))
       for name, info in PeaksParams.model_fields.items() if name not in _PEAKS_SHARED})


class FodParams(_FodWithPeaksOptions):
    """``dwi2fod`` settings (:func:`gpu.fod.msmt_csd`, :func:`gpu.fod.csd`) and, with ``peaks``,
    the peaks job's options (:meth:`peaks_params`)."""

    backend: Backend = "auto"

    def peaks_params(self) -> PeaksParams:
        """The peaks job's parameters of the ``peaks_*`` options, the FOD's basis and backend."""
        values = {name: getattr(self, peaks_option_name(name)) for name in PeaksParams.model_fields
                  if name not in _PEAKS_SHARED}
        return PeaksParams(basis=self.basis, backend=self.backend, **values)

    @model_validator(mode="after")
    def _valid_peaks_options(self) -> "FodParams":
        # the peaks job's own rules, blamed on the fod job's names; its lists kept as it stores them
        try:
            peaks = self.peaks_params()
        except ValidationError as exc:
            field, message = error_fields(exc)[0]
            raise FieldRuleError(peaks_option_name(field.partition(".")[0]), message) from None
        self.peaks_metrics, self.peaks_format = peaks.metrics, peaks.format
        return self
