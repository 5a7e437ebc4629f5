"""A peaks job's plan: everything decided from its parameters and its inputs' headers
before any data is read, made once per job and used by every step after it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from worker.errors import InputError
from worker.job_kinds import UploadedInput
from worker.jobs.peaks.memory import peaks_memory_bytes
from worker.jobs.peaks.names import image_suffixes
from worker.jobs.peaks.outputs import Output, wanted_outputs
from worker.params.peaks import PeaksParams

if TYPE_CHECKING:
    from worker.io.images import ImageInfo

__all__ = ["PeaksPlan", "plan_peaks"]


@dataclass(frozen=True)
class PeaksPlan:
    """A peaks job as its checked headers and parameters define it.

    ``fod`` and ``mask``: the inputs' headers; ``lmax``: the SH order of the FOD's
    coefficients; ``suffixes``: those of the output images; ``outputs``: the outputs this
    job writes (:mod:`worker.jobs.peaks.outputs`), in the sidecar's order;
    ``memory_bytes``: the most host memory the job holds at once
    (:func:`worker.jobs.peaks.memory.peaks_memory_bytes`); ``uploaded``: by role, the
    uploaded form of an input stored in another (a service's ``.nii.gz`` kept inflated),
    whose name and sha256 the outputs give and whose format they take."""

    params: PeaksParams
    fod: "ImageInfo"
    mask: "ImageInfo | None"
    lmax: int
    suffixes: tuple[str, ...]
    outputs: tuple[Output, ...]
    memory_bytes: int
    uploaded: dict[str, UploadedInput] = field(default_factory=dict)

    def name(self, role: str) -> str | None:
        """The name of input ``role`` ("fod", "mask") as given: uploaded or read."""
        info = self.fod if role == "fod" else self.mask
        return self.uploaded[role].name if role in self.uploaded else info and info.path.name


def plan_peaks(fod: Path, mask: Path | None = None, params: PeaksParams | None = None, *,
               uploaded: dict[str, UploadedInput] | None = None) -> PeaksPlan:
    """Check a peaks job's inputs from their headers (NIfTI or MRtrix images) and plan it;
    :class:`InputError` saying what to fix, also when the output formats ``params`` asks
    for cannot be written."""
    from gpu.sh_basis import lmax_from_ncoeffs
    from worker.io.images import read_image_header
    from worker.io.mif import mrtrix_size

    params = params if params is not None else PeaksParams()
    uploaded = dict(uploaded or {})
    info = read_image_header(fod, "FOD")
    size = mrtrix_size(info.shape, info.affine)
    if len(info.shape) != 4 or info.shape[3] == 1:
        raise InputError(
            "Not a 4D volume",
            f"the FOD file {info.path.name!r} is a 3D image ({size}{'' if len(info.shape) != 4 else ': one volume'}); "
            "peaks need a 4D image of SH coefficients, X x Y x Z x N with N one of 6, 15, 28, 45, 66, 91 (e.g. "
            f"{' x '.join(size.split(' x ')[:3])} x 45 for lmax 8), such as dwi2fod writes",
        )
    try:
        lmax = lmax_from_ncoeffs(info.shape[3])
    except ValueError as exc:
        raise InputError(
            "Wrong number of volumes",
            f"the FOD file {info.path.name!r} has {info.shape[3]} volumes: {exc}. Pass an FOD image "
            "(e.g. from dwi2fod), not the DWI",
        ) from None
    mask_info = None if mask is None else _check_mask(read_image_header(mask, "mask"), info)
    if "pam5" in params.format:
        from worker.io.pam5 import require_dipy

        require_dipy()
    fod_name = uploaded["fod"].name if "fod" in uploaded else info.path.name
    memory = peaks_memory_bytes(info, mask_info, params.npeaks, params.qc, "fixel" in params.format, params.basis)
    return PeaksPlan(params, info, mask_info, lmax, tuple(image_suffixes(fod_name, params.format)),
                     wanted_outputs(params), memory, uploaded)


def _check_mask(mask: "ImageInfo", fod: "ImageInfo") -> "ImageInfo":
    """``mask``, refused unless it lies on the FOD's grid (3D, or 4D with one volume); sizes
    in the errors as ``mrinfo`` prints them, which is not the order they are stored in."""
    from worker.io.mif import mrtrix_size

    spatial = mask.shape[:3] if len(mask.shape) == 4 and mask.shape[3] == 1 else mask.shape
    mask_size, fod_size = mrtrix_size(mask.shape, mask.affine), mrtrix_size(fod.shape[:3], fod.affine)
    if spatial != fod.shape[:3]:
        stored = (f"has the FOD's size ({fod_size}) but its axes are stored in another order (other strides); "
                  f"store it as the FOD is (mrconvert {mask.path.name} -strides {fod.path.name} OUT)"
                  if mask_size == fod_size and sorted(spatial) == sorted(fod.shape[:3]) else
                  f"is {mask_size} but the FOD grid is {fod_size}; resample the mask onto the FOD grid "
                  "(e.g. mrgrid … regrid -template)")
        raise InputError("Mask grid mismatch", f"the mask {mask.path.name!r} {stored}")
    if not np.allclose(mask.affine, fod.affine, atol=1e-3):
        raise InputError(
            "Mask grid mismatch",
            f"the mask {mask.path.name!r} has the FOD's size ({fod_size}) but a different voxel-to-scanner "
            "transform (mrinfo -transform); resample the mask onto the FOD grid (e.g. mrgrid … regrid -template)",
        )
    return mask
