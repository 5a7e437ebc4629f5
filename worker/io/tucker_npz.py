"""The ``.npz`` container of a Tucker-compressed volume (format ``fibertensor-tucker``, v1).

Arrays in the archive (read with ``numpy.load(path, allow_pickle=False)``):

=================  ===========================================================================
``format``         ``"fibertensor-tucker"``
``version``        1
``core``           the core Ĝ, float16 / float32 / float64 (``core_precision``)
``core_exp_<n>``   int32 exponents e_n: ``G = core ×_n diag(2^{−e_n})`` (zeros unless FP16)
``factor_<n>``     float64 factor U_n, I_n × r_n, orthonormal columns
``shape``          original shape (int64); ``dtype``: original on-disk dtype, e.g. ``"int16"``
``affine``         4×4 float64; ``header``: the raw NIfTI header block (uint8)
``header_kind``    ``"nifti1"`` or ``"nifti2"``
``tolerance``      requested relative error (NaN when ranks were fixed)
``relative_error`` achieved ‖X − X̂‖_F / ‖X‖_F (exact, see :mod:`gpu.compress.hosvd`)
``bound``          the TTMc forward error bound on the core, relative to ‖X‖_F
``report``         JSON: precision, scaling, order, ranks, phase times, errors, bound terms
=================  ===========================================================================

The volume is ``X̂ = G ×_1 U_1 … ×_N U_N`` (float64), cast back to ``dtype`` (integers are
rounded and clipped to the type's range). NIfTI extensions are not kept.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from pathlib import Path

import nibabel as nib
import numpy as np

from gpu.compress.hosvd import TuckerDecomposition, tucker_reconstruct
from worker.io.atomic import atomic_path

__all__ = ["FORMAT", "VERSION", "TuckerArchive", "save_archive", "load_archive", "archive_volume"]

FORMAT = "fibertensor-tucker"
VERSION = 1


@dataclass
class TuckerArchive:
    core: np.ndarray
    core_exp: list[np.ndarray]
    factors: list[np.ndarray]
    shape: tuple[int, ...]
    dtype: np.dtype
    affine: np.ndarray
    header: nib.Nifti1Header
    report: dict

    def reconstruct(self) -> np.ndarray:
        """The decompressed volume: original dtype, or float64 when the header scales data.

        Scaled integer data (``scl_slope``/``scl_inter`` set) stays float so nibabel applies
        the header's scaling when writing.
        """
        x = tucker_reconstruct(self.core, self.factors, self.core_exp)
        slope, inter = self.header.get_slope_inter()
        if slope not in (None, 1.0) or inter not in (None, 0.0):
            return x
        if np.issubdtype(self.dtype, np.integer):
            info = np.iinfo(self.dtype)
            return np.clip(np.rint(x), info.min, info.max).astype(self.dtype)
        return x.astype(self.dtype)


def save_archive(
    path: Path, decomposition: TuckerDecomposition, image: nib.Nifti1Image, report: dict
) -> Path:
    """Write the archive through a temporary name and a rename (never a half-written file)."""
    path = Path(path)
    header = image.header
    arrays = {
        "format": np.array(FORMAT),
        "version": np.array(VERSION),
        "core": decomposition.core,
        "shape": np.array(image.shape, dtype=np.int64),
        "dtype": np.array(np.dtype(header.get_data_dtype()).name),
        "affine": np.asarray(image.affine, dtype=np.float64),
        "header": np.frombuffer(header.binaryblock, dtype=np.uint8),
        "header_kind": np.array("nifti2" if isinstance(header, nib.Nifti2Header) else "nifti1"),
        "tolerance": np.array(math.nan if decomposition.tolerance is None else decomposition.tolerance),
        "relative_error": np.array(decomposition.relative_error),
        "bound": np.array(decomposition.bound),
        "report": np.array(json.dumps(report)),
    }
    for n, (e, u) in enumerate(zip(decomposition.core_exp, decomposition.factors)):
        arrays[f"core_exp_{n}"] = np.asarray(e, dtype=np.int32)
        arrays[f"factor_{n}"] = np.asarray(u, dtype=np.float64)
    with atomic_path(path) as temporary, open(temporary, "wb") as handle:
        np.savez(handle, **arrays)
    return path


def load_archive(path: Path) -> TuckerArchive:
    """Read and check an archive; raises ``ValueError`` saying what is wrong."""
    try:
        data = np.load(path, allow_pickle=False)
    except Exception as exc:  # zipfile, OSError, ValueError: all mean "not our archive"
        raise ValueError(f"{path}: not a readable .npz archive ({exc})") from None
    with data:
        if "format" not in data.files or str(data["format"]) != FORMAT:
            raise ValueError(f"{path}: not a {FORMAT} archive (written by 'fibertensor compress')")
        version = int(data["version"])
        if version != VERSION:
            raise ValueError(f"{path}: archive version {version}, this fibertensor reads version {VERSION}")
        core = data["core"]
        n_modes = core.ndim
        factors = [data[f"factor_{n}"] for n in range(n_modes)]
        core_exp = [data[f"core_exp_{n}"].astype(np.int64) for n in range(n_modes)]
        block = data["header"].tobytes()
        kind = str(data["header_kind"])
        header_class = nib.Nifti2Header if kind == "nifti2" else nib.Nifti1Header
        header = header_class.from_fileobj(io.BytesIO(block))
        return TuckerArchive(
            core=core,
            core_exp=core_exp,
            factors=factors,
            shape=tuple(int(s) for s in data["shape"]),
            dtype=np.dtype(str(data["dtype"])),
            affine=data["affine"],
            header=header,
            report=json.loads(str(data["report"])),
        )


def archive_volume(archive: TuckerArchive) -> nib.Nifti1Image:
    """The decompressed NIfTI image with the original header and affine."""
    image_class = nib.Nifti2Image if isinstance(archive.header, nib.Nifti2Header) else nib.Nifti1Image
    return image_class(archive.reconstruct(), archive.affine, header=archive.header.copy())
