"""The ahead-of-time build of the CSD and MSMT-CSD CPU loops (gpu.ahead_of_time), made by
``fibertensor warmup --backend cpu --family fod``: a small CPU fod job that finds it loads no
numba and writes the bytes numba's loops write; a fit of any size takes the build, on the
host's threads, and arguments of other types take numba's loops."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from gpu import ahead_of_time
from gpu.fod import backend_cpu
from gpu.fod.csd_problem import csd_problem
from gpu.fod.msmt_problem import msmt_problem
from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses
from tests.file_contents import assert_same_file
from tests.worker.jobs.fod_phantom import write_phantom
from tests.gpu.build_runs import run_with_kernels

# one xdist worker: the build (tens of seconds) is made once
pytestmark = pytest.mark.xdist_group("ahead_of_time")

_JOB = """
import json, sys
from service.cli import main
main(["fod", *sys.argv[1:], "--backend", "cpu", "--quiet"])
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("numba", "llvmlite"))))
"""


@pytest.fixture(scope="module")
def kernels(tmp_path_factory) -> Path:
    """A kernel cache folder holding the build ``fibertensor warmup --backend cpu --family fod``
    makes."""
    folder = tmp_path_factory.mktemp("kernels")
    done = run_with_kernels("from service.cli import main; main()", "warmup", "--backend", "cpu", "--family", "fod",
                kernels=folder)
    assert "fod ahead-of-time build (cpu)" in done.stdout, done.stdout
    return folder


@pytest.mark.parametrize("algorithm", ["csd", "msmt_csd"])
def test_a_small_job_runs_the_build_without_numba_and_writes_the_same_bytes(kernels, tmp_path, algorithm):
    # 288 voxels of the jobs' phantom, its exact responses given
    (tmp_path / "dwi").mkdir()
    p = write_phantom(tmp_path / "dwi")["paths"]
    responses = [str(p["wm"])] if algorithm == "csd" else [str(p[tissue]) for tissue in ("wm", "gm", "csf")]
    job = ["--bval", str(p["bval"]), "--bvec", str(p["bvec"]), "--mask", str(p["mask"]), "--response", *responses,
           "--algorithm", algorithm]
    for run in ("built", "jit"):
        (tmp_path / run).mkdir()
    built = run_with_kernels(_JOB, str(p["dwi"]), str(tmp_path / "built" / "sub"), *job, kernels=kernels)
    jit = run_with_kernels(_JOB, str(p["dwi"]), str(tmp_path / "jit" / "sub"), *job, kernels=tmp_path / "no-build")
    assert json.loads(built.stdout.splitlines()[-1]) == []
    assert "numba" in json.loads(jit.stdout.splitlines()[-1])

    names = sorted(path.name for path in (tmp_path / "jit").iterdir())
    assert sorted(path.name for path in (tmp_path / "built").iterdir()) == names
    assert {"sub_wmfod.nii", "sub_fod.json"} <= set(names)
    for name in names:
        ours, numbas = (tmp_path / run / name for run in ("built", "jit"))
        if name.endswith(".json"):
            ours, numbas = (json.loads(path.read_text()) for path in (ours, numbas))
            ours.pop("seconds"), numbas.pop("seconds")
            assert ours == numbas
        else:
            assert_same_file(ours, numbas)


_GPU_WARM_UP = """
from gpu.fixels import warmup as fixels_warmup
from gpu.fod import warmup as fod_warmup
from service.cli import main
cpu_warm_ups = fod_warmup.warm_up_fod, fixels_warmup.warm_up_fixels
# the simulator's kernels would take minutes: the CPU loops (the builds' input) are loaded as a GPU warm-up loads
# them, in this process (--processes 1: spawned processes would not see these stand-ins); --family fod brings fixels
fod_warmup.warm_up_fod = lambda backend, log: cpu_warm_ups[0]("cpu", log)
fixels_warmup.warm_up_fixels = lambda backend, log: cpu_warm_ups[1]("cpu", log)
main(["warmup", "--backend", "cuda", "--family", "fod", "--processes", "1"])
"""

_FALLBACK = """
import json, sys
import numpy as np
from gpu.fod import backend_cpu
from gpu.fod.msmt_problem import msmt_problem
from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses
bvals, bvecs = shell_scheme(2, ((1000, 30), (2000, 45)), seed=1)
signals = dwi_phantom((6, 5, 2), bvals, bvecs, snr=30.0, seed=4)["dwi"].reshape(-1, bvals.size)
x, niter = backend_cpu.msmt_csd_cpu(msmt_problem(bvals, bvecs, tissue_responses([0.0, 1000.0, 2000.0])), signals)
print(x.tobytes().hex(), niter.tolist())
print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] in ("numba", "llvmlite"))))
"""


def test_a_gpu_warm_up_builds_the_cpu_fallback_beside_the_cpu_build(kernels, tmp_path):
    """The CUDA backend solves on the CPU the MSMT-CSD voxels its kernel hands back; a GPU job's
    kernels launch from cubins, so without a build that first hand-back loaded numba (seconds
    in each of a batch's GPU workers). ``fibertensor warmup --backend cuda`` builds the
    MSMT-CSD loop alone, under a name of its own: a CPU build's CSD loop stays, and the
    hand-back runs without numba and writes numba's bytes."""
    folder = tmp_path / "kernels"
    shutil.copytree(kernels, folder)
    done = run_with_kernels(_GPU_WARM_UP, kernels=folder)
    assert "fod CPU fallback's ahead-of-time build: " in done.stdout, done.stdout
    manifests = {path.stem: json.loads(path.read_text())["functions"] for path in (folder / "cpu").glob("*.json")}
    assert sorted(manifests["fod_fallback"]) == ["gpu.fod.cpu_loops.msmt_loop"]
    assert sorted(manifests["fod"]) == ["gpu.fod.cpu_loops.csd_loop", "gpu.fod.cpu_loops.msmt_loop"]

    alone = tmp_path / "fallback-only"
    (alone / "cpu").mkdir(parents=True)
    for path in (folder / "cpu").glob("fod_fallback*"):
        shutil.copy(path, alone / "cpu")
    built = run_with_kernels(_FALLBACK, kernels=alone).stdout.splitlines()
    jit = run_with_kernels(_FALLBACK, kernels=tmp_path / "no-build").stdout.splitlines()
    assert json.loads(built[-1]) == [] and "numba" in json.loads(jit[-1])
    assert built[0] == jit[0]


@pytest.fixture(scope="module")
def problems():
    bvals, bvecs = shell_scheme(2, ((1000, 30), (2000, 45)), seed=1)
    signals = dwi_phantom((6, 5, 2), bvals, bvecs, snr=30.0, seed=4)["dwi"].reshape(-1, bvals.size)
    wm, gm, csf = tissue_responses([0.0, 1000.0, 2000.0])
    csd = csd_problem(bvals, bvecs, wm[-1])
    return (msmt_problem(bvals, bvecs, [wm, gm, csf]), signals), (csd, signals[:, csd.volumes])


def _solve(problems):
    (msmt, msmt_signals), (csd, csd_signals) = problems
    return backend_cpu.msmt_csd_cpu(msmt, msmt_signals), backend_cpu.csd_cpu(csd, csd_signals)


def test_the_build_on_threads_and_numbas_parallel_loops_give_the_same_bytes(in_kernels, problems, monkeypatch):
    """A fit of any size takes the build, its voxels in chunks on the host's threads (here 4
    threads, chunks of 2 voxels, across the loops' batches), and writes what numba's parallel
    loops write."""
    called, chunks = [], []
    lookup = ahead_of_time.lookup

    def recorded(name, args):
        called.append(name)
        build = lookup(name, args)
        return None if build is None else lambda *chunk: chunks.append(len(chunk[0])) or build(*chunk)

    monkeypatch.setattr(ahead_of_time, "lookup", recorded)
    monkeypatch.setattr(ahead_of_time, "host_threads", lambda: 4)
    built = _solve(problems)
    assert called == ["gpu.fod.cpu_loops.msmt_loop", "gpu.fod.cpu_loops.csd_loop"]
    assert sum(chunks) == 2 * 60 and max(chunks) == 2
    assert all(lookup(name, ()) is None for name in called)  # the wrong arguments find none
    with ahead_of_time.numba_only():
        parallel = _solve(problems)
    assert sum(chunks) == 2 * 60  # numba's loops, not the build
    for (x, niter), (x_numba, niter_numba) in zip(built, parallel):
        np.testing.assert_array_equal(niter, niter_numba)
        assert x.tobytes() == x_numba.tobytes()


def test_a_build_serves_only_the_argument_types_it_was_made_for(in_kernels, problems):
    (msmt, signals), _ = problems
    args = [np.ascontiguousarray(signals, np.float64), msmt.project, msmt.B, np.ascontiguousarray(msmt.B.T),
            msmt.B @ msmt.B.T, msmt.L, float(msmt.constraint_norm_lambda), int(msmt.max_iterations),
            np.empty((60, msmt.H.shape[1])), np.empty(60, np.int32)]
    loop = "gpu.fod.cpu_loops.msmt_loop"
    assert ahead_of_time.lookup(loop, args) is not None
    for i, wrong in ((0, signals.astype(np.float32)), (1, np.asfortranarray(msmt.project)), (6, np.float32(0.5)),
                     (9, np.empty(60, np.int64))):
        assert ahead_of_time.lookup(loop, [*args[:i], wrong, *args[i + 1:]]) is None, i


def test_a_build_of_other_solver_code_is_not_used(in_kernels, problems, tmp_path, monkeypatch):
    """The loops compile in the per-voxel solvers of another module (register_jitable): a
    change there makes the build stale too."""
    stale = tmp_path / "cpu"
    shutil.copytree(in_kernels / "cpu", stale)
    manifest = json.loads((stale / "fod.json").read_text())
    solvers = [source for source in manifest["sources"] if source.endswith("solver_math.py")]
    assert len(solvers) == 1
    manifest["sources"][solvers[0]] = "0" * 64
    (stale / "fod.json").write_text(json.dumps(manifest))
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    (csd, signals) = problems[1]
    args = [np.ascontiguousarray(signals, np.float64), csd.init, csd.Q, csd.QtQ, csd.P, np.ascontiguousarray(csd.P.T),
            float(csd.threshold), int(csd.max_iterations), np.empty((60, csd.Q.shape[1])), np.empty(60, np.int32)]
    assert ahead_of_time.lookup("gpu.fod.cpu_loops.csd_loop", args) is None
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(in_kernels))
    monkeypatch.setattr(ahead_of_time, "_loaded", {})
    assert ahead_of_time.lookup("gpu.fod.cpu_loops.csd_loop", args) is not None


def test_the_warm_up_says_what_the_build_lacks(monkeypatch, capsys):
    from service.cli import warmup

    monkeypatch.setattr(ahead_of_time, "missing_build_tools", lambda: "no C compiler (cc): install gcc")
    warmup._build_fod_ahead_of_time(print)
    assert capsys.readouterr().out == ("fod ahead-of-time build: skipped, no C compiler (cc): install gcc "
                                       "(small CPU fits then load numba, about a second)\n")
    warmup._build_fod_ahead_of_time(print, fallback=True)
    assert capsys.readouterr().out == ("fod CPU fallback's ahead-of-time build: skipped, no C compiler (cc): install "
                                       "gcc (GPU fits handing voxels to the CPU then load numba, about a second)\n")
