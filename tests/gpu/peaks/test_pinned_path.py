"""On a GPU: the peaks path's page-locked host memory and device-side fills
(gpu.cuda.host_memory, gpu.cuda.device_arrays). An input read into page-locked memory gives
the same peaks, bit for bit, as one read into pageable memory; the results come back
page-locked; fills made on the device are np.full's bits; freed blocks and device memory
are reused."""

import ctypes

import numpy as np
import pytest

from gpu.cuda import device_arrays
from gpu.cuda.device import cuda_available
from gpu.cuda.device_arrays import device_full
from gpu.cuda.driver import driver
from gpu.cuda.host_memory import pinned_empty, pinned_pool
from gpu.peaks.backend_cuda import load_cuda_runtime
from gpu.peaks.phantom import fod_phantom
from gpu.peaks.search import sshopm_peaks
from tests.worker.io.grids import oblique_affine
from worker.io.images import load_image_data, read_image_header, write_image
from worker.io.mif import write_mif
from worker.jobs.peaks import plan_peaks, read_peaks_inputs
from worker.params.peaks import PeaksParams

pytestmark = pytest.mark.skipif(not cuda_available(), reason="page-locked memory and device fills need a CUDA GPU")


def page_locked(array: np.ndarray) -> bool:
    """Whether the driver knows ``array``'s memory as page-locked (cuMemHostGetFlags fails
    for pageable memory)."""
    flags = ctypes.c_uint()
    driver.ensure_context()
    return driver._lib.cuMemHostGetFlags(ctypes.byref(flags), ctypes.c_void_p(array.ctypes.data)) == 0


@pytest.mark.parametrize("name", ["fod.mif", "fod.nii"])
@pytest.mark.parametrize("masked", [False, True])
def test_a_page_locked_read_gives_the_peaks_of_a_pageable_one(tmp_path, name, masked):
    load_cuda_runtime()
    phantom = fod_phantom((14, 12, 10), 8, relative_noise=0.3, seed=5)
    sh = phantom["sh"].astype(np.float32)
    path = tmp_path / name
    if name.endswith(".mif"):
        write_mif(path, sh, oblique_affine(), layout=(2, 3, 4, 1))  # as dwi2fod writes FODs
    else:
        write_image(path, sh, oblique_affine())
    info = read_image_header(path, "fod")
    pageable, pinned = load_image_data(info), load_image_data(info, empty=pinned_empty)
    assert page_locked(pinned) and not page_locked(pageable)
    assert pinned.strides == pageable.strides
    # on the axes the image is read in (an oblique .mif's are not the array's it was written from)
    mask = (np.arange(sh[..., 0].size).reshape(pageable.shape[:3]) % 3 > 0) if masked else None
    ours, reference = (sshopm_peaks(values, mask=mask, backend="cuda") for values in (pinned, pageable))
    for got, expected in [(ours.directions, reference.directions), (ours.amplitudes, reference.amplitudes),
                          (ours.count, reference.count)]:
        np.testing.assert_array_equal(got, expected)
    if not masked:  # the backend's arrays are the results, in page-locked memory
        assert page_locked(ours.directions) and page_locked(ours.amplitudes)


@pytest.mark.parametrize("backend, pinned", [("cuda", True), ("auto", True), ("cpu", False)])
def test_a_jobs_input_is_read_into_page_locked_memory_for_the_gpu(tmp_path, backend, pinned):
    load_cuda_runtime()
    path = tmp_path / "fod.mif"
    write_mif(path, fod_phantom((6, 5, 4), 8, seed=1)["sh"].astype(np.float32), oblique_affine(), layout=(2, 3, 4, 1))
    inputs = read_peaks_inputs(plan_peaks(path, params=PeaksParams(backend=backend)))
    assert page_locked(inputs.sh) == pinned
    np.testing.assert_array_equal(inputs.sh, load_image_data(read_image_header(path, "fod")))


@pytest.mark.parametrize("shape, dtype, value", [((1000, 3, 3), np.float32, np.nan), ((5, 7), np.int32, 0),
                                                 (4097, np.int32, -3), ((0, 3), np.float32, np.nan),
                                                 (33, np.float32, 1.5), (12, np.uint32, 0x7FC00000)])
def test_device_fills_are_np_fulls_bits(shape, dtype, value):
    filled = device_full(shape, dtype, value)
    expected = np.full(shape, value, dtype)
    into = np.empty(expected.shape, expected.dtype)
    for host in (filled.copy_to_host(), filled.copy_to_host(into)):
        assert host.shape == expected.shape and host.dtype == expected.dtype
        np.testing.assert_array_equal(host.view(np.uint32), expected.view(np.uint32))
    with pytest.raises(ValueError, match="4-byte"):
        device_full(3, np.float64, 0.0)


def test_freed_page_locked_blocks_are_reused():
    load_cuda_runtime()
    first = pinned_empty((1 << 20, 9), np.float32)
    assert page_locked(first)
    address, reused = first.ctypes.data, pinned_pool.reused
    view = first[10:]
    del first
    held = pinned_empty((1 << 20, 9), np.float32)  # the view holds the first block
    assert held.ctypes.data != address
    del view
    again = pinned_empty((1 << 20, 9), np.float32, "F")
    assert again.ctypes.data == address and pinned_pool.reused == reused + 1 and again.flags.f_contiguous


def test_device_memory_comes_from_the_stream_ordered_pool_and_is_reused():
    load_cuda_runtime()
    assert driver.memory_pools  # an H100 with a CUDA 12 driver has one
    sh = fod_phantom((20, 20, 20), 8, relative_noise=0.3, seed=2)["sh"].astype(np.float32)

    def reserved() -> int:
        pool, value = ctypes.c_void_p(), ctypes.c_uint64()
        driver.call("cuDeviceGetDefaultMemPool", ctypes.byref(pool), driver._device)
        driver.call("cuMemPoolGetAttribute", pool, 5, ctypes.byref(value))  # CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT
        return value.value

    first = sshopm_peaks(sh, backend="cuda")
    device_arrays.synchronize()
    after_first = reserved()
    second = sshopm_peaks(sh, backend="cuda")
    device_arrays.synchronize()
    assert 0 < reserved() <= after_first
    np.testing.assert_array_equal(first.directions, second.directions)
