"""How the peaks job writes its outputs side by side: the same bytes as one at a time, and
nothing left behind when one of them fails."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu.peaks.fodf_metrics import fodf_metrics
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from tests.worker.jobs.test_peaks import SHAPE, files_in, save
from worker.jobs.peaks import (
    PeaksOutputs, compute_peaks, engine_options, plan_peaks, read_peaks_inputs, run_peaks, write_peaks_outputs,
)
from worker.jobs.peaks.arrays import SLAB_VOXELS, fodf_metrics_of, peaks_image
from worker.errors import InputError
from worker.params import PeaksParams

EVERYTHING = PeaksParams(format=["nifti", "mif", "fixel", "pam5"], metrics=["all"])


@pytest.fixture(scope="module")
def computed(tmp_path_factory):
    """A phantom's inputs and peaks, ready to write."""
    sh = fod_phantom(SHAPE, 8, seed=7)["sh"].astype(np.float32)
    fod = save(sh, tmp_path_factory.mktemp("fod") / "fod.nii.gz")
    plan = plan_peaks(fod, None, EVERYTHING)
    inputs = read_peaks_inputs(plan)
    return plan, inputs, compute_peaks(plan, inputs)


@pytest.mark.parametrize("order", ["F", "C"])
def test_maps_made_in_memory_order_are_those_of_the_plain_formulas(order):
    """The peaks image, made a volume at a time in NIfTI's order, and the fODF metrics, computed
    on the engine's voxel order (reversed axes for a NIfTI volume), equal, bit for bit, what the
    formulas give on C-ordered copies of the same arrays (numpy's or the compiled passes');
    for a NIfTI volume the peaks image and the 3D maps need no copy to be written."""
    sh = np.asarray(fod_phantom(SHAPE, 6, seed=8)["sh"], np.float32, order=order)
    sh[1, 2, 3, 4] = np.nan
    result = sshopm_peaks(sh, backend="cpu", options=engine_options(PeaksParams(npeaks=4)))
    assert (result.count == 0).any() and (result.count > 1).any()
    image = peaks_image(result.directions, result.amplitudes)
    expected = (result.directions * result.amplitudes[..., None]).reshape(*SHAPE, 12)
    assert image.dtype == np.float32 and image.flags.f_contiguous
    np.testing.assert_array_equal(image, expected)
    maps = fodf_metrics_of(sh, result)
    plain = fodf_metrics(*(np.ascontiguousarray(a) for a in (sh, result.directions, result.amplitudes, result.count)))
    for name in ("afd_max", "afd_total", "afd_sum", "peak_fraction", "rgb", "nufo"):
        ours, theirs = getattr(maps, name), getattr(plain, name)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
        if order == "F" and ours.ndim == 3:
            assert ours.flags.f_contiguous


def volume_at_a_time(directions: np.ndarray, amplitudes: np.ndarray) -> np.ndarray:
    """The peaks image as peaks_image made it before its slabs: each volume in one pass."""
    spatial, k = amplitudes.shape[:-1], amplitudes.shape[-1]
    image = np.empty((*spatial, 3 * k), np.float32, order="F")
    for peak in range(k):
        for axis in range(3):
            np.multiply(directions[..., peak, axis], amplitudes[..., peak], out=image[..., 3 * peak + axis])
    return image


@pytest.mark.parametrize("layout", ["voxel-major F", "voxel-major C", "volume-major F"])
def test_peaks_image_in_slabs_is_the_image_of_a_volume_at_a_time(layout):
    """The peaks image, made in slabs of the last spatial axis, equals bit for bit the one
    made a volume at a time and the plain formula, for results with each voxel's peaks
    together (the engine's, voxels in NIfTI's order for a NIfTI or .mif input, or in C
    order) or volume by volume, with absent peaks (NaN) and infinite amplitudes, on a grid
    of several slabs, one of them partial, and on one voxel and a line of them."""
    shape, k = (41, 40, 43), 3
    assert shape[0] * shape[1] * shape[2] > SLAB_VOXELS and shape[2] % (SLAB_VOXELS // (shape[0] * shape[1]))
    rng = np.random.default_rng(5)
    directions = rng.normal(size=(*shape, k, 3)).astype(np.float32)
    amplitudes = rng.uniform(0.1, 2.0, size=(*shape, k)).astype(np.float32)
    absent = rng.random(shape) < 0.3
    directions[absent, 2] = np.nan
    amplitudes[absent, 2] = np.nan
    amplitudes[3, 4, 5, 0] = np.inf
    if layout == "voxel-major F":  # (voxels, K, 3) rows, voxels x fastest: sshopm_peaks' _to_spatial
        flipped = (2, 1, 0)
        directions = np.ascontiguousarray(directions.transpose(*flipped, 3, 4)).transpose(*flipped, 3, 4)
        amplitudes = np.ascontiguousarray(amplitudes.transpose(*flipped, 3)).transpose(*flipped, 3)
    elif layout == "volume-major F":
        directions, amplitudes = np.asfortranarray(directions), np.asfortranarray(amplitudes)
    image = peaks_image(directions, amplitudes)
    assert image.dtype == np.float32 and image.flags.f_contiguous and image.shape == (*shape, 3 * k)
    np.testing.assert_array_equal(image, volume_at_a_time(directions, amplitudes))
    np.testing.assert_array_equal(image, (directions * amplitudes[..., None]).reshape(*shape, 3 * k))
    assert np.isinf(image[3, 4, 5, :3]).all() and np.isnan(image[absent][:, 6:]).all()
    for voxels in ((3, 4, 5), (3, 4)):
        np.testing.assert_array_equal(peaks_image(directions[voxels], amplitudes[voxels]),
                                      volume_at_a_time(directions[voxels], amplitudes[voxels]))


def contents(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_side_by_side_writes_the_bytes_of_one_at_a_time(computed, tmp_path):
    plan, inputs, result = computed
    sidecar = write_peaks_outputs(plan, inputs, result, PeaksOutputs.in_folder(tmp_path / "parallel"))
    one_by_one = write_peaks_outputs(plan, inputs, result, PeaksOutputs.in_folder(tmp_path / "sequential"),
                                     compress_threads=1, threads=1)

    assert one_by_one["outputs"] == sidecar["outputs"]
    parallel = contents(tmp_path / "parallel")
    sequential = contents(tmp_path / "sequential")
    del parallel["peaks.json"], sequential["peaks.json"]  # timings
    assert sorted(parallel) == sorted(sequential)
    assert {"peaks.pam5", "fixels/directions.mif.gz", "peaks.mif.gz", "rgb.nii.gz", "qc.png"} <= set(parallel)
    for name, data in sequential.items():
        assert parallel[name] == data, name


def test_a_failed_output_takes_the_others_with_it(computed, tmp_path):
    plan, inputs, result = computed
    outputs = PeaksOutputs.in_folder(tmp_path / "out")
    # The .pam5 cannot be renamed onto a folder of its name; the fixel directory, written
    # meanwhile, must go again with every file.
    (outputs.folder / "peaks.pam5").mkdir(parents=True)
    with pytest.raises(IsADirectoryError):
        write_peaks_outputs(plan, inputs, result, outputs)
    assert files_in(outputs.folder) == ["peaks.pam5"]


def test_a_fixel_folder_already_there_is_left_alone(computed, tmp_path):
    plan, inputs, result = computed
    outputs = PeaksOutputs.in_folder(tmp_path / "out")
    (outputs.folder / "fixels").mkdir(parents=True)
    (outputs.folder / "fixels" / "mine.txt").write_text("not ours")
    with pytest.raises(FileExistsError, match="remove it or choose another output"):
        write_peaks_outputs(plan, inputs, result, outputs)
    assert files_in(outputs.folder) == ["fixels", "mine.txt"]


def test_a_job_imports_the_compiled_writers_its_outputs_need_and_no_others():
    """Whatever ran before in the process, a job imports, before its writers' threads start,
    the modules its outputs need that load numba; not those of the fODF metrics, the QC
    picture and FMLS segmentation, whose passes may have an ahead-of-time build
    (gpu.ahead_of_time: looked up when called, their modules imported then if not built); a
    peaks-only batch loads none."""
    code = """if True:
        import sys
        from worker.jobs.peaks.outputs import import_writer_modules, wanted_outputs
        from worker.params.peaks import PeaksParams
        import_writer_modules(wanted_outputs(PeaksParams(%s)))
        print(*(name in sys.modules for name in ("numba", "gpu.peaks.fodf_metrics_compiled", "worker.qc_raster",
                                                  "worker.io.fixels", "gpu.fixels.cpu_loops")))
    """
    root = Path(__file__).resolve().parents[3]
    runs = [subprocess.run([sys.executable, "-c", code % params], capture_output=True, text=True, check=True,
                           cwd=root).stdout.split()
            for params in ("", "metrics=['rgb'], qc=False", "format=['nifti', 'fixel'], metrics=[], qc=False",
                           "metrics=[], qc=False")]
    assert runs[0] == runs[1] == ["False", "False", "False", "False", "False"]
    # the fixel directory is FMLS segmentation's, which needs no fODF metrics
    assert runs[2] == ["False", "False", "False", "True", "False"]
    assert runs[3] == ["False", "False", "False", "False", "False"]


@pytest.mark.parametrize("damage", ["cut", "no voxel"])
def test_a_read_that_fails_leaves_no_background_work(tmp_path, damage, monkeypatch):
    """The engine's preparation, started beside the read, is over when the read's error
    reaches the caller (a test, a batch) that moves on."""
    import gpu.peaks.search

    started, finished = [], []

    def recorded(*args, _prepare=gpu.peaks.search.prepare_peaks, **kwargs):
        started.append(args)
        try:
            return _prepare(*args, **kwargs)
        finally:
            finished.append(args)

    monkeypatch.setattr(gpu.peaks.search, "prepare_peaks", recorded)
    sh = fod_phantom(SHAPE, 4, seed=1)["sh"].astype(np.float32)
    if damage == "no voxel":
        sh[:] = np.nan
    fod = save(sh, tmp_path / "fod.nii.gz")
    if damage == "cut":
        data = fod.read_bytes()
        fod.write_bytes(data[: len(data) // 2])  # the header stays readable: the data is cut
    with pytest.raises(InputError):
        run_peaks(fod, PeaksOutputs.in_folder(tmp_path / "out"), PeaksParams(backend="cpu"))
    assert len(started) == 1 and finished == started
    assert files_in(tmp_path / "out") == []
