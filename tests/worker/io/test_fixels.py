"""Fixel directories read back by MRtrix3: the FMLS fixels of an FOD, written in each format,
give ``fixel2voxel`` and ``fixel2peaks`` the same maps as ``fod2fixel``'s own directory."""

from __future__ import annotations

import subprocess

import nibabel as nib
import numpy as np
import pytest

from gpu.fixels.segment import segment_fods
from gpu.peaks.phantom import fod_phantom
from tests.gpu.fixels.mrtrix_fixels import run_fod2fixel
from tests.worker.io.grids import oblique_affine
from worker.errors import InputError
from worker.io.fixels import FIXEL_FORMATS, FMLS_QUANTITIES, write_fixel_images
from worker.io.images import write_image

GRID = (4, 3, 2)


@pytest.fixture(scope="module")
def fod() -> np.ndarray:
    return fod_phantom(GRID, 8, seed=3)["sh"].astype(np.float32)


def write_ours(folder, fod, affine, fmt="mif"):
    fixels = segment_fods(fod, backend="cpu")
    return write_fixel_images(folder, fixels.index, fixels.directions,
                              {name: getattr(fixels, name) for name in FMLS_QUANTITIES}, affine, fmt=fmt), fixels


def voxel_maps(folder, fmt, out):
    """fixel2peaks of the directions, and the count and afd sum maps (fixel2voxel)."""
    maps = {}
    for name, args in (("peaks", [folder]), ("count", [folder / f"afd.{fmt}", "count"]),
                       ("afd", [folder / f"afd.{fmt}", "sum"]), ("peak_amp", [folder / f"peak_amp.{fmt}", "max"]),
                       ("disp", [folder / f"disp.{fmt}", "mean"])):
        tool = "fixel2peaks" if name == "peaks" else "fixel2voxel"
        path = out / f"{out.name}_{name}.nii"
        subprocess.run([tool, "-quiet", *map(str, args), str(path), *(["-nan"] if name == "peaks" else [])],
                       check=True)
        maps[name] = nib.load(path)
    return maps


@pytest.mark.requires_mrtrix
@pytest.mark.parametrize("fmt", FIXEL_FORMATS)
def test_mrtrix_reads_back_what_fod2fixel_writes(tmp_path, fod, fmt):
    affine = oblique_affine()
    write_image(tmp_path / "fod.nii", fod, affine)
    folder, fixels = write_ours(tmp_path / "fixels", fod, affine, fmt)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{name}.{fmt}" for name in ("index", "directions", "afd", "peak_amp", "disp"))
    reference = run_fod2fixel(tmp_path / "fod.nii", tmp_path / "theirs")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ours, theirs = voxel_maps(folder, fmt, tmp_path / "a"), voxel_maps(reference, "mif", tmp_path / "b")
    np.testing.assert_array_equal(ours["count"].get_fdata(), theirs["count"].get_fdata())
    assert ours["count"].get_fdata().sum() == fixels.afd.size > 0
    np.testing.assert_allclose(ours["peaks"].affine, affine, atol=1e-5)
    np.testing.assert_allclose(ours["peaks"].get_fdata(), theirs["peaks"].get_fdata(), atol=1e-6)
    for name in ("afd", "peak_amp", "disp"):
        np.testing.assert_allclose(ours[name].get_fdata(), theirs[name].get_fdata(), rtol=1e-6, atol=0, err_msg=name)


def test_the_directory_appears_whole_or_not_at_all(tmp_path, fod):
    existing = tmp_path / "taken"
    existing.mkdir()
    (existing / "index.mif").write_bytes(b"")
    with pytest.raises(FileExistsError, match="remove it or choose another output"):
        write_ours(existing, fod, np.eye(4))
    with pytest.raises(InputError, match="no voxel has a fixel"):
        write_ours(tmp_path / "empty", np.zeros_like(fod), np.eye(4))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_arrays_that_disagree_are_refused(tmp_path, fod):
    fixels = segment_fods(fod, backend="cpu")
    with pytest.raises(ValueError, match="index counts"):
        write_fixel_images(tmp_path / "f", fixels.index, fixels.directions[1:], {"afd": fixels.afd[1:]}, np.eye(4))
    with pytest.raises(ValueError, match="index counts"):
        write_fixel_images(tmp_path / "f", fixels.index, fixels.directions, {"afd": fixels.afd[1:]}, np.eye(4))
    with pytest.raises(ValueError, match="fixel format"):
        write_fixel_images(tmp_path / "f", fixels.index, fixels.directions, {}, np.eye(4), fmt="png")
    assert not any(tmp_path.iterdir())
