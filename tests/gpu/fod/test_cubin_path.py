"""On a GPU: the CSD and MSMT-CSD kernels launched from their saved cubins through the driver
binding give the same bits as numba launching them, in one chunk and in several; and a
fresh process with the cubins cached fits FODs without importing numba."""

import os
import subprocess
import sys

import numpy as np
import pytest

from gpu.cuda.device import cuda_available
from gpu.cuda.family_kernels import NumbaKernels
from gpu.fod import backend_cuda
from gpu.fod.csd_problem import csd_problem
from gpu.fod.msmt_problem import msmt_problem
from gpu.fod.phantom import dwi_phantom, shell_scheme, tissue_responses

pytestmark = pytest.mark.skipif(not cuda_available(), reason="the cubin path runs on a CUDA GPU only")


@pytest.fixture(scope="module")
def case():
    bvals, bvecs = shell_scheme(2, ((1000, 30), (2000, 45)), seed=1)
    signals = dwi_phantom((10, 10, 8), bvals, bvecs, snr=30.0, seed=4)["dwi"].reshape(-1, bvals.size)
    responses = tissue_responses([0.0, 1000.0, 2000.0])
    return bvals, bvecs, signals.astype(np.float64), responses


def _solves(case, chunk_voxels):
    bvals, bvecs, signals, (wm, gm, csf) = case
    msmt = msmt_problem(bvals, bvecs, [wm, gm, csf])
    csd = csd_problem(bvals, bvecs, wm[-1])
    return (backend_cuda.msmt_csd_cuda(msmt, signals, chunk_voxels=chunk_voxels),
            backend_cuda.csd_cuda(csd, signals[:, csd.volumes], chunk_voxels=chunk_voxels))


@pytest.mark.parametrize("chunk_voxels", [backend_cuda.CHUNK_VOXELS, 300])
def test_cubin_path_equals_numba_path(case, chunk_voxels, monkeypatch, tmp_path):
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(backend_cuda.KERNELS, "_cubins", None)
    first = _solves(case, chunk_voxels)  # numba loads, cubins saved
    assert len(list(tmp_path.rglob("*.cubin"))) == 2
    cubins = _solves(case, chunk_voxels)
    with monkeypatch.context() as patch:
        patch.setattr(backend_cuda.KERNELS, "kernels", lambda notice: NumbaKernels(backend_cuda._dispatcher))
        numba = _solves(case, chunk_voxels)
    for result in (first, cubins):
        for (x, niter), (x_numba, niter_numba) in zip(result, numba):
            np.testing.assert_array_equal(niter, niter_numba)
            np.testing.assert_array_equal(x, x_numba)


_FRESH = """
import sys
import numpy as np
from gpu.fod import msmt_csd, csd
from gpu.fod.phantom import tissue_responses
bvals, bvecs, dwi = (np.load(sys.argv[1] + name + ".npy") for name in ("bvals", "bvecs", "dwi"))
responses = tissue_responses([0.0, 1000.0, 2000.0])
np.save(sys.argv[1] + "fresh.npy", np.concatenate([*msmt_csd(dwi, bvals, bvecs, responses, backend="cuda"),
                                                     csd(dwi, bvals, bvecs, responses[0][-1], backend="cuda")], -1))
print("numba imported:", "numba" in sys.modules)
"""


def test_a_fresh_process_with_cached_cubins_imports_no_numba(case, tmp_path):
    from gpu.fod import csd, msmt_csd

    bvals, bvecs, signals, responses = case
    dwi = signals[:40].reshape(5, 4, 2, -1)
    for name, array in (("bvals", bvals), ("bvecs", bvecs), ("dwi", dwi)):
        np.save(tmp_path / f"{name}.npy", array)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "FIBERTENSOR_KERNEL_CACHE": str(tmp_path / "kernels")}
    run = [sys.executable, "-c", _FRESH, f"{tmp_path}/"]
    subprocess.run(run, env=env, check=True, capture_output=True)  # numba launches once, cubins saved
    fresh = subprocess.run(run, env=env, check=True, capture_output=True, text=True)
    assert "numba imported: False" in fresh.stdout, fresh.stderr
    here = np.concatenate([*msmt_csd(dwi, bvals, bvecs, responses, backend="cuda"),
                           csd(dwi, bvals, bvecs, responses[0][-1], backend="cuda")], -1)
    np.testing.assert_array_equal(np.load(tmp_path / "fresh.npy"), here)
