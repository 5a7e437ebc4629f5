"""The peaks job: files, sh2peaks layout, header, sidecar, input validation, cancellation."""

from __future__ import annotations

import gzip
import hashlib
import json
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from tests.file_contents import assert_same_file
from worker.errors import InputError, JobCancelled
from worker.input_limits import InputLimits, check_job_inputs
from worker.job_kinds import JobContext, get_job_kind
from worker.jobs.peaks import JOB_KINDS, PeaksOutputs, engine_options, plan_peaks, run_peaks
from worker.params import PeaksParams

SHAPE = (5, 6, 4)


def rotated_affine() -> np.ndarray:
    """An oblique grid: rotation about z by 20°, voxels 2 × 2 × 2.5 mm, an offset."""
    angle = np.radians(20.0)
    rotation = np.array([[np.cos(angle), -np.sin(angle), 0], [np.sin(angle), np.cos(angle), 0], [0, 0, 1]])
    affine = np.eye(4)
    affine[:3, :3] = rotation @ np.diag([2.0, 2.0, 2.5])
    affine[:3, 3] = [-40.0, 12.5, 7.0]
    return affine


def save(data: np.ndarray, path: Path, affine: np.ndarray | None = None) -> Path:
    affine = rotated_affine() if affine is None else affine
    image = nib.Nifti1Image(data, affine)
    image.set_qform(affine, code=1)
    image.set_sform(affine, code=4)
    image.header.set_xyzt_units("mm", "sec")
    nib.save(image, path)
    return path


@pytest.fixture
def fod(tmp_path) -> dict:
    sh = fod_phantom(SHAPE, 8, seed=2)["sh"].copy()
    sh[0, 0, 0, 3] = np.nan
    sh[4, 5, 3, :] = np.inf
    path = save(sh, tmp_path / "fod.nii.gz")
    mask = np.ones(SHAPE, np.uint8)
    mask[2, :, :] = 0
    mask_path = save(mask, tmp_path / "mask.nii.gz")
    return {"sh": sh, "path": path, "mask": mask.astype(bool), "mask_path": mask_path}


def files_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*")) if folder.exists() else []


def test_run_peaks_writes_sh2peaks_layout_on_the_input_grid(fod, tmp_path):
    out = tmp_path / "out"
    outputs = PeaksOutputs.in_folder(out)
    sidecar = run_peaks(fod["path"], outputs, PeaksParams(), mask=fod["mask_path"])
    assert files_in(out) == sorted(get_job_kind("peaks").result_names)

    expected = sshopm_peaks(fod["sh"], mask=fod["mask"], backend="cpu")
    peaks_image = nib.load(outputs.path("peaks", ".nii.gz"))
    amplitudes_image = nib.load(outputs.path("amplitudes", ".nii.gz"))
    count_image = nib.load(outputs.path("count", ".nii.gz"))
    peaks = np.asarray(peaks_image.dataobj)
    amplitudes = np.asarray(amplitudes_image.dataobj)
    count = np.asarray(count_image.dataobj)
    assert peaks.shape == (*SHAPE, 9) and peaks.dtype == np.float32
    assert amplitudes.shape == (*SHAPE, 3) and amplitudes.dtype == np.float32
    assert count.shape == SHAPE and count.dtype == np.uint8

    np.testing.assert_array_equal(count, expected.count)
    np.testing.assert_array_equal(amplitudes, expected.amplitudes)
    for k in range(3):
        triplet = peaks[..., 3 * k: 3 * k + 3]
        np.testing.assert_array_equal(triplet, expected.directions[..., k, :] * expected.amplitudes[..., k, None])
        has = count > k
        # amplitude × unit direction, NaN beyond the count.
        np.testing.assert_allclose(np.linalg.norm(triplet[has], axis=-1), amplitudes[..., k][has], rtol=1e-6)
        assert np.isnan(triplet[~has]).all() and np.isnan(amplitudes[..., k][~has]).all()
    assert (count[fod["mask"]] > 0).sum() >= fod["mask"].sum() - 2  # all but the two non-finite voxels
    assert (count[~fod["mask"]] == 0).all()
    assert count[0, 0, 0] == 0 and count[4, 5, 3] == 0

    source = nib.load(fod["path"])
    for image in (peaks_image, amplitudes_image, count_image):
        np.testing.assert_allclose(image.affine, source.affine, atol=1e-6)
        qform, qcode = image.get_qform(coded=True)
        sform, scode = image.get_sform(coded=True)
        np.testing.assert_allclose(qform, source.get_qform(), atol=1e-5)
        np.testing.assert_allclose(sform, source.get_sform(), atol=1e-6)
        assert (int(qcode), int(scode)) == (1, 4)
        assert image.header.get_zooms()[:3] == pytest.approx(source.header.get_zooms()[:3])
        assert image.header.get_xyzt_units()[0] == "mm"

    on_disk = json.loads(outputs.sidecar.read_text())
    assert on_disk == json.loads(json.dumps(sidecar, default=float))
    assert on_disk["parameters"] == PeaksParams().model_dump()
    assert on_disk["sh_basis"] == "mrtrix" and on_disk["basis"] == "mrtrix"
    assert on_disk["lmax"] == 8
    assert on_disk["backend"] == "cpu" and on_disk["device"] == "cpu"
    assert on_disk["nonfinite_voxels"] == 2
    assert on_disk["voxels"] == int(np.prod(SHAPE)) and on_disk["voxels_processed"] == int(fod["mask"].sum()) - 2
    assert on_disk["voxels_with_peaks"] == int((count > 0).sum())
    assert isinstance(on_disk["starts_hit_cap"], int) and on_disk["starts_hit_cap"] == 0
    assert {"python", "numpy", "numba", "nibabel", "fibertensor"} <= set(on_disk["versions"])
    assert on_disk["versions"]["numpy"] == np.__version__
    seconds = on_disk["seconds"]
    assert {"read", "peaks_prepare", "peaks_compute", "peaks_total", "write", "total"} <= set(seconds)
    assert all(value >= 0 for value in seconds.values())
    sha256 = {name: hashlib.sha256((fod["path"].parent / name).read_bytes()).hexdigest()
              for name in ("fod.nii.gz", "mask.nii.gz")}
    assert on_disk["input"] == {"fod": "fod.nii.gz", "mask": "mask.nii.gz", "shape": [*SHAPE, 45], "dtype": "float32",
                                "sha256": sha256}
    assert on_disk["outputs"] == {name: [f"{name}.nii.gz"] for name in (
        "peaks", "amplitudes", "count", "afd_max", "afd_total", "afd_sum", "peak_fraction", "rgb")} | {"qc": ["qc.png"]}
    assert on_disk["options"]["starts"] == 128 and on_disk["options"]["npeaks"] == 3


@pytest.mark.parametrize("suffix", [".nii", ".mif", ".mih"])
def test_the_sidecar_holds_the_sha256_of_every_input_file(fod, tmp_path, suffix):
    """The checksums the read takes are hashlib's of the files as stored, by file name: a
    .nii, a .mif, an .mih header and its data file, a .nii.gz mask."""
    from worker.io.images import write_image

    image = nib.load(fod["path"])
    path = tmp_path / f"fod{suffix}"
    write_image(path, np.asarray(image.dataobj), image.affine)
    sidecar = run_peaks(path, PeaksOutputs.in_folder(tmp_path / "out"), PeaksParams(backend="cpu", qc=False),
                        mask=fod["mask_path"])
    files = [path, path.with_suffix(".dat")] if suffix == ".mih" else [path]
    assert sidecar["input"]["sha256"] == {file.name: hashlib.sha256(file.read_bytes()).hexdigest()
                                          for file in (*files, fod["mask_path"])}


def test_without_checksums_nothing_is_hashed_and_the_outputs_are_the_same(fod, tmp_path, monkeypatch):
    """--no-checksums: the sidecar lists no sha256 and no input byte is hashed; every output
    file is the checksummed run's, byte for byte."""
    from worker.io import images

    written = {}
    for checksums in (True, False):
        if not checksums:
            def hashed(*args, **kwargs):
                raise AssertionError("an input was hashed with checksums off")

            monkeypatch.setattr(images, "load_image_data_with_sha256", hashed)
        outputs = PeaksOutputs.in_folder(tmp_path / str(checksums))
        written[checksums] = run_peaks(fod["path"], outputs, PeaksParams(backend="cpu", checksums=checksums),
                                       mask=fod["mask_path"])
    assert written[True]["input"]["sha256"].keys() == {"fod.nii.gz", "mask.nii.gz"}
    assert written[False]["input"]["sha256"] == {}
    assert written[False]["outputs"] == written[True]["outputs"]
    for name in (name for names in written[True]["outputs"].values() for name in names):
        assert_same_file(tmp_path / "False" / name, tmp_path / "True" / name)


def test_run_peaks_parameters_reach_the_engine(fod, tmp_path):
    outputs = PeaksOutputs.with_prefix(tmp_path / "sub" / "case")
    params = PeaksParams(npeaks=2, relative_threshold=0.6, starts=64, metrics=["none"])
    sidecar = run_peaks(fod["path"], outputs, params)
    assert files_in(tmp_path / "sub") == ["case.json", "case_amplitudes.nii.gz", "case_count.nii.gz", "case_peaks.nii.gz",
                                          "case_qc.png"]
    expected = sshopm_peaks(fod["sh"], options=engine_options(params), backend="cpu")
    peaks = np.asarray(nib.load(outputs.path("peaks", ".nii.gz")).dataobj)
    assert peaks.shape == (*SHAPE, 6)
    np.testing.assert_array_equal(np.asarray(nib.load(outputs.path("count", ".nii.gz")).dataobj), expected.count)
    np.testing.assert_array_equal(peaks[..., :3], expected.directions[..., 0, :] * expected.amplitudes[..., 0, None])
    assert sidecar["parameters"]["relative_threshold"] == 0.6 and sidecar["options"]["starts"] == 64
    assert sidecar["input"]["mask"] is None and sidecar["nonfinite_voxels"] == 2


def test_run_peaks_dipy_basis(tmp_path):
    from gpu.sh_basis import convert_sh_basis

    sh = fod_phantom((3, 3, 3), 8, seed=9)["sh"]
    save(sh, tmp_path / "mrtrix.nii.gz")
    save(convert_sh_basis(sh, "mrtrix", "dipy"), tmp_path / "dipy.nii.gz")
    a = PeaksOutputs.in_folder(tmp_path / "a")
    b = PeaksOutputs.in_folder(tmp_path / "b")
    run_peaks(tmp_path / "mrtrix.nii.gz", a)
    sidecar = run_peaks(tmp_path / "dipy.nii.gz", b, PeaksParams(basis="dipy", peaks_frame="voxel"))
    assert sidecar["sh_basis"] == "dipy" and sidecar["peaks_frame"] == "voxel"
    np.testing.assert_array_equal(np.asarray(nib.load(a.path("count", ".nii.gz")).dataobj), np.asarray(nib.load(b.path("count", ".nii.gz")).dataobj))
    np.testing.assert_allclose(np.asarray(nib.load(b.path("peaks", ".nii.gz")).dataobj), np.asarray(nib.load(a.path("peaks", ".nii.gz")).dataobj),
                               rtol=1e-5, atol=1e-6)


def fibre_fod(directions: np.ndarray, basis: str, lmax: int = 8) -> np.ndarray:
    """SH (..., C) float32 of one heat-kernel lobe per fibre of ``directions`` (..., F, 3)
    (Funk–Hecke: c_lm = k_l·Y_lm(d), as :func:`gpu.peaks.phantom.fod_phantom` makes them)."""
    from gpu.sh_basis import real_sh_matrix, sh_degrees_orders

    degrees, _ = sh_degrees_orders(lmax)
    profile = np.exp(-degrees * (degrees + 1) / 60.0)
    rows = real_sh_matrix(lmax, directions.reshape(-1, 3), basis).reshape(*directions.shape[:-1], -1)
    return (rows * profile).sum(axis=-2).astype(np.float32)


def oblique_affine() -> np.ndarray:
    """A grid tilted about all three axes, its first axis flipped, voxels 2 × 2.2 × 2.5 mm."""
    from scipy.spatial.transform import Rotation

    affine = np.eye(4)
    affine[:3, :3] = Rotation.from_euler("zyx", [35.0, -20.0, 50.0], degrees=True).as_matrix() @ np.diag([-2.0, 2.2, 2.5])
    affine[:3, 3] = [30.0, -12.0, 5.0]
    return affine


def test_dipy_basis_peaks_are_written_in_the_scanner_frame_as_mrtrix_basis_ones(tmp_path):
    # The same fibres: in scanner space for an MRtrix3-basis FOD; along the image axes
    # (Rᵀd, R the affine's rotation, as DIPY's gradient table has them) for a DIPY-basis one.
    from gpu.peaks.phantom import random_directions

    rng = np.random.default_rng(4)
    shape = (3, 2, 2)
    scanner = random_directions(12 * 2, rng).reshape(*shape, 2, 3)
    scanner[..., 1, :] = np.cross(scanner[..., 0, :], random_directions(12, rng).reshape(*shape, 3))
    scanner /= np.linalg.norm(scanner, axis=-1, keepdims=True)  # two fibres at right angles
    affine = oblique_affine()
    u, _, vt = np.linalg.svd(affine[:3, :3])
    along_axes = scanner @ (u @ vt)  # rows: Rᵀd
    save(fibre_fod(scanner, "mrtrix"), tmp_path / "mrtrix.nii.gz", affine)
    save(fibre_fod(along_axes, "dipy"), tmp_path / "dipy.nii.gz", affine)
    runs = {}
    for name, params in [("mrtrix", PeaksParams(npeaks=2)), ("dipy", PeaksParams(basis="dipy", npeaks=2)),
                         ("dipy_voxel", PeaksParams(basis="dipy", npeaks=2, peaks_frame="voxel"))]:
        out = PeaksOutputs.in_folder(tmp_path / name)
        fod = tmp_path / f"{name.split('_')[0]}.nii.gz"
        runs[name] = (run_peaks(fod, out, params), np.asarray(nib.load(out.path("peaks", ".nii.gz")).dataobj))
    assert runs["mrtrix"][0]["peaks_frame"] == runs["dipy"][0]["peaks_frame"] == "scanner"
    for name, truth in [("mrtrix", scanner), ("dipy", scanner), ("dipy_voxel", along_axes)]:
        found = runs[name][1].reshape(*shape, 2, 3)
        found = found / np.linalg.norm(found, axis=-1, keepdims=True)
        # each true fibre has a found peak within 0.1° (peaks are axes: ±d)
        cosines = np.abs(np.einsum("...ij,...kj->...ik", truth, found)).max(axis=-1)
        assert np.degrees(np.arccos(np.clip(cosines, -1, 1))).max() <= 0.1, name


def bad_input(kind: str, tmp_path: Path) -> dict[str, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    good = fod_phantom((3, 3, 2), 4, seed=1)["sh"]
    fod = tmp_path / "fod.nii.gz"
    if kind == "3d":
        save(good[..., 0], fod)
    elif kind == "44 volumes":
        save(np.zeros((3, 3, 2, 44), np.float32), fod)
    elif kind == "complex":
        save(good.astype(np.complex64), fod)
    elif kind in ("mask shape", "mask affine"):
        save(good, fod)
        mask = tmp_path / "mask.nii.gz"
        if kind == "mask shape":
            save(np.ones((3, 3, 3), np.uint8), mask)
        else:
            shifted = rotated_affine()
            shifted[:3, 3] += [2.0, 0.0, 0.0]
            save(np.ones((3, 3, 2), np.uint8), mask, shifted)
        return {"fod": fod, "mask": mask}
    elif kind == "truncated .nii.gz":
        save(np.random.default_rng(0).normal(size=(8, 8, 8, 15)).astype(np.float32), fod)
        content = fod.read_bytes()
        fod.write_bytes(content[: len(content) // 2])
    elif kind == "truncated .nii":
        fod = tmp_path / "fod.nii"
        save(good, fod)
        content = fod.read_bytes()
        fod.write_bytes(content[: len(content) // 2])
    elif kind == "not NIfTI":
        fod = tmp_path / "fod.nii.gz"
        fod.write_bytes(gzip.compress(b"x y z\n1 2 3\n" * 100))
    return {"fod": fod}


BAD_INPUTS = {
    # kind: (error title, words the detail must contain)
    "3d": ("Not a 4D volume", ["is a 3D image (3 x 3 x 2)", "4D image of SH coefficients", "3 x 3 x 2 x 45"]),
    "44 volumes": ("Wrong number of volumes", ["44 SH coefficients", "6 (lmax 2), 15 (lmax 4), 28 (lmax 6), 45 (lmax 8)"]),
    "complex": ("Unsupported data type", ["complex64", "float or integer"]),
    "mask shape": ("Mask grid mismatch", ["is 3 x 3 x 3", "FOD grid is 3 x 3 x 2", "resample the mask"]),
    "mask affine": ("Mask grid mismatch", ["different voxel-to-scanner transform", "resample the mask"]),
    "not NIfTI": ("Unreadable NIfTI file", ["could not be read as NIfTI", "fod.nii.gz"]),
}


@pytest.mark.parametrize("kind", list(BAD_INPUTS))
def test_validate_rejects_bad_inputs_and_leaves_no_files(kind, tmp_path):
    inputs = bad_input(kind, tmp_path / "in")
    title, words = BAD_INPUTS[kind]
    peaks_kind = get_job_kind("peaks")
    assert peaks_kind is JOB_KINDS[0]
    with pytest.raises(InputError) as info:
        peaks_kind.validate(inputs, PeaksParams())
    assert info.value.title == title
    for word in words:
        assert word in info.value.detail, (word, info.value.detail)
    assert "\n" not in info.value.detail
    # The same input given straight to a run: the same error, nothing written.
    out = tmp_path / "out"
    with pytest.raises(InputError) as run_info:
        run_peaks(inputs["fod"], PeaksOutputs.in_folder(out), mask=inputs.get("mask"))
    assert run_info.value.detail == info.value.detail
    assert files_in(out) == []
    assert files_in(tmp_path / "in") == sorted(p.name for p in inputs.values())


@pytest.mark.parametrize("kind", ["truncated .nii.gz", "truncated .nii"])
def test_truncated_input_is_rejected_before_any_output(kind, tmp_path):
    """Header checks cannot see a missing second half (the upload layer measures the data;
    see service/uploads.py); the run reads the data first and stops with a clear error."""
    inputs = bad_input(kind, tmp_path / "in")
    out = tmp_path / "out"
    with pytest.raises(InputError) as info:
        run_peaks(inputs["fod"], PeaksOutputs.in_folder(out))
    assert info.value.title in ("Truncated file", "Truncated or damaged file", "Unreadable NIfTI file")
    assert inputs["fod"].name in info.value.detail
    assert "cut short" in info.value.detail or "complete" in info.value.detail
    assert files_in(out) == []
    # Through the job kind: the same error, the job folder stays empty.
    ctx = JobContext(inputs=inputs, out_dir=out, params=PeaksParams())
    with pytest.raises(InputError):
        get_job_kind("peaks").run(ctx)
    assert files_in(out) == []


def test_plan_peaks_accepts_good_input_and_4d_singleton_mask(tmp_path):
    sh = fod_phantom((3, 3, 2), 6, seed=1)["sh"]
    fod = save(sh, tmp_path / "fod.nii")
    mask = save(np.ones((3, 3, 2, 1), np.uint8), tmp_path / "mask.nii.gz")
    plan = plan_peaks(fod, mask)
    assert plan.fod.shape == (3, 3, 2, 28) and plan.mask.shape == (3, 3, 2, 1) and plan.lmax == 6
    sidecar = run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "out"), mask=mask)
    assert sidecar["lmax"] == 6 and sidecar["voxels_processed"] == 18


def test_a_job_reads_each_header_once(tmp_path, monkeypatch):
    """The plan holds the headers: checking, the memory estimate, reading and writing all
    take them from it."""
    import worker.io.images

    read = []

    def counted(path, role, _read=worker.io.images.read_image_header):
        read.append(Path(path).name)
        return _read(path, role)

    monkeypatch.setattr(worker.io.images, "read_image_header", counted)
    fod = save(fod_phantom((3, 3, 2), 4, seed=2)["sh"], tmp_path / "fod.nii.gz")
    mask = save(np.ones((3, 3, 2), np.uint8), tmp_path / "mask.nii")
    ctx = JobContext(inputs={"fod": fod, "mask": mask}, out_dir=tmp_path / "out",
                     params=PeaksParams(backend="cpu", format=["nifti", "mif", "fixel"]))
    written = get_job_kind("peaks").run(ctx)
    assert sorted(read) == ["fod.nii.gz", "mask.nii"]
    assert (tmp_path / "out" / "peaks.mif.gz") in written
    # At the door: the limit check reads each header, and validation and the memory
    # estimate share one plan.
    read.clear()
    check_job_inputs(get_job_kind("peaks"), {"fod": fod, "mask": mask}, ctx.params, InputLimits(1 << 30, 1 << 20, 1 << 34))
    assert sorted(read) == ["fod.nii.gz", "fod.nii.gz", "mask.nii", "mask.nii"]


def test_cancellation_through_progress_stops_with_no_outputs(fod, tmp_path):
    out = tmp_path / "out"
    calls = []

    def cancel(fraction):
        calls.append(fraction)
        raise JobCancelled("cancelled by request")

    with pytest.raises(JobCancelled):
        run_peaks(fod["path"], PeaksOutputs.in_folder(out), progress=cancel)
    assert calls == [1.0]
    assert files_in(out) == []


def test_job_kind_run_cancelled_by_should_stop_writes_nothing(fod, tmp_path):
    out = tmp_path / "job"
    out.mkdir()
    progress = []
    ctx = JobContext(inputs={"fod": fod["path"]}, out_dir=out, params=PeaksParams(),
                     progress=progress.append, should_stop=lambda: True)
    with pytest.raises(JobCancelled):
        get_job_kind("peaks").run(ctx)
    assert progress == [] and files_in(out) == []
    # Not cancelled: the job writes its four results and returns them.
    ctx = JobContext(inputs={"fod": fod["path"], "mask": fod["mask_path"]}, out_dir=out, params=PeaksParams(),
                     progress=progress.append)
    written = get_job_kind("peaks").run(ctx)
    assert [p.name for p in written] == list(get_job_kind("peaks").result_names)
    assert files_in(out) == sorted(get_job_kind("peaks").result_names)
    assert progress == [1.0]


def test_params_model_rejects_bad_values():
    from pydantic import ValidationError

    for bad in ({"npeaks": 0}, {"npeaks": 256}, {"npeaks": 20, "starts": 10}, {"relative_threshold": 1.5},
                {"threshold": -1.0}, {"threshold": float("inf")}, {"relative_threshold": float("nan")},
                {"starts": 257}, {"basis": "fsl"}, {"backend": "gpu"}, {"unknown": 1}):
        with pytest.raises(ValidationError):
            PeaksParams(**bad)


@pytest.mark.parametrize("suffix, formats", [(".nii.gz", []), (".nii.gz", ["nifti", "mif"]), (".mif.gz", [])])
def test_a_job_on_an_upload_kept_inflated_writes_what_it_writes_from_the_upload(fod, tmp_path, suffix, formats):
    """The service stores a .nii.gz (.mif.gz) upload as the .nii (.mif) its check inflates
    (the record: the uploaded name and sha256); the job on that writes the same files, byte
    for byte, in the uploaded format (.nii.gz, .mif.gz), and a sidecar and warnings naming
    and hashing the upload, as the same job on the upload itself."""
    from worker.input_limits import InputLimits, check_job_inputs
    from worker.io.images import load_image_data, read_image_header, write_image

    kind, params = get_job_kind("peaks"), PeaksParams(format=formats)
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    files = {slot: uploads / f"{slot}{suffix}" for slot in ("fod", "mask")}
    for slot, key in (("fod", "path"), ("mask", "mask_path")):
        if suffix == ".nii.gz":
            files[slot].write_bytes(fod[key].read_bytes())
        else:
            image = nib.load(fod[key])
            write_image(files[slot], np.asarray(image.dataobj), image.affine)
    kept = check_job_inputs(kind, files, params, InputLimits(1 << 30, 1 << 20, 1 << 30), keep_inflated=True)
    plain = suffix.removesuffix(".gz")
    assert {slot: k.path.name for slot, k in kept.items()} == {"fod": f"fod{plain}", "mask": f"mask{plain}"}
    np.testing.assert_array_equal(load_image_data(read_image_header(kept["fod"].path, "FOD")),
                                  load_image_data(read_image_header(files["fod"], "FOD")))

    runs = {}
    for name, inputs, uploaded in (("as uploaded", files, {}),
                                   ("kept inflated", {slot: k.path for slot, k in kept.items()},
                                    {slot: k.uploaded for slot, k in kept.items()})):
        out = tmp_path / name
        out.mkdir()
        warned = []
        written = kind.run(JobContext(inputs=inputs, out_dir=out, params=params, warn=warned.append,
                                      uploaded=uploaded))
        sidecar = json.loads((out / "peaks.json").read_text())
        del sidecar["seconds"]
        runs[name] = ([p.name for p in written], {p.name: p.read_bytes() for p in written if p.suffix != ".json"},
                      sidecar, warned)
    (names, kept_bytes, kept_sidecar, kept_warned), (*uploaded_run,) = runs["kept inflated"], runs["as uploaded"]
    assert names == uploaded_run[0]
    for name, data in kept_bytes.items():  # file by file, so that a difference names its file
        assert data == uploaded_run[1][name], f"{name} differs"
    assert (kept_sidecar, kept_warned) == (uploaded_run[2], uploaded_run[3])
    names, _, sidecar, warned = runs["kept inflated"]
    assert (f"peaks{suffix}" in names) and (("peaks.mif.gz" in names) == ("mif" in formats or suffix == ".mif.gz"))
    assert sidecar["input"]["fod"] == f"fod{suffix}" and sidecar["input"]["mask"] == f"mask{suffix}"
    assert sidecar["input"]["sha256"] == {f"{slot}{suffix}": hashlib.sha256(files[slot].read_bytes()).hexdigest()
                                          for slot in ("fod", "mask")}
    assert len(warned) == 1 and f"'fod{suffix}'" in warned[0]
