"""On a GPU: the peaks kernels launched from their saved cubins through the driver binding
give the same bits as numba launching them, in one chunk and in several."""

import numpy as np
import pytest

from gpu.cuda.device import cuda_available
from gpu.cuda.family_kernels import NumbaKernels
from gpu.peaks import backend_cuda
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks

pytestmark = pytest.mark.skipif(not cuda_available(), reason="the cubin path runs on a CUDA GPU only")


@pytest.mark.parametrize("chunk_voxels", [None, 700])
def test_cubin_path_equals_numba_path(chunk_voxels, monkeypatch, tmp_path):
    monkeypatch.setenv("FIBERTENSOR_KERNEL_CACHE", str(tmp_path))
    monkeypatch.setattr(backend_cuda.KERNELS, "_cubins", None)
    sh = fod_phantom((12, 12, 12), 8, relative_noise=0.3, seed=3)["sh"].astype(np.float32)
    first = sshopm_peaks(sh, backend="cuda", chunk_voxels=chunk_voxels)  # numba loads, cubins saved
    assert any(tmp_path.rglob("*.cubin"))
    cubins = sshopm_peaks(sh, backend="cuda", chunk_voxels=chunk_voxels)
    with monkeypatch.context() as patch:
        patch.setattr(backend_cuda.KERNELS, "kernels", lambda notice: NumbaKernels(backend_cuda._dispatcher))
        numba = sshopm_peaks(sh, backend="cuda", chunk_voxels=chunk_voxels)
    for result in (first, cubins):
        np.testing.assert_array_equal(result.count, numba.count)
        np.testing.assert_array_equal(result.directions, numba.directions)
        np.testing.assert_array_equal(result.amplitudes, numba.amplitudes)
