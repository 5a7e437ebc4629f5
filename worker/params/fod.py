"""Parameters of the ``response`` and ``fod`` job kinds (``fibertensor response``,
``fibertensor fod``, ``POST /v1/jobs/response``, ``POST /v1/jobs/fod``), named after MRtrix3
``dwi2response`` and ``dwi2fod``'s options."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from worker.params.base import Backend, FieldRuleError, JobParams

__all__ = ["ResponseParams", "FodParams"]


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

    @model_validator(mode="after")
    def _iter_voxels_cover_number(self) -> "ResponseParams":
        # the voxels tested next must hold the ones selected now
        if self.iter_voxels and self.iter_voxels < self.number:
            raise FieldRuleError("iter_voxels", f"iter_voxels {self.iter_voxels} is below number {self.number}: "
                                 f"test at least {self.number} voxels per iteration, or give 0 for ten times number")
        return self


class FodParams(JobParams):
    """``dwi2fod`` settings (:func:`gpu.fod.msmt_csd`, :func:`gpu.fod.csd`)."""

    algorithm: Literal["msmt_csd", "csd"] = Field(
        "msmt_csd", description="msmt_csd: WM FOD, GM and CSF from WM/GM/CSF responses (Jeurissen et al. 2014); "
        "csd: single-shell WM FOD from the highest shell and one WM response (Tournier et al. 2007)")
    lmax: int = Field(8, ge=2, le=12, multiple_of=2, description="harmonic degree of the WM FOD (dwi2fod -lmax); "
                      "lowered, with a warning, where the data or the response cannot support it")
    basis: Literal["mrtrix", "dipy"] = Field(
        "mrtrix", description="SH basis of the written FOD: mrtrix (MRtrix3's, what dwi2fod writes) or dipy "
        "(DIPY's descoteaux07 legacy basis, the m ↔ −m swap of MRtrix3's)")
    backend: Backend = "auto"
