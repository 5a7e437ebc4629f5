"""``fibertensor sample`` and ``fibertensor peaks``: results equal the job function; bad
input gives one line ``fibertensor: error: …`` and exit code 2."""

from __future__ import annotations

import gzip
import json

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.peak_matching import match_peaks
from service.cli import main
from service.settings import get_settings
from tests.worker.io.conftest import mrtrix  # noqa: F401 (the fixture)
from worker.errors import InputError
from worker.input_limits import check_job_inputs
from worker.job_kinds import get_job_kind
from worker.jobs.peaks import PeaksOutputs, run_peaks
from worker.params import PeaksParams


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sample")
    assert main(["sample", str(folder)]) == 0
    return folder


def load(path):
    return np.asarray(nib.load(path).dataobj)


def test_sample_writes_a_phantom_with_truth(sample):
    names = sorted(p.name for p in sample.iterdir())
    assert names == ["fod.nii.gz", "mask.nii.gz", "sample.json", "truth_count.nii.gz", "truth_peaks.nii.gz"]
    description = json.loads((sample / "sample.json").read_text())
    assert description["lmax"] == 8 and description["basis"] == "mrtrix" and description["shape"] == [24, 24, 12]
    fod = nib.load(sample / "fod.nii.gz")
    assert fod.shape == (24, 24, 12, 45)
    for name in ("mask.nii.gz", "truth_count.nii.gz", "truth_peaks.nii.gz"):
        np.testing.assert_allclose(nib.load(sample / name).affine, fod.affine)
    count = load(sample / "truth_count.nii.gz")
    assert set(np.unique(count)) == {1, 2, 3}
    truth = load(sample / "truth_peaks.nii.gz").reshape(24, 24, 12, 3, 3)
    norms = np.linalg.norm(truth, axis=-1)
    for k in range(3):
        assert np.isnan(norms[..., k][count <= k]).all() and (norms[..., k][count > k] >= 0.5 - 1e-6).all()


def test_peaks_command_equals_run_peaks_and_recovers_the_truth(sample, tmp_path, capsys):
    fod, mask = sample / "fod.nii.gz", sample / "mask.nii.gz"
    prefix = tmp_path / "cli" / "out"
    assert main(["peaks", str(fod), str(prefix), "--mask", str(mask), "--quiet"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    reference = PeaksOutputs.in_folder(tmp_path / "reference")
    run_peaks(fod, reference, PeaksParams(), mask=mask)
    cli = PeaksOutputs.with_prefix(prefix)
    for name in ("peaks", "amplitudes", "count"):
        np.testing.assert_array_equal(load(cli.path(name, ".nii.gz")), load(reference.path(name, ".nii.gz")),
                                      err_msg=name)
    sidecar = json.loads(cli.sidecar.read_text())
    assert sidecar["input"] | {"sha256": None} == {"fod": "fod.nii.gz", "mask": "mask.nii.gz",
                                                   "shape": [24, 24, 12, 45], "dtype": "float32", "sha256": None}
    assert sidecar["backend"] == "cpu" and sidecar["parameters"] == PeaksParams().model_dump()

    # Inside the mask the peaks are the sample's fibers.
    inside = load(mask) > 0
    peaks = load(cli.path("peaks", ".nii.gz")).reshape(24, 24, 12, 3, 3)[inside]
    truth = load(sample / "truth_peaks.nii.gz").reshape(24, 24, 12, 3, 3)[inside]
    # Both files hold amplitude (weight) × direction; match_peaks takes unit vectors.
    peaks = peaks / np.linalg.norm(peaks, axis=-1, keepdims=True)
    truth = truth / np.linalg.norm(truth, axis=-1, keepdims=True)
    matched = match_peaks(peaks, load(cli.path("count", ".nii.gz"))[inside], truth, load(sample / "truth_count.nii.gz")[inside])
    assert matched["count_agreement"] >= 0.99 and matched["mean_error"] < 1.0
    assert (load(cli.path("count", ".nii.gz"))[~inside] == 0).all()


def test_peaks_command_options_and_summary(sample, tmp_path, capsys):
    prefix = tmp_path / "opts"
    code = main(["peaks", str(sample / "fod.nii.gz"), str(prefix), "--npeaks", "2", "--relative-threshold", "0.5",
                 "--starts", "64", "--backend", "cpu"])
    assert code == 0
    out = capsys.readouterr().out
    assert "backend cpu" in out and "wrote" in out and "0 non-finite" in out
    sidecar = json.loads((tmp_path / "opts.json").read_text())
    assert sidecar["parameters"]["npeaks"] == 2 and sidecar["options"]["relative_threshold"] == 0.5
    assert sidecar["options"]["starts"] == 64
    assert nib.load(tmp_path / "opts_peaks.nii.gz").shape == (24, 24, 12, 6)


@pytest.mark.parametrize("existing", [False, True])
def test_an_out_prefix_naming_a_folder_gets_the_jobs_file_names(sample, tmp_path, capsys, existing):
    """As for ``fibertensor fod``: OUT_PREFIX ending in ``/`` (created) or an existing folder
    holds peaks.nii.gz, count.nii.gz, ... and peaks.json, the images those of a prefix run."""
    folder = tmp_path / "out"
    if existing:
        folder.mkdir()
    given = str(folder) if existing else f"{folder}/"
    assert main(["peaks", str(sample / "fod.nii.gz"), given, "--backend", "cpu", "--no-qc"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(f"and peaks.json in {folder}")
    assert main(["peaks", str(sample / "fod.nii.gz"), str(tmp_path / "sub"), "--backend", "cpu", "--no-qc",
                 "--quiet"]) == 0
    names = ("peaks", "amplitudes", "count", "afd_max", "afd_total", "afd_sum", "peak_fraction", "rgb")
    assert sorted(p.name for p in folder.iterdir()) == sorted([f"{n}.nii.gz" for n in names] + ["peaks.json"])
    for name in names:
        np.testing.assert_array_equal(load(folder / f"{name}.nii.gz"), load(tmp_path / f"sub_{name}.nii.gz"))
    assert json.loads((folder / "peaks.json").read_text())["outputs"]["peaks"] == ["peaks.nii.gz"]


def test_mif_outputs_add_the_command_to_the_inputs_command_history(sample, tmp_path, mrtrix):
    from worker.provenance import generated_by

    fod = tmp_path / "fod.mif"
    mrtrix("mrconvert", sample / "fod.nii.gz", fod)
    [converted] = mrtrix("mrinfo", fod, "-property", "command_history").splitlines()
    argv = ["peaks", str(fod), str(tmp_path / "s1"), "--npeaks", "2", "--metrics", "afd_max", "--format", "mif",
            "--no-qc", "--backend", "cpu", "--quiet"]
    assert main(argv) == 0
    entry = f"fibertensor {' '.join(argv)}  (version={generated_by()['Version']})"
    for name in ("s1_peaks.mif", "s1_count.mif", "s1_afd_max.mif"):
        assert mrtrix("mrinfo", tmp_path / name, "-property", "command_history").splitlines() == [converted, entry]


def write(tmp_path, name, data, affine=None):
    path = tmp_path / name
    nib.save(nib.Nifti1Image(data, np.eye(4) if affine is None else affine), path)
    return path


def cli_error(argv, capsys) -> str:
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    assert code == 2, (code, captured)
    lines = captured.err.splitlines()
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("fibertensor: error: "), lines[0]
    return lines[0]


def test_error_missing_file(tmp_path, capsys):
    line = cli_error(["peaks", tmp_path / "absent.nii.gz", tmp_path / "out", "--quiet"], capsys)
    assert "absent.nii.gz" in line and "does not exist" in line
    assert list(tmp_path.iterdir()) == []


def test_error_missing_mask(sample, tmp_path, capsys):
    line = cli_error(["peaks", sample / "fod.nii.gz", tmp_path / "out", "--mask", tmp_path / "nomask.nii", "--quiet"],
                     capsys)
    assert "mask file" in line and "nomask.nii" in line and "does not exist" in line


@pytest.mark.parametrize("shape", [(4, 5, 6), (4, 5, 6, 1)])
def test_error_3d_input(tmp_path, capsys, shape):
    # A 3D image, or one stored as 4D with a single volume: its size as mrinfo gives it
    # (axes realigned to scanner x, y, z), and what a FOD looks like.
    affine = np.array([[0, 0, 2.0, 0], [2.0, 0, 0, 0], [0, 2.0, 0, 0], [0, 0, 0, 1]])
    fod = write(tmp_path, "fod3d.nii.gz", np.zeros(shape, np.float32), affine)
    line = cli_error(["peaks", fod, tmp_path / "out", "--quiet"], capsys)
    size = "6 x 4 x 5" + " x 1: one volume" * (len(shape) == 4)
    assert line == (f"fibertensor: error: Not a 4D volume: the FOD file 'fod3d.nii.gz' is a 3D image ({size}); peaks "
                    "need a 4D image of SH coefficients, X x Y x Z x N with N one of 6, 15, 28, 45, 66, 91 "
                    "(e.g. 6 x 4 x 5 x 45 for lmax 8), such as dwi2fod writes")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod3d.nii.gz"]


def mif_mask(tmp_path, nifti, strides: str):
    import subprocess

    path = tmp_path / "mask.mif"
    subprocess.run(["mrconvert", "-quiet", str(nifti), str(path), "-strides", strides], check=True)
    return path


def test_error_mif_mask_with_other_strides_names_sizes_as_mrinfo_does(tmp_path, capsys):
    import subprocess

    fod = write(tmp_path, "fod.nii", np.zeros((9, 10, 10, 15), np.float32))
    # On the FOD's grid, stored with other strides: mrinfo shows 9 x 10 x 10 for both.
    same = mif_mask(tmp_path, write(tmp_path, "m.nii", np.ones((9, 10, 10), np.uint8)), "2,1,3")
    assert subprocess.run(["mrinfo", "-size", str(same)], capture_output=True, text=True).stdout.split() == [
        "9", "10", "10"]
    line = cli_error(["peaks", fod, tmp_path / "out", "--mask", same, "--quiet"], capsys)
    assert line == ("fibertensor: error: Mask grid mismatch: the mask 'mask.mif' has the FOD's size (9 x 10 x 10) but "
                    "its axes are stored in another order (other strides); store it as the FOD is "
                    "(mrconvert mask.mif -strides fod.nii OUT)")
    # The suggested command makes a mask the job takes.
    subprocess.run(["mrconvert", "-quiet", str(same), "-strides", str(fod), str(tmp_path / "fixed.mif")], check=True)
    assert main(["peaks", str(fod), str(tmp_path / "out"), "--mask", str(tmp_path / "fixed.mif"), "--quiet",
                 "--no-qc", "--metrics", "none"]) == 0
    # Another grid, stored with other strides: both sizes as mrinfo gives them.
    (tmp_path / "mask.mif").unlink()
    other = mif_mask(tmp_path, write(tmp_path, "m8.nii", np.ones((9, 8, 10), np.uint8)), "2,1,3")
    line = cli_error(["peaks", fod, tmp_path / "out2", "--mask", other, "--quiet"], capsys)
    assert line == ("fibertensor: error: Mask grid mismatch: the mask 'mask.mif' is 9 x 8 x 10 but the FOD grid is "
                    "9 x 10 x 10; resample the mask onto the FOD grid (e.g. mrgrid … regrid -template)")


@pytest.mark.parametrize("volumes", [44, 46])
def test_error_wrong_volume_count(tmp_path, capsys, volumes):
    fod = write(tmp_path, "fod.nii", np.zeros((2, 2, 2, volumes), np.float32))
    line = cli_error(["peaks", fod, tmp_path / "out", "--quiet"], capsys)
    assert f"{volumes} SH coefficients" in line
    assert "6 (lmax 2), 15 (lmax 4), 28 (lmax 6), 45 (lmax 8), 66 (lmax 10), 91 (lmax 12)" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii"]


def test_error_not_nifti(tmp_path, capsys):
    text = tmp_path / "fod.txt"
    text.write_text("1 2 3\n")
    line = cli_error(["peaks", text, tmp_path / "out", "--quiet"], capsys)
    assert "fod.txt" in line and "is neither NIfTI (.nii, .nii.gz) nor MRtrix (.mif, .mif.gz, .mih)" in line
    garbage = tmp_path / "garbage.nii"
    garbage.write_bytes(np.random.default_rng(0).bytes(1000))
    line = cli_error(["peaks", garbage, tmp_path / "out", "--quiet"], capsys)
    assert line.startswith("fibertensor: error: Unreadable NIfTI file: the fod file 'garbage.nii' could not be read "
                           "as NIfTI")


def test_error_wrong_dtype(tmp_path, capsys):
    fod = write(tmp_path, "fod.nii.gz", np.zeros((2, 2, 2, 15), np.complex64))
    line = cli_error(["peaks", fod, tmp_path / "out", "--quiet"], capsys)
    assert "complex64" in line and "float or integer" in line


def test_error_truncated_file(sample, tmp_path, capsys):
    content = (sample / "fod.nii.gz").read_bytes()
    truncated = tmp_path / "cut.nii.gz"
    truncated.write_bytes(content[: len(content) // 2])
    line = cli_error(["peaks", truncated, tmp_path / "out", "--quiet"], capsys)
    assert line.startswith(f"fibertensor: error: Truncated or damaged file: {truncated}: the gzip stream is incomplete")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.nii.gz"]


def damaged(content: bytes, damage: str) -> bytes:
    """A .nii.gz's bytes with ``damage``: its stream cut short, a wrong CRC, data missing from
    a whole stream, or 3 MiB more data than its header declares."""
    if damage == "cut short":
        return content[: len(content) // 2]
    if damage == "bad crc":
        return content[:-8] + bytes(b ^ 0xFF for b in content[-8:-4]) + content[-4:]
    raw = gzip.decompress(content)
    return gzip.compress(raw[:-1000] if damage == "short data" else raw + bytes(3 << 20), 1)


@pytest.mark.parametrize("damage", ["cut short", "bad crc", "short data", "longer"])
def test_damaged_data_found_by_the_read_says_what_the_check_says(sample, tmp_path, capsys, damage):
    """The command checks headers only and the job's read finds the damage: the same line,
    title and file included, as when the check read the data through (the API's check)."""
    fod = tmp_path / "fod.nii.gz"
    fod.write_bytes(damaged((sample / "fod.nii.gz").read_bytes(), damage))
    with pytest.raises(InputError) as checked:
        check_job_inputs(get_job_kind("peaks"), {"fod": fod}, PeaksParams(), get_settings().input_limits)
    detail = checked.value.detail
    assert detail.startswith("fod: ")
    line = cli_error(["peaks", fod, tmp_path / "out", "--quiet"], capsys)
    assert line == f"fibertensor: error: {checked.value.title}: {fod}: {detail[len('fod: '):]}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fod.nii.gz"]


def test_each_input_is_inflated_once(sample, tmp_path, inflate_passes):
    assert main(["peaks", str(sample / "fod.nii.gz"), str(tmp_path / "out"), "--mask", str(sample / "mask.nii.gz"),
                 "--quiet"]) == 0
    assert inflate_passes == {"fod.nii.gz": 1, "mask.nii.gz": 1}


@pytest.mark.parametrize("value", ["1.5", "-0.2"])
def test_error_invalid_relative_threshold(sample, tmp_path, capsys, value):
    line = cli_error(["peaks", sample / "fod.nii.gz", tmp_path / "out", "--relative-threshold", value, "--quiet"],
                     capsys)
    assert line.startswith("fibertensor: error: --relative-threshold: ")
    assert ("less than or equal to 1" in line) if value == "1.5" else ("greater than or equal to 0" in line)
    assert list(tmp_path.iterdir()) == []


def test_error_invalid_starts(sample, tmp_path, capsys):
    line = cli_error(["peaks", sample / "fod.nii.gz", tmp_path / "out", "--starts", "1000", "--quiet"], capsys)
    assert line.startswith("fibertensor: error: --starts: ") and "256" in line


def test_a_small_cpu_job_imports_only_what_it_runs(tmp_path):
    # A process that writes the default outputs of a CPU job loads neither the CUDA layer of
    # numba nor the writers and formats it was not asked for.
    import os
    import subprocess
    import sys

    fod = write(tmp_path, "fod.nii.gz", np.zeros((3, 3, 3, 6), np.float32) + np.float32(0.3))
    script = ("import sys; from service.cli import main; "
              f"code = main(['peaks', {str(fod)!r}, {str(tmp_path / 'out')!r}, '--backend', 'cpu', '--quiet']); "
              "print(' '.join(sorted(sys.modules))); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env={**os.environ, "NUMBA_ENABLE_CUDASIM": "0"}, check=True)
    modules = set(done.stdout.split())
    assert {"worker.jobs.peaks", "gpu.peaks.backend_cpu", "worker.qc_picture"} <= modules
    unneeded = {"numba.cuda", "gpu.peaks.backend_cuda", "gpu.peaks.kernels_cuda", "worker.io.fixels", "worker.io.pam5",
                "dipy", "fastapi", "celery", "redis", "matplotlib"}
    assert modules & unneeded == set()
