"""What the ``response`` and ``fod`` jobs share: the DWI, its gradient table and mask checked
from headers and text files alone (:func:`check_dwi_inputs`), the DWI read with unusable
voxels left out (:func:`read_dwi`), and where their outputs go (:func:`output_path`).

The gradients are found as MRtrix3 finds them (:func:`worker.io.gradients.read_gradients`):
an MRtrix gradient file or FSL bvecs/bvals when given, else a ``.mif``'s ``dw_scheme``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from worker.errors import InputError
from worker.job_kinds import InputSlot

__all__ = ["DwiPlan", "DwiData", "DWI_SLOTS", "check_dwi_inputs", "read_dwi", "map_dwi", "output_path",
           "image_suffix"]

_IMAGE_SUFFIXES = (".nii", ".nii.gz", ".mif", ".mif.gz")

#: The input slots both jobs take (the DWI, its gradients, a mask), as the API's form fields.
DWI_SLOTS = (
    InputSlot("dwi", True, _IMAGE_SUFFIXES, "4D diffusion-weighted series (NIfTI, or MRtrix with a dw_scheme)"),
    InputSlot("bval", False, ("bval", "bvals", ".txt"), "FSL b-values (with bvec), as dwi2fod -fslgrad"),
    InputSlot("bvec", False, ("bvec", "bvecs", ".txt"), "FSL b-vectors in voxel axes (with bval)"),
    InputSlot("grad", False, (".b", ".txt", ".grad"), "MRtrix gradient table (x y z b rows, scanner space), as "
              "dwi2fod -grad"),
    InputSlot("mask", False, _IMAGE_SUFFIXES, "3D mask on the DWI grid (non-zero = process)"),
)


@dataclass(frozen=True)
class DwiPlan:
    """A DWI's checked headers: ``info`` (4-D), ``scheme`` ((n, 4) ``x y z b`` rows, scanner
    space), ``shells`` (:func:`gpu.fod.shells.dw_shells`, b=0 first), ``mask`` (or None);
    with shells chosen (``--shells``), ``volumes`` the series' volumes they hold (``scheme``
    and ``shells`` are theirs) and ``notes`` what the choice warns of."""

    info: object
    scheme: np.ndarray
    shells: list
    mask: object | None
    volumes: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    @property
    def shell_bvalues(self) -> np.ndarray:
        return np.array([s.mean_b for s in self.shells])

    def shells_text(self) -> str:
        return ", ".join(f"{b:.0f}" for b in self.shell_bvalues)


@dataclass(frozen=True)
class DwiData:
    """A DWI read: ``dwi`` (X, Y, Z, n) float32, 0 in ``unusable`` voxels (or, from
    :func:`map_dwi`, a :class:`worker.io.mapped_images.MappedImage`); ``mask`` (X, Y, Z)
    bool, the voxels to use; ``unusable`` the count of masked voxels left out for NaN,
    infinite or negative signal; ``names`` and ``sha256`` of the files read, by slot and by name."""

    dwi: np.ndarray
    mask: np.ndarray
    unusable: int
    names: dict[str, str]
    sha256: dict[str, str]
    notes: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        """The plan's notes (:class:`DwiPlan`) and the unusable voxels' count."""
        if not self.unusable:
            return list(self.notes)
        return [*self.notes, f"{self.unusable} voxels have NaN, infinite or negative signal in some volume; they "
                "are left out (0 in the outputs)"]


def check_dwi_inputs(dwi: Path, *, bval: Path | None = None, bvec: Path | None = None, grad: Path | None = None,
                     mask: Path | None = None, shells: list[float] | None = None,
                     single_shell: bool = False) -> DwiPlan:
    """Header-only checks of a DWI, its gradients and mask; raises :class:`InputError`
    saying what to fix: a 3-D image, a gradient table whose rows are not the volumes, no
    b=0 volume, no b > 0 shell, volumes whose b-value is in no shell, a mask off the grid.
    ``shells``: the b-values of the shells to use (``-shells`` of ``dwi2fod`` and
    ``dwi2response``, :func:`gpu.fod.shells.select_shells`), the other volumes left out: b = 0
    and b > 0 shells, or for a fit of one shell (``single_shell``: csd, tournier) that shell
    alone, as those commands take it (the b=0 volumes stay beside it, unused by the fit)."""
    from gpu.fod.shells import BZERO_THRESHOLD, MIN_LINKAGE, SHELL_EPSILON, dw_shells
    from worker.io.gradients import read_gradients
    from worker.io.images import read_image_header

    info = read_image_header(dwi, "dwi")
    if len(info.shape) != 4:
        raise InputError("Not a diffusion-weighted series",
                         f"the DWI {info.path.name!r} has shape {tuple(info.shape)}; give the 4-D series (one volume "
                         "per gradient direction), not a single volume")
    scheme = read_gradients(info, bvecs=bvec, bvals=bval, grad=grad)
    try:
        found = dw_shells(scheme[:, 3])
    except ValueError as exc:
        raise InputError("No b-value shells", f"{exc}; check the b-values (bval or grad file)") from None
    volumes, notes = None, ()
    if shells is not None:
        volumes, notes = _chosen_volumes(found, scheme[:, 3], shells, single_shell)
        scheme = scheme[volumes]
        found = dw_shells(scheme[:, 3])
    shells = found
    if not shells[0].is_bzero:
        raise InputError("No b=0 volume", f"the DWI has no b=0 volume (b ≤ {BZERO_THRESHOLD:g} s/mm²; the smallest "
                         f"b-value is {scheme[:, 3].min():g}); responses and FODs need b=0 volumes: give a series "
                         "with them, or the bvals written with it")
    if len(shells) < 2:
        raise InputError("No diffusion-weighted shell", "every volume is b=0; give a series with diffusion-weighted "
                         "(b > 0) volumes")
    in_shells = np.zeros(len(scheme), bool)
    for shell in shells:
        in_shells[shell.volumes] = True
    if not in_shells.all():
        lost = np.flatnonzero(~in_shells)
        raise InputError("B-values in no shell",
                         f"volumes {lost.tolist()[:8]} (b = {', '.join(f'{b:g}' for b in scheme[lost[:8], 3])}) "
                         f"belong to no shell: a shell needs at least {MIN_LINKAGE} volumes within "
                         f"{SHELL_EPSILON:g} s/mm² of each other (MRtrix3's rule); fix the b-values or drop those "
                         "volumes (mrconvert -coord 3 …)")
    mask_info = None
    if mask is not None:
        mask_info = read_image_header(mask, "mask")
        spatial = mask_info.shape[:3] if len(mask_info.shape) == 4 and mask_info.shape[3] == 1 else mask_info.shape
        if tuple(spatial) != tuple(info.shape[:3]) or not np.allclose(mask_info.affine, info.affine, atol=1e-3):
            raise InputError("Mask grid mismatch", f"the mask {mask_info.path.name!r} (shape {tuple(mask_info.shape)})"
                             f" is not on the DWI grid (shape {tuple(info.shape[:3])}); resample it onto the DWI grid "
                             "(e.g. mrgrid … regrid -template)")
    return DwiPlan(info, scheme, shells, mask_info, volumes, notes)


def _chosen_volumes(shells: list, bvals: np.ndarray, wanted: list[float],
                    single_shell: bool) -> tuple[np.ndarray, tuple[str, ...]]:
    """The volumes of the shells ``wanted`` names (:func:`gpu.fod.shells.select_shells`), in
    the series' order, and the choice's warnings: b=0 and a b > 0 shell must be among them,
    or for ``single_shell`` one b > 0 shell alone (the data's b=0 volumes then added)."""
    from gpu.fod.shells import select_shells

    found = ", ".join(f"{s.mean_b:g}" for s in shells)
    try:
        chosen, notes = select_shells(shells, bvals, list(wanted))
    except ValueError as exc:
        raise InputError("Shell not found", f"{exc} (shells: the DWI has b = {found})") from None
    if single_shell:
        weighted = [s.mean_b for s in chosen if not s.is_bzero]
        if len(weighted) != len(chosen) or len(weighted) != 1:
            raise InputError("Not one shell chosen",
                             f"a single-shell fit (csd, tournier) takes one b > 0 shell, listed alone (as dwi2fod csd "
                             f"-shells 3000), but shells {_listed(wanted)} choose b = "
                             f"{', '.join(f'{s.mean_b:g}' for s in chosen)}; list one of b = {found} but 0")
        chosen = [*(s for s in shells if s.is_bzero), *chosen]
    if not any(s.is_bzero for s in chosen):
        raise InputError("No b=0 volume chosen", f"shells {_listed(wanted)} leave out the b=0 volumes, which responses"
                         f" and FODs need; list 0 among them (the DWI has b = {found})")
    if all(s.is_bzero for s in chosen):
        raise InputError("No diffusion-weighted shell chosen", f"shells {_listed(wanted)} hold b=0 volumes alone; "
                         f"add a b > 0 shell (the DWI has b = {found})")
    return np.sort(np.concatenate([s.volumes for s in chosen])), tuple(notes)


def _listed(values: list[float]) -> str:
    return ",".join(f"{b:g}" for b in values)



def read_dwi(plan: DwiPlan, uploaded: dict | None = None, *, inflate_threads: int = 1) -> DwiData:
    """Read the DWI and mask of ``plan``. Without a mask every voxel is used; voxels with a
    NaN, infinite or negative value in any volume are left out and counted. ``uploaded``:
    :class:`worker.job_kinds.UploadedInput` by slot, for inputs stored in another form. A
    large ``.nii.gz`` is inflated on ``inflate_threads`` threads (one job alone on a machine;
    a batch's or the service's jobs keep one each: docs/decisions/parallel-gzip.md)."""
    from worker.io.images import load_job_images

    arrays, names, sha256 = load_job_images({"dwi": plan.info, "mask": plan.mask}, uploaded,
                                            threads=inflate_threads)
    dwi = arrays["dwi"]
    if plan.volumes is not None:
        kept = dwi[:, :, :, plan.volumes]
        dwi = np.asfortranarray(kept) if dwi.flags.f_contiguous else kept
    shape = tuple(plan.info.shape[:3])
    mask = np.ones(shape, bool) if plan.mask is None else arrays["mask"].reshape(shape) != 0
    if not mask.any():
        raise InputError("Empty mask", "the mask selects no voxel; pass a mask with non-zero voxels, or none")
    with np.errstate(invalid="ignore"):
        bad = ~(np.isfinite(dwi).all(axis=3) & (dwi >= 0).all(axis=3))
    unusable = int((bad & mask).sum())
    if bad.any():
        dwi[bad] = 0.0
        mask &= ~bad
    if not mask.any():
        raise InputError("No usable voxel", "every masked voxel has NaN, infinite or negative signal; check the DWI "
                         "(its scaling, or the preprocessing that wrote it)")
    return DwiData(dwi, mask, unusable, names, sha256, plan.notes)


def map_dwi(plan: DwiPlan, scratch: Path, uploaded: dict | None = None, planes: int = 1, *,
            inflate_threads: int = 1) -> DwiData:
    """:func:`read_dwi` for a DWI too large to hold: its data memory-mapped
    (:func:`worker.io.mapped_images.map_image`; a compressed file inflated into ``scratch``
    first, on ``inflate_threads`` threads), the mask read, and the unusable voxels found ``planes`` planes of the last
    spatial axis at a time; ``dwi`` of the result is the :class:`MappedImage`, whose slabs
    hold what :func:`read_dwi` gives (its unusable voxels are left out of the mask, not
    zeroed)."""
    from worker.io.images import load_job_images
    from worker.io.mapped_images import map_image

    uploaded = dict(uploaded or {})
    mapped = map_image(plan.info, scratch, "dwi", hashed="dwi" not in uploaded, threads=inflate_threads)
    if plan.volumes is not None:
        mapped = replace(mapped, volumes=plan.volumes)
    if "dwi" in uploaded:
        names, sha256 = {"dwi": uploaded["dwi"].name}, {uploaded["dwi"].name: uploaded["dwi"].sha256}
    else:
        names, sha256 = {"dwi": plan.info.path.name}, dict(mapped.sha256)
    shape = tuple(plan.info.shape[:3])
    if plan.mask is None:
        mask = np.ones(shape, bool)
    else:
        arrays, mask_names, mask_sha256 = load_job_images({"mask": plan.mask}, uploaded)
        mask = arrays["mask"].reshape(shape) != 0
        names.update(mask_names)
        sha256.update(mask_sha256)
    if not mask.any():
        raise InputError("Empty mask", "the mask selects no voxel; pass a mask with non-zero voxels, or none")
    bad = np.zeros(shape, bool)
    for start in range(0, shape[2], planes):
        slab = mapped.slab(start, start + planes)
        with np.errstate(invalid="ignore"):
            bad[:, :, start:start + planes] = ~(np.isfinite(slab).all(axis=3) & (slab >= 0).all(axis=3))
    unusable = int((bad & mask).sum())
    mask &= ~bad
    if not mask.any():
        raise InputError("No usable voxel", "every masked voxel has NaN, infinite or negative signal; check the DWI "
                         "(its scaling, or the preprocessing that wrote it)")
    return DwiData(mapped, mask, unusable, names, sha256, plan.notes)


def image_suffix(name: str) -> str:
    """The image format of outputs for an input named ``name``: its own (``.mih`` → ``.mif``)."""
    for suffix in (".nii.gz", ".mif.gz", ".nii", ".mif"):
        if name.endswith(suffix):
            return suffix
    return ".mif"


def output_path(prefix: Path, name: str) -> Path:
    """Where an output ``name`` goes for the prefix given: inside ``prefix`` when it is a
    folder (or ends in ``/``), else ``<prefix>_<name>`` (``<prefix><name>`` when it ends in
    ``_`` or ``-``)."""
    text = str(prefix)
    if text.endswith("/") or Path(prefix).is_dir():
        return Path(prefix) / name
    prefix = Path(prefix)
    joiner = "" if prefix.name.endswith(("_", "-")) else "_"
    return prefix.with_name(f"{prefix.name}{joiner}{name}")
