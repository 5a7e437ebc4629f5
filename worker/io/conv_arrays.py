"""File formats of the conv jobs: inputs (.npy or NIfTI), factor archives (.npz), kernels.

* Input ``.npy``: (N, C, H, W), real dtype (converted to float32).
* Input NIfTI: a 3D (X, Y, Z) or 4D (X, Y, Z, C) volume, convolved slice by slice along the
  third axis with the 4th axis as channels, i.e. as the batch U[z, c, x, y] = vol[x, y, z, c].
  The output goes back on the same grid, so it needs an output of the input's in-plane
  size (stride 1, padding "same").
* Factors ``.npz``: CP — ``S`` (C×R), ``H`` (kh×R), ``W`` (kw×R), ``T`` (T×R), optional
  ``bias`` (T); Tucker — ``U_in`` (C×D1), ``core`` (D2×D1×kh×kw), ``U_out`` (T×D2),
  optional ``bias`` (T).
* Kernel ``.npy``: a dense (T, C, kh, kw) kernel (PyTorch's layout) to decompose.

Checks read headers only (the ``.npy`` header, each ``.npz`` member's header, the NIfTI
header); writes go through a temporary name and a rename.
"""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from worker.io.atomic import atomic_path
from worker.errors import InputError
from worker.io.nifti import (
    NIFTI_SUFFIXES,
    NiftiInfo,
    derived_image,
    load_nifti_data,
    read_nifti_header,
    save_nifti_atomic,
)

__all__ = [
    "ConvInputInfo",
    "FACTOR_NAMES",
    "read_input_header",
    "load_input",
    "write_output",
    "read_npz_header",
    "check_factor_header",
    "load_factors",
    "read_kernel_header",
    "load_kernel",
    "save_factors",
    "save_npy_atomic",
]

#: Required and optional arrays of each factor archive.
FACTOR_NAMES = {
    "cp": (("S", "H", "W", "T"), ("bias",)),
    "tucker": (("U_in", "core", "U_out"), ("bias",)),
}


@dataclass(frozen=True)
class ConvInputInfo:
    """An input's header: its NCHW shape as convolved, and the NIfTI header if it is one."""

    path: Path
    shape: tuple[int, int, int, int]
    dtype: np.dtype
    nifti: NiftiInfo | None = None

    @property
    def is_nifti(self) -> bool:
        return self.nifti is not None


def _npy_header(fh, name: str, what: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    try:
        version = np.lib.format.read_magic(fh)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(fh)
    except Exception as exc:  # numpy raises ValueError/OSError/... for foreign files
        raise InputError(f"Unreadable {what}", f"{name!r} is not a valid .npy array ({exc})") from None
    return tuple(int(d) for d in shape), np.dtype(dtype), bool(fortran)


def _check_real(dtype: np.dtype, name: str, what: str) -> None:
    if dtype.kind not in "fiu" or dtype.fields is not None:
        raise InputError(f"Unsupported {what} data type", f"{name!r} stores {dtype}; use float32 (or another real type)")


def read_input_header(path: Path) -> ConvInputInfo:
    """Header-only check of a conv input (``.npy`` or NIfTI)."""
    path = Path(path)
    if path.name.endswith(NIFTI_SUFFIXES):
        info = read_nifti_header(path, "input")
        if len(info.shape) == 3:
            x, y, z = info.shape
            c = 1
        elif len(info.shape) == 4:
            x, y, z, c = info.shape
        else:
            raise InputError(
                "Wrong number of dimensions",
                f"the input {path.name!r} has shape {info.shape}; use a 3D volume or a 4D volume "
                "whose 4th axis holds the channels",
            )
        return ConvInputInfo(path, (z, c, x, y), info.dtype, info)
    if path.suffix != ".npy":
        raise InputError("Unsupported input format", f"the input {path.name!r} must be .npy, .nii or .nii.gz")
    with open(path, "rb") as fh:
        shape, dtype, _ = _npy_header(fh, path.name, "input")
    _check_real(dtype, path.name, "input")
    if len(shape) != 4 or min(shape) < 1:
        raise InputError(
            "Wrong input shape",
            f"the input {path.name!r} has shape {shape}; a .npy input must be 4-D (N, C, H, W) and non-empty",
        )
    return ConvInputInfo(path, shape, dtype)


def load_input(info: ConvInputInfo) -> np.ndarray:
    """The input as a C-contiguous float32 (N, C, H, W) array."""
    if info.is_nifti:
        vol = load_nifti_data(info.nifti)
        if vol.ndim == 3:
            vol = vol[..., None]
        return np.ascontiguousarray(np.transpose(vol, (2, 3, 0, 1)), dtype=np.float32)
    try:
        data = np.load(info.path, allow_pickle=False)
    except Exception as exc:
        raise InputError("Unreadable input", f"the data of {info.path.name!r} could not be read ({exc})") from None
    return np.ascontiguousarray(data, dtype=np.float32)


def save_npy_atomic(array: np.ndarray, path: Path) -> Path:
    """``np.save`` to a temporary name beside ``path``, then rename into place."""
    path = Path(path)
    with atomic_path(path) as temporary:
        np.save(temporary, array)
    return path


def write_output(output: np.ndarray, info: ConvInputInfo, path: Path) -> Path:
    """Write the (N, T, Ho, Wo) output: ``.npy`` as is, or NIfTI on the input's grid
    (vol[x, y, z, t] = V[z, t, x, y])."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(NIFTI_SUFFIXES):
        if not info.is_nifti:
            raise InputError("Output format", "a NIfTI output needs a NIfTI input (its grid); write .npy instead")
        vol = np.ascontiguousarray(np.transpose(output, (2, 3, 0, 1)), dtype=np.float32)
        return save_nifti_atomic(derived_image(info.nifti, vol), path)
    if path.suffix != ".npy":
        raise InputError("Output format", f"the output {path.name!r} must end in .npy, .nii or .nii.gz")
    return save_npy_atomic(np.ascontiguousarray(output, dtype=np.float32), path)


def read_npz_header(path: Path, what: str = "factors") -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of each array of an ``.npz`` archive, from the member headers only."""
    path = Path(path)
    if path.suffix != ".npz":
        raise InputError(f"Unsupported {what} format", f"the {what} file {path.name!r} must be an .npz archive")
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise InputError(f"Unreadable {what}", f"{path.name!r} is not a valid .npz archive ({exc})") from None
    headers = {}
    with archive:
        for member in archive.namelist():
            if not member.endswith(".npy"):
                continue
            with archive.open(member) as fh:
                shape, dtype, _ = _npy_header(fh, f"{path.name}:{member}", what)
            headers[member[:-4]] = (shape, dtype)
    return headers


def check_factor_header(path: Path, family: str, channels: int | None = None) -> dict:
    """Header-only check of a factor archive for ``family`` (``cp`` or ``tucker``).

    Returns ``{"rank": R, "out_channels": T, "kernel": (kh, kw)}`` (``rank`` = (D1, D2) for
    Tucker); raises :class:`InputError` naming the array at fault.
    """
    headers = read_npz_header(path)
    required, optional = FACTOR_NAMES[family]
    missing = [n for n in required if n not in headers]
    if missing:
        raise InputError(
            "Missing factor arrays",
            f"{Path(path).name!r} lacks {', '.join(missing)}; a {family} archive holds "
            f"{', '.join(required)} (and optionally {', '.join(optional)}); found: {', '.join(headers) or 'nothing'}",
        )
    for name, (shape, dtype) in headers.items():
        if name in required + optional:
            _check_real(dtype, f"{Path(path).name}:{name}", "factor")
    shapes = {n: headers[n][0] for n in required}
    want_dims = {"S": 2, "H": 2, "W": 2, "T": 2, "U_in": 2, "core": 4, "U_out": 2}
    for name, shape in shapes.items():
        if len(shape) != want_dims[name] or 0 in shape:
            raise InputError("Wrong factor shape", f"factor {name} has shape {shape}; it must be a non-empty "
                                                   f"{want_dims[name]}-D array")
    if family == "cp":
        ranks = {n: shapes[n][1] for n in required}
        if len(set(ranks.values())) != 1:
            raise InputError("Ranks do not match", "the CP factors must share one rank (column count); got "
                             + ", ".join(f"{k}: {v}" for k, v in ranks.items()))
        c, t, rank, kernel = shapes["S"][0], shapes["T"][0], shapes["S"][1], (shapes["H"][0], shapes["W"][0])
    else:
        c, d1 = shapes["U_in"]
        t, d2 = shapes["U_out"]
        core = shapes["core"]
        if core[1] != d1 or core[0] != d2:
            raise InputError("Ranks do not match", f"core has shape {core} (D2, D1, kh, kw) but U_in has {d1} and "
                             f"U_out {d2} columns")
        rank, kernel = (d1, d2), core[2:]
    if "bias" in headers and headers["bias"][0] != (t,):
        raise InputError("Wrong bias shape", f"bias has shape {headers['bias'][0]}; it needs one entry per output "
                         f"channel ({t})")
    if channels is not None and c != channels:
        raise InputError("Channel count mismatch", f"the factors expect {c} input channels but the input has {channels}")
    return {"rank": rank, "out_channels": t, "kernel": tuple(kernel), "in_channels": c}


def load_factors(path: Path, family: str):
    """Load a checked archive into :class:`gpu.conv.cp.CPFactors` or
    :class:`gpu.conv.tucker.TuckerFactors` (NaN or infinite weights are an InputError)."""
    from gpu.conv.cp import check_cp_factors
    from gpu.conv.tucker import check_tucker_factors

    required, _ = FACTOR_NAMES[family]
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
    except Exception as exc:
        raise InputError("Unreadable factors", f"{Path(path).name!r} could not be read ({exc})") from None
    try:
        if family == "cp":
            return check_cp_factors(*(arrays[n] for n in required), arrays.get("bias"))
        return check_tucker_factors(*(arrays[n] for n in required), arrays.get("bias"))
    except ValueError as exc:
        raise InputError("Invalid factors", str(exc)) from None


def read_kernel_header(path: Path) -> tuple[int, int, int, int]:
    """Header-only check of a dense (T, C, kh, kw) kernel ``.npy``."""
    path = Path(path)
    if path.suffix != ".npy":
        raise InputError("Unsupported kernel format", f"the kernel {path.name!r} must be a .npy array")
    with open(path, "rb") as fh:
        shape, dtype, _ = _npy_header(fh, path.name, "kernel")
    _check_real(dtype, path.name, "kernel")
    if len(shape) != 4 or 0 in shape:
        raise InputError("Wrong kernel shape", f"the kernel {path.name!r} has shape {shape}; it must be 4-D "
                         "(T, C, kh, kw) as PyTorch stores conv weights")
    return shape


def load_kernel(path: Path) -> np.ndarray:
    read_kernel_header(path)
    try:
        kernel = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise InputError("Unreadable kernel", f"{Path(path).name!r} could not be read ({exc})") from None
    if not np.all(np.isfinite(kernel)):
        raise InputError("Invalid kernel", f"the kernel {Path(path).name!r} contains NaN or infinite values")
    return kernel


def save_factors(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write a factor archive atomically (``np.savez`` to a temporary name, then rename)."""
    path = Path(path)
    if path.suffix != ".npz":
        raise InputError("Output format", f"the factors file {path.name!r} must end in .npz")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as temporary:
        np.savez(temporary, **{k: np.asarray(v, np.float32) for k, v in arrays.items() if v is not None})
    return path
