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


def test_amplitudes_compare_as_float64_through_their_float32_shadow():
    # the grow kernel compares samples on a float32 shadow and reads the float64 samples only
    # where two tie there: values that tie in float32 but not in float64, equal ones, signed
    # zeros and magnitudes below float32's range, against the float64 rules
    from numba import cuda, uint64

    rng = np.random.default_rng(0)
    base = rng.uniform(-1.0, 1.0, 24)
    samples = np.concatenate([base, base + 3 * np.spacing(base), base[:6],
                              [1e-50, -1e-50, 0.0, -0.0, 5e-46, -5e-46, 1e-30, -1e-30]])
    shadow = samples.astype(np.float32)
    assert (shadow[:24] == shadow[24:48]).all() and (samples[:24] != samples[24:48]).all()
    n = samples.size
    first = np.zeros((n, n), np.int8)
    before_top = np.zeros((n, n), np.int8)
    positive = np.zeros(n, np.int8)

    @cuda.jit
    def probe(shadow, samples, first, before_top, positive):
        for a in range(shadow.shape[0]):
            positive[a] = kernels_cuda._positive(shadow, samples, uint64(a))
            for b in range(shadow.shape[0]):
                first[a, b] = kernels_cuda._sweeps_first(shadow, samples, uint64(a), uint64(b))
                before_top[a, b] = kernels_cuda._before_top(shadow, samples, uint64(a), uint64(b))

    probe[1, 1](shadow, samples, first, before_top, positive)
    a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    x, y = samples[a], samples[b]
    np.testing.assert_array_equal(first, (x > y) | ((x == y) & (a < b)))
    np.testing.assert_array_equal(positive, samples > 0)
    # the largest positive sample is the one _before_top is asked about
    tops = samples > 0
    expected = (x <= 0) & ((-x > y) | ((-x == y) & (a < b)))
    np.testing.assert_array_equal(before_top[:, tops], expected[:, tops])


class _CoarseShadow:
    """float32 as the grow kernel's shadow, rounded to 6 bits of mantissa (monotonic and
    odd-symmetric, as rounding to float32 is), so that many samples tie in the shadow."""

    dtype = np.dtype(np.float32)

    def __call__(self, value):
        mantissa, exponent = np.frexp(value)
        return np.float32(np.ldexp(np.round(mantissa * 64) / 64, exponent))


@pytest.mark.parametrize("options", [FmlsOptions(), FmlsOptions(lobe_merge_ratio=0.3)])
def test_samples_tied_in_the_shadow_take_the_float64_order(options, monkeypatch):
    # in the simulator the shadow is made coarse: the sort's runs of ties, the sweep's
    # comparisons and the check of the negative samples then lean on the float64 samples, and
    # the fixels must still be the CPU backend's
    fod = fod_phantom((4, 1, 1), 8, relative_noise=0.1, seed=4)["sh"]
    if simulator_active():
        coarse = _CoarseShadow()
        monkeypatch.setattr(kernels_cuda, "float32", coarse)
        amplitudes = fod.reshape(4, -1) @ fmls_tables(8).sh_to_amp.T
        ordered = -np.sort(-amplitudes[amplitudes > 0])
        shadow = np.array([coarse(a) for a in ordered])
        assert ((shadow[1:] == shadow[:-1]) & (ordered[1:] != ordered[:-1])).sum() > 100
    assert_same_fixels(segment_fods(fod, options=options, backend="cuda"),
                       segment_fods(fod, options=options, backend="cpu"))
