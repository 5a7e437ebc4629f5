"""On a GPU: the FMLS kernels launched from their saved cubins through the driver binding
(streams, asynchronous copies, the work list counted up atomically) give the same bits as
numba launching them, in one chunk and in several under way at once; and a fresh process
with the cubins cached segments FODs without importing numba."""

import os
import subprocess
import sys

import numpy as np
import pytest

from gpu.cuda.device import cuda_available
from gpu.cuda.family_kernels import NumbaKernels
from gpu.fixels import backend_cuda, segment
from gpu.fixels.segment import segment_fods
from gpu.peaks.phantom import fod_phantom

pytestmark = pytest.mark.skipif(not cuda_available(), reason="the cubin path runs on a CUDA GPU only")


@pytest.fixture(scope="module")
def fod():
    # float32, a volume per coefficient: as a NIfTI image is read
    return np.asfortranarray(fod_phantom((12, 10, 8), 8, relative_noise=0.1, seed=3)["sh"], np.float32)


@pytest.mark.parametrize("chunk_voxels", [65536, 300])
def test_cubin_path_equals_numba_path(fod, chunk_voxels, monkeypatch, tmp_path):
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(backend_cuda.KERNELS, "_cubins", None)
    monkeypatch.setattr(segment, "_CHUNK_VOXELS", chunk_voxels)
    first = segment_fods(fod, backend="cuda")  # numba loads, cubins saved
    saved = sorted(path.name.rsplit("-", 1)[0] for path in tmp_path.rglob("*.cubin"))
    # a float32 volume a coefficient at a time: widened rows, then the four FMLS steps' kernels
    assert saved == ["fmls_grow_cuda", "fmls_refine_cuda", "fmls_refine_more_cuda", "fmls_sample_cuda",
                     "fmls_write_cuda", "widen_rows_cuda"], saved
    cubins = segment_fods(fod, backend="cuda")
    with monkeypatch.context() as patch:
        patch.setattr(backend_cuda.KERNELS, "kernels", lambda notice: NumbaKernels(backend_cuda._dispatcher))
        numba = segment_fods(fod, backend="cuda")
    for result in (first, cubins):
        for name in ("index", "directions", "afd", "peak_amp", "disp"):
            np.testing.assert_array_equal(getattr(result, name), getattr(numba, name), err_msg=name)


_FRESH = """
import sys
import numpy as np
from gpu.fixels import segment_fods
fixels = segment_fods(np.load(sys.argv[1]), backend="cuda")
np.save(sys.argv[2], np.concatenate([fixels.directions.ravel(), fixels.afd, fixels.peak_amp]))
print("numba imported:", "numba" in sys.modules)
"""


def test_a_fresh_process_with_cached_cubins_imports_no_numba(fod, tmp_path):
    np.save(tmp_path / "fod.npy", fod)
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "0", "FIBERTENSOR_KERNEL_CACHE": str(tmp_path / "kernels")}
    run = [sys.executable, "-c", _FRESH, str(tmp_path / "fod.npy"), str(tmp_path / "fresh.npy")]
    subprocess.run(run, env=env, check=True, capture_output=True)  # numba launches once, cubins saved
    fresh = subprocess.run(run, env=env, check=True, capture_output=True, text=True)
    assert "numba imported: False" in fresh.stdout, fresh.stderr
    here = segment_fods(fod, backend="cuda")
    np.testing.assert_array_equal(np.load(tmp_path / "fresh.npy"),
                                  np.concatenate([here.directions.ravel(), here.afd, here.peak_amp]))
