"""The service's input checks, run by the local commands before they read any data.

``fibertensor peaks|conv|compress|decompress|batch|bids`` refuse what ``POST /v1/jobs/{kind}``
refuses, with the same titles and messages: :func:`worker.input_limits.check_job_inputs`
under this machine's ``FIBERTENSOR_MAX_INPUT_BYTES``, ``FIBERTENSOR_MAX_VOXELS`` and
``FIBERTENSOR_MAX_JOB_MEMORY_BYTES`` (the server's variables and defaults), so a small file
whose header promises a huge volume is refused from its header instead of being inflated
into memory. Commands that read their inputs next check headers only and leave damaged
data to the reader, which refuses it in the same words (one inflate per input).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ValidationError

from service.cli import CommandError
from service.input_limit_settings import input_limit_settings_from_environment

if TYPE_CHECKING:
    from worker.job_kinds import JobKind

__all__ = ["input_limits", "check_inputs", "input_problem"]


def input_limits():
    """This machine's :class:`worker.input_limits.InputLimits`, from the ``FIBERTENSOR_*``
    environment as the server reads it; a bad value is a :class:`CommandError`."""
    try:
        return input_limit_settings_from_environment().input_limits
    except ValidationError as exc:
        problems = "; ".join(f"FIBERTENSOR_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        raise CommandError(f"invalid setting in the environment: {problems}; fix or unset it") from None


def check_inputs(kind: "JobKind", files: Mapping[str, Path | None], params: BaseModel, *,
                 name_file: bool = True, read_through: bool = True) -> None:
    """Refuse the inputs of a ``kind`` job (its family's own :class:`worker.job_kinds.JobKind`:
    the registry would import every family; slot → path; None for a slot not given) as
    the API would, as a :class:`CommandError` (:func:`input_problem`); a missing file first.
    ``read_through=False`` checks headers only, for a command that reads the files next: the
    reader refuses damaged data with the same message, so each file is inflated once.
    Parameters asking for a GPU this machine lacks are refused too; what to know about an
    accepted header (a NIfTI read through its qform) is printed to stderr."""
    from worker.errors import InputError
    from worker.input_limits import check_backend, check_job_inputs

    given = {slot: Path(path) for slot, path in files.items() if path is not None}
    for slot, path in given.items():
        if not path.is_file():
            raise CommandError(f"{slot} file {str(path)!r} does not exist")

    def warn(message: str) -> None:
        print(f"fibertensor: warning: {message}", file=sys.stderr)

    try:
        check_backend(params)
        check_job_inputs(kind, given, params, input_limits(), read_through=read_through, warn=warn)
    except InputError as exc:
        raise CommandError(input_problem(exc, given, name_file=name_file)) from None


def input_problem(exc, files: Mapping[str, Path | None], *, name_file: bool = True) -> str:
    """``<title>: <detail>`` of an :class:`worker.errors.InputError` about one of ``files``
    (slot → path), whether the checks or the job raised it. Where the detail starts with the
    form field (``fod: ...``, as the API words it) or the file's name (``fod.nii.gz: ...``,
    as the reader does), this names the file as given, or nothing with ``name_file=False``
    (for a caller that names it already)."""
    named = {f"{slot}: ": path for slot, path in files.items() if path is not None}
    named |= {f"{Path(path).name}: ": path for path in named.values()}
    detail = exc.detail
    for prefix, path in named.items():
        if detail.startswith(prefix):
            detail = (f"{path}: " if name_file else "") + detail[len(prefix):]
            break
    return f"{exc.title}: {detail}"
