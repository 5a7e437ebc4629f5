"""The contract between job families and the job machinery (CLI, Celery tasks, REST routes).

A job family (peaks, cp-conv, tucker-conv, compress, decompress) describes itself with a
:class:`JobKind`: its parameters as a pydantic model, its input files, a validation step that
reads only headers (run before a job is queued) and the run step itself. The machinery never
needs to know more about a family than this.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from pydantic import BaseModel, ConfigDict

from worker.errors import JobCancelled

__all__ = ["InputSlot", "UploadedInput", "JobContext", "JobKind", "job_kinds", "get_job_kind", "kind_named"]

# Modules that define job families; each exposes ``JOB_KINDS: list[JobKind]``.
_FAMILY_MODULES = (
    "worker.jobs.peaks",
    "worker.jobs.compress",
    "worker.jobs.conv",
    "worker.jobs.fixels",
    "worker.jobs.fod",
)


@dataclass(frozen=True)
class InputSlot:
    """One uploaded file of a job: form field name, whether required, accepted suffixes."""

    name: str
    required: bool
    suffixes: tuple[str, ...]
    description: str = ""


class UploadedInput(BaseModel):
    """An input as it was uploaded, where the service stores another form of it (a ``.nii.gz``
    kept inflated as ``.nii`` by the check at the door): the uploaded file's name, as stored
    (``fod.nii.gz``), and the sha256 of its bytes. A job names and hashes its input by these,
    and writes its outputs in the uploaded format."""

    model_config = ConfigDict(frozen=True)

    name: str
    sha256: str


@dataclass
class JobContext:
    """What a running job gets: its input paths, output folder, parameters and callbacks.

    ``progress(fraction)`` reports 0..1; ``should_stop()`` is polled between chunks of work
    and, when it returns True, the job calls :meth:`check_cancelled` which raises
    :class:`JobCancelled`. ``warn(message)`` adds to the job's ``warnings``. ``uploaded``:
    by slot, the uploaded form of each input that is stored in another
    (:class:`UploadedInput`); a slot not there was stored as uploaded.
    """

    inputs: dict[str, Path]
    out_dir: Path
    params: BaseModel
    progress: Callable[[float], None] = lambda fraction: None
    should_stop: Callable[[], bool] = lambda: False
    log: Callable[[str], None] = lambda message: None
    warn: Callable[[str], None] = lambda message: None
    uploaded: dict[str, UploadedInput] = field(default_factory=dict)

    def check_cancelled(self) -> None:
        if self.should_stop():
            raise JobCancelled("cancelled by request")


@dataclass(frozen=True)
class JobKind:
    """A job family.

    ``validate(inputs, params)`` reads headers only and raises
    :class:`worker.errors.InputError`; it may return what it made of them (the peaks job's
    plan), which ``memory_bytes`` then takes rather than reading them again. ``run(ctx)``
    writes result files into ``ctx.out_dir`` (through a temporary name and a rename) and
    returns their paths, sidecar included. ``memory_bytes(inputs, params, validated)``, with
    ``validated`` what ``validate`` returned for them, is the most memory the run holds at
    once; a job above the service's limit is refused before it is queued, with
    ``memory_advice(params, validated, limit)``'s way round it where the kind has one (else: crop the
    volume, or ask for a higher limit).
    """

    name: str
    summary: str
    params_model: type[BaseModel]
    inputs: tuple[InputSlot, ...]
    validate: Callable[[dict[str, Path], BaseModel], object]
    run: Callable[[JobContext], list[Path]]
    result_names: tuple[str, ...] = field(default=())
    memory_bytes: Callable[[dict[str, Path], BaseModel, object], int] | None = None
    memory_advice: Callable[[BaseModel, object, int], str | None] | None = None


def job_kinds() -> dict[str, JobKind]:
    """All job families by name, in a stable order."""
    kinds: dict[str, JobKind] = {}
    for module_name in _FAMILY_MODULES:
        for kind in importlib.import_module(module_name).JOB_KINDS:
            kinds[kind.name] = kind
    return kinds


def kind_named(kinds: Iterable[JobKind], name: str) -> JobKind:
    """The kind ``name`` among one family's ``JOB_KINDS``: a command that runs that family
    needs no registry, which imports every family."""
    return next(kind for kind in kinds if kind.name == name)


def get_job_kind(name: str) -> JobKind:
    kinds = job_kinds()
    if name not in kinds:
        raise KeyError(f"unknown job kind {name!r}; known: {', '.join(kinds)}")
    return kinds[name]
