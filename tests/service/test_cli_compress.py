"""``fibertensor compress`` / ``decompress`` on a small volume: output, round trip, errors."""

from __future__ import annotations

import argparse

import nibabel as nib
import numpy as np
import pytest

from service.cli import CommandError
from service.cli import compress as compress_cli


def run(argv):
    parser = argparse.ArgumentParser(prog="fibertensor")
    compress_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture
def volume(tmp_path):
    grid = np.meshgrid(*[np.linspace(0, 1, n) for n in (12, 11, 10)], indexing="ij")
    data = np.stack([np.exp(-b * (grid[0] ** 2 + grid[1])) * 1000 for b in np.linspace(0, 3, 9)], axis=-1)
    affine = np.diag([2.0, 2.0, 2.5, 1.0])
    affine[:3, 3] = (-10, 5, 3)
    path = tmp_path / "vol.nii.gz"
    image = nib.Nifti1Image(data.astype(np.float32), affine)
    image.header.set_xyzt_units("mm", "sec")
    nib.save(image, str(path))
    return path


def test_compress_prints_ratio_error_bound_and_times(volume, tmp_path, capsys):
    out = tmp_path / "v.npz"
    assert run(["compress", str(volume), str(out), "--tol", "1e-2", "--order", "best"]) == 0
    text = capsys.readouterr().out
    for word in ("compression ratio", "relative error", "max error", "PSNR", "TTMc bound", "times", "TTMc phases"):
        assert word in text
    assert run(["decompress", str(out), str(tmp_path / "back.nii.gz")]) == 0
    original, restored = nib.load(volume), nib.load(tmp_path / "back.nii.gz")
    assert restored.shape == original.shape
    np.testing.assert_array_equal(restored.affine, original.affine)
    assert restored.header.get_xyzt_units() == ("mm", "sec")
    x = original.get_fdata()
    assert 5e-3 <= np.linalg.norm(restored.get_fdata() - x) / np.linalg.norm(x) <= 1e-2


def test_abs_target_is_guaranteed(volume, tmp_path):
    out = tmp_path / "a.npz"
    assert run(["compress", str(volume), str(out), "--abs", "0.5"]) == 0
    assert run(["decompress", str(out), str(tmp_path / "a.nii")]) == 0
    x, y = nib.load(volume).get_fdata(), nib.load(tmp_path / "a.nii").get_fdata()
    assert np.abs(y - x).max() <= 0.5


def test_fixed_ranks_fp32(volume, tmp_path, capsys):
    out = tmp_path / "r.npz"
    assert run(["compress", str(volume), str(out), "--ranks", "3,3,3,2", "--precision", "fp32", "--hooi-sweeps", "1"]) == 0
    assert "ranks 3x3x3x2" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["compress", "{v}", "{t}/x.npz", "--ranks", "3,3"], "ranks"),
        (["compress", "{v}", "{t}/x.nii"], ".npz"),
        (["compress", "{t}/missing.nii.gz", "{t}/x.npz"], "missing.nii.gz"),
        (["decompress", "{t}/missing.npz", "{t}/x.nii.gz"], "missing.npz"),
        (["decompress", "{v}", "{t}/x.nii.gz"], "not a readable .npz"),
        (["decompress", "{t}/x.npz", "{t}/x.txt"], ".nii"),
    ],
)
def test_user_errors_are_one_line(volume, tmp_path, argv, message):
    argv = [a.format(v=volume, t=tmp_path) for a in argv]
    with pytest.raises(CommandError, match=message.replace(".", r"\.")):
        run(argv)


def test_targets_exclude_each_other(volume, tmp_path):
    with pytest.raises(CommandError, match="^--psnr: give one error target \\(tol, abs or psnr\\), not tol and psnr$"):
        run(["compress", str(volume), str(tmp_path / "x.npz"), "--tol", "1e-2", "--psnr", "40"])
    with pytest.raises(CommandError, match="bval and bvec"):
        run(["compress", str(volume), str(tmp_path / "x.npz"), "--report-dwi"])
    assert not (tmp_path / "x.npz").exists()


def test_a_cut_stream_is_found_by_the_one_read_and_named_as_the_check_names_it(volume, tmp_path, inflate_passes):
    """``compress`` checks headers only and reads the volume once, through the checked
    reader: the same problem as the API's read-through check, naming the file given."""
    from service.settings import get_settings
    from worker.errors import InputError
    from worker.input_limits import check_job_inputs
    from worker.job_kinds import get_job_kind
    from worker.params.compress import CompressParams

    assert run(["compress", str(volume), str(tmp_path / "v.npz"), "--tol", "1e-2"]) == 0
    assert inflate_passes == {"vol.nii.gz": 1}
    cut = tmp_path / "cut.nii.gz"
    cut.write_bytes(volume.read_bytes()[:-200])
    with pytest.raises(InputError) as checked:
        check_job_inputs(get_job_kind("compress"), {"volume": cut}, CompressParams(), get_settings().input_limits)
    with pytest.raises(CommandError) as caught:
        run(["compress", str(cut), str(tmp_path / "cut.npz")])
    assert str(caught.value) == f"{checked.value.title}: {cut}: {checked.value.detail.removeprefix('volume: ')}"
    assert checked.value.title == "Truncated or damaged file"
