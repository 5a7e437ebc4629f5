"""Diffusion gradient tables read as MRtrix3 reads them: FSL ``bvals``/``bvecs``
(``-fslgrad``), an MRtrix gradient file (``-grad``) or the ``dw_scheme`` of a ``.mif`` header.

Every reader returns the scheme in MRtrix3's convention: an ``(n, 4)`` float64 array of rows
``x y z b``, the direction a unit vector in scanner (real-world) coordinates, ``[0 0 0]`` where
the file gives none. As MRtrix3 (``core/dwi/gradient.cpp``): FSL's ``bvecs`` are in the image's
voxel axes with x flipped when the affine's 3×3 part has a positive determinant, and rotate into
scanner space with the affine's rotation. The directions are then normalised, and the b-values
scaled where MRtrix3 scales them, by :func:`gpu.fod.gradient_scheme.normalise_scheme`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from gpu.fod.shells import BZERO_THRESHOLD
from worker.errors import InputError
from worker.io.atomic import write_bytes_atomic

__all__ = ["read_fsl_gradients", "write_fsl_gradients", "read_mrtrix_gradients", "scheme_from_header", "read_gradients"]

_log = logging.getLogger(__name__)

# MRtrix3 writes the normalised scheme back once some |log(norm²)| exceeds single precision:
# a normalisation that changes the directions, which earns a warning.
_SINGLE_PRECISION_LOG = 1e-5


def _numbers(path: Path, what: str, flag: str) -> np.ndarray:
    """The whitespace- (or comma-) separated numbers of text file ``path`` as a 2-D array;
    ``#`` starts a comment. Non-finite entries are :func:`_normalised`'s to judge."""
    if not path.is_file():
        raise InputError("Missing gradient file", f"the {what} file {path.name!r} does not exist; give it with {flag}")
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.split("#", 1)[0].replace(",", " ").strip()
        if not line:
            continue
        try:
            rows.append([float(v) for v in line.split()])
        except ValueError:
            raise InputError("Unreadable gradient file",
                             f"the {what} file {path.name!r} holds {line[:40]!r}, not numbers; {flag} takes "
                             "plain text numbers") from None
    if not rows or len({len(r) for r in rows}) != 1:
        raise InputError("Unreadable gradient file",
                         f"the {what} file {path.name!r} is empty or its rows differ in length; {flag} takes a "
                         "rectangular table of numbers")
    return np.asarray(rows, dtype=np.float64)


def _check_volumes(scheme: np.ndarray, n_volumes: int | None, source: str) -> None:
    if n_volumes is not None and scheme.shape[0] != n_volumes:
        raise InputError("Gradient table does not match the image",
                         f"{source} gives {scheme.shape[0]} gradient rows but the image has {n_volumes} volumes; "
                         "give the gradient files written with this image (one row per volume)")


def _normalised(scheme: np.ndarray, source: str) -> np.ndarray:
    """``scheme`` with unit directions and, where MRtrix3 scales them, scaled b-values
    (:func:`gpu.fod.gradient_scheme.normalise_scheme`); a warning when directions were not unit."""
    from gpu.fod.gradient_scheme import normalise_scheme

    if not np.isfinite(scheme[:, 3]).all():
        raise InputError("Unreadable gradient table", f"{source} holds non-finite b-values; fix those entries")
    # b=0 volumes may carry no direction (FSL bvecs of NaN, as MRtrix3's -fslgrad takes);
    # a diffusion-weighted one needs its direction.
    undefined = ~np.isfinite(scheme[:, :3]).all(axis=1)
    weighted = np.flatnonzero(undefined & (scheme[:, 3] > BZERO_THRESHOLD))
    if weighted.size:
        raise InputError("Unreadable gradient table",
                         f"{source} has non-finite directions for diffusion-weighted volumes "
                         f"{weighted.tolist()[:5]}; fix those entries")
    directions = np.where(undefined[:, None], np.nan, scheme[:, :3])
    norms = np.linalg.norm(directions[~undefined], axis=1)
    norms = norms[norms > 0]
    if norms.size and np.abs(np.log(norms * norms)).max() > _SINGLE_PRECISION_LOG:
        _log.warning("%s: gradient directions are not unit vectors (norm off by up to %.3g); they are normalised",
                     source, float(np.abs(norms - 1.0).max()))
    bvals, unit = normalise_scheme(scheme[:, 3], directions)
    return np.column_stack([unit, bvals])


def _rows_of(table: np.ndarray, rows: int, path: Path, what: str, other: str) -> np.ndarray:
    """``table`` with ``rows`` rows, transposed if FSL's columns were written as rows."""
    if table.shape[0] == rows:
        return table
    if table.shape[1] == rows:
        return table.T
    raise InputError("Unreadable gradient file",
                     f"the file {path.name!r} must hold {what}, not {table.shape[0]}×{table.shape[1]}; "
                     f"is it the {other} file?")


def read_fsl_gradients(bvecs: Path, bvals: Path, affine: np.ndarray,
                       n_volumes: int | None = None) -> np.ndarray:
    """The scheme of an FSL ``bvecs``/``bvals`` pair, as MRtrix3's ``-fslgrad``.

    Parameters
    ----------
    bvecs, bvals : Path
        FSL files: 3 rows (or columns) of directions in voxel axes, 1 row (or column) of b.
    affine : (4, 4) array
        The image's voxel → scanner affine, voxel axes in the order the data are stored
        (:attr:`worker.io.nifti.NiftiInfo.affine`, :attr:`worker.io.mif.MifInfo.affine`).
    n_volumes : int, optional
        The image's volume count, checked against the files.

    Returns
    -------
    (n, 4) float64 array of ``x y z b`` rows, directions in scanner space.
    """
    bvecs, bvals = Path(bvecs), Path(bvals)
    b = _numbers(bvals, "bvals", "-fslgrad BVECS BVALS")
    vecs = _numbers(bvecs, "bvecs", "-fslgrad BVECS BVALS")
    b = _rows_of(b, 1, bvals, "one row (or column) of b-values", "bvecs")
    vecs = _rows_of(vecs, 3, bvecs, "3 rows (or columns) of directions", "bvals")
    if vecs.shape[1] != b.shape[1]:
        raise InputError("Gradient files do not match",
                         f"the bvecs file {bvecs.name!r} has {vecs.shape[1]} directions but the bvals file "
                         f"{bvals.name!r} has {b.shape[1]} b-values; give the pair written together")
    scheme = np.empty((b.shape[1], 4))
    scheme[:, 3] = b[0]
    _check_volumes(scheme, n_volumes, f"the bvals file {bvals.name!r}")
    linear = np.asarray(affine, dtype=np.float64)[:3, :3]
    # FSL's bvecs live in a left-handed voxel frame: x flips when the affine is right-handed.
    if np.linalg.det(linear) > 0:
        vecs[0] = -vecs[0]
    scheme[:, :3] = (_rotation(linear) @ vecs).T
    return _normalised(scheme, f"the bvecs file {bvecs.name!r}")


def _rotation(linear: np.ndarray) -> np.ndarray:
    """MRtrix3 rotates with the orthogonal part (polar decomposition) of the voxel-size-free
    affine, so a slightly non-orthogonal header leaves unit vectors unit."""
    u, _, vt = np.linalg.svd(linear / np.linalg.norm(linear, axis=0))
    return u @ vt


def write_fsl_gradients(bvecs: Path, bvals: Path, scheme: np.ndarray, affine: np.ndarray) -> tuple[Path, Path]:
    """Write ``scheme`` as the FSL pair that :func:`read_fsl_gradients` (and MRtrix3's
    ``-fslgrad``) read back as it for an image with ``affine``.

    Parameters
    ----------
    bvecs, bvals : Path
        The files to write (each whole or not at all).
    scheme : (n, 4) array
        ``x y z b`` rows, directions in scanner space.
    affine : (4, 4) array
        The image's voxel → scanner affine.

    Returns
    -------
    (bvecs, bvals)
    """
    scheme = np.asarray(scheme, dtype=np.float64)
    linear = np.asarray(affine, dtype=np.float64)[:3, :3]
    vecs = _rotation(linear).T @ scheme[:, :3].T
    if np.linalg.det(linear) > 0:
        vecs[0] = -vecs[0]
    vecs[vecs == 0] = 0.0  # no "-0" in the file
    rows = "\n".join(" ".join(f"{v:.10f}" for v in row) for row in vecs)
    write_bytes_atomic(Path(bvecs), (rows + "\n").encode())
    write_bytes_atomic(Path(bvals), (" ".join(f"{b:g}" for b in scheme[:, 3]) + "\n").encode())
    return Path(bvecs), Path(bvals)


def _scheme_rows(table: np.ndarray, source: str, n_volumes: int | None) -> np.ndarray:
    if table.shape[1] != 4:
        raise InputError("Unreadable gradient table",
                         f"{source} must have 4 numbers a row (x y z b), not {table.shape[1]}")
    _check_volumes(table, n_volumes, source)
    return _normalised(table, source)


def read_mrtrix_gradients(path: Path, n_volumes: int | None = None) -> np.ndarray:
    """The scheme of an MRtrix gradient file (``-grad``): rows ``x y z b``, scanner space.

    Returns
    -------
    (n, 4) float64 array, directions normalised as MRtrix3 does.
    """
    path = Path(path)
    return _scheme_rows(_numbers(path, "gradient", "-grad FILE"), f"the gradient file {path.name!r}", n_volumes)


def scheme_from_header(keyval: dict[str, str], n_volumes: int | None = None) -> np.ndarray:
    """The ``dw_scheme`` entry of an MRtrix header's key-values (:attr:`worker.io.mif.MifInfo.keyval`).

    Returns
    -------
    (n, 4) float64 array, directions normalised as MRtrix3 does.
    """
    text = keyval.get("dw_scheme")
    if text is None:
        raise InputError("No gradient table", "the image header has no dw_scheme; give the gradients with "
                         "bvecs/bvals (FSL) or an MRtrix gradient file")
    try:
        rows = [[float(v) for v in line.replace(",", " ").split()] for line in text.splitlines() if line.strip()]
        table = np.asarray(rows, dtype=np.float64)
    except ValueError:
        raise InputError("Unreadable gradient table", "the image header's dw_scheme holds entries that are not "
                         "numbers; write it again with mrconvert -grad or -fslgrad") from None
    if table.ndim != 2:
        raise InputError("Unreadable gradient table", "the image header's dw_scheme is not a table of x,y,z,b "
                         "rows; write it again with mrconvert -grad or -fslgrad")
    return _scheme_rows(table, "the image header's dw_scheme", n_volumes)


def read_gradients(info, *, bvecs: Path | None = None, bvals: Path | None = None,
                   grad: Path | None = None) -> np.ndarray:
    """The scheme of the DWI with header ``info`` (NIfTI or MRtrix), as MRtrix3 picks it:
    ``grad`` or ``bvecs``+``bvals`` when given, else the header's ``dw_scheme``.

    Parameters
    ----------
    info : NiftiInfo or MifInfo
        The 4-D DWI's header (:func:`worker.io.images.read_image_header`).
    bvecs, bvals : Path, optional
        FSL files, given together.
    grad : Path, optional
        MRtrix gradient file.

    Returns
    -------
    (n, 4) float64 array of ``x y z b`` rows, ``n`` the image's volume count.
    """
    if len(info.shape) != 4:
        raise InputError("Not a diffusion-weighted series",
                         f"the DWI must be 4-D (one volume per gradient), not of shape {tuple(info.shape)}")
    n_volumes = info.shape[3]
    if (bvecs is None) != (bvals is None):
        raise InputError("Incomplete FSL gradients", "give both bvecs and bvals, or neither")
    if grad is not None and bvecs is not None:
        raise InputError("Two gradient tables", "give either an MRtrix gradient file or bvecs/bvals, not both")
    if grad is not None:
        return read_mrtrix_gradients(grad, n_volumes)
    if bvecs is not None:
        return read_fsl_gradients(bvecs, bvals, info.affine, n_volumes)
    keyval = getattr(info, "keyval", {})
    if "dw_scheme" not in keyval:
        raise InputError("No gradient table", "the DWI needs its gradients: give bvecs and bvals (FSL) or an "
                         "MRtrix gradient file, or a .mif whose header has a dw_scheme")
    return scheme_from_header(keyval, n_volumes)
