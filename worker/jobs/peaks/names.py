"""Where a peaks job writes its files, and the suffixes of its images."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel

__all__ = ["PeaksOutputs", "image_suffixes"]


class PeaksOutputs(BaseModel):
    """Where a peaks run writes: output ``name`` with ``suffix`` goes to
    ``folder / f"{stem}{name}{suffix}"``, the JSON sidecar to ``sidecar``."""

    folder: Path
    stem: str
    sidecar: Path

    @classmethod
    def with_prefix(cls, prefix: Path) -> "PeaksOutputs":
        """The CLI naming: ``PREFIX_peaks.nii.gz``, ``PREFIX_count.nii.gz``, …, ``PREFIX.json``."""
        prefix = Path(prefix)
        return cls(folder=prefix.parent, stem=prefix.name + "_", sidecar=prefix.with_name(prefix.name + ".json"))

    @classmethod
    def in_folder(cls, folder: Path) -> "PeaksOutputs":
        """The job naming: ``peaks.nii.gz``, ``count.nii.gz``, …, ``peaks.json`` in ``folder``."""
        folder = Path(folder)
        return cls(folder=folder, stem="", sidecar=folder / "peaks.json")

    def path(self, name: str, suffix: str = "") -> Path:
        return self.folder / f"{self.stem}{name}{suffix}"


def image_suffixes(fod: Path | str, formats: list[str]) -> list[str]:
    """File suffixes of the output images: those of the image formats in ``formats``
    (``nifti`` → ``.nii.gz``; ``mif`` → ``.mif.gz`` from a gzip-compressed input, else
    ``.mif``), or the input's own format when ``formats`` names none."""
    from worker.io.images import image_format

    name = Path(fod).name
    named = [f for f in formats if f in ("nifti", "mif")] or [image_format(Path(name))]
    mif = ".mif.gz" if name.endswith(".gz") else ".mif"
    return [".nii.gz" if f == "nifti" else mif for f in named]
