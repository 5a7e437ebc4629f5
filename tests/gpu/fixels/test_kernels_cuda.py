"""The CUDA kernel (numba's simulator; a GPU with NUMBA_ENABLE_CUDASIM=0) against the CPU
backend on a few voxels: default settings, and merging with the peak direction; a voxel with
more lobes than the kernels' scratch redone on the CPU; the fixels byte for byte."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.cuda.simulator import simulator_active
from gpu.fixels import backend_cuda, kernels_cuda, segment
from gpu.fixels.fmls import segment_voxels_cpu
from gpu.fixels.fmls_math import LOBE_OVERFLOW
from gpu.fixels.fmls_tables import fmls_tables
from gpu.fixels.segment import FmlsOptions, segment_fods
from gpu.peaks.phantom import fod_phantom


def assert_same_fixels(cuda, cpu):
    np.testing.assert_array_equal(cuda.index, cpu.index)
    # float64 on both; the GPU may contract multiply-adds, so not always the same last bit
    for name in ("directions", "afd", "peak_amp", "disp"):
        np.testing.assert_allclose(getattr(cuda, name), getattr(cpu, name), rtol=1e-6, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("options", [FmlsOptions(), FmlsOptions(lobe_merge_ratio=0.3, dirpeak=True, peak_value=0.0)])
def test_cuda_matches_cpu(options):
    # five voxels: two blocks of two and a block of one
    fod = fod_phantom((5, 1, 1), 8, relative_noise=0.05, seed=1)["sh"]
    fod[1, 0, 0, 0] = -1.0  # no fixel: the l = 0 term is not positive
    fod[3, 0, 0, 4] = np.nan  # no fixel: a coefficient is not finite
    cuda = segment_fods(fod, options=options, backend="cuda")
    cpu = segment_fods(fod, options=options, backend="cpu")
    assert_same_fixels(cuda, cpu)
    assert cpu.index[1, 0, 0, 0] == 0 and cpu.index[3, 0, 0, 0] == 0 and cpu.index[..., 0].sum() >= 4


@pytest.mark.parametrize("layout", ["volume per coefficient", "voxel's coefficients together"])
def test_cuda_reads_float32_images_as_they_lie(layout, monkeypatch):
    # float32 as the image readers give it, in NIfTI's memory order or in dwi2fod's .mif order,
    # with and without a mask: the rows reach the kernels widened exactly, as the CPU's. In
    # chunks of 5 voxels, two under way at a time on alternating workspaces.
    monkeypatch.setattr(segment, "_CHUNK_VOXELS", 5)
    fractions = []
    fod = fod_phantom((3, 2, 2), 8, relative_noise=0.05, seed=3)["sh"].astype(np.float32)
    if layout == "volume per coefficient":
        fod = np.asfortranarray(fod)
    else:
        fod = np.ascontiguousarray(fod.transpose(2, 1, 0, 3)).transpose(2, 1, 0, 3)
    rows = fod.transpose(2, 1, 0, 3).reshape(-1, fod.shape[3])
    assert np.shares_memory(rows, fod)
    mask = np.ones(fod.shape[:3], bool)
    mask[1, 0, 1] = mask[2, 1, 0] = False
    for where in (None, mask):
        cpu = segment_fods(fod, where, backend="cpu")
        cuda = segment_fods(fod, where, backend="cuda", progress=fractions.append)
        assert_same_fixels(cuda, cpu)
        assert cpu.index[..., 0].sum() >= (8 if where is None else 6)
    assert fractions == [5 / 12, 10 / 12, 1.0, 0.5, 1.0]


def test_a_run_stopped_by_its_progress_callback_ends_with_the_chunk_under_way(monkeypatch):
    # the callback's exception (a cancelled job) stops the run after the first chunk, once the
    # chunk already under way on the device is done
    monkeypatch.setattr(segment, "_CHUNK_VOXELS", 2)
    fod = fod_phantom((3, 2, 1), 8, relative_noise=0.05, seed=3)["sh"].astype(np.float32)
    waited = []
    real_start = backend_cuda.start_segment_cuda

    def start(*args):
        finish = real_start(*args)
        chunk = len(waited)
        waited.append(False)

        def wait():
            waited[chunk] = True
            return finish()

        return wait

    monkeypatch.setattr(backend_cuda, "start_segment_cuda", start)
    fractions = []

    def cancel(fraction):
        fractions.append(fraction)
        raise InterruptedError("cancelled")

    with pytest.raises(InterruptedError):
        segment_fods(fod, backend="cuda", progress=cancel)
    # the first chunk collected, the second waited for, the third never started
    assert fractions == [2 / 6] and waited == [True, True]


@pytest.mark.skipif(not simulator_active(), reason="shrinks the kernel's lobe scratch, which only the simulator reads at run time")
def test_lobe_overflow_is_redone_on_cpu(monkeypatch):
    fod = fod_phantom((2, 1, 1), 8, relative_noise=0.3, seed=2)["sh"]
    options = FmlsOptions(no_thresholds=True)
    cpu = segment_fods(fod, options=options, backend="cpu")
    assert cpu.index[..., 0].max() > 2
    monkeypatch.setattr(kernels_cuda, "MAX_LOBES", 2)
    counts = backend_cuda.segment_voxels_cuda(fod.reshape(2, -1).astype(np.float64), fmls_tables(8), 0.0, 0.0, 1.0,
                                              0, False, 8)[0]
    assert (counts == LOBE_OVERFLOW).all()
    assert_same_fixels(segment_fods(fod, options=options, backend="cuda"), cpu)


@pytest.mark.parametrize("options", [FmlsOptions(no_thresholds=True),
                                     FmlsOptions(lobe_merge_ratio=0.3, dirpeak=True, peak_value=0.0)])
def test_kernels_match_cpu_bytes(options, monkeypatch):
    # voxel 0 seeds more lobes than the 9 the simulator is given room for; voxel 2 has a NaN
    fod = fod_phantom((3, 1, 1), 8, relative_noise=0.3, seed=2)["sh"].reshape(3, -1).astype(np.float64)
    fod[2, 4] = np.nan
    if simulator_active():
        monkeypatch.setattr(kernels_cuda, "MAX_LOBES", 9)
    integral, peak = options.thresholds
    args = (fmls_tables(8), integral, peak, options.lobe_merge_ratio, options.maxnum, options.dirpeak, 16)
    cpu = segment_voxels_cpu(fod, *args)
    split = backend_cuda.segment_voxels_cuda(fod, *args)
    assert cpu[0][2] == 0 and cpu[0][:2].min() >= 4
    expected = cpu[0].copy()
    if simulator_active():
        expected[0] = LOBE_OVERFLOW
    np.testing.assert_array_equal(split[0], expected)
    for v in np.flatnonzero(expected > 0):
        n = expected[v]
        for ours, theirs in zip(split[1:], cpu[1:]):
            assert ours[v, :n].tobytes() == theirs[v, :n].astype(np.float32).tobytes()
