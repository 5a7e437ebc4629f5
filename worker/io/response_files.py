"""MRtrix3 response-function text files (``dwi2response``, ``amp2response``): one row per
b-value shell of zonal SH coefficients l = 0, 2, 4, … and a ``# Shells: b1,b2,…`` comment;
other ``#`` lines are comments. Written atomically."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from worker.errors import InputError
from worker.io.atomic import write_bytes_atomic

__all__ = ["read_response", "write_response"]


def read_response(path: Path) -> tuple[np.ndarray, np.ndarray | None]:
    """The response of an MRtrix3 response file.

    Returns
    -------
    response : (n_shells, n_coefs) float64 array
        Zonal coefficients l = 0, 2, … per shell (rows of MRtrix's file; short rows zero-padded).
    bvalues : (n_shells,) float64 array or None
        The ``# Shells:`` b-values, when the file has them.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("Missing response file", f"the response file {path.name!r} does not exist")
    rows, bvalues = [], None
    for line in path.read_text(errors="replace").splitlines():
        text = line.strip()
        if text.startswith("#"):
            key, _, value = text[1:].partition(":")
            if key.strip() == "Shells":
                try:
                    bvalues = np.array([float(b) for b in value.replace(",", " ").split()])
                except ValueError:
                    raise InputError("Unreadable response file",
                                     f"the response file {path.name!r} has a '# Shells:' line that is not "
                                     "b-values separated by commas") from None
            continue
        if not text:
            continue
        try:
            rows.append([float(v) for v in text.replace(",", " ").split()])
        except ValueError:
            raise InputError("Unreadable response file",
                             f"the response file {path.name!r} holds {text[:40]!r}, not numbers; it must hold "
                             "one row of zonal SH coefficients per shell") from None
    if not rows:
        raise InputError("Unreadable response file", f"the response file {path.name!r} holds no coefficients")
    response = np.zeros((len(rows), max(map(len, rows))))
    for i, row in enumerate(rows):
        response[i, :len(row)] = row
    if not np.isfinite(response).all():
        raise InputError("Unreadable response file", f"the response file {path.name!r} holds non-finite numbers")
    if bvalues is not None and bvalues.size != len(rows):
        raise InputError("Unreadable response file",
                         f"the response file {path.name!r} lists {bvalues.size} shells but has {len(rows)} rows; "
                         "write one row per shell")
    return response, bvalues


def write_response(path: Path, response: np.ndarray, bvalues: np.ndarray | None = None) -> None:
    """Write ``response`` ((n_shells, n_coefs) or (n_coefs,)) as MRtrix3 does, with a
    ``# Shells:`` line of the rounded ``bvalues`` when given."""
    response = np.atleast_2d(np.asarray(response, dtype=np.float64))
    if bvalues is not None and len(bvalues) != response.shape[0]:
        raise ValueError(f"{len(bvalues)} b-values for {response.shape[0]} response rows")
    lines = []
    if bvalues is not None:
        lines.append("# Shells: " + ",".join(str(int(round(b))) for b in bvalues))
    lines += [" ".join(repr(float(v)) for v in row) for row in response]
    write_bytes_atomic(Path(path), ("\n".join(lines) + "\n").encode())
