"""``fibertensor fod --peaks`` writes what ``fibertensor peaks`` writes of the saved WM FOD: the
same bytes in every image, the QC picture and the fixel directory (an MRtrix image's header
but for the command line it records), the same sidecar but for its timings; from a NIfTI DWI
with FSL gradients and from a .mif DWI with an MRtrix gradient file."""

from __future__ import annotations

import json

import numpy as np
import pytest

from service.cli import main
from tests.file_contents import file_content
from tests.worker.jobs.fod_phantom import AFFINE, write_phantom
from worker.io.images import write_image


@pytest.fixture(scope="module")
def phantom(tmp_path_factory):
    return write_phantom(tmp_path_factory.mktemp("dwi"))


def _dwi_arguments(phantom, tmp_path, suffix: str) -> list[str]:
    p = phantom["paths"]
    if suffix == ".nii.gz":
        dwi = write_image(tmp_path / "dwi.nii.gz", phantom["dwi"], AFFINE)
        return [str(dwi), "--bval", str(p["bval"]), "--bvec", str(p["bvec"])]
    dwi = write_image(tmp_path / "dwi.mif", phantom["dwi"], AFFINE)
    np.savetxt(tmp_path / "grad.b", np.column_stack([phantom["dirs"], phantom["bvals"]]))
    return [str(dwi), "--grad", str(tmp_path / "grad.b")]


def _without_command(content: bytes) -> tuple[list[bytes], bytes]:
    """An MRtrix image's header lines but its command_history and data offset, and its data."""
    header = content[:content.index(b"\nEND\n")].split(b"\n")
    offset = next(int(line.split()[-1]) for line in header if line.startswith(b"file: "))
    return [line for line in header if not line.startswith((b"command_history:", b"file: "))], content[offset:]


def _files(folder):
    files = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            content = file_content(path)  # a .gz inflated (tests/file_contents.py)
            files[path.relative_to(folder).as_posix()] = (_without_command(content) if ".mif" in path.name
                                                          else content)
    return files


@pytest.mark.parametrize("suffix", [".nii.gz", ".mif"])
def test_fod_peaks_are_the_peaks_of_the_written_fod(phantom, tmp_path, suffix):
    p = phantom["paths"]
    (tmp_path / "fod").mkdir()
    (tmp_path / "peaks").mkdir()
    options = ["--npeaks", "2", "--relative-threshold", "0.2", "--format", "fixel"]
    assert main(["fod", *_dwi_arguments(phantom, tmp_path, suffix), str(tmp_path / "fod" / "sub"), "--mask",
                 str(p["mask"]), "--response", str(p["wm"]), str(p["gm"]), str(p["csf"]), "--backend", "cpu",
                 "--quiet", "--peaks", *(option.replace("--", "--peaks-") for option in options)]) == 0
    wmfod = tmp_path / "fod" / f"sub_wmfod{suffix}"
    assert main(["peaks", str(wmfod), str(tmp_path / "peaks" / "sub"), "--mask", str(p["mask"]), "--backend", "cpu",
                 "--quiet", *options]) == 0

    ours = _files(tmp_path / "fod")
    theirs = _files(tmp_path / "peaks")
    ours_sidecar, their_sidecar = json.loads(ours.pop("sub_peaks.json")), json.loads(theirs.pop("sub.json"))
    assert len(theirs) >= 10
    images = {name for name in theirs if name.endswith(suffix)}
    assert {f"sub_{name}{suffix}" for name in ("peaks", "amplitudes", "count", "afd_max", "rgb")} <= images
    assert "sub_qc.png" in theirs and any(name.startswith("sub_fixels/directions.mif") for name in theirs)
    for name, content in theirs.items():
        assert ours[name] == content, name
    for sidecar in (ours_sidecar, their_sidecar):
        sidecar.pop("seconds")
    assert ours_sidecar == their_sidecar
    fod_sidecar = json.loads(ours["sub_fod.json"])
    assert fod_sidecar["peaks"]["sidecar"] == "sub_peaks.json"
    assert fod_sidecar["peaks"]["outputs"] == their_sidecar["outputs"]


class Cancelled(Exception):
    pass


def test_a_failed_peaks_step_leaves_none_of_the_job_files(phantom, tmp_path):
    """The peaks step fails after the FODs are written: its fixel directory is taken (the
    fixel writer refuses a folder that is not empty), or the job is cancelled once the WM
    FOD is on disk. Neither the FODs, nor the peaks outputs, nor a sidecar stay behind."""
    from worker.jobs.fod import run_fod
    from worker.params.fod import FodParams

    p = phantom["paths"]
    params = FodParams(lmax=4, backend="cpu", peaks=True, peaks_npeaks=2, peaks_format=["fixel"])
    given = {"bval": p["bval"], "bvec": p["bvec"], "mask": p["mask"],
             "responses": {t: p[t] for t in ("wm", "gm", "csf")}}
    taken = tmp_path / "taken"
    (taken / "sub_fixels").mkdir(parents=True)
    (taken / "sub_fixels" / "mine.txt").write_text("kept")
    with pytest.raises(FileExistsError, match="sub_fixels exists and is not an empty folder"):
        run_fod(p["dwi"], taken / "sub", params, **given)
    assert sorted(path.relative_to(taken).as_posix() for path in taken.rglob("*")) == [
        "sub_fixels", "sub_fixels/mine.txt"]

    cancelled = tmp_path / "cancelled"
    cancelled.mkdir()

    def check_cancelled():
        if (cancelled / "sub_wmfod.nii").exists():
            raise Cancelled

    with pytest.raises(Cancelled):
        run_fod(p["dwi"], cancelled / "sub", params, check_cancelled=check_cancelled, **given)
    assert list(cancelled.iterdir()) == []
