"""Images in the formats our jobs read and write, NIfTI or MRtrix, chosen by file name.

The header object of either format has ``path``, ``shape``, ``dtype``, ``affine``, ``zooms``,
``n_voxels``, ``data_bytes`` and ``warnings`` with the same meaning (:class:`worker.io.nifti.NiftiInfo`,
:class:`worker.io.mif.MifInfo`), so a job reads either through :func:`read_image_header` and
:func:`load_image_data` and gets the same arrays from a ``.nii`` and the ``.mif`` that
``mrconvert`` makes of it. :func:`check_image_limits` is the service's header-only check of
an upload against its size limits, and :func:`check_image_data` its one bounded pass proving
the data whole, for both formats.
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Callable, Union

import nibabel as nib
import numpy as np

from worker.errors import InputError
from worker.io.image_names import IMAGE_SUFFIXES, MIF_SUFFIXES, NIFTI_SUFFIXES
from worker.io.mif import MifInfo, load_mif_data, read_mif_header, write_mif
from worker.io.nifti import (
    INFLATER_BYTES,
    NiftiInfo,
    check_stored_size,
    derived_image,
    inflate_checked,
    load_memory_bytes,
    load_nifti_data,
    read_nifti_header,
    save_nifti_atomic,
)
from worker.provenance import file_sha256

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageInfo",
    "image_format",
    "read_image_header",
    "load_image_data",
    "load_image_data_with_sha256",
    "load_job_images",
    "write_image",
    "save_image",
    "check_image_limits",
    "check_image_data",
    "image_memory_bytes",
]

ImageInfo = Union[NiftiInfo, MifInfo]


def image_format(path: Path) -> str:
    """``"nifti"`` or ``"mif"`` from the file name; :class:`InputError` for anything else."""
    name = Path(path).name
    if name.endswith(NIFTI_SUFFIXES):
        return "nifti"
    if name.endswith(MIF_SUFFIXES):
        return "mif"
    raise InputError(
        "Unsupported image format",
        f"{Path(path).name!r} is neither NIfTI (.nii, .nii.gz) nor MRtrix (.mif, .mif.gz, .mih); "
        "convert it with mrconvert",
    )


def read_image_header(path: Path, role: str) -> ImageInfo:
    """The header of a NIfTI or MRtrix image, checked as :func:`worker.io.nifti.read_nifti_header`
    checks NIfTI: a real (not complex) data type. ``role`` names the file in errors."""
    if image_format(path) == "nifti":
        return read_nifti_header(path, role)
    info = read_mif_header(path, role)
    if info.dtype.kind not in "fiub":
        raise InputError(
            "Unsupported data type",
            f"the {role} file {info.path.name!r} stores {info.datatype}; use a real-valued image "
            "(e.g. mrconvert -datatype float32)",
        )
    return info


def load_image_data(info: ImageInfo, dtype=np.float32, *, threads: int = 1,
                    empty: Callable[..., np.ndarray] = np.empty) -> np.ndarray:
    """The data of a checked header, scaled by its slope/intercept (NIfTI) or scaling (MRtrix);
    a large .nii.gz inflated on ``threads`` threads (:func:`worker.io.nifti.load_nifti_data`);
    read into an array ``empty`` makes, as ``np.empty`` (page-locked memory for a GPU:
    :func:`gpu.cuda.host_memory.pinned_empty`), where the stored values need no conversion."""
    if isinstance(info, MifInfo):
        return load_mif_data(info, dtype, empty=empty)
    return load_nifti_data(info, dtype, threads=threads, empty=empty)


def load_image_data_with_sha256(info: ImageInfo, dtype=np.float32, *, threads: int = 1,
                                empty: Callable[..., np.ndarray] = np.empty) -> tuple[np.ndarray, dict[str, str]]:
    """:func:`load_image_data`, and the hex sha256 of each file holding the image by file name
    (:func:`worker.provenance.file_sha256`'s digests: of a ``.gz`` file as stored), the data
    file's taken from the bytes the read takes in rather than by reading it again; an
    ``.mih`` header's, a few kilobytes, apart."""
    digest = hashlib.sha256()
    if isinstance(info, MifInfo):
        data = load_mif_data(info, dtype, digest=digest, empty=empty)
        header = {} if info.data_path == info.path else {info.path.name: file_sha256(info.path)}
        return data, {**header, info.data_path.name: digest.hexdigest()}
    data = load_nifti_data(info, dtype, threads=threads, digest=digest, empty=empty)
    return data, {info.path.name: digest.hexdigest()}


def load_job_images(images: dict[str, ImageInfo | None], uploaded: dict | None = None, *, threads: int = 1
                    ) -> tuple[dict[str, np.ndarray], dict[str, str], dict[str, str]]:
    """A job's input images (by role; None for one not given) as float32: the arrays and the
    file names by role, and the sha256 of the files by name (:func:`load_image_data_with_sha256`),
    or, for an image stored in another form than it was uploaded in (``uploaded``: by role,
    :class:`worker.job_kinds.UploadedInput`), the uploaded file's name and sha256. A large
    ``.nii.gz`` is inflated on ``threads`` threads (:func:`load_image_data`)."""
    uploaded = dict(uploaded or {})
    arrays, names, sha256 = {}, {}, {}
    for role, info in images.items():
        if info is None:
            continue
        if role in uploaded:
            arrays[role] = load_image_data(info, threads=threads)
            names[role], sha256[uploaded[role].name] = uploaded[role].name, uploaded[role].sha256
        else:
            arrays[role], digests = load_image_data_with_sha256(info, threads=threads)
            names[role] = info.path.name
            sha256.update(digests)
    return arrays, names, sha256


def write_image(
    path: Path,
    data: np.ndarray,
    affine: np.ndarray,
    *,
    keyval: dict[str, str] | None = None,
) -> Path:
    """Write ``data`` with voxel→scanner ``affine`` (its column norms are the voxel sizes) as
    NIfTI or MRtrix according to ``path``'s name, atomically; ``keyval`` goes into an MRtrix
    header only."""
    path = Path(path)
    if image_format(path) == "mif":
        return write_mif(path, data, affine, keyval=keyval)
    image = nib.Nifti1Image(data, affine, dtype=data.dtype)
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=1)
    image.header.set_xyzt_units("mm")
    return save_nifti_atomic(image, path)


def save_image(reference: ImageInfo, data: np.ndarray, path: Path, threads: int | None = None) -> Path:
    """Write ``data`` on the reference's grid (same affine) as NIfTI or MRtrix according to
    ``path``'s name, atomically. An MRtrix output keeps an MRtrix reference's key–value pairs
    (command history, ...), as MRtrix3 commands do. ``threads``: gzip threads of a ``.nii.gz``
    (:func:`worker.io.nifti.save_nifti_atomic`)."""
    if image_format(path) == "nifti" and isinstance(reference, NiftiInfo):
        return save_nifti_atomic(derived_image(reference, data), path, threads)
    keyval = reference.keyval if isinstance(reference, MifInfo) else None
    return write_image(path, data, reference.affine, keyval=keyval)


def image_memory_bytes(info: ImageInfo) -> int:
    """Most bytes :func:`load_image_data` holds at once for a checked header, as float32:
    :func:`worker.io.nifti.load_memory_bytes` for NIfTI; for MRtrix the stored bytes (for
    ``.gz``, the buffer they are inflated into and the inflater's), bits unpacked to bytes and
    bools, and the float32 values in array order."""
    if isinstance(info, NiftiInfo):
        return load_memory_bytes(info)
    values = math.prod(info.shape)
    stored = max(info.data_offset, info.data_bytes) + INFLATER_BYTES if info.compressed else info.data_bytes
    unpacked = 2 * values if info.datatype.lower() == "bit" else 0
    return stored + unpacked + values * 4


def check_image_limits(path: Path, role: str, *, max_input_bytes: int, max_voxels: int) -> ImageInfo:
    """Header-only checks of an upload against the service limits, before any data is inflated:
    a ``.gz`` must be gzip, the header readable (:func:`read_image_header`), its voxel grid
    within ``max_voxels`` and the data it declares within ``max_input_bytes``, so a small
    ``.nii.gz``/``.mif.gz`` that claims terabytes (a gzip bomb) is refused from its header.
    Returns the header, for :func:`check_image_data`. ``role`` (the upload's field) names the
    file in messages.
    """
    path = Path(path)
    if path.name.endswith(".gz"):
        with open(path, "rb") as handle:
            if handle.read(2) != b"\x1f\x8b":
                raise InputError(
                    "Not gzip-compressed",
                    f"{role}: {path.name!r} ends in .gz but is not gzip data; rename it without .gz "
                    "if it is uncompressed, or compress it with gzip",
                )
    info = read_image_header(path, role)
    grid = "×".join(str(n) for n in info.shape[:3])
    if info.n_voxels > max_voxels:
        raise InputError(
            "Too many voxels",
            f"{role}: the image grid {grid} has {info.n_voxels} voxels, more than this server's "
            f"limit of {max_voxels} (FIBERTENSOR_MAX_VOXELS); crop it",
        )
    if info.data_bytes > max_input_bytes:
        raise InputError(
            "Input too large",
            f"{role}: the header declares {info.data_bytes} bytes of image data "
            f"({'×'.join(str(n) for n in info.shape)} of {info.dtype}), more than this server's "
            f"limit of {max_input_bytes} (FIBERTENSOR_MAX_INPUT_BYTES); crop the volume",
        )
    if isinstance(info, NiftiInfo) and info.offset < info.header_bytes:
        # nibabel would read the header's own bytes as data
        raise InputError(
            "Unreadable NIfTI file",
            f"{role}: the file puts its data at byte {info.offset} (vox_offset), inside its "
            f"{info.header_bytes}-byte header; the header is damaged, write the file again (e.g. with nibabel or mrconvert)",
        )
    return info


def check_image_data(info: ImageInfo, role: str, *, inflate: bool = True, keep: Path | None = None) -> str | None:
    """Prove a checked image holds the data its header declares and no more
    (:func:`worker.io.nifti.check_stored_size`): the check of an upload that is stored now and
    read later. A compressed file is read through once, keeping nothing; ``inflate=False``
    checks the size of an uncompressed one only, for a caller about to load the image
    (:func:`load_image_data` refuses a damaged ``.nii.gz`` in the same words).

    ``keep`` (a ``.nii.gz`` or ``.mif.gz``): the pass writes what it inflates there, the same
    image uncompressed (``.nii``, ``.mif``), and returns the sha256 of the compressed file
    (:func:`worker.io.nifti.inflate_checked`)."""
    data_path, offset = (info.data_path, info.data_offset) if isinstance(info, MifInfo) else (info.path, info.offset)
    if keep is not None:
        return inflate_checked(data_path, offset, info.data_bytes, role, keep)
    if inflate or not data_path.name.endswith(".gz"):
        check_stored_size(data_path, offset, info.data_bytes, role)
    return None
