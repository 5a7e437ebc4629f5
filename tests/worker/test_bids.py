"""BIDS-derivatives batches: FODs found by their BEP016 and QSIRecon/MRtrix3 names, one job
per subject and session through the batch pipeline (in this process or in worker processes),
the files of one peaks job per FOD, outputs indexed by pybids as a derivatives dataset."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from bids import BIDSLayout

from gpu.peaks.phantom import fod_phantom
from tests.file_contents import file_content
from tests.worker.io.test_mif import mif_without_our_command
from tests.worker.jobs.test_peaks import rotated_affine
from worker.batch import BatchItem, run_batch, up_to_date
from worker.bids import derivative_name, find_fods, publish_job, run_bids_peaks, write_dataset_description
from worker.errors import InputError
from worker.io.images import load_image_data, read_image_header, write_image
from worker.jobs.peaks import PeaksOutputs, run_peaks
from worker.params import PeaksParams

GRID = (3, 3, 2)
PARAMS = PeaksParams(npeaks=2, backend="cpu")
MAPS = ("peaks", "amplitudes", "nufo", "afdmax", "afdtotal", "afdsum", "peakfraction", "rgb")
#: each map's Description, as its own sidecar must give it
DESCRIPTIONS = {"peaks": "Fiber directions", "amplitudes": "FOD amplitude at each peak", "nufo": "Number of fiber",
                "afdmax": "FOD amplitude of the largest", "afdtotal": "Integral of the FOD", "afdsum": "Sum of the",
                "peakfraction": "Each peak's amplitude", "rgb": "Directionally encoded colour",
                "qc": "Quality-control picture"}


def make_dataset(root: Path, grid: tuple[int, int, int] = GRID) -> dict[tuple[str, str], Path]:
    """Two subjects, two sessions each, in the names users have: BEP016 NIfTI with brain
    masks (sub-01), QSIRecon/MRtrix3 ``desc-wmfod`` and multi-tissue ``label-WM`` MRtrix
    images without masks (sub-02), plus files that are not white-matter FODs."""
    root.mkdir(parents=True)
    (root / "dataset_description.json").write_text(json.dumps(
        {"Name": "FODs", "BIDSVersion": "1.10.0", "DatasetType": "derivative", "GeneratedBy": [{"Name": "MRtrix3"}]}))
    names = {("01", "1"): "sub-01_ses-1_model-csd_param-fod_dwimap.nii.gz",
             ("01", "2"): "sub-01_ses-2_model-csd_param-fod_dwimap.nii.gz",
             ("02", "1"): "sub-02_ses-1_space-T1w_desc-wmfod_dwimap.mif.gz",
             ("02", "2"): "sub-02_ses-2_model-msmtcsd_param-fod_label-WM_dwimap.mif.gz"}
    fods = {}
    for seed, ((subject, session), name) in enumerate(names.items()):
        folder = root / "derivatives" / "mrtrix" / f"sub-{subject}" / f"ses-{session}" / "dwi"
        folder.mkdir(parents=True)
        fods[subject, session] = write_image(folder / name, fod_phantom(grid, 4, seed=seed)["sh"].astype(np.float32),
                                             rotated_affine())
        if subject == "01":
            mask = np.ones(grid, np.uint8)
            mask[0] = 0
            write_image(folder / f"sub-01_ses-{session}_desc-brain_mask.nii.gz", mask, rotated_affine())
        else:
            write_image(folder / f"sub-02_ses-{session}_model-msmtcsd_param-fod_label-CSF_dwimap.mif.gz",
                        np.ones((*grid, 1), np.float32), rotated_affine())
        (folder / f"sub-{subject}_ses-{session}_dwi.bval").write_text("0 1000\n")
    return fods


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("bids") / "ds"
    fods = make_dataset(root)
    output = root / "derivatives" / "fibertensor"
    results = run_bids_peaks(root, output, PARAMS)
    return {"root": root, "fods": fods, "output": output, "results": results}


def test_finds_the_white_matter_fods_and_their_masks(dataset):
    found = find_fods(dataset["root"], exclude=dataset["output"])
    assert [f.path for f in found] == list(dataset["fods"].values())
    masks = [f.mask.name if f.mask else None for f in found]
    assert masks == ["sub-01_ses-1_desc-brain_mask.nii.gz", "sub-01_ses-2_desc-brain_mask.nii.gz", None, None]
    assert [str(f.folder) for f in found] == ["sub-01/ses-1/dwi", "sub-01/ses-2/dwi", "sub-02/ses-1/dwi",
                                              "sub-02/ses-2/dwi"]


def test_outputs_are_a_derivatives_dataset_pybids_indexes(dataset):
    # pybids as installed: it knows desc- but not yet BEP016's param-
    layout = BIDSLayout(dataset["output"], is_derivative=True)
    description = layout.get_dataset_description()
    assert description["DatasetType"] == "derivative"
    assert description["GeneratedBy"][0]["Name"] == "fibertensor" and description["GeneratedBy"][0]["Version"]
    assert layout.get_subjects() == ["01", "02"] and layout.get_sessions() == ["1", "2"]
    for (subject, session), fod in dataset["fods"].items():
        extension = ".nii.gz" if subject == "01" else ".mif.gz"
        files = layout.get(subject=subject, session=session, suffix="dwimap", extension=extension)
        assert sorted(f.entities["desc"] for f in files) == sorted(MAPS)
        qc = layout.get(subject=subject, session=session, desc="qc", extension=".png")
        assert len(qc) == 1 and qc[0].entities["datatype"] == "dwi"
        # every file's metadata is its own sidecar's, not another map's
        for image in [*files, *qc]:
            metadata = image.get_metadata()
            desc = image.entities["desc"]
            assert metadata["Description"].startswith(DESCRIPTIONS[desc]), (image.filename, metadata["Description"])
            assert ("Provenance" in metadata) == (desc == "peaks"), image.filename
            assert f"param-{desc}_" in image.filename or desc == "qc"
        nufo = layout.get(subject=subject, session=session, desc="nufo", extension=extension)[0]
        model = {("01", "1"): "csd", ("01", "2"): "csd", ("02", "1"): None, ("02", "2"): "msmtcsd"}[subject, session]
        assert nufo.entities.get("model") == model

        # The files are the peaks job's on that FOD (with its mask where there is one).
        mask = fod.parent / f"sub-01_ses-{session}_desc-brain_mask.nii.gz" if subject == "01" else None
        reference = PeaksOutputs.in_folder(dataset["root"].parent / f"reference-{subject}-{session}")
        run_peaks(fod, reference, PARAMS, mask=mask)
        np.testing.assert_array_equal(load_image_data(read_image_header(nufo.path, "nufo")),
                                      load_image_data(read_image_header(reference.path("count", extension), "count")))
        sidecar = json.loads(Path(nufo.path.replace(extension, ".json")).read_text())
        sources = [f"bids:fods:{p.relative_to(dataset['root']).as_posix()}" for p in (fod, mask) if p is not None]
        assert sidecar["Sources"] == sources and sidecar["Parameters"] == PARAMS.model_dump()
        assert nufo.get_metadata()["Sources"] == sources  # pybids pairs the sidecar with its file
    links = json.loads((dataset["output"] / "dataset_description.json").read_text())["DatasetLinks"]
    assert links == {"fods": dataset["root"].resolve().as_uri()}


def test_output_names_keep_the_source_entities_in_their_order(dataset):
    found = {(f.subject, f.session): f for f in find_fods(dataset["root"], exclude=dataset["output"])}
    assert derivative_name(found["01", "1"], "afd_max", ".nii.gz") == (
        "sub-01_ses-1_model-csd_param-afdmax_desc-afdmax_dwimap.nii.gz")
    assert derivative_name(found["02", "1"], "count", ".mif.gz") == (
        "sub-02_ses-1_space-T1w_param-nufo_desc-nufo_dwimap.mif.gz")
    # QSIRecon's order, param- before label-, stays
    assert derivative_name(found["02", "2"], "peaks", ".mif.gz") == (
        "sub-02_ses-2_model-msmtcsd_param-peaks_label-WM_desc-peaks_dwimap.mif.gz")
    assert derivative_name(found["02", "2"], "pam5", ".pam5") == (
        "sub-02_ses-2_model-msmtcsd_param-peaks_label-WM_desc-pam5_dwimap.pam5")
    assert derivative_name(found["02", "2"], "qc", ".png") == "sub-02_ses-2_model-msmtcsd_label-WM_desc-qc_dwimap.png"
    assert sorted(p.name for p in (dataset["output"] / "sub-02/ses-2/dwi").iterdir() if p.suffix != ".json") == sorted(
        [f"sub-02_ses-2_model-msmtcsd_param-{m}_label-WM_desc-{m}_dwimap.mif.gz" for m in MAPS]
        + ["sub-02_ses-2_model-msmtcsd_label-WM_desc-qc_dwimap.png"])
    peaks = json.loads((dataset["output"] / "sub-01/ses-1/dwi/sub-01_ses-1_model-csd_param-peaks_desc-peaks_dwimap.json")
                       .read_text())
    assert peaks["Provenance"]["input"]["mask"] == "sub-01_ses-1_desc-brain_mask.nii.gz"
    assert not (dataset["output"] / ".work").exists()


def test_participant_and_session_labels_filter(tmp_path):
    root = tmp_path / "ds"
    make_dataset(root)
    results = run_bids_peaks(root, tmp_path / "out", PeaksParams(npeaks=2, backend="cpu", metrics=["none"]),
                             participant_labels=["sub-02"], session_labels=["2"])
    assert [p.name for p in results] == ["sub-02_ses-2_model-msmtcsd_param-fod_label-WM_dwimap.mif.gz"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["dataset_description.json", "sub-02"]
    assert [p.name for p in (tmp_path / "out" / "sub-02").iterdir()] == ["ses-2"]


def test_nothing_matching_says_what_it_looked_for(tmp_path):
    root = tmp_path / "ds"
    make_dataset(root)
    with pytest.raises(InputError) as caught:
        find_fods(root, participant_labels=["03"])
    detail = caught.value.detail
    assert "participants 03" in detail and "_param-fod_dwimap" in detail and "_desc-wmfod_" in detail
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="looked for"):
        run_bids_peaks(empty, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_output_folder_of_another_dataset_is_refused(tmp_path):
    root = tmp_path / "ds"
    make_dataset(root)
    with pytest.raises(InputError, match="choose an empty OUTPUT_DIR"):
        run_bids_peaks(root, root, PARAMS)


COHORT_GRID = (7, 6, 5)


def published_files(folder: Path) -> dict[str, bytes]:
    """Every file below ``folder`` by relative path; the peaks sidecars without the timings,
    MRtrix images as their header and data without the command that wrote them; a ``.gz`` by
    what it inflates to (``tests/file_contents.py``)."""
    files = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        content = file_content(path)
        if path.name.endswith("_desc-peaks_dwimap.json"):
            sidecar = json.loads(content)
            assert sidecar["Provenance"].pop("seconds").keys() >= {"read", "write", "total"}
            content = json.dumps(sidecar, sort_keys=True).encode()
        elif path.name.endswith((".mif", ".mif.gz")):
            content = mif_without_our_command(content)
        files[path.relative_to(folder).as_posix()] = content
    return files


@pytest.fixture(scope="module")
def cohort(tmp_path_factory) -> dict:
    """The dataset on a 7×6×5 grid, and a third subject whose FOD is cut short; the
    reference: one :func:`run_peaks` after the other, each published as it ends (the
    sequential BIDS app this pipeline replaces)."""
    root = tmp_path_factory.mktemp("cohort") / "ds"
    fods = make_dataset(root, COHORT_GRID)
    folder = root / "derivatives" / "mrtrix" / "sub-03" / "dwi"
    folder.mkdir(parents=True)
    broken = write_image(folder / "sub-03_model-csd_param-fod_dwimap.nii.gz",
                         fod_phantom(COHORT_GRID, 4, seed=9)["sh"].astype(np.float32), rotated_affine())
    whole = broken.read_bytes()
    broken.write_bytes(whole[: len(whole) // 2])
    reference = root.parent / "reference"
    reference.mkdir()
    write_dataset_description(reference, root)
    for fod in find_fods(root):
        work = root.parent / "work" / fod.path.name
        if fod.path != broken:
            sidecar = run_peaks(fod.path, PeaksOutputs.in_folder(work), PARAMS, mask=fod.mask)
            publish_job(fod, root, work, sidecar, reference)
        shutil.rmtree(work, ignore_errors=True)
    return {"root": root, "fods": fods, "broken": broken, "reference": published_files(reference)}


@pytest.mark.parametrize("processes", [1, 2])
def test_pipeline_publishes_what_one_job_after_the_other_does(cohort, tmp_path, processes):
    """In this process and in two worker processes: every file byte for byte the sequential
    app's; the cut FOD fails alone, with the reader's message, and publishes nothing."""
    lines = []
    out = tmp_path / "out"
    results = run_bids_peaks(cohort["root"], out, PARAMS, log=lines.append, processes=processes)
    assert published_files(out) == cohort["reference"]
    assert list(results) == [*cohort["fods"].values(), cohort["broken"]]
    assert results[cohort["broken"]].startswith("Truncated or damaged file: ")
    assert not (out / "sub-03").exists() and not (out / ".work").exists()
    for fod in cohort["fods"].values():
        assert len(results[fod]) == 9 and all(path.is_file() for path in results[fod])
    # one line per FOD as it is published, counting up
    assert [line.split("]")[0] for line in lines] == [f"[{n}/5" for n in range(1, 6)]
    assert f"] {cohort['broken'].name}: Truncated or damaged file: " in "".join(lines)
    assert "] sub-01_ses-1_model-csd_param-fod_dwimap.nii.gz: 9 files in sub-01/ses-1/dwi" in "".join(lines)


def test_a_brain_mask_leaves_its_outside_voxels_without_peaks(cohort, tmp_path):
    """sub-01's masks zero its x = 0 slab: no peaks there in the published maps (as one
    run_peaks with the mask gives: the test above); the batch item's mask counts in --resume."""
    out = tmp_path / "out"
    run_bids_peaks(cohort["root"], out, PARAMS, participant_labels=["01"], session_labels=["1"])
    stem = out / "sub-01/ses-1/dwi/sub-01_ses-1_model-csd_param-"
    count = load_image_data(read_image_header(Path(f"{stem}nufo_desc-nufo_dwimap.nii.gz"), "nufo"))
    peaks = load_image_data(read_image_header(Path(f"{stem}peaks_desc-peaks_dwimap.nii.gz"), "peaks"))
    assert count.shape == COHORT_GRID and (count[0] == 0).all() and (count[1:] > 0).all()
    assert np.isnan(peaks[0]).all() and np.isfinite(peaks[1:, ..., :3]).all()

    fod = cohort["fods"]["01", "1"]
    item = BatchItem(fod, PeaksOutputs.with_prefix(tmp_path / "batch" / "sub-01"),
                     fod.parent / "sub-01_ses-1_desc-brain_mask.nii.gz")
    assert [r.ok for r in run_batch([item], PARAMS)] == [True]
    assert up_to_date(item, PARAMS) and not up_to_date(dataclasses.replace(item, mask=None), PARAMS)
    later = item.outputs.sidecar.stat().st_mtime + 10
    os.utime(item.mask, (later, later))  # the mask changed since
    assert not up_to_date(item, PARAMS)
