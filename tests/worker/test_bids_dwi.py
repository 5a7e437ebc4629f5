"""``fibertensor bids`` from DWIs: raw BIDS (gradients beside each DWI or inherited from the
dataset root) and QSIPrep derivatives (``desc-preproc`` with its brain mask) to BEP016
derivatives, the FODs, peaks and fixels those of the single-subject jobs, read back by pybids."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest
from bids import BIDSLayout

from gpu.fod import dwi_phantom, shell_scheme
from service.cli import main
from tests.file_contents import assert_same_file
from tests.worker.jobs.fod_phantom import AFFINE, write_exact_responses, write_fsl
from worker.bids_dwi import find_dwis, run_bids_fod
from worker.errors import InputError
from worker.io.images import load_image_data, read_image_header, write_image
from worker.jobs.fixels import run_fixels
from worker.jobs.fod import run_fod
from worker.jobs.peaks import PeaksOutputs, run_peaks
from worker.params.fixels import FixelsParams
from worker.params.fod import FodParams
from worker.params.peaks import PeaksParams

SHAPE = (12, 6, 4)
SHELLS = ((1000, 12), (2000, 15))
FOD = FodParams(lmax=4, backend="cpu")
PEAKS = PeaksParams(npeaks=2, backend="cpu", qc=False, metrics=["afd_max"])
FIXELS = FixelsParams(backend="cpu")


def write_dwi(path: Path, seed: int, gradients: bool = True) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    bvals, dirs = shell_scheme(2, SHELLS, seed=0)
    if gradients:
        write_fsl(path.parent, bvals, dirs, stem=path.name.removesuffix(".nii.gz"))
    return write_image(path, dwi_phantom(SHAPE, bvals, dirs, snr=50.0, seed=seed)["dwi"], AFFINE)


@pytest.fixture(scope="module")
def datasets(tmp_path_factory) -> dict:
    """A raw dataset (sub-01 with its gradients beside it, sub-02's session inheriting the
    root's dwi.bval/dwi.bvec) and a QSIPrep one (preprocessed DWI and brain mask of sub-03,
    whose raw DWI is left out), and the group responses."""
    base = tmp_path_factory.mktemp("bids")
    raw, qsiprep = base / "raw", base / "qsiprep"
    dwis = {"01": write_dwi(raw / "sub-01/dwi/sub-01_dwi.nii.gz", 1),
            "02": write_dwi(raw / "sub-02/ses-1/dwi/sub-02_ses-1_acq-hi_dwi.nii.gz", 2, gradients=False)}
    write_fsl(raw, *shell_scheme(2, SHELLS, seed=0))
    folder = qsiprep / "sub-03/dwi"
    dwis["03"] = write_dwi(folder / "sub-03_space-T1w_desc-preproc_dwi.nii.gz", 3)
    write_dwi(qsiprep / "sub-03/dwi/sub-03_dwi.nii.gz", 4)
    mask = np.ones(SHAPE, np.uint8)
    mask[:, 0] = 0
    write_image(folder / "sub-03_space-T1w_desc-brain_mask.nii.gz", mask, AFFINE)
    write_image(folder / "sub-03_space-MNI_desc-brain_mask.nii.gz", np.ones(SHAPE, np.uint8), AFFINE)
    responses = write_exact_responses(base, [0.0, 1000.0, 2000.0])
    return {"raw": raw, "qsiprep": qsiprep, "dwis": dwis, "responses": tuple(responses.values()), "base": base}


def test_finds_raw_and_preprocessed_dwis_with_gradients_and_masks(datasets):
    found = find_dwis(datasets["raw"]) + find_dwis(datasets["qsiprep"])
    assert [(d.path.name, d.bval.name, d.mask and d.mask.name) for d in found] == [
        ("sub-01_dwi.nii.gz", "sub-01_dwi.bval", None),
        ("sub-02_ses-1_acq-hi_dwi.nii.gz", "dwi.bval", None),
        ("sub-03_space-T1w_desc-preproc_dwi.nii.gz", "sub-03_space-T1w_desc-preproc_dwi.bval",
         "sub-03_space-T1w_desc-brain_mask.nii.gz")]
    assert [str(d.folder) for d in found] == ["sub-01/dwi", "sub-02/ses-1/dwi", "sub-03/dwi"]


def test_missing_gradients_are_refused_at_the_door(datasets, tmp_path, capsys):
    dwi = write_dwi(tmp_path / "ds/sub-04/dwi/sub-04_dwi.nii.gz", 4)
    dwi.with_name("sub-04_dwi.bvec").unlink()
    with pytest.raises(InputError) as caught:
        find_dwis(tmp_path / "ds")
    assert caught.value.detail.startswith(f"no {dwi.with_name('sub-04_dwi.bvec')}: each DWI needs its b-values")
    assert main(["bids", str(tmp_path / "ds"), str(tmp_path / "out"), "participant", "--from", "dwi"]) == 2
    assert "no " + str(dwi.with_name("sub-04_dwi.bvec")) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("peaks, refused", [
    (PeaksParams(backend="auto"), "the peaks (backend auto) run on the FODs' backend (cpu)"),
    (PeaksParams(backend="cpu", checksums=False), "leave out --no-checksums")])
def test_peaks_the_fod_job_cannot_honour_are_refused(datasets, tmp_path, peaks, refused):
    """The peaks come from the fod job, on its backend, with the FOD's checksum."""
    with pytest.raises(InputError, match=re.escape(refused)):
        run_bids_fod(datasets["raw"], tmp_path / "out", FOD, peaks)
    assert not (tmp_path / "out").exists()


def image(path) -> np.ndarray:
    return load_image_data(read_image_header(Path(path), "image"))


@pytest.mark.parametrize("dataset, subject", [("raw", "01"), ("qsiprep", "03")])
def test_derivatives_read_back_by_pybids_equal_the_single_subject_jobs(datasets, tmp_path, dataset, subject):
    out = tmp_path / "out"
    fixels = FIXELS if dataset == "qsiprep" else None
    results = run_bids_fod(datasets[dataset], out, FOD, PEAKS, fixels, responses=datasets["responses"])
    dwi = datasets["dwis"][subject]
    assert all(isinstance(files, list) for files in results.values()), results
    layout = BIDSLayout(out, is_derivative=True)
    assert layout.get_dataset_description()["DatasetType"] == "derivative"
    found = {(f.entities.get("label"), f.entities.get("desc"), f.entities["suffix"]): f
             for f in layout.get(subject=subject, suffix="dwimap", extension=".nii.gz")}
    assert sorted(found) == sorted([("WM", "fod", "dwimap"), ("GM", "fod", "dwimap"), ("CSF", "fod", "dwimap"),
                                    *(("WM", d, "dwimap") for d in ("peaks", "amplitudes", "nufo", "afdmax"))])
    wm = found["WM", "fod", "dwimap"]
    space = "_space-T1w" if dataset == "qsiprep" else ""
    assert wm.filename == f"sub-{subject}{space}_model-msmtcsd_param-fod_label-WM_desc-fod_dwimap.nii.gz"
    assert wm.entities["model"] == "msmtcsd" and wm.entities["datatype"] == "dwi"

    # the FODs are fibertensor fod's on that DWI with those responses (and its mask)
    mask = dwi.with_name(f"sub-{subject}_space-T1w_desc-brain_mask.nii.gz") if dataset == "qsiprep" else None
    single = run_fod(dwi, tmp_path / "single", FOD, bval=dwi.with_name(dwi.name.replace(".nii.gz", ".bval")) if
                     subject != "02" else None, bvec=dwi.with_name(dwi.name.replace(".nii.gz", ".bvec")), mask=mask,
                     responses=dict(zip(("wm", "gm", "csf"), datasets["responses"])))
    for label, output in (("WM", "wmfod"), ("GM", "gm"), ("CSF", "csf")):
        ours = found[label, "fod", "dwimap"]
        assert_same_file(Path(ours.path), tmp_path / single["outputs"][output], label)
        metadata = ours.get_metadata()
        assert metadata["Sources"][0] == f"bids:dwi:{dwi.relative_to(datasets[dataset]).as_posix()}"
        assert metadata["Parameters"] == FOD.model_dump()
        assert ("Provenance" in metadata) == (label == "WM")
    assert wm.get_metadata()["Description"].startswith("WM fibre orientation distribution by dwi2fod msmt_csd")

    # the peaks are fibertensor peaks' on that FOD, their sources the FOD in this dataset
    # (computed from the FOD in memory by the fod job: byte for byte, and named after the FOD published)
    reference = PeaksOutputs.in_folder(tmp_path / "peaks")
    expected = run_peaks(tmp_path / single["outputs"]["wmfod"], reference, PEAKS, mask=mask)
    nufo = found["WM", "nufo", "dwimap"]
    assert nufo.filename == f"sub-{subject}{space}_model-msmtcsd_param-nufo_label-WM_desc-nufo_dwimap.nii.gz"
    np.testing.assert_array_equal(image(nufo.path), image(reference.path("count", ".nii.gz")))
    for desc, output in (("peaks", "peaks"), ("amplitudes", "amplitudes"), ("nufo", "count"), ("afdmax", "afd_max")):
        assert_same_file(Path(found["WM", desc, "dwimap"].path), reference.path(output, ".nii.gz"))
    assert nufo.get_metadata()["Sources"][0] == f"bids::{Path(wm.path).relative_to(out).as_posix()}"
    assert "Provenance" not in nufo.get_metadata()
    peaks = found["WM", "peaks", "dwimap"].get_metadata()
    assert peaks["Parameters"] == expected["parameters"]
    sha256 = {wm.filename if name == expected["input"]["fod"] else name: value for name, value in
              expected["input"]["sha256"].items()}
    assert sha256[wm.filename] == hashlib.sha256(Path(wm.path).read_bytes()).hexdigest()
    assert peaks["Provenance"]["input"] == {**expected["input"], "fod": wm.filename, "sha256": sha256}

    fixel_dirs = sorted(p.name for p in Path(wm.path).parent.iterdir() if p.is_dir())
    if fixels is None:
        assert fixel_dirs == []
        return
    assert fixel_dirs == [f"sub-{subject}{space}_model-msmtcsd_param-fixels_label-WM_desc-fixels_dwimap"]
    run_fixels(tmp_path / single["outputs"]["wmfod"], tmp_path / "fixels", FIXELS, mask=mask)
    for file in ("index", "directions", "afd", "peak_amp", "disp"):
        assert_same_file(Path(wm.path).parent / fixel_dirs[0] / f"{file}.nii.gz", tmp_path / "fixels" / f"{file}.nii.gz")
    sidecar = json.loads((Path(wm.path).parent / f"{fixel_dirs[0]}.json").read_text())
    assert sidecar["Parameters"] == FIXELS.model_dump() and sidecar["Description"].startswith("MRtrix3 fixel directory")


def test_normalised_fods_are_the_single_subject_job_s(datasets, tmp_path):
    """``--mtnormalise``: each DWI's compartments normalised within its brain mask, as the fod job
    normalises them, and the balance factors in the WM FOD's provenance."""
    fod = FOD.model_copy(update={"mtnormalise": True})
    out = tmp_path / "out"
    run_bids_fod(datasets["qsiprep"], out, fod, PEAKS, None, responses=datasets["responses"])
    dwi = datasets["dwis"]["03"]
    single = run_fod(dwi, tmp_path / "single", fod, bval=dwi.with_name(dwi.name.replace(".nii.gz", ".bval")),
                     bvec=dwi.with_name(dwi.name.replace(".nii.gz", ".bvec")),
                     mask=dwi.with_name("sub-03_space-T1w_desc-brain_mask.nii.gz"),
                     responses=dict(zip(("wm", "gm", "csf"), datasets["responses"])))
    layout = BIDSLayout(out, is_derivative=True)
    for label, output in (("WM", "wmfod"), ("GM", "gm"), ("CSF", "csf")):
        (found,) = layout.get(subject="03", label=label, desc="fod", suffix="dwimap", extension=".nii.gz")
        assert_same_file(Path(found.path), tmp_path / single["outputs"][output], label)
        assert found.get_metadata()["Parameters"]["mtnormalise"] is True
        if label == "WM":
            assert found.get_metadata()["Provenance"]["mtnormalise"] == single["mtnormalise"]
    assert single["mtnormalise"]["voxels"]["mask"] == 12 * 5 * 4  # the brain mask: y = 0 left out


def test_the_predicted_signal_is_a_dwi_of_its_own(datasets, tmp_path):
    """``--fod-predicted-signal``: the fod job's prediction as ``..._model-msmtcsd_desc-predicted_dwi``
    with the source's gradients beside it, which pybids pairs with it as a DWI's."""
    fod = FOD.model_copy(update={"predicted_signal": True})
    out = tmp_path / "out"
    run_bids_fod(datasets["raw"], out, fod, PEAKS, None, participant_labels=["01"], responses=datasets["responses"])
    dwi = datasets["dwis"]["01"]
    bval, bvec = (dwi.with_name(dwi.name.replace(".nii.gz", suffix)) for suffix in (".bval", ".bvec"))
    single = run_fod(dwi, tmp_path / "single", fod, bval=bval, bvec=bvec,
                     responses=dict(zip(("wm", "gm", "csf"), datasets["responses"])))
    layout = BIDSLayout(out, is_derivative=True)
    (found,) = layout.get(subject="01", desc="predicted", suffix="dwi", extension=".nii.gz")
    assert Path(found.path).name == "sub-01_model-msmtcsd_desc-predicted_dwi.nii.gz"
    assert_same_file(Path(found.path), tmp_path / single["outputs"]["predicted_signal"], "predicted")
    assert Path(layout.get_bval(found.path)).read_bytes() == bval.read_bytes()
    assert Path(layout.get_bvec(found.path)).read_bytes() == bvec.read_bytes()
    assert "dwi2fod -predicted_signal" in found.get_metadata()["Description"]
