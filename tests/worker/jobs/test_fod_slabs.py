"""A fod job whose DWI is too large to hold is fitted a slab at a time from a memory map of the
file: the same bytes as the whole-volume fit, nothing left on disk, memory bounded by a slab."""

from __future__ import annotations

import json
import subprocess
import tracemalloc

import numpy as np
import pytest

import worker.jobs.fod.plan as fod_plan
from gpu.fod import dwi_phantom, shell_scheme
from tests.worker.jobs.fod_phantom import AFFINE, write_exact_responses, write_fsl
from worker.io.images import load_image_data, read_image_header, write_image
from worker.jobs.fod import fod_memory_bytes, plan_fod, run_fod
from worker.params.fod import FodParams

SHAPE = (10, 9, 7)


def _slabs_of_two_planes(monkeypatch):
    monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(fod_plan, "SLAB_VOXELS", 2 * SHAPE[0] * SHAPE[1])


@pytest.fixture(scope="module")
def dwi_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("slabs")
    bvals, dirs = shell_scheme(2, ((1000, 20), (2000, 30)))
    dwi = dwi_phantom(SHAPE, bvals, dirs, snr=30.0)["dwi"]
    dwi[2, 3, 4, 5] = np.nan  # an unusable voxel, left out and counted either way
    files = {"dwi.nii": write_image(folder / "dwi.nii", dwi, AFFINE),
             "dwi.nii.gz": write_image(folder / "dwi.nii.gz", dwi, AFFINE)}
    bval, bvec = write_fsl(folder, bvals, dirs)
    # a .mif stored volume-fastest and backwards in x: the map's view must undo both
    files["dwi.mif"] = folder / "dwi.mif"
    subprocess.run(["mrconvert", "-quiet", str(files["dwi.nii"]), str(files["dwi.mif"]), "-fslgrad", str(bvec),
                    str(bval), "-strides", "-2,3,4,1"], check=True)
    return folder, files, bval, bvec, write_exact_responses(folder, [0.0, 1000.0, 2000.0])


def _fit(folder, dwi, bval, bvec, responses, params):
    out = folder / "out"
    out.mkdir()
    gradients = {} if dwi.name.endswith(".mif") else {"bval": bval, "bvec": bvec}
    sidecar = run_fod(dwi, out / "sub", params, responses=responses, **gradients)
    return out, sidecar


@pytest.mark.parametrize("name", ["dwi.nii", "dwi.nii.gz", "dwi.mif"])
@pytest.mark.parametrize("algorithm", ["msmt_csd", "csd"])
def test_slabs_give_the_whole_volume_fit_bytes(dwi_files, name, algorithm, tmp_path, monkeypatch):
    folder, files, bval, bvec, exact = dwi_files
    responses = exact if algorithm == "msmt_csd" else {"wm": exact["wm"]}
    params = FodParams(algorithm=algorithm, backend="cpu", lmax=6)
    (tmp_path / "whole").mkdir()
    whole, whole_sidecar = _fit(tmp_path / "whole", files[name], bval, bvec, responses, params)
    _slabs_of_two_planes(monkeypatch)
    gradients = {} if name.endswith(".mif") else {"bval": bval, "bvec": bvec}
    assert plan_fod(files[name], params, responses=responses, **gradients).slab_planes == 2
    (tmp_path / "slabs").mkdir()
    slabs, slabs_sidecar = _fit(tmp_path / "slabs", files[name], bval, bvec, responses, params)

    assert sorted(p.name for p in slabs.iterdir()) == sorted(p.name for p in whole.iterdir())  # no scratch left
    for output in whole_sidecar["outputs"].values():
        ours = load_image_data(read_image_header(slabs / output, "fod"))
        theirs = load_image_data(read_image_header(whole / output, "fod"))
        assert ours.shape == theirs.shape and np.array_equal(ours.view(np.uint32), theirs.view(np.uint32))
        assert np.count_nonzero(ours.any(axis=-1)) == whole_sidecar["voxels_fitted"]
    for key in ("warnings", "voxels_fitted", "input", "outputs"):
        assert slabs_sidecar[key] == whole_sidecar[key]
    assert "1 voxels have NaN" in " ".join(slabs_sidecar["warnings"])


def test_a_slab_fit_holds_a_slab_not_the_dwi(tmp_path, monkeypatch):
    """Peak numpy allocations of a fit in slabs of a 69 MB DWI (331,776 voxels, 52 volumes; a
    thin line of brain so the fit itself is short) stay below a third of the DWI's float32
    bytes (the inflater's buffers, some 16 MB, whatever the size) and within the job's
    declared memory, which is below the DWI's bytes too."""
    shape = (72, 72, 64)
    bvals, dirs = shell_scheme(2, ((1000, 20), (2000, 30)))
    dwi = dwi_phantom(shape, bvals, dirs, snr=30.0)["dwi"]
    dwi_bytes = dwi.size * 4
    files = {"dwi": write_image(tmp_path / "dwi.nii.gz", dwi, AFFINE)}
    mask = np.zeros(shape, np.uint8)
    mask[5, 5, :] = 1
    files["mask"] = write_image(tmp_path / "mask.nii.gz", mask, AFFINE)
    del dwi
    files["bval"], files["bvec"] = write_fsl(tmp_path, bvals, dirs)
    responses = write_exact_responses(tmp_path, [0.0, 1000.0, 2000.0])
    monkeypatch.setattr(fod_plan, "FIT_IN_MEMORY_BYTES", 0)
    monkeypatch.setattr(fod_plan, "SLAB_VOXELS", 2 * shape[0] * shape[1])
    params = FodParams(backend="cpu", lmax=6)
    plan = plan_fod(files["dwi"], params, bval=files["bval"], bvec=files["bvec"], mask=files["mask"],
                    responses=responses)
    assert plan.slab_planes == 2 and fod_memory_bytes(plan) < dwi_bytes + (32 << 20)
    run_fod(files["dwi"], tmp_path / "warm", params, bval=files["bval"], bvec=files["bvec"], mask=files["mask"],
            responses=responses)
    tracemalloc.start()
    try:
        sidecar = run_fod(files["dwi"], tmp_path / "sub", params, bval=files["bval"], bvec=files["bvec"],
                          mask=files["mask"], responses=responses)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sidecar["voxels_fitted"] == shape[2]
    assert peak < dwi_bytes / 3 and peak <= fod_memory_bytes(plan)
    assert json.loads((tmp_path / "sub_fod.json").read_text())["outputs"]["wmfod"] == "sub_wmfod.nii.gz"


def test_a_slab_fit_of_an_upload_names_the_upload_and_skips_hashing_the_stored_file(dwi_files, tmp_path,
                                                                                     monkeypatch):
    """The service stores a ``.nii.gz`` upload inflated: the sidecar names the upload and its
    checksum, as the whole read's does, and the stored ``.nii`` is not read again to hash it."""
    import worker.io.mapped_images as mapped_images
    from worker.job_kinds import UploadedInput

    folder, files, bval, bvec, exact = dwi_files
    _slabs_of_two_planes(monkeypatch)
    monkeypatch.setattr(mapped_images, "file_sha256", lambda path: pytest.fail(f"{path} hashed"))
    upload = UploadedInput(name="sub-01_dwi.nii.gz", sha256="ab" * 32)
    sidecar = run_fod(files["dwi.nii"], tmp_path / "sub", FodParams(backend="cpu", lmax=6), bval=bval, bvec=bvec,
                      responses=exact, uploaded={"dwi": upload})
    assert sidecar["input"]["dwi"] == "sub-01_dwi.nii.gz"
    assert sidecar["input"]["sha256"] == {"sub-01_dwi.nii.gz": "ab" * 32}
