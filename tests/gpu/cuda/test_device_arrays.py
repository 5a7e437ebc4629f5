"""Views of device memory without a GPU: :func:`gpu.cuda.device_arrays.device_view` of arrays
with the CUDA array interface, and :meth:`DeviceArray.reshape`, checked against numpy's views
of a host array of the same layout (pointers and strides only; nothing is read)."""

from __future__ import annotations

import numpy as np
import pytest

from gpu.cuda.device_arrays import DeviceArray, device_view


class _Interfaced:
    """What CuPy and numba arrays show of themselves: the CUDA array interface."""

    def __init__(self, host: np.ndarray, ptr: int, c_order_strides: bool) -> None:
        self.__cuda_array_interface__ = {
            "shape": host.shape, "typestr": host.dtype.str, "data": (ptr, False), "version": 3,
            "strides": None if c_order_strides else host.strides}


@pytest.mark.parametrize("host", [np.zeros((3, 4, 5), np.float64), np.zeros((6, 7), np.int32).T,
                                  np.zeros((4, 9), np.float32)[:, 2:7]])
def test_a_view_has_the_interfaces_pointer_shape_strides_and_dtype(host):
    source = _Interfaced(host, 1 << 40, c_order_strides=host.flags.c_contiguous)
    view = device_view(source)
    assert (view.ptr, view.shape, view.strides, view.dtype) == (1 << 40, host.shape, host.strides, host.dtype)
    assert view.is_c_contiguous == host.flags.c_contiguous
    assert view._allocation is source  # keeps the array whose memory it views alive
    assert device_view(view) is view


@pytest.mark.parametrize("shape", [(-1,), (12, 10), (2, -1, 5), (120,)])
def test_reshape_gives_numpys_strides(shape):
    host = np.zeros((4, 6, 5), np.float64)
    view = device_view(_Interfaced(host, 4096, c_order_strides=True)).reshape(*shape)
    expected = host.reshape(shape)
    assert (view.shape, view.strides, view.ptr) == (expected.shape, expected.strides, 4096)
    assert view.reshape(shape).shape == expected.shape  # a tuple, as numpy takes it


def test_reshape_refuses_other_sizes_and_strided_views():
    host = np.zeros((4, 6), np.int32)
    view = DeviceArray(None, 0, host.shape, host.strides, host.dtype)
    with pytest.raises(ValueError, match="cannot reshape 24 items"):
        view.reshape(5, 5)
    with pytest.raises(ValueError, match="contiguous"):
        view.T.reshape(-1)
