"""The CUDA kernel (numba's simulator; a GPU with NUMBA_ENABLE_CUDASIM=0) against the CPU
backend on a few voxels: default settings, and merging with the peak direction; a voxel with
more lobes than the kernels' scratch redone on the CPU; the fixels byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from numba import cuda, int64, uint64

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


def _sweep_order(row):
    """The positive samples' directions in the sweep's order: larger amplitude first, equal by index."""
    positive = np.flatnonzero(row > 0)
    return positive[np.lexsort((positive, -row[positive]))]


@pytest.mark.parametrize("levels", [1 << 21, 1 << 6])
def test_sort_keys_then_tied_runs_give_the_sweeps_order(levels):
    # keys sorted as the bitonic sort leaves them, then the runs tied in fixed point put in
    # order by the float64 amplitudes: values that tie at any level but differ in float64,
    # equal ones, magnitudes far below the largest, and non-positive samples left out
    rng = np.random.default_rng(0)
    base = rng.uniform(-1.0, 1.0, 300)
    row = np.concatenate([base, base + 3 * np.spacing(base), base[:40], [1e-300, 5e-320, 0.0, -0.0, -1e-300]])
    rng.shuffle(row)
    scale = levels / row.max()
    keys = np.zeros(row.size, np.uint32)

    @cuda.jit
    def make_keys(row, scale, levels, keys):
        i = cuda.grid(1)
        if i < row.shape[0] and row[i] > 0.0:
            keys[i] = kernels_cuda._sort_key(row[i], scale, uint64(levels), uint64(i))

    @cuda.jit
    def sort_tied_runs(keys, n, row):
        kernels_cuda._sort_tied_runs(keys, uint64(n), row, uint64(cuda.threadIdx.x))

    make_keys[(row.size + 127) // 128, 128](row, scale, levels, keys)
    keys = np.sort(keys[row > 0])
    levels_of = keys >> 11
    assert (np.diff(levels_of.astype(np.int64)) == 0).sum() > (100 if levels < 1 << 21 else 40)
    sort_tied_runs[1, 32](keys, keys.size, row)
    np.testing.assert_array_equal(keys & 0x7FF, _sweep_order(row))
    # the fixed-point amplitudes still ascend as the sweep goes
    assert (np.diff((keys >> 11).astype(np.int64)) >= 0).all()


def test_a_words_fields_are_set_and_read_apart():
    # the grow kernel's word a direction: the direction at a position, the direction's rank
    # and its label (−97…95 in the sweep), each set without touching the others
    rng = np.random.default_rng(1)
    n = 1281
    order = rng.permutation(n)
    rank = rng.integers(0, 2048, n)
    labels = rng.integers(-97, 96, n)
    words = ((rank << 11) | rng.integers(0, 2048, n) | (127 << 22)).astype(np.uint32)
    out = np.zeros((n, 3), np.int64)

    @cuda.jit
    def probe(words, order, labels, out):
        i = cuda.grid(1)
        if i < words.shape[0]:
            kernels_cuda._set_label(words, uint64(i), int64(labels[i]))
            kernels_cuda._set_order(words, uint64(i), uint64(order[i]))
            out[i, 0] = kernels_cuda._order(words[i])
            out[i, 1] = kernels_cuda._rank(words[i])
            out[i, 2] = kernels_cuda._label(words[i])

    probe[(n + 127) // 128, 128](words, order, labels, out)
    np.testing.assert_array_equal(out, np.stack([order, rank, labels], axis=1))


def test_a_negative_sample_swept_first_leaves_the_voxel_without_lobes():
    # MRtrix3 sweeps by |amplitude|: the voxel has no lobe when a non-positive sample's
    # magnitude exceeds the largest positive one, or equals it at a lower direction
    top = 0.75
    row = np.linspace(-0.5, 0.5, 100)
    row[60] = top
    cases = {"below": (row, False), "above": (np.where(np.arange(100) == 7, -0.8, row), True)}
    for where in (10, 90):
        tied = row.copy()
        tied[where] = -top
        cases[f"tied at {where}"] = (tied, where < 60)
    out = np.zeros(32, np.int8)

    @cuda.jit
    def probe(row, top, deepest, out):
        out[cuda.threadIdx.x] = kernels_cuda._negative_first(row, top, deepest, uint64(60), uint64(cuda.threadIdx.x))

    for name, (values, expected) in cases.items():
        probe[1, 32](values, top, max(0.0, -values.min()), out)
        assert out.any() == expected, name


@pytest.mark.parametrize("options", [FmlsOptions(), FmlsOptions(lobe_merge_ratio=0.3)])
def test_samples_tied_in_the_sort_keys_take_the_float64_order(options, monkeypatch):
    # in the simulator the keys' fixed point is made coarse (64 levels): the sort's runs of
    # ties lean on the float64 samples, and the fixels must still be the CPU backend's
    fod = fod_phantom((4, 1, 1), 8, relative_noise=0.1, seed=4)["sh"]
    if simulator_active():
        monkeypatch.setattr(kernels_cuda, "_KEY_LEVELS", 64)
        tied = 0
        for amplitudes in fod.reshape(4, -1) @ fmls_tables(8).sh_to_amp.T:
            ordered = -np.sort(-amplitudes[amplitudes > 0])
            fixed = np.minimum(np.floor(ordered * (64 / ordered[0])), 63)
            tied += ((fixed[1:] == fixed[:-1]) & (ordered[1:] != ordered[:-1])).sum()
        assert tied > 1000
    assert_same_fixels(segment_fods(fod, options=options, backend="cuda"),
                       segment_fods(fod, options=options, backend="cpu"))
