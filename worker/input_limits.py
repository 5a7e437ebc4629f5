"""The limits every job input passes before the job is queued, the same for the API and the CLI.

Sizes come from headers alone: the voxels and bytes each input declares, and the working
memory the job would need (its kind's estimate), so a small file that promises a huge volume
is refused before anything is inflated or allocated.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pydantic import BaseModel

from worker.errors import InputError
from worker.io.images import (
    IMAGE_SUFFIXES, ImageInfo, check_image_data, check_image_limits, image_memory_bytes,
    read_image_header,
)
from worker.job_kinds import JobKind, UploadedInput

__all__ = ["InputLimits", "InputTooLarge", "InflatedInput", "check_job_inputs", "check_backend", "check_run_here",
           "job_memory_bytes"]


@dataclass(frozen=True)
class InputLimits:
    """Largest decompressed input (bytes), spatial grid (voxels) and job working memory (bytes)."""

    max_input_bytes: int
    max_voxels: int
    max_job_memory_bytes: int


class InputTooLarge(InputError):
    """An input is well formed but the job would need more memory than allowed (HTTP 413)."""


# Compressed images the check can keep inflated (their data in the same file), and the
# suffix of the uncompressed form.
_KEPT_INFLATED = {".nii.gz": ".nii", ".mif.gz": ".mif"}


@dataclass(frozen=True)
class InflatedInput:
    """A ``.nii.gz`` or ``.mif.gz`` input that the check kept inflated: the ``.nii`` or ``.mif``
    written beside it, and what was uploaded (its name and sha256)."""

    path: Path
    uploaded: UploadedInput


def _check_npy(slot: str, path: Path, max_input_bytes: int) -> None:
    try:
        with open(path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = (
                np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(handle)
            offset = handle.tell()
    except Exception as exc:
        raise InputError("Not a .npy file", f"{slot}: not a readable NumPy .npy file ({exc}); "
                         "save it with numpy.save") from None
    data_bytes = math.prod(shape) * np.dtype(dtype).itemsize
    if data_bytes > max_input_bytes:
        raise InputError("Input too large", f"{slot}: the array holds {data_bytes} bytes, more "
                         f"than this server's limit of {max_input_bytes} (FIBERTENSOR_MAX_INPUT_BYTES)")
    if path.stat().st_size < offset + data_bytes:
        raise InputError("Truncated file", f"{slot}: the .npy header declares {data_bytes} bytes "
                         "of data but the file is shorter; send it again")


def job_memory_bytes(kind: JobKind, files: Mapping[str, Path], params: BaseModel,
                     headers: Mapping[str, ImageInfo] | None = None, validated: object = None) -> int:
    """Bytes of memory the job needs at its peak, from headers: the kind's own estimate, or,
    for a kind without one, what loading its images (NIfTI or MRtrix) as float32 takes
    (``headers``: those already read, by slot; ``validated``: what the kind's ``validate``
    returned for these inputs, if it ran)."""
    if kind.memory_bytes is not None:
        if validated is None:
            validated = kind.validate(dict(files), params)
        return kind.memory_bytes(dict(files), params, validated)
    if headers is None:
        headers = {slot: read_image_header(path, slot) for slot, path in files.items()
                   if path.name.endswith(IMAGE_SUFFIXES)}
    return sum(image_memory_bytes(info) for info in headers.values())


def check_backend(params: BaseModel) -> None:
    """Refuse parameters asking for the CUDA backend where no GPU (nor numba's simulator) can
    run it: on the machine the job runs on, before it starts."""
    if getattr(params, "backend", None) != "cuda":
        return
    from gpu.cuda import device, simulator

    if not (device.cuda_available() or simulator.simulator_active()):
        raise InputError(
            "No GPU for backend cuda",
            "backend 'cuda' was asked for, but the machine that runs this job has no usable CUDA GPU; "
            "use backend auto (the GPU where there is one, else the CPU) or cpu",
        )


def check_run_here(params: BaseModel, files: Mapping[str, Path]) -> list[str]:
    """What a worker checks as a job starts, the job's inputs having passed
    :func:`check_job_inputs`: its backend (:func:`check_backend`); returns what a user should
    know about the inputs' headers (a NIfTI read through its qform), the job's warnings."""
    check_backend(params)
    return [message for slot, path in files.items() if path.name.endswith(IMAGE_SUFFIXES)
            for message in read_image_header(path, slot).warnings]


def check_job_inputs(kind: JobKind, files: Mapping[str, Path], params: BaseModel, limits: InputLimits, *,
                     read_through: bool = True, keep_inflated: bool = False,
                     warn: Callable[[str], object] | None = None) -> dict[str, InflatedInput]:
    """Every check before a job is queued, cheapest first: each file's header (parsed once)
    against the size limits, the kind's header validation, the job's working memory, then
    one bounded pass over each image's data to prove it whole. Raises :class:`InputError`,
    or :class:`InputTooLarge` for the memory limit. ``read_through=False`` checks the size
    of uncompressed files only, for a caller that reads the files next: the NIfTI loader
    refuses a damaged stream with the same title and message
    (:func:`worker.io.nifti.load_nifti_data`).

    ``keep_inflated`` (the service, which stores its uploads for a job to read later): the
    pass over a ``.nii.gz`` (``.mif.gz``) also writes the ``.nii`` (``.mif``) it inflates to
    beside it and hashes the upload (:func:`worker.io.nifti.inflate_checked`), so the job
    need not inflate it again. Returns those, by slot (none without ``keep_inflated``); a
    refused job leaves none. ``warn``: called with what a user should know about an accepted
    header (a NIfTI read through its qform)."""
    headers: dict[str, ImageInfo] = {}
    for slot, path in files.items():
        if path.stat().st_size == 0:
            raise InputError("Empty file", f"{slot}: the file is empty")
        if path.name.endswith(IMAGE_SUFFIXES):
            headers[slot] = check_image_limits(
                path, slot, max_input_bytes=limits.max_input_bytes, max_voxels=limits.max_voxels
            )
            if warn is not None:
                for message in headers[slot].warnings:
                    warn(message)
        elif path.name.endswith(".npy"):
            _check_npy(slot, path, limits.max_input_bytes)
    validated = kind.validate(dict(files), params)
    needed = job_memory_bytes(kind, files, params, headers, validated)
    limit = limits.max_job_memory_bytes
    if needed > limit:
        advice = kind.memory_advice(params, validated, limit) if kind.memory_advice is not None else None
        raise InputTooLarge(
            "Job too large for memory",
            f"this {kind.name} job needs about {needed / 2**30:.1f} GiB of memory "
            f"({needed} bytes), more than this server's limit of "
            f"{limit / 2**30:.1f} GiB (FIBERTENSOR_MAX_JOB_MEMORY_BYTES); "
            + (advice or "crop the volume (e.g. to the brain mask's bounding box: mrgrid … crop -mask), split it "
               "into slabs")
            + ", or ask the operator to raise the limit",
        )
    inflated: dict[str, InflatedInput] = {}
    try:
        for slot, info in headers.items():
            suffix = next((s for s in _KEPT_INFLATED if info.path.name.endswith(s)), None)
            if keep_inflated and suffix is not None:
                target = info.path.with_name(info.path.name.removesuffix(suffix) + _KEPT_INFLATED[suffix])
                sha256 = check_image_data(info, slot, keep=target)
                inflated[slot] = InflatedInput(target, UploadedInput(name=info.path.name, sha256=sha256))
            else:
                check_image_data(info, slot, inflate=read_through)
    except BaseException:
        for kept in inflated.values():
            kept.path.unlink(missing_ok=True)
        raise
    return inflated
