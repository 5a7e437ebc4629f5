"""The door check of where a command writes: before any input is read, the folder its
outputs go to must be one it can make and write into, so that a job does not run to its end
and then fail on its first file."""

from __future__ import annotations

import tempfile
from pathlib import Path

from service.cli import CommandError

__all__ = ["check_output_folder"]


def check_output_folder(folder: Path, role: str) -> None:
    """Refuse ``folder`` (where the outputs named by the argument ``role`` go; it need not
    exist yet) unless its nearest existing folder is a folder this process can create a file
    in: a file there is made and removed, which finds read-only mounts, permissions and
    pseudo file systems alike."""
    folder = Path(folder).absolute()
    existing = next(path for path in (folder, *folder.parents) if path.exists())
    if not existing.is_dir():
        raise CommandError(f"the folder {str(folder)!r} that {role} needs cannot be made: {str(existing)!r} is a "
                           f"file; choose another {role}")
    try:
        with tempfile.TemporaryFile(dir=existing, prefix=".fibertensor-check-"):
            pass
    except OSError as exc:
        raise CommandError(f"cannot write in {str(existing)!r} ({exc.strerror}), where {role} goes; choose a "
                           f"folder you can write to") from None
