"""MRtrix3's dwi2response and amp2response on small data, run once per test session."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from tests.conftest import require_system_package
from tests.gpu.fod.response_phantom import three_tissue_phantom
from worker.io.gradients import read_gradients
from worker.io.images import load_image_data, read_image_header


def _mrtrix(*args) -> None:
    done = subprocess.run([shutil.which(args[0]), "-quiet", *map(str, args[1:])], capture_output=True, text=True)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed: {done.stderr}"


def _load(path: Path) -> np.ndarray:
    return load_image_data(read_image_header(path, "image"))


class MrtrixCase:
    """A DWI as MRtrix3 sees it (``dwi.mif`` with its dw_scheme, ``mask.mif``) and our arrays of it."""

    def __init__(self, folder: Path):
        self.folder = folder
        info = read_image_header(folder / "dwi.mif", "DWI")
        self.dwi = load_image_data(info)
        self.scheme = read_gradients(info)
        self.mask = _load(folder / "mask.mif").astype(bool).reshape(self.dwi.shape[:3])

    def path(self, name: str) -> Path:
        return self.folder / name

    def image(self, name: str) -> np.ndarray:
        return _load(self.folder / name)


@pytest.fixture(scope="session")
def phantom_case(tmp_path_factory) -> MrtrixCase:
    """The 3-tissue phantom and ``dwi2response dhollander`` on it (whole-volume mask)."""
    require_system_package("requires_mrtrix")
    folder = tmp_path_factory.mktemp("dhollander_phantom")
    signal, scheme = three_tissue_phantom()
    nib.save(nib.Nifti1Image(signal, np.diag([2.0, 2.0, 2.0, 1.0])), folder / "dwi.nii")
    np.savetxt(folder / "grad.b", scheme)
    _mrtrix("mrconvert", folder / "dwi.nii", folder / "dwi.mif", "-grad", folder / "grad.b")
    nib.save(nib.Nifti1Image(np.ones(signal.shape[:3], np.uint8), np.diag([2.0, 2.0, 2.0, 1.0])), folder / "mask.nii")
    _mrtrix("mrconvert", folder / "mask.nii", folder / "mask.mif", "-datatype", "bit")
    _mrtrix("dwi2response", "dhollander", folder / "dwi.mif", folder / "wm.txt", folder / "gm.txt", folder / "csf.txt",
            "-mask", folder / "mask.mif", "-voxels", folder / "voxels.mif")
    return MrtrixCase(folder)


@pytest.fixture(scope="session")
def small_64d_case(tmp_path_factory) -> MrtrixCase:
    """DIPY's small_64D (b=0 + one shell), its tensor FA and direction by ``dwi2tensor`` and
    ``tensor2metric``, and ``amp2response`` on its 300 highest-FA voxels."""
    require_system_package("requires_mrtrix")
    from dipy.data import get_fnames  # here: the folder's other tests run where DIPY is not installed (a GPU host)

    folder = tmp_path_factory.mktemp("small_64D")
    image, bvals, bvecs = get_fnames(name="small_64D")
    # MRtrix3 keeps the NaN direction DIPY's file gives b=0 and then fits NaN tensors: write it as 0
    np.savetxt(folder / "bvecs", np.nan_to_num(np.loadtxt(bvecs)).T)
    _mrtrix("mrconvert", image, folder / "dwi.mif", "-fslgrad", folder / "bvecs", bvals, "-strides", "0,0,0,1")
    _mrtrix("mrconvert", folder / "dwi.mif", folder / "b0.mif", "-coord", "3", "0", "-axes", "0,1,2")
    _mrtrix("mrcalc", folder / "b0.mif", "0", "-gt", folder / "mask.mif", "-datatype", "bit")
    _mrtrix("dwi2tensor", folder / "dwi.mif", folder / "tensor.mif")
    _mrtrix("tensor2metric", folder / "tensor.mif", "-fa", folder / "fa.mif", "-vector", folder / "vec.mif",
            "-modulate", "none")
    _mrtrix("mrthreshold", folder / "fa.mif", "-top", "300", folder / "sf.mif")
    for suffix, options in (("", ()), ("_ols", ("-noconstraint",)), ("_iso", ("-isotropic",))):
        _mrtrix("amp2response", folder / "dwi.mif", folder / "sf.mif", folder / "vec.mif",
                folder / f"rf{suffix}.txt", *options)
    return MrtrixCase(folder)
