"""The ``.npz`` container of a compressed volume (format ``fibertensor-tucker``).

Version 3 (written), read with ``numpy.load(path, allow_pickle=False)``:

===================  =========================================================================
``format``           ``"fibertensor-tucker"``
``version``          3
``core_codes``       uint8: the coded integer stream of the quantised core (ranks)
``factor_codes_<n>`` uint8: the stream of the quantised factor U_n (I_n × r_n)
``residual_codes``   uint8: the stream of the quantised residual (empty: no residual)
``affine``           4×4 float64; ``header``: the raw NIfTI header block (uint8)
``header_kind``      ``"nifti1"`` or ``"nifti2"``
``report``           JSON: ``shape``, ``dtype``, ``ranks``, ``core_step``, ``factor_step``,
                     ``residual_step`` (the decoder's numbers), the target, the measured
                     errors (``relative_error``, ``max_error``, ``psnr``), the TTMc bound, times
===================  =========================================================================

The volume is ``Q(G) ×_1 Q(U_1) … ×_N Q(U_N) + Δ·q`` with every ``Q(·)`` its codes times
its step (:mod:`gpu.compress.error_bounded`, streams of :mod:`gpu.compress.chunked_rans`),
cast back to ``dtype`` (integers rounded and clipped). Version 2 (still read) has the same
arrays, its streams range-coded (:mod:`gpu.compress.entropy_coding`). Version 1 (still read) stored the
FP16/FP32/FP64 core (``core``, ``core_exp_<n>``) and float64 factors (``factor_<n>``) as
plain arrays, with ``shape``, ``dtype``, ``tolerance``, ``relative_error`` and ``bound``
beside them. NIfTI extensions are not kept.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np

from gpu.compress.error_bounded import EncodedTensor, cast_output, decode_tensor
from gpu.compress.hosvd import tucker_reconstruct
from worker.io.atomic import atomic_path

__all__ = ["FORMAT", "VERSION", "CompressedVolume", "save_archive", "load_archive", "archive_volume", "output_dtype"]

FORMAT = "fibertensor-tucker"
VERSION = 3
_READS = (1, 2, 3)
#: the integer coder of each version's streams (:data:`gpu.compress.error_bounded.CODERS`)
_CODER = {2: "range", 3: "rans"}


def output_dtype(header: nib.Nifti1Header) -> np.dtype:
    """The type decoded values take: the on-disk type, or float64 when the header scales
    data (``scl_slope``/``scl_inter``), so nibabel applies the scaling when writing."""
    slope, inter = header.get_slope_inter()
    if slope not in (None, 1.0) or inter not in (None, 0.0):
        return np.dtype(np.float64)
    return np.dtype(header.get_data_dtype())


@dataclass
class CompressedVolume:
    """A read archive: the coded volume (v2 and v3 ``encoded``, or v1 ``core``/``core_exp``/``factors``)."""

    version: int
    shape: tuple[int, ...]
    dtype: np.dtype
    affine: np.ndarray
    header: nib.Nifti1Header
    report: dict
    encoded: EncodedTensor | None = None
    core: np.ndarray | None = None
    core_exp: list[np.ndarray] | None = None
    factors: list[np.ndarray] | None = None

    def reconstruct(self, backend: str = "cpu") -> np.ndarray:
        """The decompressed volume in :func:`output_dtype`."""
        if self.encoded is not None:
            return decode_tensor(self.encoded, output_dtype(self.header), backend=backend)
        return cast_output(tucker_reconstruct(self.core, self.factors, self.core_exp), output_dtype(self.header))


def _header_arrays(image: nib.Nifti1Image) -> dict:
    header = image.header
    return {"affine": np.asarray(image.affine, dtype=np.float64),
            "header": np.frombuffer(header.binaryblock, dtype=np.uint8),
            "header_kind": np.array("nifti2" if isinstance(header, nib.Nifti2Header) else "nifti1")}


def _stream(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=np.uint8)


def save_archive(path: Path, encoded: EncodedTensor, image: nib.Nifti1Image, report: dict) -> Path:
    """Write a version-3 archive through a temporary name and a rename."""
    path = Path(path)
    report = {**report, "shape": list(encoded.shape), "dtype": np.dtype(image.header.get_data_dtype()).name,
              "ranks": list(encoded.ranks), "core_step": encoded.core_step, "factor_step": encoded.factor_step,
              "residual_step": encoded.residual_step}
    arrays = {"format": np.array(FORMAT), "version": np.array(VERSION), **_header_arrays(image),
              "core_codes": _stream(encoded.core_stream), "residual_codes": _stream(encoded.residual_stream),
              "report": np.array(json.dumps(report))}
    for n, stream in enumerate(encoded.factor_streams):
        arrays[f"factor_codes_{n}"] = _stream(stream)
    with atomic_path(path) as temporary, open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def load_archive(path: Path) -> CompressedVolume:
    """Read and check an archive (version 1, 2 or 3); raises ``ValueError`` saying what is wrong."""
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # zipfile, OSError, ValueError: all mean "not our archive"
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from None
    with data:
        if "format" not in data.files or str(data["format"]) != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} archive (written by 'fibertensor compress')")
        version = int(data["version"])
        if version not in _READS:
            raise ValueError(f"{path}: archive version {version}, this fibertensor reads versions "
                             f"{', '.join(map(str, _READS))}")
        try:
            header_class = nib.Nifti2Header if str(data["header_kind"]) == "nifti2" else nib.Nifti1Header
            header = header_class.from_fileobj(io.BytesIO(data["header"].tobytes()))
            report = json.loads(str(data["report"]))
            common = dict(version=version, affine=data["affine"], header=header, report=report)
            if version == 1:
                core = data["core"]
                return CompressedVolume(
                    **common, shape=tuple(int(s) for s in data["shape"]), dtype=np.dtype(str(data["dtype"])),
                    core=core, core_exp=[data[f"core_exp_{n}"].astype(np.int64) for n in range(core.ndim)],
                    factors=[data[f"factor_{n}"] for n in range(core.ndim)])
            shape = tuple(int(s) for s in report["shape"])
            encoded = EncodedTensor(
                shape=shape, ranks=tuple(int(r) for r in report["ranks"]), core_step=float(report["core_step"]),
                core_stream=data["core_codes"].tobytes(), factor_step=float(report["factor_step"]),
                factor_streams=[data[f"factor_codes_{n}"].tobytes() for n in range(len(shape))],
                residual_step=float(report["residual_step"]), residual_stream=data["residual_codes"].tobytes(),
                coder=_CODER[version])
            return CompressedVolume(**common, shape=shape, dtype=np.dtype(report["dtype"]), encoded=encoded)
        except (KeyError, ValueError, TypeError) as exc:
            raise ValueError(f"{path}: damaged archive ({exc})") from None


def archive_volume(archive: CompressedVolume, backend: str = "cpu") -> nib.Nifti1Image:
    """The decompressed NIfTI image with the original header and affine."""
    image_class = nib.Nifti2Image if isinstance(archive.header, nib.Nifti2Header) else nib.Nifti1Image
    return image_class(archive.reconstruct(backend), archive.affine, header=archive.header.copy())
