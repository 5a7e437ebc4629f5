"""The ``fixels`` job and ``fibertensor fixels``: fixel directories MRtrix3 reads back
(``fixel2voxel``) with the same per-voxel sums as ``fod2fixel``'s, in the input's format."""

from __future__ import annotations

import json
import subprocess
import tarfile

import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from service.cli import main
from tests.gpu.fixels.mrtrix_fixels import real_fod, run_fod2fixel
from worker.errors import InputError
from worker.io.images import load_image_data, read_image_header, write_image
from worker.job_kinds import JobContext, get_job_kind
from worker.jobs.fixels import check_fixels_inputs, run_fixels
from worker.params.fixels import FixelsParams

pytestmark = pytest.mark.requires_mrtrix


def voxel_map(folder, data_file, operation, out):
    """``fixel2voxel FOLDER/DATA_FILE OPERATION OUT``, read back."""
    subprocess.run(["fixel2voxel", "-quiet", str(folder / data_file), operation, str(out)], check=True)
    return load_image_data(read_image_header(out, "map"))


@pytest.fixture(scope="module")
def csd_fod(tmp_path_factory):
    return real_fod(tmp_path_factory.mktemp("small_64D"))


def test_cli_directory_reads_back_as_fod2fixel(csd_fod, tmp_path):
    assert main(["fixels", str(csd_fod), str(tmp_path / "ours"), "--backend", "cpu", "--quiet"]) == 0
    reference = run_fod2fixel(csd_fod, tmp_path / "theirs")
    for data_file, operation in (("afd.mif", "sum"), ("peak_amp.mif", "max"), ("disp.mif", "mean"),
                                 ("afd.mif", "count")):
        ours = voxel_map(tmp_path / "ours", data_file, operation, tmp_path / f"ours_{operation}.mif")
        theirs = voxel_map(reference, data_file, operation, tmp_path / f"theirs_{operation}.mif")
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-7, err_msg=f"{data_file} {operation}")
    assert voxel_map(tmp_path / "ours", "afd.mif", "count", tmp_path / "n.mif").sum() > 1000
    sidecar = json.loads((tmp_path / "ours.json").read_text())
    assert sidecar["outputs"]["format"] == "mif" and sidecar["parameters"]["fmls_peak_value"] == 0.1
    assert sidecar["fixels"] == int(voxel_map(reference, "afd.mif", "count", tmp_path / "c.mif").sum())


def test_nifti_input_gives_nifti_directory(tmp_path):
    fod = fod_phantom((6, 5, 3), 8)["sh"]
    write_image(tmp_path / "fod.nii", fod, np.diag([2.0, 2.0, 2.0, 1.0]))
    run_fixels(tmp_path / "fod.nii", tmp_path / "ours", FixelsParams(maxnum=2, backend="cpu"))
    assert sorted(p.name for p in (tmp_path / "ours").iterdir()) == [
        "afd.nii", "directions.nii", "disp.nii", "index.nii", "peak_amp.nii"]
    reference = run_fod2fixel(tmp_path / "fod.nii", tmp_path / "theirs", "-maxnum", "2")
    ours = voxel_map(tmp_path / "ours", "afd.nii", "sum", tmp_path / "ours.mif")
    theirs = voxel_map(reference, "afd.mif", "sum", tmp_path / "theirs.mif")
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert ours.min() > 0


def test_a_fod_inflated_on_several_threads_segments_as_on_one(tmp_path, monkeypatch):
    """``fibertensor fixels`` inflates a large .nii.gz on every core: the same fixels and
    the same input checksum as a read on one thread."""
    from worker.io import nifti

    fod = fod_phantom((6, 5, 3), 8)["sh"]
    write_image(tmp_path / "fod.nii.gz", fod, np.diag([2.0, 2.0, 2.0, 1.0]))
    params = FixelsParams(maxnum=2, backend="cpu")
    one = run_fixels(tmp_path / "fod.nii.gz", tmp_path / "one", params)
    monkeypatch.setattr(nifti, "_PARALLEL_INFLATE_BYTES", 0)  # the small test file goes to rapidgzip too
    several = run_fixels(tmp_path / "fod.nii.gz", tmp_path / "several", params, inflate_threads=3)
    assert several["input"] == one["input"] and several["fixels"] == one["fixels"] > 0
    for name in ("afd.nii.gz", "directions.nii.gz", "index.nii.gz"):
        np.testing.assert_array_equal(load_image_data(read_image_header(tmp_path / "several" / name, name)),
                                      load_image_data(read_image_header(tmp_path / "one" / name, name)))


def test_job_writes_tar_and_sidecar(tmp_path):
    fod = fod_phantom((4, 4, 2), 8)["sh"]
    write_image(tmp_path / "fod.mif", fod, np.eye(4))
    mask = np.zeros((4, 4, 2), np.uint8)
    mask[1:3, 1:3, :] = 1
    mask[-1, -1, -1] = 1  # fod2fixel segments voxel (0, 0, 0) too when its mask ends in zeros
    write_image(tmp_path / "mask.mif", mask, np.eye(4))
    kind = get_job_kind("fixels")
    inputs = {"fod": tmp_path / "fod.mif", "mask": tmp_path / "mask.mif"}
    params = FixelsParams(backend="cpu")
    headers = kind.validate(inputs, params)
    assert kind.memory_bytes(inputs, params, headers) > fod.nbytes
    out = tmp_path / "job"
    out.mkdir()
    written = kind.run(JobContext(inputs=inputs, out_dir=out, params=params))
    assert [p.name for p in written] == list(kind.result_names)
    with tarfile.open(out / "fixels.tar") as tar:
        tar.extractall(tmp_path / "unpacked", filter="data")
    reference = run_fod2fixel(tmp_path / "fod.mif", tmp_path / "theirs", "-mask", str(tmp_path / "mask.mif"))
    ours = voxel_map(tmp_path / "unpacked" / "fixels", "afd.mif", "sum", tmp_path / "ours.mif")
    np.testing.assert_allclose(ours, voxel_map(reference, "afd.mif", "sum", tmp_path / "theirs.mif"), rtol=1e-5)
    assert (ours[mask == 0] == 0).all() and (ours[mask == 1] > 0).all()
    sidecar = json.loads((out / "fixels.json").read_text())
    assert sidecar["input"]["mask"] == "mask.mif" and sidecar["voxels_with_fixels"] == 9


def test_bad_inputs_say_what_to_fix(tmp_path, capsys):
    write_image(tmp_path / "dwi.nii", np.ones((3, 3, 3, 46), np.float32), np.eye(4))
    with pytest.raises(InputError, match="46 SH coefficients are not an even-order SH series"):
        check_fixels_inputs(tmp_path / "dwi.nii")
    write_image(tmp_path / "fod.nii", np.ones((3, 3, 3, 45), np.float32), np.eye(4))
    write_image(tmp_path / "mask.nii", np.ones((3, 3, 2), np.uint8), np.eye(4))
    assert main(["fixels", str(tmp_path / "fod.nii"), str(tmp_path / "out"), "--mask", str(tmp_path / "mask.nii")]) == 2
    assert "Mask grid mismatch" in capsys.readouterr().err
    assert main(["fixels", str(tmp_path / "fod.nii"), str(tmp_path / "out"), "--fmls-lobe-merge-ratio", "1.5"]) == 2
    assert "--fmls-lobe-merge-ratio" in capsys.readouterr().err
