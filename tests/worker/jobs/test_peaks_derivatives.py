"""What the peaks job writes for users of other tools: fODF metric maps, the QC picture,
MRtrix images, fixel directories and .pam5 files (each read back by the tool that owns the
format), and the provenance in its sidecar."""

from __future__ import annotations

import hashlib
import json
import math
import tarfile

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.fodf_metrics import METRIC_NAMES
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from gpu.sh_basis import convert_sh_basis, real_sh_matrix
from tests.worker.io.conftest import mrtrix  # noqa: F401  (the fixture)
from tests.worker.jobs.test_peaks import SHAPE, rotated_affine, save
from worker.io.images import load_image_data, read_image_header
from worker.job_kinds import JobContext, get_job_kind
from worker.jobs.peaks import PeaksOutputs, engine_options, image_suffixes, run_peaks
from worker.params import PeaksParams, params_from_text
from worker.params.peaks import METRICS
from worker.qc_picture import write_qc_png


@pytest.fixture(scope="module")
def phantom(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("fod")
    sh = fod_phantom(SHAPE, 8, seed=4)["sh"].astype(np.float32)
    sh[1, 1, 1] = np.nan
    mask = np.ones(SHAPE, np.uint8)
    mask[0] = 0
    return {"sh": sh, "mask": mask.astype(bool), "nii": save(sh, folder / "fod.nii.gz"),
            "mask_nii": save(mask, folder / "mask.nii.gz"), "folder": folder}


def read(path) -> np.ndarray:
    return load_image_data(read_image_header(path, "output"), np.float64)


def test_metric_names_are_declared_once_for_the_schema():
    assert METRICS == METRIC_NAMES


def test_metrics_beside_the_peaks_match_their_float64_definitions(phantom, tmp_path):
    outputs = PeaksOutputs.with_prefix(tmp_path / "case")
    params = PeaksParams(relative_threshold=0.2)
    run_peaks(phantom["nii"], outputs, params, mask=phantom["mask_nii"])
    expected = sshopm_peaks(phantom["sh"], mask=phantom["mask"], options=engine_options(params), backend="cpu")
    count = expected.count
    reported = np.arange(3) < count[..., None]
    amplitudes = np.where(reported, expected.amplitudes, 0.0).astype(np.float64)
    afd_sum = amplitudes.sum(axis=-1)
    # The definitions of issue 11 in float64, independently of gpu.peaks.fodf_metrics.
    reference = {
        "afd_max": amplitudes[..., 0],
        "afd_total": math.sqrt(4 * math.pi) * phantom["sh"][..., 0].astype(np.float64),
        "afd_sum": afd_sum,
        "peak_fraction": np.divide(amplitudes, afd_sum[..., None], out=np.zeros_like(amplitudes),
                                   where=afd_sum[..., None] > 0),
    }
    for name, values in reference.items():
        written = read(tmp_path / f"case_{name}.nii.gz")
        assert written.shape == values.shape, name
        np.testing.assert_allclose(written, values, rtol=1e-5, atol=1e-7, err_msg=name)
    first = np.where(reported[..., :1], np.abs(expected.directions[..., 0, :]), 0.0)
    rgb_reference = 255.0 * first * (amplitudes[..., 0] / amplitudes[..., 0].max())[..., None]
    rgb = np.asarray(nib.load(tmp_path / "case_rgb.nii.gz").dataobj)
    assert rgb.dtype == np.uint8 and rgb.shape == (*SHAPE, 3)
    assert np.abs(rgb.astype(float) - np.floor(rgb_reference)).max() <= 1  # truncation, as scilpy writes it
    np.testing.assert_array_equal(np.asarray(nib.load(tmp_path / "case_count.nii.gz").dataobj), count)
    assert np.isnan(read(tmp_path / "case_afd_total.nii.gz")[1, 1, 1])


@pytest.mark.parametrize("metrics, written", [("none", []), ("rgb,afd_max", ["afd_max", "rgb"]), ("all", METRICS)])
def test_metrics_option_chooses_the_maps(phantom, tmp_path, metrics, written):
    params = params_from_text(PeaksParams, {"metrics": metrics, "npeaks": "2"})
    sidecar = run_peaks(phantom["nii"], PeaksOutputs.in_folder(tmp_path), params)
    maps = ["peaks", "amplitudes", "count", *written]
    assert list(sidecar["outputs"]) == [*maps, "qc"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([f"{m}.nii.gz" for m in maps] + ["qc.png", "peaks.json"])
    assert sidecar["parameters"]["metrics"] == list(written)


@pytest.mark.parametrize("text", ["all,rgb", "nufo", "none,afd_max"])
def test_metrics_option_refuses_unknown_names_and_mixes(text):
    with pytest.raises(ValueError, match="metrics"):
        params_from_text(PeaksParams, {"metrics": text})


def test_sidecar_provenance(phantom, tmp_path):
    sidecar = run_peaks(phantom["nii"], PeaksOutputs.in_folder(tmp_path), mask=phantom["mask_nii"])
    on_disk = json.loads((tmp_path / "peaks.json").read_text())
    assert on_disk["input"]["sha256"] == {
        path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in (phantom["nii"], phantom["mask_nii"])}
    assert on_disk["generated_by"]["Name"] == "fibertensor"
    assert on_disk["generated_by"]["Version"] == on_disk["versions"]["fibertensor"]
    assert on_disk["device"] == "cpu" and on_disk["parameters"] == PeaksParams().model_dump()
    assert {"read", "peaks_total", "write", "total"} <= set(on_disk["seconds"])
    assert on_disk == json.loads(json.dumps(sidecar, default=float))


@pytest.mark.parametrize("basis, frame", [("mrtrix", "world"), ("dipy", "voxel")])
def test_qc_picture_draws_the_directions_in_the_basis_frame(phantom, tmp_path, basis, frame):
    sh = phantom["sh"] if basis == "mrtrix" else convert_sh_basis(phantom["sh"], "mrtrix", "dipy")
    path = save(sh, tmp_path / "fod.nii.gz")
    run_peaks(path, PeaksOutputs.with_prefix(tmp_path / "case"), PeaksParams(basis=basis))
    result = sshopm_peaks(sh, basis=basis, backend="cpu")
    rgb = np.asarray(nib.load(tmp_path / "case_rgb.nii.gz").dataobj)
    count = np.asarray(nib.load(tmp_path / "case_count.nii.gz").dataobj)
    title = f"fod.nii.gz: lmax 8, K = 3 peaks, {basis} basis"
    write_qc_png(tmp_path / "expected.png", rgb, result.directions[..., 0, :], count, (2.0, 2.0, 2.5), title,
                 affine=rotated_affine(), directions_frame=frame, npeaks=3)
    assert (tmp_path / "case_qc.png").read_bytes() == (tmp_path / "expected.png").read_bytes()


def test_output_suffixes_follow_the_input_unless_format_says():
    assert image_suffixes("a.nii", []) == [".nii.gz"]
    assert image_suffixes("a.mif", []) == [".mif"]
    assert image_suffixes("a.mif.gz", ["fixel"]) == [".mif.gz"]
    assert image_suffixes("a.nii.gz", PeaksParams(format=["mif", "nifti", "pam5"]).format) == [".nii.gz", ".mif.gz"]


def test_mif_gz_in_gives_mif_gz_out_that_mrtrix_reads_as_the_nifti_run(phantom, tmp_path, mrtrix):
    mrtrix("mrconvert", phantom["nii"], tmp_path / "fod.mif.gz")
    mrtrix("mrconvert", phantom["mask_nii"], tmp_path / "mask.mif")
    from_nii = run_peaks(phantom["nii"], PeaksOutputs.in_folder(tmp_path / "nii"), mask=phantom["mask_nii"])
    from_mif = run_peaks(tmp_path / "fod.mif.gz", PeaksOutputs.in_folder(tmp_path / "mif"), mask=tmp_path / "mask.mif")
    assert from_mif["outputs"] == {name: [n.replace(".nii.gz", ".mif.gz") for n in names]
                                   for name, names in from_nii["outputs"].items()}
    for name, names in from_mif["outputs"].items():
        if name == "qc":
            continue
        mrtrix("mrconvert", tmp_path / "mif" / names[0], tmp_path / f"{name}.nii")
        ours = nib.load(tmp_path / "nii" / from_nii["outputs"][name][0])
        theirs = nib.load(tmp_path / f"{name}.nii")
        np.testing.assert_array_equal(np.asarray(theirs.dataobj), np.asarray(ours.dataobj), err_msg=name)
        np.testing.assert_allclose(theirs.affine, ours.affine, atol=1e-4)
    # The input's key-value pairs are kept, as MRtrix3 commands keep them.
    assert "mrconvert" in mrtrix("mrinfo", tmp_path / "mif" / "peaks.mif.gz", "-property", "command_history")


def test_fixel_directory_is_fod2fixels(phantom, tmp_path, mrtrix):
    params = PeaksParams(format=["mif", "fixel"])
    sidecar = run_peaks(phantom["nii"], PeaksOutputs.with_prefix(tmp_path / "case"), params, mask=phantom["mask_nii"])
    assert sidecar["outputs"]["fixel"] == ["case_fixels"] and sidecar["outputs"]["peaks"] == ["case_peaks.mif.gz"]
    folder = tmp_path / "case_fixels"
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{name}.mif.gz" for name in ("index", "directions", "afd", "peak_amp", "disp"))
    # fod2fixel -afd -peak_amp -disp with its defaults, on the same FOD and mask
    mrtrix("fod2fixel", phantom["nii"], tmp_path / "theirs", "-mask", phantom["mask_nii"], "-afd", "afd.mif",
           "-peak_amp", "peak_amp.mif", "-disp", "disp.mif")
    maps = {}
    for who, directory, suffix in (("ours", folder, "mif.gz"), ("theirs", tmp_path / "theirs", "mif")):
        mrtrix("fixel2peaks", directory, tmp_path / f"{who}_peaks.nii", "-nan")
        maps[who, "peaks"] = nib.load(tmp_path / f"{who}_peaks.nii").get_fdata()
        for name, operation in (("afd", "count"), ("afd", "sum"), ("peak_amp", "max"), ("disp", "mean")):
            out = tmp_path / f"{who}_{name}_{operation}.nii"
            mrtrix("fixel2voxel", directory / f"{name}.{suffix}", operation, out)
            maps[who, name, operation] = nib.load(out).get_fdata()
    nufo = maps["ours", "afd", "count"]
    np.testing.assert_array_equal(nufo, maps["theirs", "afd", "count"])
    assert nufo.sum() > 0 and not nufo[0].any() and nufo[1, 1, 1] == 0  # masked out; non-finite
    np.testing.assert_allclose(maps["ours", "peaks"], maps["theirs", "peaks"], atol=1e-6)
    for key in (("afd", "sum"), ("peak_amp", "max"), ("disp", "mean")):
        np.testing.assert_allclose(maps["ours", *key], maps["theirs", *key], rtol=1e-6, atol=0, err_msg=str(key))


def test_fixel_directory_of_a_dipy_fod_is_in_scanner_space(tmp_path, mrtrix):
    """A DIPY-basis FOD lives along the image axes; its fixel directory, as every fixel
    directory, holds scanner-space directions: fod2fixel's on the same FOD rotated into
    scanner space and re-expressed in MRtrix3's basis (on the 20° oblique grid)."""
    from tests.gpu.fixels.mrtrix_fixels import read_fixel_directory
    from worker.jobs.peaks.arrays import scanner_to_image_axes

    along_axes = fod_phantom((4, 3, 2), 8, seed=9)["sh"]  # MRtrix3's basis, in the image axes' frame
    affine = rotated_affine()
    path = save(convert_sh_basis(along_axes, "mrtrix", "dipy").astype(np.float32), tmp_path / "fod.nii", affine)
    run_peaks(path, PeaksOutputs.with_prefix(tmp_path / "case"), PeaksParams(basis="dipy", format=["fixel"]))
    ours = read_fixel_directory(tmp_path / "case_fixels")

    # f_scanner(u) = f_axes(Rᵀu): B(u)·T = B(Rᵀu) by least squares on many directions (exact
    # for an SH series), so the scanner-frame coefficients are T·c
    rotation = scanner_to_image_axes(affine)
    u = np.random.default_rng(0).normal(size=(400, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    to_scanner = np.linalg.lstsq(real_sh_matrix(8, u), real_sh_matrix(8, u @ rotation), rcond=None)[0]
    save((along_axes @ to_scanner.T).astype(np.float32), tmp_path / "scanner.nii", affine)
    mrtrix("fod2fixel", tmp_path / "scanner.nii", tmp_path / "theirs", "-afd", "afd.mif", "-peak_amp",
           "peak_amp.mif", "-disp", "disp.mif")
    theirs = read_fixel_directory(tmp_path / "theirs")

    # FMLS samples the lobes on its 1281 directions, turned by 20° between the two: the small
    # lobes of the phantom's ringing can split, merge or swap order; the fibres' lobes match
    same = ours["index"][..., 0] == theirs["index"][..., 0]
    assert same.mean() > 0.9
    angles, afd = [], []
    for voxel in zip(*np.nonzero(same)):
        (n, first), (_, their_first) = ours["index"][voxel], theirs["index"][voxel]
        mine = ours["directions"][first:first + n].astype(np.float64)
        np.testing.assert_allclose(ours["afd"][first:first + n].sum(), theirs["afd"][their_first:their_first + n].sum(),
                                   rtol=0.01)
        for j in range(their_first, their_first + n):
            if theirs["afd"][j] > 0.1:
                cosines = np.abs(mine @ theirs["directions"][j])
                angles.append(np.degrees(np.arccos(min(cosines.max(), 1.0))))
                afd.append(ours["afd"][first + cosines.argmax()] / theirs["afd"][j])
    assert len(angles) > 40
    assert max(angles) < 1.5
    np.testing.assert_allclose(afd, 1.0, atol=0.05)


def test_pam5_holds_dipys_own_peaks_in_the_image_frame(tmp_path):
    from dipy.data import get_sphere
    from dipy.direction.peaks import peak_directions
    from dipy.io.peaks import load_pam

    sh = fod_phantom((3, 2, 2), 8, seed=6)["sh"].astype(np.float32)
    affine = rotated_affine()
    path = save(sh, tmp_path / "fod.nii.gz", affine)
    sidecar = run_peaks(path, PeaksOutputs.in_folder(tmp_path / "out"), PeaksParams(format=["pam5"]))
    assert sidecar["outputs"]["pam5"] == ["peaks.pam5"]
    pam = load_pam(tmp_path / "out" / "peaks.pam5")
    np.testing.assert_allclose(pam.affine, affine, atol=1e-6)  # as NIfTI stores it, in float32
    count = np.asarray(nib.load(tmp_path / "out" / "count.nii.gz").dataobj)

    # DIPY's own peak extraction on the FOD seen in the image axes: f(u) = f_scanner(R u).
    sphere = get_sphere(name="repulsion724").subdivide(n=1)
    rotation = affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0)
    values = sh.reshape(-1, sh.shape[-1]).astype(np.float64) @ real_sh_matrix(8, sphere.vertices @ rotation.T).T
    for voxel, sf in zip(np.ndindex(sh.shape[:3]), values):
        dirs, peak_values, _ = peak_directions(sf, sphere, relative_peak_threshold=0.1, min_separation_angle=15)
        n = min(len(dirs), 3)
        assert count[voxel] == n
        cosines = np.abs(np.sum(pam.peak_dirs[voxel][:n] * dirs[:n], axis=-1))
        assert np.degrees(np.arccos(np.minimum(cosines, 1.0))).max() < 3.0, voxel
        np.testing.assert_allclose(pam.peak_values[voxel][:n], peak_values[:n], rtol=0.02)


def test_service_job_packs_the_fixel_directory_and_lists_every_file(phantom, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    params = PeaksParams(format=["nifti", "fixel"], metrics=["afd_total"])
    ctx = JobContext(inputs={"fod": phantom["nii"]}, out_dir=out, params=params)
    written = get_job_kind("peaks").run(ctx)
    assert [p.name for p in written] == ["peaks.nii.gz", "amplitudes.nii.gz", "count.nii.gz", "afd_total.nii.gz",
                                         "qc.png", "fixels.tar", "peaks.json"]
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    with tarfile.open(out / "fixels.tar") as archive:
        assert sorted(archive.getnames()) == ["fixels", "fixels/afd.mif.gz", "fixels/directions.mif.gz",
                                              "fixels/disp.mif.gz", "fixels/index.mif.gz", "fixels/peak_amp.mif.gz"]


def test_mrtrix_outputs_from_a_nifti_input_keep_the_grid(phantom, tmp_path, mrtrix):
    run_peaks(phantom["nii"], PeaksOutputs.in_folder(tmp_path), PeaksParams(format=["mif"], metrics=["none"]))
    printed = mrtrix("mrinfo", tmp_path / "count.mif.gz", "-transform")
    transform = np.array([[float(v) for v in line.split()] for line in printed.strip().splitlines()])
    affine = rotated_affine()
    np.testing.assert_allclose(transform[:3, :3], affine[:3, :3] / np.linalg.norm(affine[:3, :3], axis=0), atol=1e-5)
    np.testing.assert_allclose(transform[:3, 3], affine[:3, 3], atol=1e-4)


def test_no_metrics_and_no_picture_leaves_the_three_peak_images(phantom, tmp_path):
    params = params_from_text(PeaksParams, {"metrics": "none", "qc": "false"})
    sidecar = run_peaks(phantom["nii"], PeaksOutputs.in_folder(tmp_path), params)
    assert sidecar["outputs"] == {"peaks": ["peaks.nii.gz"], "amplitudes": ["amplitudes.nii.gz"],
                                  "count": ["count.nii.gz"]}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["amplitudes.nii.gz", "count.nii.gz", "peaks.json",
                                                          "peaks.nii.gz"]
