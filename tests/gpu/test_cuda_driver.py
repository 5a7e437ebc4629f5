"""The driver binding's pure-Python half against numba, which owns the kernel ABI: how an
argument is typed (which compiled kernel it picks) and how it is flattened into parameters."""

import numpy as np
import pytest
from numba import typeof
from numba.core import types
from numba.core.registry import cpu_target

from gpu.cuda_driver import DeviceArray, _parameter_format, argument_type
from gpu.cubin_cache import _signature_name


def _device_view(host: np.ndarray) -> DeviceArray:
    """A DeviceArray with ``host``'s shape, strides and dtype (no device memory: only typed)."""
    return DeviceArray(None, 1 << 40, host.shape, host.strides, host.dtype)


BASE = np.zeros((6, 5, 4), np.float32)
VIEWS = [BASE, BASE[1:3], BASE[:, 1:3], BASE[:, :, 1:2], BASE[:1], BASE[2:3, :, :], np.zeros(7, np.int32)[2:5],
         np.zeros((1, 1), np.uint8), np.zeros((3, 1), np.int32), np.zeros((0, 4), np.float32)]


@pytest.mark.parametrize("host", VIEWS, ids=lambda a: f"{a.dtype}{a.shape}{a.strides}")
def test_arrays_are_typed_as_numba_types_them(host):
    assert argument_type(_device_view(host)) == _signature_name(typeof(host))


@pytest.mark.parametrize("value, numba_type", [(5, "int64"), (True, "bool"), (np.int32(3), "int32"),
                                               (np.float32(1.5), "float32"), (2.5, "float64")])
def test_scalars_are_typed_as_numba_types_them(value, numba_type):
    assert argument_type(value) == numba_type == str(typeof(value))


def test_parameters_flatten_as_numba_lowers_kernel_arguments():
    """Every numba argument type becomes the same number of parameters, of the same sizes,
    as numba's argument packer makes of it (our slots are 8 bytes, scalars padded)."""
    argtypes = [typeof(BASE), typeof(BASE[:, 1:3]), types.int64, typeof(np.zeros(3, np.uint8)), types.boolean,
                types.float32, types.int32]
    packer = cpu_target.target_context.get_arg_packer(argtypes)
    lowered = packer.argument_types
    fmt = _parameter_format([_signature_name(t) for t in argtypes])
    assert len(fmt.replace("4x", "").replace("7x", "")) - 1 == len(lowered)
    target = cpu_target.target_context
    sizes = [target.get_abi_sizeof(t) for t in lowered]
    assert sizes == [{"Q": 8, "q": 8, "i": 4, "f": 4, "?": 1}[c] for c in fmt[1:].replace("4x", "").replace("7x", "")]


def test_slices_are_views_with_numpys_offsets():
    host = np.zeros((6, 5, 4), np.float32)
    view = _device_view(host)
    for index in [(slice(1, 3),), (slice(None), slice(2, 5)), (slice(4, 9), slice(0, 1), slice(1, 3))]:
        part = view[index]
        expected = host[index]
        offset = expected.__array_interface__["data"][0] - host.__array_interface__["data"][0]
        assert (part.shape, part.strides, part.ptr - view.ptr) == (expected.shape, expected.strides, offset)


def test_transposes_and_their_slices_are_typed_as_numba_types_numpys():
    """A C array's transpose (how to_device keeps a Fortran-ordered host array) and slices of
    it: numpy's shapes and strides, and the layout numba gives the same numpy views."""
    host = np.zeros((6, 5), np.float32)
    view = _device_view(host).T
    for index, expected in [((), host.T), ((slice(None), slice(1, 4)), host.T[:, 1:4]), ((slice(2, 4),), host.T[2:4])]:
        part = view[index] if index else view
        assert (part.shape, part.strides) == (expected.shape, expected.strides)
        assert argument_type(part) == _signature_name(typeof(expected))
