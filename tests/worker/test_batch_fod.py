"""``fibertensor batch fod`` and ``fibertensor batch fixels``: the files of one ``fibertensor
fod`` (``fixels``) run per input, byte for byte once inflated, in one process or in a worker process per
GPU; gradients, masks and responses found beside each DWI; inputs refused at the door or
failing alone."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpu.fod import dwi_phantom, shell_scheme
from service.cli import main
from tests.file_contents import assert_same_file, file_content
from tests.worker.io.test_mif import mif_without_our_command
from tests.worker.jobs.fod_phantom import AFFINE, write_exact_responses, write_fsl
from worker.batch import fixels_items, fod_items
from worker.errors import InputError
from worker.io.images import load_image_data, read_image_header, write_image
from worker.io.mif import write_mif

SHAPE = (12, 6, 4)
SHELLS = ((1000, 12), (2000, 15))
BVALUES = [0.0, 1000.0, 2000.0]
FOD_FILES = ("_wmfod.nii.gz", "_gm.nii.gz", "_csf.nii.gz")


def write_subject(folder: Path, name: str, seed: int, form: str) -> Path:
    """A DWI phantom as ``form``: ``fsl`` (``.nii.gz`` with ``.bval``/``.bvec``, a mask and its
    own exact responses beside it), ``grad`` (``.nii`` with an MRtrix ``.b``) or ``mif`` (with
    its ``dw_scheme``)."""
    bvals, dirs = shell_scheme(2, SHELLS, seed=seed)
    dwi = dwi_phantom(SHAPE, bvals, dirs, snr=50.0, seed=seed)["dwi"]
    scheme = np.column_stack([dirs, bvals])
    if form == "mif":
        return write_mif(folder / f"{name}.mif", dwi, AFFINE,
                         keyval={"dw_scheme": "\n".join(",".join(f"{v:.10g}" for v in row) for row in scheme)})
    if form == "grad":
        np.savetxt(folder / f"{name}.b", scheme, fmt="%.10g")
        return write_image(folder / f"{name}.nii", dwi, AFFINE)
    write_fsl(folder, bvals, dirs, stem=name)
    mask = np.ones(SHAPE, np.uint8)
    mask[:, 0] = 0
    write_image(folder / f"{name}_mask.nii.gz", mask, AFFINE)
    write_exact_responses(folder, BVALUES, stem=f"{name}_")
    return write_image(folder / f"{name}.nii.gz", dwi, AFFINE)


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> dict:
    """Three DWIs in the three gradient forms, and a group response; the reference: one
    ``fibertensor fod DWI single/<name>`` per DWI, with the files the batch finds beside it."""
    folder = tmp_path_factory.mktemp("dwis")
    dwis = {name: write_subject(folder, name, seed, form)
            for seed, (name, form) in enumerate((("sub-01", "fsl"), ("sub-02", "grad"), ("sub-03", "mif")))}
    group = write_exact_responses(tmp_path_factory.mktemp("group"), BVALUES)
    single = tmp_path_factory.mktemp("single")
    for name, dwi in dwis.items():
        given = {"sub-01": ["--bval", str(folder / "sub-01.bval"), "--bvec", str(folder / "sub-01.bvec"),
                            "--mask", str(folder / "sub-01_mask.nii.gz"), "--response",
                            *(str(folder / f"sub-01_{t}.txt") for t in ("wm", "gm", "csf"))],
                 "sub-02": ["--grad", str(folder / "sub-02.b")], "sub-03": []}[name]
        if name != "sub-01":
            given += ["--response", str(group["wm"]), str(group["gm"]), str(group["csf"])]
        assert main(["fod", str(dwi), str(single / name), "--backend", "cpu", "--lmax", "4", "--quiet",
                     *given]) == 0
    return {"folder": folder, "dwis": dwis, "group": group, "single": single}


def fod_files(name: str, dwi: Path) -> list[str]:
    suffix = ".mif" if dwi.name.endswith(".mif") else ".nii" if dwi.name.endswith(".nii") else ".nii.gz"
    return [f"{name}_{output}{suffix}" for output in ("wmfod", "gm", "csf")]


def comparable(path: Path) -> bytes:
    """The file's bytes (a ``.gz`` inflated); an MRtrix image's without the command line that wrote it."""
    return mif_without_our_command(file_content(path)) if path.name.endswith(".mif") else file_content(path)


def assert_same_fods(batch: Path, single: Path, dwis: dict[str, Path]) -> None:
    for name, dwi in dwis.items():
        for file in fod_files(name, dwi):
            assert comparable(batch / file) == comparable(single / file), file
        sidecars = [json.loads((folder / f"{name}_fod.json").read_text()) for folder in (batch, single)]
        for sidecar in sidecars:
            assert sidecar.pop("seconds").keys() >= {"read", "fit", "total"}
        assert sidecars[0] == sidecars[1]


def test_items_find_gradients_masks_and_responses_beside_each_dwi(cohort, tmp_path):
    folder, group = cohort["folder"], cohort["group"]
    items = fod_items([folder], tmp_path)
    assert [(item.dwi.name, item.bval and item.bval.name, item.grad and item.grad.name, item.mask and item.mask.name,
             [r.name for r in item.responses]) for item in items] == [
        ("sub-01.nii.gz", "sub-01.bval", None, "sub-01_mask.nii.gz", ["sub-01_wm.txt", "sub-01_gm.txt", "sub-01_csf.txt"]),
        ("sub-02.nii", None, "sub-02.b", None, []),
        ("sub-03.mif", None, None, None, [])]
    assert items[0].prefix == tmp_path / "sub-01"
    # a group response for every DWI; csd takes a DWI's own WM response alone
    assert {item.responses for item in fod_items([folder], tmp_path, tuple(group.values()))} == {tuple(group.values())}
    assert [len(item.responses) for item in fod_items([folder], tmp_path, algorithm="csd")] == [1, 0, 0]


def test_batch_fod_equals_one_fod_run_per_dwi(cohort, tmp_path, capsys):
    """In one process: sub-01 with its own responses beside it, the others with the group's."""
    out = tmp_path / "out"
    dwis = cohort["dwis"]
    assert main(["batch", "fod", str(dwis["sub-01"]), "--out-dir", str(out), "--backend", "cpu", "--lmax", "4",
                 "--processes-per-gpu", "1", "--readers", "2"]) == 0
    assert main(["batch", "fod", str(dwis["sub-02"]), str(dwis["sub-03"]), "--out-dir", str(out), "--backend",
                 "cpu", "--lmax", "4", "--processes-per-gpu", "1", "--response",
                 *(str(p) for p in cohort["group"].values())]) == 0
    assert "2 of 2 inputs written" in capsys.readouterr().out.splitlines()[-1]
    assert_same_fods(out, cohort["single"], dwis)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        file for name, dwi in dwis.items() for file in [*fod_files(name, dwi), f"{name}_fod.json"])


def test_batch_fod_on_two_gpus(cohort, tmp_path):
    """--gpus 0,1 (a worker process per device; the CPU backend here): the same files."""
    out = tmp_path / "out"
    dwis = {name: cohort["dwis"][name] for name in ("sub-02", "sub-03")}
    assert main(["batch", "fod", *map(str, dwis.values()), "--out-dir", str(out), "--backend", "cpu", "--lmax", "4",
                 "--gpus", "0,1", "--processes-per-gpu", "1", "--readers", "1", "--writers", "1", "--quiet",
                 "--response", *(str(p) for p in cohort["group"].values())]) == 0
    assert_same_fods(out, cohort["single"], dwis)


def test_batch_fod_reports_its_stages(cohort, tmp_path):
    """A fod item's report times its stages; ``estimate``, the part of ``compute`` that
    estimated responses, is 0 where the group's were given."""
    from worker.batch import run_batch
    from worker.params.fod import FodParams

    [item] = fod_items([cohort["dwis"]["sub-02"]], tmp_path, tuple(cohort["group"].values()))
    [report] = run_batch([item], FodParams(backend="cpu", lmax=4), readers=1, writers=1)
    assert report.ok and list(report.seconds) == ["read", "compute", "estimate", "write"]
    assert report.seconds["estimate"] == 0 and report.seconds["compute"] > 0 and report.seconds["read"] > 0


def test_missing_gradients_are_refused_at_the_door(cohort, tmp_path, capsys):
    folder = tmp_path / "in"
    folder.mkdir()
    for name in ("sub-01.nii.gz", "sub-01.bval", "sub-02.nii"):
        shutil.copy(cohort["folder"] / name, folder / name)
    with pytest.raises(InputError) as caught:
        fod_items([folder], tmp_path / "out")
    assert caught.value.detail.startswith(
        f"{str(folder / 'sub-01.nii.gz')!r} has sub-01.bval but no sub-01.bvec beside it; "
        f"{str(folder / 'sub-02.nii')!r} has no sub-02.bval and sub-02.bvec beside it: put each DWI's FSL b-values")
    assert main(["batch", "fod", str(folder), "--out-dir", str(tmp_path / "out")]) == 2
    assert "has no sub-02.bval and sub-02.bvec beside it" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_a_failing_dwi_fails_alone(cohort, tmp_path, capsys):
    """A DWI cut short and one whose responses cannot be estimated (the tiny phantom, the
    default percentages) are listed; the other's files are written, and theirs are not."""
    folder, out = tmp_path / "in", tmp_path / "out"
    folder.mkdir()
    for name in ("sub-01.nii.gz", "sub-01.bval", "sub-01.bvec", "sub-01_mask.nii.gz", "sub-01_wm.txt",
                 "sub-01_gm.txt", "sub-01_csf.txt", "sub-02.b", "sub-03.mif"):
        shutil.copy(cohort["folder"] / name, folder / name)
    whole = (cohort["folder"] / "sub-02.nii").read_bytes()
    (folder / "sub-02.nii").write_bytes(whole[: len(whole) // 2])
    assert main(["batch", "fod", str(folder), "--out-dir", str(out), "--backend", "cpu", "--lmax", "4",
                 "--processes-per-gpu", "1", "--quiet"]) == 1
    failures = capsys.readouterr().err.splitlines()
    assert failures[0] == "fibertensor: 2 of 3 inputs failed:"
    assert failures[1].startswith(f"  {folder / 'sub-02.nii'}: Truncated file: the header declares ")
    assert failures[2].startswith(f"  {folder / 'sub-03.mif'}: Responses cannot be estimated: ")
    assert failures[2].endswith("and pass them with --response")
    assert sorted(p.name for p in out.iterdir()) == sorted([*fod_files("sub-01", folder / "sub-01.nii.gz"),
                                                            "sub-01_fod.json"])


def test_batch_fod_with_peaks_equals_one_fod_peaks_run_per_dwi(cohort, tmp_path):
    """--peaks and its options reach every input: the FODs, peaks, metrics and fixel
    directory of one ``fibertensor fod --peaks`` per DWI, byte for byte, and their sidecars
    but for the timings."""
    options = ["--backend", "cpu", "--lmax", "4", "--response", *(str(p) for p in cohort["group"].values()), "--peaks",
               "--peaks-npeaks", "2", "--peaks-relative-threshold", "0.2", "--peaks-metrics", "afd_max",
               "--no-peaks-qc", "--peaks-format", "fixel"]
    dwis = {name: cohort["dwis"][name] for name in ("sub-02", "sub-03")}
    single = tmp_path / "single"
    single.mkdir()
    for name, dwi in dwis.items():
        gradients = ["--grad", str(cohort["folder"] / "sub-02.b")] if name == "sub-02" else []
        assert main(["fod", str(dwi), str(single / name), "--quiet", *gradients, *options]) == 0
    out = tmp_path / "out"
    assert main(["batch", "fod", *map(str, dwis.values()), "--out-dir", str(out), "--processes-per-gpu", "1",
                 "--quiet", *options]) == 0

    files = sorted(path.relative_to(single).as_posix() for path in single.rglob("*") if path.is_file())
    assert files == sorted(path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file())
    for name, dwi in dwis.items():
        # the peaks job writes NIfTI as .nii.gz whatever the FOD's compression
        fod_suffix, suffix = (".mif", ".mif") if name == "sub-03" else (".nii", ".nii.gz")
        assert {f"{name}_{output}{suffix}" for output in ("peaks", "amplitudes", "count", "afd_max")} | {
            f"{name}_wmfod{fod_suffix}", f"{name}_fixels/directions.mif",
            f"{name}_peaks.json"} <= set(files)
    for file in files:
        if file.endswith(".json"):
            sidecars = [json.loads((folder / file).read_text()) for folder in (out, single)]
            for folder, sidecar in zip((out, single), sidecars):
                sidecar.pop("seconds")
                if sidecar["job"] == "peaks":
                    # the FOD's own: a .mif's header records the command that wrote it
                    fod = sidecar["input"]["fod"]
                    written = hashlib.sha256((folder / fod).read_bytes()).hexdigest()
                    assert sidecar["input"]["sha256"].pop(fod) == written
            assert sidecars[0] == sidecars[1], file
        else:
            assert comparable(out / file) == comparable(single / file), file
    sidecar = json.loads((out / "sub-02_fod.json").read_text())
    assert sidecar["parameters"]["peaks_npeaks"] == 2 and sidecar["peaks"]["sidecar"] == "sub-02_peaks.json"
    assert json.loads((out / "sub-02_peaks.json").read_text())["parameters"]["npeaks"] == 2


def test_batch_fixels_equals_one_fixels_run_per_fod(cohort, tmp_path):
    """The WM FODs of the reference fod runs."""
    fods = tmp_path / "fods"
    fods.mkdir()
    for name in ("sub-01", "sub-02"):
        source = cohort["single"] / f"{name}_wmfod{'.nii.gz' if name == 'sub-01' else '.nii'}"
        shutil.copy(source, fods / source.name)
    shutil.copy(cohort["folder"] / "sub-01_mask.nii.gz", fods / "sub-01_wmfod_mask.nii.gz")
    items = fixels_items([fods], tmp_path / "batch")
    assert [(item.fod.name, item.mask and item.mask.name, item.out_dir.name) for item in items] == [
        ("sub-01_wmfod.nii.gz", "sub-01_wmfod_mask.nii.gz", "sub-01_wmfod_fixels"),
        ("sub-02_wmfod.nii", None, "sub-02_wmfod_fixels")]
    single = tmp_path / "single"
    for item in items:
        assert main(["fixels", str(item.fod), str(single / item.out_dir.name), "--backend", "cpu", "--quiet",
                     *(["--mask", str(item.mask)] if item.mask else [])]) == 0
    # in a worker process per GPU (the pipeline in one process: the fod tests above)
    out = tmp_path / "batch"
    assert main(["batch", "fixels", str(fods), "--out-dir", str(out), "--backend", "cpu", "--quiet", "--gpus", "0,1",
                 "--processes-per-gpu", "1", "--readers", "1"]) == 0
    for item in items:
        files = sorted(p.name for p in (single / item.out_dir.name).iterdir())
        assert files == sorted(p.name for p in (out / item.out_dir.name).iterdir())
        assert files == sorted(f"{name}.{'nii.gz' if item.fod.name.endswith('.gz') else 'nii'}"
                               for name in ("index", "directions", "afd", "peak_amp", "disp"))
        for file in files:
            assert_same_file(out / item.out_dir.name / file, single / item.out_dir.name / file)
        sidecars = [json.loads((folder / f"{item.out_dir.name}.json").read_text()) for folder in (out, single)]
        for sidecar in sidecars:
            assert sidecar.pop("seconds").keys() == {"read", "segment", "write", "total"}
        assert sidecars[0] == sidecars[1] and sidecars[0]["fixels"] > 0
    masked = load_image_data(read_image_header(out / "sub-01_wmfod_fixels" / "index.nii.gz", "index"))
    assert (masked[:, 0, :, 0] == 0).all() and (masked[:, 1:, :, 0] > 0).any()
