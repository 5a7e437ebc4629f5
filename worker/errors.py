"""Errors a job raises that users can act on."""

from __future__ import annotations

from pathlib import Path

__all__ = ["InputError", "JobCancelled"]


class InputError(ValueError):
    """An input a user supplied is unusable.

    ``title`` is a short category ("Wrong number of volumes"); ``detail`` says what is wrong
    and how to fix it. The CLI prints ``detail`` as one line; the API returns both as
    ``application/problem+json`` with status 422.
    """

    def __init__(self, title: str, detail: str):
        super().__init__(detail)
        self.title = title
        self.detail = detail


class JobCancelled(Exception):
    """Raised inside a running job when its cancellation was requested."""


def without_path(exc: BaseException, path) -> str:
    """``exc``'s message with ``path`` shortened to its file name: a server's folders stay out
    of the messages users read."""
    return str(exc).replace(str(path), Path(path).name)
