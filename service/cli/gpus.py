"""The ``--gpus all|0,1`` option of the commands that run the batch pipeline
(``fibertensor batch peaks``, ``fibertensor bids``): which GPUs its worker processes use."""

from __future__ import annotations

from service.cli import CommandError

__all__ = ["devices_from_option"]


def devices_from_option(gpus: str | None) -> list[str] | None:
    """``CUDA_VISIBLE_DEVICES`` values for :func:`worker.batch.run_batch` from ``--gpus``:
    None (not given: the backend's device), those visible here for ``all``, or the given
    distinct values; a :class:`CommandError` saying what to give otherwise."""
    from worker.batch import visible_gpus

    if gpus is None:
        return None
    if gpus == "all":
        devices = visible_gpus()
        if not devices:
            raise CommandError("--gpus all: no CUDA GPU is visible here; leave out --gpus to run on the CPU")
        return devices
    devices = [d.strip() for d in gpus.split(",")]
    if not all(devices) or len(set(devices)) != len(devices):
        raise CommandError(f"--gpus {gpus!r}: give 'all' or distinct device numbers separated by commas, e.g. 0,1")
    return devices
