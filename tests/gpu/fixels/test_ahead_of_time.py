"""The ahead-of-time build of the FMLS CPU loop (gpu.ahead_of_time), made by ``fibertensor
warmup --family fixels``: a small CPU fixels job, and with the fod build a single-shell CPU fod
job that estimates its response (tournier, which segments FOD lobes), load no numba and write
the bytes numba's loop writes; a run of any size takes the build, on the host's threads, and
arguments of other types take numba's loop."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpu import ahead_of_time
from gpu.fixels import fmls
from gpu.fixels.fmls_tables import fmls_tables
from gpu.peaks.phantom import fod_phantom
from tests.gpu.build_runs import run_with_kernels
from tests.worker.jobs.fod_phantom import AFFINE, write_phantom
from worker.io.images import write_image

# one xdist worker: the builds (tens of seconds) are made once
pytestmark = pytest.mark.xdist_group("ahead_of_time")

_JOB = """
import json, sys
from service.cli import main
main([*sys.argv[1:], "--backend", "cpu", "--quiet"])
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("numba", "llvmlite"))))
"""

_LOOP = f"{fmls.LOOP_MODULE}.segment_loop"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    """A kernel cache folder holding the builds ``fibertensor warmup --backend cpu --family fod
    fixels`` makes."""
    folder = tmp_path_factory.mktemp("kernels")
    done = run_with_kernels("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "fod",
                            "fixels", kernels=folder)
    assert "fod ahead-of-time build (cpu)" in done.stdout and "fixels ahead-of-time build (cpu)" in done.stdout, \
        done.stdout
    return folder


def _files(folder: Path) -> dict[str, object]:
    """Every file under ``folder`` by relative path: its bytes, or a JSON sidecar's content
    less its timings."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file():
            content = path.read_bytes()
            if path.suffix == ".json":
                content = json.loads(content)
                content.pop("seconds")
            found[str(path.relative_to(folder))] = content
    return found


def _built_and_jit(kernels: Path, tmp_path: Path, *job: str) -> tuple[dict, dict]:
    """The outputs of ``job`` (its output path ``{out}/``-relative) run in a fresh process
    with the builds and in one without, after checking that only the latter loaded numba."""
    runs = {}
    for run, folder in (("built", kernels), ("jit", tmp_path / "no-build")):
        (tmp_path / run).mkdir()
        done = run_with_kernels(_JOB, *(arg.replace("{out}", str(tmp_path / run)) for arg in job), kernels=folder)
        loaded = json.loads(done.stdout.splitlines()[-1])
        assert ("numba" in loaded) == (run == "jit"), (run, loaded)
        runs[run] = _files(tmp_path / run)
    return runs["built"], runs["jit"]


def test_a_small_fixels_job_runs_the_build_without_numba_and_writes_the_same_bytes(kernels, tmp_path):
    # 576 voxels of 1 to 3 fibres, a sixth of them masked out
    sh = fod_phantom((12, 12, 4), 8, seed=3)["sh"]
    mask = np.ones(sh.shape[:3], np.uint8)
    mask[:2] = 0
    fod = write_image(tmp_path / "fod.nii", sh, AFFINE)
    write_image(tmp_path / "mask.nii", mask, AFFINE)
    built, jit = _built_and_jit(kernels, tmp_path, "fixels", str(fod), "{out}/fixels", "--mask",
                                str(tmp_path / "mask.nii"))
    assert {"fixels.json", "fixels/index.nii", "fixels/afd.nii"} <= set(jit)
    assert jit["fixels.json"]["fixels"] > 576
    assert built == jit


def test_a_single_shell_fod_job_estimating_its_response_runs_the_builds_without_numba(kernels, tmp_path):
    """No --response: tournier estimates it, segmenting FOD lobes with the FMLS loop between CSD
    fits; the fod and fixels builds together leave numba out."""
    (tmp_path / "dwi").mkdir()
    p = write_phantom(tmp_path / "dwi", shells=((2000, 60),), n_b0=5)["paths"]
    built, jit = _built_and_jit(kernels, tmp_path, "fod", str(p["dwi"]), "{out}/sub", "--bval", str(p["bval"]),
                                "--bvec", str(p["bvec"]), "--mask", str(p["mask"]), "--algorithm", "csd")
    assert {"sub_wmfod.nii", "sub_wm.txt", "sub_fod.json"} <= set(jit)
    assert built == jit


def _segment(coeffs: np.ndarray, **kwargs) -> tuple[np.ndarray, ...]:
    return fmls.segment_voxels_cpu(coeffs, fmls_tables(8), 0.0, 0.1, 1.0, 0, False, 16, **kwargs)


@pytest.fixture(scope="module")
def coeffs() -> np.ndarray:
    return fod_phantom((8, 6, 2), 8, seed=5)["sh"].reshape(-1, 45).astype(np.float64)


def test_the_build_on_threads_and_numbas_parallel_loop_give_the_same_bytes(in_kernels, coeffs, monkeypatch):
    """A run of any size takes the build, its voxels in chunks on the host's threads (here 4
    threads, chunks of 3 voxels), and writes what numba's parallel loop writes."""
    chunks = []
    lookup = ahead_of_time.lookup

    def recorded(*args):
        build = lookup(*args)
        return None if build is None else lambda *chunk: chunks.append(len(chunk[0])) or build(*chunk)

    monkeypatch.setattr(ahead_of_time, "lookup", recorded)
    monkeypatch.setattr(ahead_of_time, "host_threads", lambda: 4)
    built = _segment(coeffs)
    assert sum(chunks) == coeffs.shape[0] and max(chunks) == 3
    assert lookup(_LOOP, ()) is None  # the wrong arguments find none
    assert fmls.build_present(fmls_tables(8))
    with ahead_of_time.numba_only():
        assert not fmls.build_present(fmls_tables(8))
        parallel = _segment(coeffs)
    assert sum(chunks) == coeffs.shape[0]  # numba's loop, not the build
    assert built[0].sum() > coeffs.shape[0]
    for ours, numbas in zip(built, parallel):
        assert ours.tobytes() == numbas.tobytes()


def _loop_args(coeffs: np.ndarray) -> list:
    tables = fmls_tables(8)
    n = coeffs.shape[0]
    return [coeffs, tables.lmax, tables.unit, tables.neighbours, tables.weights,
            np.ascontiguousarray(tables.sh_to_amp.T), tables.legendre, tables.legendre_step, tables.derivative_factors,
            0.0, 0.1, 1.0, 0, False, np.zeros(n, np.int32), np.zeros((n, 16, 3)), np.zeros((n, 16)), np.zeros((n, 16))]


def test_a_build_serves_only_the_argument_types_it_was_made_for(in_kernels, coeffs):
    args = _loop_args(coeffs)
    assert ahead_of_time.lookup(_LOOP, args) is not None
    for i, wrong in ((0, coeffs.astype(np.float32)), (0, np.asfortranarray(coeffs)), (1, np.int32(8)),
                     (3, args[3].astype(np.int64)), (9, np.float32(0.0)), (14, np.zeros(len(coeffs), np.int64))):
        assert ahead_of_time.lookup(_LOOP, [*args[:i], wrong, *args[i + 1:]]) is None, i


def test_a_build_of_other_fmls_math_is_not_used(in_kernels, coeffs, tmp_path, monkeypatch):
    """The loop compiles in the per-voxel math of another module (register_jitable): a change
    there makes the build stale too."""
    stale = tmp_path / "cpu"
    shutil.copytree(in_kernels / "cpu", stale)
    manifest = json.loads((stale / "fixels.json").read_text())
    math_files = [source for source in manifest["sources"] if source.endswith("fmls_math.py")]
    assert len(math_files) == 1
    manifest["sources"][math_files[0]] = "0" * 64
    (stale / "fixels.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    args = _loop_args(coeffs)
    assert ahead_of_time.lookup(_LOOP, args) is None
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(in_kernels))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    assert ahead_of_time.lookup(_LOOP, args) is not None


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_the_warm_up_builds_the_loop_for_either_backend(monkeypatch, capsys, backend):
    """A GPU run segments on the CPU the voxels with more fixels than its first pass holds: a
    CUDA warm-up, which compiles the CPU loop too, builds it as well; --no-ahead-of-time not."""
    from gpu.cuda import backend as backends
    from gpu.fixels import warmup as fixels_warmup
    from service.cli import main, warmup

    monkeypatch.setattr(backends, "resolve_backend", lambda chosen: chosen)
    monkeypatch.setattr(fixels_warmup, "warm_up_fixels", lambda chosen, log: print(f"warmed {chosen}"))
    monkeypatch.setattr(warmup, "_build_fixels_ahead_of_time", lambda log: print("built"))
    assert main(["warmup", "--backend", backend, "--family", "fixels"]) == 0
    assert main(["warmup", "--backend", backend, "--family", "fixels", "--no-ahead-of-time"]) == 0
    assert capsys.readouterr().out == f"warmed {backend}\nbuilt\nwarmed {backend}\n"


def test_the_warm_up_says_what_the_build_lacks(monkeypatch, capsys):
    from service.cli import warmup

    monkeypatch.setattr(ahead_of_time, "missing_build_tools", lambda: "no C compiler (cc): install gcc")
    warmup._build_fixels_ahead_of_time(print)
    assert capsys.readouterr().out == ("fixels ahead-of-time build: skipped, no C compiler (cc): install gcc "
                                       "(small CPU segmentations then load numba, about a second)\n")
