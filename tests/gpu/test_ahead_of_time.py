"""The ahead-of-time build of the CPU functions (gpu.ahead_of_time), made by ``fibertensor
warmup`` with the QC picture's glyph store: a small job that finds them loads neither numba
nor Pillow and writes the bytes numba's code and Pillow's text write; a build is used only for
the sources, versions and argument types it was made for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nibabel as nib
import numpy as np
import pytest

from gpu import ahead_of_time
from gpu.peaks.phantom import fod_phantom
from tests.file_contents import assert_same_file
from worker.jobs.peaks.ahead_of_time import WRITERS_BUILD_NAME
from tests.gpu.build_runs import run_with_kernels

ROOT = Path(__file__).resolve().parents[2]
# one xdist worker: the build (tens of seconds) is made once
pytestmark = pytest.mark.xdist_group("ahead_of_time")

_JOB = """
import json, sys
from service.cli import main
main(["peaks", *sys.argv[1:], "--backend", "cpu", "--quiet"])
print(json.dumps(sorted(name for name in sys.modules
                        if name.split(".")[0] in ("numba", "llvmlite", "PIL") or name == "numpy.ma")))
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    """A kernel cache folder holding the build ``fibertensor warmup --backend cpu --family
    peaks --lmax 4`` makes."""
    folder = tmp_path_factory.mktemp("kernels")
    done = run_with_kernels("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "peaks",
                "--lmax", "4", kernels=folder)
    assert "peaks ahead-of-time build (cpu)" in done.stdout and "peaks QC picture glyph store" in done.stdout, done.stdout
    return folder


def test_a_second_warm_up_keeps_the_build_and_the_glyph_store(kernels):
    def files() -> dict[Path, int]:
        return {path: path.stat().st_mtime_ns for path in kernels.rglob("*") if path.suffix != ".lock"}

    before = files()
    assert len([path for path in before if path.suffix == ".so"]) == 1
    done = run_with_kernels("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "peaks",
                "--lmax", "4", kernels=kernels)
    assert "peaks ahead-of-time build (cpu)" in done.stdout
    assert files() == before  # nothing compiled or rendered again


def test_a_small_job_runs_the_build_without_numba_or_pillow_and_writes_the_same_bytes(kernels, tmp_path):
    # 1,000 voxels of noisy crossing fibres, with a mask: a real small job
    phantom = fod_phantom((10, 10, 10), 4, seed=7, noise=0.02)
    nib.save(nib.Nifti1Image(phantom["sh"], np.diag([2.0, 2.0, 2.0, 1.0])), tmp_path / "fod.nii.gz")
    mask = np.ones((10, 10, 10), np.uint8)
    mask[0] = 0
    nib.save(nib.Nifti1Image(mask, np.diag([2.0, 2.0, 2.0, 1.0])), tmp_path / "mask.nii.gz")
    job = [str(tmp_path / "fod.nii.gz"), "--mask", str(tmp_path / "mask.nii.gz")]

    built = run_with_kernels(_JOB, job[0], str(tmp_path / "built" / "sub"), *job[1:], kernels=kernels)
    jit = run_with_kernels(_JOB, job[0], str(tmp_path / "jit" / "sub"), *job[1:], kernels=tmp_path / "no-build")
    assert json.loads(built.stdout.splitlines()[-1]) == []
    assert {"numba", "PIL"} <= set(json.loads(jit.stdout.splitlines()[-1]))

    names = sorted(p.name for p in (tmp_path / "jit").iterdir())
    assert sorted(p.name for p in (tmp_path / "built").iterdir()) == names
    assert {"sub_peaks.nii.gz", "sub_afd_max.nii.gz", "sub_rgb.nii.gz", "sub_qc.png"} <= set(names)
    for name in names:
        ours, numbas = (tmp_path / run / name for run in ("built", "jit"))
        if name.endswith(".json"):
            ours, numbas = (json.loads(p.read_text()) for p in (ours, numbas))
            ours.pop("seconds"), numbas.pop("seconds")
            assert ours == numbas
        else:
            assert_same_file(ours, numbas)
    count = np.asarray(nib.load(tmp_path / "built" / "sub_count.nii.gz").dataobj)
    assert (count[0] == 0).all() and (count[1:] > 0).all()


def test_a_build_serves_only_the_argument_types_it_was_made_for(in_kernels):
    loop = f"{'gpu.peaks.sshopm_generated_cpu'}.sshopm_cpu_m4"
    shape = dict(coeffs=(15, 3), sh2t=(15, 15), starts=(20, 3), neighbors=(20, 6), hops=(20, 6, 3))
    args = [np.zeros(shape["coeffs"]), np.zeros(shape["sh2t"]), np.zeros(shape["starts"]),
            np.zeros(shape["neighbors"], np.int64), np.zeros(shape["hops"]), np.zeros(16), np.zeros(16, np.int64),
            np.zeros((3, 5, 3)), np.zeros((3, 5)), np.zeros(3, np.int32), np.zeros((3, 8), np.int32),
            np.zeros((1, 64), np.int64)]
    assert ahead_of_time.lookup(loop, args) is not None
    # numba would type each of these otherwise: the build's wrapper would read them wrongly
    for i, wrong in ((0, np.zeros(shape["coeffs"], np.float32)), (0, np.zeros((3, 15)).T),
                     (3, np.zeros(shape["neighbors"], np.int32)), (9, np.zeros(3, np.int64)), (7, np.zeros((3, 5)))):
        assert ahead_of_time.lookup(loop, [*args[:i], wrong, *args[i + 1:]]) is None, i
    frozen = args[7].copy()
    frozen.setflags(write=False)  # an output the loop writes
    assert ahead_of_time.lookup(loop, [*args[:7], frozen, *args[8:]]) is None
    assert ahead_of_time.lookup(loop, args[:-1]) is None
    assert ahead_of_time.lookup("gpu.peaks.sshopm_generated_cpu.sshopm_cpu_m6", args) is None  # not built


def test_a_scalar_argument_matches_its_type():
    spec = ["scalar", "float32"]
    assert ahead_of_time._accepts(spec, np.float32(2.5))
    assert not ahead_of_time._accepts(spec, 2.5)  # numba types a Python float as float64
    assert not ahead_of_time._accepts(spec, np.zeros(1, np.float32))
    assert ahead_of_time._accepts(["scalar", "int64"], 3)


@pytest.mark.parametrize("change", ["source", "numba"])
def test_a_build_from_other_sources_or_versions_is_not_used(in_kernels, tmp_path, monkeypatch, change):
    stale = tmp_path / "cpu"
    shutil.copytree(in_kernels / "cpu", stale)
    manifest = json.loads((stale / "peaks.json").read_text())
    if change == "source":
        source = next(s for s in manifest["sources"] if s.endswith("qc_raster.py"))
        manifest["sources"][source] = "0" * 64
    else:
        manifest["numba"] = "0" * 64
    (stale / "peaks.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    canvas = np.zeros((4, 4, 3), np.uint8)
    args = [canvas, np.zeros(0, np.uint8), np.zeros((0, 7), np.int64), np.zeros(0, np.uint8),
            np.zeros((0, 5), np.int64), np.zeros((0, 6), np.int64), np.zeros((0, 4)), np.zeros(0, np.int64),
            np.zeros((0, 3), np.uint8)]
    assert ahead_of_time.lookup("worker.qc_raster.rasterize", args) is None
    # the same folder's build as made
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(in_kernels))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    assert ahead_of_time.lookup("worker.qc_raster.rasterize", args) is not None


@pytest.mark.parametrize("threads", [1, 3])
def test_the_build_on_the_hosts_threads_gets_numbas_peaks(in_kernels, monkeypatch, threads):
    """The build of the SS-HOPM loop runs over chunks of voxels on the host's threads (three:
    chunks of two voxels and a last one of one), each chunk with its own columns of the
    coefficients and its own histogram row: the peaks, per-voxel statistics and iteration
    histogram of numba's parallel loop."""
    from gpu.peaks import backend_cpu
    from gpu.peaks.search import sshopm_peaks

    sh = fod_phantom((41,), 4, seed=11, noise=0.05)["sh"]
    with ahead_of_time.numba_only():
        numbas = sshopm_peaks(sh, backend="cpu")
    monkeypatch.setattr(ahead_of_time, "host_threads", lambda: threads)
    chunks = []
    map_on_threads = ahead_of_time.map_on_threads
    monkeypatch.setattr(ahead_of_time, "map_on_threads",
                        lambda run, n: map_on_threads(lambda lo, hi: chunks.append((lo, hi)) or run(lo, hi), n))
    monkeypatch.setattr(backend_cpu, "_run_on_every_core", lambda *a, **k: pytest.fail("numba's loop ran"))
    built = sshopm_peaks(sh, backend="cpu")
    assert sorted(chunks) == ([(0, 41)] if threads == 1 else [(lo, min(41, lo + 2)) for lo in range(0, 41, 2)])
    for name in ("directions", "amplitudes", "count"):
        np.testing.assert_array_equal(getattr(built, name), getattr(numbas, name))
    timeless = [{k: v for k, v in result.stats.items() if k != "seconds"} for result in (built, numbas)]
    assert timeless[0] == timeless[1] and timeless[0]["iterations_total"] > 0


def test_the_warm_up_says_what_a_build_lacks(monkeypatch, capsys, tmp_path):
    from service.cli import warmup
    from worker import qc_text

    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(ahead_of_time, "missing_build_tools", lambda: "no C compiler (cc): install gcc")
    try:
        warmup._build_peaks_ahead_of_time(print)
    finally:
        qc_text._glyph_store.cache_clear()
    store, build = capsys.readouterr().out.splitlines()
    assert store.startswith("peaks QC picture glyph store: ") and store.endswith(".npz")  # needs no compiler
    assert list((tmp_path / "qc").glob("glyphs-*.npz"))
    assert build == ("peaks ahead-of-time build: skipped, no C compiler (cc): install gcc "
                     "(small CPU jobs then load numba, about a second)")


def test_the_warm_up_loads_numbas_code_beside_a_build(in_kernels, monkeypatch):
    """Larger runs take numba's loops: the warm-up loads them where a build would serve its
    few voxels."""
    from gpu.peaks import backend_cpu
    from gpu.peaks.warmup import warm_up_peaks

    on_every_core = []
    run = backend_cpu._run_on_every_core
    monkeypatch.setattr(backend_cpu, "_run_on_every_core", lambda *a, **k: on_every_core.append(a[0]) or run(*a, **k))
    warm_up_peaks("cpu", (4,))
    assert on_every_core and set(on_every_core) == {4}  # the warm-up's voxels (and the engine's preparation)
    args = [np.zeros((4, 4, 3), np.uint8), np.zeros(0, np.uint8), np.zeros((0, 7), np.int64), np.zeros(0, np.uint8),
            np.zeros((0, 5), np.int64), np.zeros((0, 6), np.int64), np.zeros((0, 4)), np.zeros(0, np.int64),
            np.zeros((0, 3), np.uint8)]
    assert ahead_of_time.lookup("worker.qc_raster.rasterize", args) is not None
    with ahead_of_time.numba_only():
        assert ahead_of_time.lookup("worker.qc_raster.rasterize", args) is None


_METRICS = """
import sys
import numpy as np
from gpu.peaks.fodf_metrics import fodf_metrics
count = np.array([0, 1, 2], np.uint8)
amplitudes = np.array([[0, 0], [0.5, 0], [0.7, 0.2]], np.float32)
directions = np.tile(np.float32([1, 0, 0]), (3, 2, 1))
metrics = fodf_metrics(np.ones((3, 45), np.float32), directions, amplitudes, count)
print(metrics.afd_max.tolist(), metrics.rgb.tolist(), any(n.split(".")[0] == "numba" for n in sys.modules))
"""


def test_a_gpu_warm_up_builds_the_writers_beside_the_cpu_build(kernels, tmp_path):
    """``fibertensor warmup --backend cuda`` builds the writers' passes alone, under a name of
    their own (a CPU build's loops stay), so that a GPU job, whose kernels launch from cubins,
    writes its fODF metrics without loading numba."""
    folder = tmp_path / "kernels"
    shutil.copytree(kernels, folder)
    done = run_with_kernels("from service.cli import main; main()", "warmup", "--backend", "cuda", "--family", "peaks",
                "--lmax", "2", kernels=folder)
    assert "peaks writers' ahead-of-time build: " in done.stdout, done.stdout
    manifests = {path.stem: json.loads(path.read_text()) for path in (folder / "cpu").glob("*.json")}
    writers = [m for m in manifests.values() if m["module"].startswith(WRITERS_BUILD_NAME)]
    assert len(writers) == 1 and sorted(writers[0]["functions"]) == [
        "gpu.peaks.fodf_metrics_compiled._colour", "gpu.peaks.fodf_metrics_compiled._voxel_metrics",
        "worker.qc_raster.rasterize"]
    assert any(any(".sshopm_cpu_m4" in f for f in m["functions"]) for m in manifests.values())  # the CPU build stays
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FIBERTENSOR_KERNEL_CACHE": str(folder), "NUMBA_ENABLE_CUDASIM": "0"}
    shown = subprocess.run([sys.executable, "-c", _METRICS], cwd=ROOT, env=env, capture_output=True, text=True,
                           check=True, timeout=300).stdout.split("] ")
    assert shown[0] == "[0.0, 0.5, 0.699999988079071" and shown[-1].strip() == "False"
