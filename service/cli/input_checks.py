"""The service's input checks, run by the local commands before they read any data.

``fibertensor peaks|conv|compress|decompress|batch|bids`` refuse what ``POST /v1/jobs/{kind}``
refuses, with the same titles and messages: :func:`worker.input_limits.check_job_inputs`
under this machine's ``FIBERTENSOR_MAX_INPUT_BYTES``, ``FIBERTENSOR_MAX_VOXELS`` and
``FIBERTENSOR_MAX_JOB_MEMORY_BYTES`` (the server's variables and defaults), so a small file
whose header promises a huge volume, or a stream that inflates past its header, is refused
from its header or in one bounded pass instead of being inflated into memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, ValidationError

from service.cli import CommandError
from service.settings import get_settings

__all__ = ["input_limits", "check_inputs"]


def input_limits():
    """This machine's :class:`worker.input_limits.InputLimits`, from the ``FIBERTENSOR_*``
    environment as the server reads it; a bad value is a :class:`CommandError`."""
    try:
        return get_settings().input_limits
    except ValidationError as exc:
        problems = "; ".join(f"FIBERTENSOR_{'_'.join(map(str, e['loc'])).upper()}: {e['msg']}" for e in exc.errors())
        raise CommandError(f"invalid setting in the environment: {problems}; fix or unset it") from None


def check_inputs(kind_name: str, files: Mapping[str, Path | None], params: BaseModel, *,
                 name_file: bool = True) -> None:
    """Refuse the inputs of a ``kind_name`` job (slot → path; None for a slot not given) as
    the API would, as a :class:`CommandError` ``<title>: <detail>``; a missing file first.
    Where the API's detail names the form field (``fod: ...``), this names the file given,
    or nothing with ``name_file=False`` (for a caller that names it already)."""
    from worker.errors import InputError
    from worker.input_limits import check_job_inputs
    from worker.job_kinds import get_job_kind

    given = {slot: Path(path) for slot, path in files.items() if path is not None}
    for slot, path in given.items():
        if not path.is_file():
            raise CommandError(f"{slot} file {str(path)!r} does not exist")
    try:
        check_job_inputs(get_job_kind(kind_name), given, params, input_limits())
    except InputError as exc:
        detail = exc.detail
        for slot, path in given.items():
            if detail.startswith(f"{slot}: "):
                detail = (f"{path}: " if name_file else "") + detail[len(slot) + 2:]
        raise CommandError(f"{exc.title}: {detail}") from None
