"""CSD and MSMT-CSD against MRtrix3's ``dwi2fod`` given the same response files, which
``dwi2response`` estimates from the same data: on multi-shell and single-shell phantoms
and on DIPY's ``small_64D`` (real single-shell data)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu.fod.deconvolution import csd, msmt_csd
from gpu.fod.phantom import dwi_phantom, shell_scheme
from worker.io.mif import load_mif_data, read_mif_header, write_mif

pytestmark = [pytest.mark.requires_mrtrix, pytest.mark.xdist_group("fod_vs_mrtrix")]

DATA = Path(__file__).parent / "data"
# Per-voxel relative L2 error allowed, and the fraction of voxels that must meet it.
TOLERANCE = 1e-3
FRACTION = 0.999


def _mrtrix(*args) -> None:
    subprocess.run([*map(str, args), "-quiet", "-force", "-nthreads", "1"], check=True, capture_output=True)


def _write_dwi(path: Path, dwi: np.ndarray, bvals: np.ndarray, bvecs: np.ndarray) -> Path:
    """The DWI as .mif with an identity transform, so image axes are scanner axes, and its
    scheme as ``dw_scheme`` at full precision."""
    scheme = "\n".join(",".join(repr(float(v)) for v in (*g, b)) for g, b in zip(bvecs, bvals))
    return write_mif(path, dwi, np.eye(4), keyval={"dw_scheme": scheme})


def _read(path: Path) -> np.ndarray:
    data = load_mif_data(read_mif_header(path), np.float64)
    return data if data.ndim == 4 else data[..., None]


def relative_errors(ours: list[np.ndarray], theirs: list[np.ndarray]) -> np.ndarray:
    """Per voxel and tissue ‖ours − theirs‖ / ‖theirs, all tissues of the voxel‖, shape
    (n_voxels, n_tissues): relative to the whole solution, so a tissue the constraint holds
    at zero (±1e-13 of round-off) is not an error."""
    ours = [np.asarray(o, np.float64).reshape(-1, o.shape[-1]) for o in ours]
    theirs = [np.asarray(t, np.float64).reshape(-1, t.shape[-1]) for t in theirs]
    scale = np.linalg.norm(np.concatenate(theirs, axis=1), axis=1)
    return np.stack([np.linalg.norm(o - t, axis=1) / scale for o, t in zip(ours, theirs)], axis=1)


def assert_matches(errors: np.ndarray) -> None:
    passing = (errors <= TOLERANCE).mean(axis=0)
    assert (passing >= FRACTION).all(), f"fraction within {TOLERANCE} per tissue: {passing}, worst {errors.max(axis=0)}"


@pytest.fixture(scope="module")
def multi_shell(tmp_path_factory):
    """A 3-shell phantom, dhollander responses and dwi2fod msmt_csd's three tissue images."""
    d = tmp_path_factory.mktemp("msmt")
    bvals, bvecs = shell_scheme(4, ((1000, 30), (2000, 45), (3000, 60)), seed=0)
    phantom = dwi_phantom((12, 12, 6), bvals, bvecs, snr=30.0, seed=1)
    dwi = _write_dwi(d / "dwi.mif", phantom["dwi"], bvals, bvecs)
    write_mif(d / "mask.mif", np.ones(phantom["dwi"].shape[:3], np.uint8), np.eye(4))
    # the phantom is too small for dhollander's default mask erosion
    _mrtrix("dwi2response", "dhollander", dwi, d / "wm.txt", d / "gm.txt", d / "csf.txt", "-mask", d / "mask.mif",
            "-erode", "0")
    tissues = ("wm", "gm", "csf")
    _mrtrix("dwi2fod", "msmt_csd", dwi, *[a for t in tissues for a in (d / f"{t}.txt", d / f"{t}.mif")])
    return {"phantom": phantom, "bvals": bvals, "bvecs": bvecs,
            "responses": [np.loadtxt(d / f"{t}.txt", ndmin=2) for t in tissues],
            "theirs": [_read(d / f"{t}.mif") for t in tissues]}


def test_msmt_csd_matches_dwi2fod(multi_shell):
    ours = msmt_csd(multi_shell["phantom"]["dwi"], multi_shell["bvals"], multi_shell["bvecs"], multi_shell["responses"])
    assert [o.shape for o in ours] == [t.shape for t in multi_shell["theirs"]]
    errors = relative_errors(ours, multi_shell["theirs"])
    assert_matches(errors)
    assert errors.max() < 1e-4  # float32 output against float32 output


def test_msmt_csd_is_deterministic(multi_shell):
    args = (multi_shell["phantom"]["dwi"], multi_shell["bvals"], multi_shell["bvecs"], multi_shell["responses"])
    first, second = msmt_csd(*args), msmt_csd(*args)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(first, second))


def test_msmt_csd_mask_and_lmax(multi_shell, tmp_path):
    """Masked-out voxels are 0 and lmax 6 for WM, as ``dwi2fod -mask -lmax 6,0,0``."""
    phantom = multi_shell["phantom"]
    mask = np.zeros(phantom["dwi"].shape[:3], bool)
    mask[::2, 1::3] = True
    dwi = _write_dwi(tmp_path / "dwi.mif", phantom["dwi"], multi_shell["bvals"], multi_shell["bvecs"])
    write_mif(tmp_path / "mask.mif", mask.astype(np.uint8), np.eye(4))
    for t, r in zip(("wm", "gm", "csf"), multi_shell["responses"]):
        np.savetxt(tmp_path / f"{t}.txt", r)
    _mrtrix("dwi2fod", "msmt_csd", dwi, *[a for t in ("wm", "gm", "csf") for a in (tmp_path / f"{t}.txt",
                                                                                   tmp_path / f"{t}.mif")],
            "-mask", tmp_path / "mask.mif", "-lmax", "6,0,0")
    theirs = [_read(tmp_path / f"{t}.mif") for t in ("wm", "gm", "csf")]
    ours = msmt_csd(phantom["dwi"], multi_shell["bvals"], multi_shell["bvecs"], multi_shell["responses"],
                    lmax=[6, 0, 0], mask=mask)
    assert ours[0].shape[-1] == 28 and all((o[~mask] == 0).all() for o in ours)
    errors = relative_errors([o[mask] for o in ours], [t[mask] for t in theirs])
    assert_matches(errors)


@pytest.fixture(scope="module")
def single_shell(tmp_path_factory):
    """A single-shell phantom, a tournier response and dwi2fod csd's FOD."""
    d = tmp_path_factory.mktemp("csd")
    bvals, bvecs = shell_scheme(4, ((2500, 60),), seed=3)
    phantom = dwi_phantom((12, 12, 6), bvals, bvecs, snr=30.0, seed=2)
    dwi = _write_dwi(d / "dwi.mif", phantom["dwi"], bvals, bvecs)
    write_mif(d / "mask.mif", np.ones(phantom["dwi"].shape[:3], np.uint8), np.eye(4))
    # fewer voxels and iterations than the defaults: the phantom is small
    _mrtrix("dwi2response", "tournier", dwi, d / "wm.txt", "-mask", d / "mask.mif", "-number", "50",
            "-iter_voxels", "300", "-max_iters", "2")
    _mrtrix("dwi2fod", "csd", dwi, d / "wm.txt", d / "fod.mif")
    return {"phantom": phantom, "bvals": bvals, "bvecs": bvecs, "response": np.loadtxt(d / "wm.txt"),
            "theirs": _read(d / "fod.mif")}


def test_csd_matches_dwi2fod(single_shell):
    ours = csd(single_shell["phantom"]["dwi"], single_shell["bvals"], single_shell["bvecs"], single_shell["response"])
    assert ours.shape == single_shell["theirs"].shape
    errors = relative_errors([ours], [single_shell["theirs"]])
    assert_matches(errors)
    assert errors.max() < 1e-5


def test_csd_uses_the_highest_shell(multi_shell, tmp_path):
    """On multi-shell data dwi2fod csd fits the highest shell alone, with its response row."""
    bvals, bvecs, phantom = multi_shell["bvals"], multi_shell["bvecs"], multi_shell["phantom"]
    response = multi_shell["responses"][0][-1]
    np.savetxt(tmp_path / "wm.txt", response[None])
    dwi = _write_dwi(tmp_path / "dwi.mif", phantom["dwi"], bvals, bvecs)
    _mrtrix("dwi2fod", "csd", dwi, tmp_path / "wm.txt", tmp_path / "fod.mif")
    errors = relative_errors([csd(phantom["dwi"], bvals, bvecs, response)], [_read(tmp_path / "fod.mif")])
    assert_matches(errors)


@pytest.fixture(scope="module")
def small_64d(tmp_path_factory):
    """DIPY's small_64D (b=0 and one shell near b=1000), its scheme in scanner space as
    MRtrix3 reads the FSL files, and the stored ``dwi2response tournier`` response."""
    from dipy.data import get_fnames

    d = tmp_path_factory.mktemp("small_64D")
    image, bval, bvec = map(str, get_fnames(name="small_64D"))
    scheme = subprocess.run(["mrinfo", image, "-fslgrad", bvec, bval, "-dwgrad", "-quiet"], check=True,
                            capture_output=True, text=True).stdout
    grad = np.array([[float(v) for v in line.split()] for line in scheme.strip().splitlines()])
    return {"dir": d, "image": image, "fslgrad": ("-fslgrad", bvec, bval),
            "dwi": np.asarray(nib.load(image).dataobj, np.float32), "bvals": grad[:, 3], "bvecs": grad[:, :3],
            "response": np.loadtxt(DATA / "small_64D_wm_tournier.txt")}


def test_csd_matches_dwi2fod_on_small_64d(small_64d):
    d = small_64d["dir"]
    _mrtrix("dwi2fod", "csd", small_64d["image"], DATA / "small_64D_wm_tournier.txt", d / "fod.nii",
            *small_64d["fslgrad"])
    theirs = nib.load(d / "fod.nii")
    assert np.allclose(theirs.affine, nib.load(small_64d["image"]).affine)
    ours = csd(small_64d["dwi"], small_64d["bvals"], small_64d["bvecs"], small_64d["response"])
    errors = relative_errors([ours], [np.asarray(theirs.dataobj, np.float64)])
    assert_matches(errors)


def test_msmt_csd_matches_dwi2fod_on_small_64d(small_64d):
    """Two tissues (WM and CSF) from two shells (b=0 and b≈1000) on real signals."""
    d = small_64d["dir"]
    r = small_64d["response"]
    wm = np.zeros((2, r.size))
    wm[0, 0], wm[1] = 2.5 * r[0], r
    csf = np.array([[6.0 * r[0]], [0.6 * r[0]]])
    np.savetxt(d / "wm.txt", wm)
    np.savetxt(d / "csf.txt", csf)
    _mrtrix("dwi2fod", "msmt_csd", small_64d["image"], d / "wm.txt", d / "wm.nii", d / "csf.txt", d / "csf.nii",
            *small_64d["fslgrad"])
    theirs = [np.asarray(nib.load(d / f"{t}.nii").dataobj, np.float64) for t in ("wm", "csf")]
    ours = msmt_csd(small_64d["dwi"], small_64d["bvals"], small_64d["bvecs"], [wm, csf])
    errors = relative_errors(ours, [theirs[0], theirs[1][..., None]])
    assert_matches(errors)
